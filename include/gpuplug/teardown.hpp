// SPDX-License-Identifier: Apache-2.0
// ModelResource and Teardown: release a model's resources in reverse order, past failures.
#pragma once

#include <gpuplug/config.hpp>  // first: the C++20 check, the export region
#include <gpuplug/types.hpp>

#include <functional>
#include <string>
#include <string_view>
#include <vector>

GPUPLUG_API_BEGIN
namespace gpuplug {

class GpuBackend;

/// Something a model holds on a backend (scratch, weights, a KV cache) that must go back
/// before the backend does.
template <class Gpu>
class ModelResource {
 public:
  virtual ~ModelResource() = default;
  /// Short name used in teardown errors, e.g. "op scratch".
  virtual std::string_view label() const = 0;
  /// Frees what the resource holds on `gpu`. Throws on failure; calling it again after a
  /// success is harmless (idempotent).
  virtual void release(Gpu& gpu) = 0;
};

/// One resource that failed to release, with what its own error said.
struct ReleaseFailure {
  std::string label;      // the resource's label(), e.g. "kv cache"
  Status status;          // its Error's status; internal for an exception that is no Error
  std::string operation;  // its Error's operation ("free"), "" when none
  std::string message;    // its Error's message(), or what() of another exception
};

/// What Teardown::release_all throws: an Error whose message names every failure ("2 of 5
/// resources failed to release: kv cache: free: device lost; tokenizer: ..."), and the failures
/// themselves, in the order they were released, each with its own status. status() is the
/// failures' common status when they all agree, else Status::internal; operation() is
/// "release_all".
class TeardownError : public Error {
 public:
  TeardownError(std::string backend, std::vector<ReleaseFailure> failures, std::size_t attempted);
  const std::vector<ReleaseFailure>& failures() const noexcept { return failures_; }

 private:
  std::vector<ReleaseFailure> failures_;
};

/// An ordered list of resources (not owned) released together.
/// Thread-safety: none; a Teardown belongs to the code that tears the model down.
class Teardown {
 public:
  /// Adds a resource; it must outlive the Teardown's last release_all.
  void add(ModelResource<GpuBackend>& resource);
  std::size_t size() const noexcept { return resources_.size(); }
  /// Releases every resource in reverse order of adding and keeps going past failures: a failed
  /// release never skips the others. Then, if any failed, throws one TeardownError (an Error)
  /// listing each failed resource by label with its own status, operation and message.
  /// Resources stay registered, so a second call retries (each release is idempotent).
  void release_all(GpuBackend& gpu);

 private:
  std::vector<std::reference_wrapper<ModelResource<GpuBackend>>> resources_;
};

}  // namespace gpuplug
GPUPLUG_API_END
