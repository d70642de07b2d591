// SPDX-License-Identifier: Apache-2.0
// HipDevice's module hooks: hipModuleLoadData/Unload/GetFunction/GetGlobal and kernel listing
// (image.cpp checks and reads the bytes).
#include <algorithm>
#include <memory>

#include "device.hpp"
#include "gpuplug/support/text.hpp"
#include "image.hpp"

namespace gpuplug::hip {
namespace {

/// What sdk::VendorModule points at for this backend. Immutable after load, so the lookup hooks
/// read it concurrently without a lock.
struct LoadedModule {
  hipModule_t handle = nullptr;
  // The image stays alive as long as the module: hipModuleLoadData takes no size and the runtime
  // may keep referring to the bytes it was given (lazy per-device loading), while the SDK only
  // lends the image for the duration of the call.
  std::vector<std::byte> image;
  std::vector<std::string> kernels;  // from the code object's symbols, for "not found" messages
};

LoadedModule& loaded(sdk::VendorModule module) {
  return *reinterpret_cast<LoadedModule*>(static_cast<std::uintptr_t>(module));
}

// Results of hipModuleGetFunction / hipModuleGetGlobal that mean "no such name" (they differ
// between releases) rather than a broken runtime.
bool is_not_found(hipError_t error) noexcept {
  return error == hipErrorNotFound || error == hipErrorInvalidSymbol ||
         error == hipErrorInvalidDeviceFunction || error == hipErrorSharedObjectSymbolNotFound;
}

}  // namespace

sdk::VendorModule HipDevice::vendor_load_module(std::string_view name,
                                                std::span<const std::byte> image) {
  const std::string what = "module " + std::string(name);
  if (const std::string problem = image_problem(image); !problem.empty())
    sdk::fail(GPUPLUG_STATUS_INVALID_IMAGE, what + ": " + problem);

  auto module = std::make_unique<LoadedModule>();
  module->image.assign(image.begin(), image.end());
  make_current();
  const hipError_t error = hip_.module_load_data(&module->handle, module->image.data());
  if (error != hipSuccess) {
    module->handle = nullptr;  // some releases leave the out-handle unset on failure
    std::string why = describe_error("hipModuleLoadData(" + what + ")", error);
    if (const auto targets = bundle_targets(image);
        !targets.empty() && std::none_of(targets.begin(), targets.end(),
                                         [&](const auto& t) { return target_matches(t, arch_); }))
      why += "; the image has no code object for " + (arch_.empty() ? "this GPU" : arch_) +
             " (it has " + support::join(targets) + ")";
    sdk::fail(status_of(error) == GPUPLUG_STATUS_DEVICE_ERROR ? GPUPLUG_STATUS_INVALID_IMAGE
                                                              : status_of(error),
              why);
  }

  // Kernel names from the code object this device runs (all targets of one source share them).
  if (const auto symbols = read_elf_symbols(select_code_object(module->image, arch_)))
    module->kernels = kernel_names(*symbols);
  return static_cast<sdk::VendorModule>(reinterpret_cast<std::uintptr_t>(module.release()));
}

void HipDevice::vendor_unload_module(sdk::VendorModule module) noexcept {
  std::unique_ptr<LoadedModule> owned(&loaded(module));
  (void)try_make_current();
  const hipError_t error = hip_.module_unload(owned->handle);
  if (error != hipSuccess) {
    try {
      log(GPUPLUG_LOG_WARNING, describe_error("hipModuleUnload", error));
    } catch (...) {  // building the message failed (out of memory): nothing more to say
    }
  }
}

std::uint64_t HipDevice::vendor_get_function(sdk::VendorModule module, const std::string& func) {
  const LoadedModule& m = loaded(module);
  // When the code object's symbols were readable they are the whole truth: no runtime call (and
  // no runtime error log) for a name that is not there.
  if (!m.kernels.empty() && !std::binary_search(m.kernels.begin(), m.kernels.end(), func)) return 0;
  make_current();
  hipFunction_t function = nullptr;
  const hipError_t error = hip_.module_get_function(&function, m.handle, func.c_str());
  if (error == hipSuccess) return reinterpret_cast<std::uint64_t>(function);
  if (is_not_found(error)) return 0;
  throw_error(error, "hipModuleGetFunction(" + func + ")");
}

std::vector<std::string> HipDevice::vendor_list_functions(sdk::VendorModule module) {
  return loaded(module).kernels;
}

std::optional<sdk::VendorGlobal> HipDevice::vendor_get_global(sdk::VendorModule module,
                                                              const std::string& symbol) {
  make_current();
  hipDeviceptr_t address = nullptr;
  std::size_t bytes = 0;
  const hipError_t error =
      hip_.module_get_global(&address, &bytes, loaded(module).handle, symbol.c_str());
  // The size is only meaningful after success; a failed lookup may leave it stale.
  if (error == hipSuccess && address != nullptr)
    return sdk::VendorGlobal{reinterpret_cast<std::uint64_t>(address), bytes};
  if (error == hipSuccess || is_not_found(error)) return std::nullopt;
  throw_error(error, "hipModuleGetGlobal(" + symbol + ")");
}

std::vector<std::string> HipDevice::vendor_module_file_extensions() const {
  return {".hsaco", ".co"};
}

}  // namespace gpuplug::hip
