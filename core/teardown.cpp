// SPDX-License-Identifier: Apache-2.0
// Teardown: releases a model's resources in reverse order of adding, past failures, one error.
#include <gpuplug/teardown.hpp>
#include <gpuplug/backend.hpp>
#include <gpuplug/types.hpp>
#include <gpuplug/support/failures.hpp>

#include <string>

namespace gpuplug {

void Teardown::add(ModelResource<GpuBackend>& resource) { resources_.emplace_back(resource); }

void Teardown::release_all(GpuBackend& gpu) {
  // Reverse order: what was set up last may depend on what was set up first (a KV cache on
  // the weights' buffers), so it goes first. A failure must not leak the others.
  support::FailureList failures;
  for (auto it = resources_.rbegin(); it != resources_.rend(); ++it) {
    ModelResource<GpuBackend>& resource = it->get();
    std::string why;
    try {
      resource.release(gpu);
      continue;
    } catch (const Error& e) {
      why = e.message();  // the backend's name is already in our own error's prefix
    } catch (...) {
      why = support::describe_current_exception();
    }
    failures.add(std::string(resource.label()) + ": " + why);
  }
  if (failures.empty()) return;
  throw Error(Status::internal, std::string(gpu.name()),
              failures.message(resources_.size(), "resources failed to release"));
}

}  // namespace gpuplug
