// SPDX-License-Identifier: Apache-2.0
// Teardown: releases a model's resources in reverse order of adding, past failures, one error
// that keeps each failure's own status.
#include <gpuplug/backend.hpp>
#include <gpuplug/support/failures.hpp>
#include <gpuplug/teardown.hpp>
#include <gpuplug/types.hpp>
#include <string>
#include <utility>

namespace gpuplug {

namespace {

Status common_status(const std::vector<ReleaseFailure>& failures) noexcept {
  if (failures.empty()) return Status::internal;
  for (const ReleaseFailure& f : failures) {
    if (f.status != failures.front().status) return Status::internal;
  }
  return failures.front().status;
}

std::string describe(const std::vector<ReleaseFailure>& failures, std::size_t attempted) {
  support::FailureList list;
  for (const ReleaseFailure& f : failures) {
    list.add(f.label + ": " + (f.operation.empty() ? "" : f.operation + ": ") + f.message);
  }
  return list.message(attempted, "resources failed to release");
}

}  // namespace

TeardownError::TeardownError(std::string backend, std::vector<ReleaseFailure> failures,
                             std::size_t attempted)
    : Error(common_status(failures), std::move(backend), "release_all",
            describe(failures, attempted)),
      failures_(std::move(failures)) {}

void Teardown::add(ModelResource<GpuBackend>& resource) { resources_.emplace_back(resource); }

void Teardown::release_all(GpuBackend& gpu) {
  // Reverse order: what was set up last may depend on what was set up first (a KV cache on
  // the weights' buffers), so it goes first. A failure must not leak the others.
  std::vector<ReleaseFailure> failures;
  for (auto it = resources_.rbegin(); it != resources_.rend(); ++it) {
    ModelResource<GpuBackend>& resource = it->get();
    ReleaseFailure failure{std::string(resource.label()), Status::internal, {}, {}};
    try {
      resource.release(gpu);
      continue;
    } catch (const Error& e) {
      // The backend's name is already in our own error's prefix.
      failure.status = e.status();
      failure.operation = e.operation();
      failure.message = e.message();
    } catch (...) {
      failure.message = support::describe_current_exception();
    }
    failures.push_back(std::move(failure));
  }
  if (failures.empty()) return;
  throw TeardownError(std::string(gpu.name()), std::move(failures), resources_.size());
}

}  // namespace gpuplug
