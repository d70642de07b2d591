// SPDX-License-Identifier: Apache-2.0
// ModelResource and Teardown: release a model's resources in reverse order, past failures.
#pragma once

#include <gpuplug/config.hpp>  // first: the C++20 check, the export region

#include <functional>
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

/// An ordered list of resources (not owned) released together.
/// Thread-safety: none; a Teardown belongs to the code that tears the model down.
class Teardown {
 public:
  /// Adds a resource; it must outlive the Teardown's last release_all.
  void add(ModelResource<GpuBackend>& resource);
  std::size_t size() const noexcept { return resources_.size(); }
  /// Releases every resource in reverse order of adding, keeps going past failures, then
  /// throws one gpuplug::Error(Status::internal) whose message names each failed resource by
  /// label with its own message ("2 of 5 resources failed to release: kv cache: ...; weights: ...").
  /// Resources stay registered, so a second call retries (each release is idempotent).
  void release_all(GpuBackend& gpu);

 private:
  std::vector<std::reference_wrapper<ModelResource<GpuBackend>>> resources_;
};

}  // namespace gpuplug
GPUPLUG_API_END
