// SPDX-License-Identifier: Apache-2.0
// CudaDevice's module hooks: fatbin/cubin/PTX images through cuModuleLoadDataEx, kernels and
// globals (image.cpp checks the bytes first).
#include <cstring>
#include <string>

#include "device.hpp"
#include "image.hpp"

namespace gpuplug::cuda {
namespace {

CUmodule as_module(sdk::VendorModule m) {
  return reinterpret_cast<CUmodule>(static_cast<std::uintptr_t>(m));
}

}  // namespace

sdk::VendorModule CudaDevice::vendor_load_module(std::string_view name,
                                                 std::span<const std::byte> image) {
  GPUPLUG_EXPECTS(!image.empty(), GPUPLUG_STATUS_INVALID_IMAGE,
                  "module " + std::string(name) + ": the image is empty");
  if (const std::string problem = image_problem(image); !problem.empty())
    sdk::fail(GPUPLUG_STATUS_INVALID_IMAGE, "module " + std::string(name) + ": " + problem);
  // The driver reads fatbins and cubins as structures (wants 8-byte alignment) and PTX as a
  // NUL-terminated string; copy only when the caller's bytes are not already in that form.
  const bool binary = image_kind(image) != ImageKind::ptx;
  std::vector<std::uint64_t> aligned;
  std::string ptx;
  const void* data = image.data();
  if (binary) {
    if (reinterpret_cast<std::uintptr_t>(data) % alignof(std::uint64_t) != 0) {
      aligned.resize((image.size() + sizeof(std::uint64_t) - 1) / sizeof(std::uint64_t));
      std::memcpy(aligned.data(), image.data(), image.size());
      data = aligned.data();
    }
  } else if (image.back() != std::byte{0}) {
    ptx.assign(reinterpret_cast<const char*>(image.data()), image.size());
    data = ptx.c_str();
  }

  // The JIT's error log explains a PTX that does not compile or a fatbin with no code for this GPU.
  char jit_log[2048] = {};
  CUjit_option keys[2] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void* values[2] = {jit_log, reinterpret_cast<void*>(static_cast<std::uintptr_t>(sizeof jit_log))};
  const ContextScope current = make_current();
  CUmodule module = nullptr;
  const CUresult r = api_.module_load_data_ex(&module, data, 2, keys, values);
  if (r != CUDA_SUCCESS) {
    std::string why = describe_error("module " + std::string(name) + ": cuModuleLoadDataEx", r);
    jit_log[sizeof jit_log - 1] = '\0';
    if (jit_log[0] != '\0') why += std::string("; JIT log: ") + jit_log;
    sdk::fail(status_of(r) == GPUPLUG_STATUS_OUT_OF_MEMORY ? GPUPLUG_STATUS_OUT_OF_MEMORY
                                                           : GPUPLUG_STATUS_INVALID_IMAGE,
              why);
  }
  return reinterpret_cast<std::uintptr_t>(module);
}

void CudaDevice::vendor_unload_module(sdk::VendorModule module) noexcept {
  const ContextScope current(api_, context_, std::nothrow);
  if (current.result() != CUDA_SUCCESS) return;
  if (const CUresult r = api_.module_unload(as_module(module)); r != CUDA_SUCCESS) {
    try {
      log(GPUPLUG_LOG_WARNING, describe_error("cuModuleUnload", r));
    } catch (...) {  // logging must not throw out of a noexcept hook
    }
  }
}

std::uint64_t CudaDevice::vendor_get_function(sdk::VendorModule module, const std::string& func) {
  const ContextScope current = make_current();
  CUfunction f = nullptr;
  const CUresult r = api_.module_get_function(&f, as_module(module), func.c_str());
  if (r == CUDA_ERROR_NOT_FOUND) return 0;
  if (r != CUDA_SUCCESS) throw_error(r, "cuModuleGetFunction(" + func + ")");
  return reinterpret_cast<std::uintptr_t>(f);
}

std::vector<std::string> CudaDevice::vendor_list_functions(sdk::VendorModule module) {
  std::vector<std::string> names;
  // Drivers before CUDA 12.4 cannot enumerate a module's kernels: the message then names none.
  if (api_.module_get_function_count == nullptr || api_.module_enumerate_functions == nullptr ||
      api_.func_get_name == nullptr) {
    return names;
  }
  const ContextScope current = make_current();
  unsigned int count = 0;
  if (api_.module_get_function_count(&count, as_module(module)) != CUDA_SUCCESS || count == 0)
    return names;
  std::vector<CUfunction> functions(count);
  if (api_.module_enumerate_functions(functions.data(), count, as_module(module)) != CUDA_SUCCESS)
    return names;
  names.reserve(count);
  for (CUfunction f : functions) {
    const char* name = nullptr;
    if (api_.func_get_name(&name, f) == CUDA_SUCCESS && name != nullptr) names.emplace_back(name);
  }
  return names;
}

std::optional<sdk::VendorGlobal> CudaDevice::vendor_get_global(sdk::VendorModule module,
                                                               const std::string& symbol) {
  const ContextScope current = make_current();
  CUdeviceptr address = 0;
  std::size_t bytes = 0;
  const CUresult r = api_.module_get_global(&address, &bytes, as_module(module), symbol.c_str());
  if (r == CUDA_ERROR_NOT_FOUND) return std::nullopt;
  // Only a successful call defines address and size.
  if (r != CUDA_SUCCESS) throw_error(r, "cuModuleGetGlobal(" + symbol + ")");
  return sdk::VendorGlobal{address, bytes};
}

std::vector<std::string> CudaDevice::vendor_module_file_extensions() const {
  return {".fatbin", ".cubin", ".ptx"};
}

}  // namespace gpuplug::cuda
