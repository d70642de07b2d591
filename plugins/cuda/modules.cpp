// SPDX-License-Identifier: Apache-2.0
// CudaDevice's module hooks: fatbin/cubin/PTX images through cuModuleLoadDataEx, kernels and
// globals.
#include <cstring>
#include <mutex>
#include <string>

#include "device.hpp"

namespace gpuplug::cuda {
namespace {

constexpr unsigned char kFatbinMagic[4] = {0x50, 0xED, 0x55, 0xBA};  // 0xBA55ED50, little endian
constexpr unsigned char kElfMagic[4] = {0x7F, 'E', 'L', 'F'};

bool starts_with(std::span<const std::byte> image, const unsigned char (&magic)[4]) {
  return image.size() >= 4 && std::memcmp(image.data(), magic, 4) == 0;
}

template <class T>
T read_at(std::span<const std::byte> image, std::size_t offset) {
  T value;
  std::memcpy(&value, image.data() + offset, sizeof value);
  return value;
}

// cuModuleLoadData takes no size: it trusts the sizes and offsets inside the image. So before a
// fatbin or cubin reaches it, every structure the driver will follow must lie inside the bytes
// we have, or a truncated file would be read past its end. Returns why not, or "".
std::string binary_image_problem(std::span<const std::byte> image, bool fatbin) {
  const std::uint64_t size = image.size();
  if (fatbin) {
    // Header: u32 magic, u16 version, u16 header size, u64 size of the entries that follow.
    if (size < 16) return "a fatbin header needs 16 bytes, the image has " + std::to_string(size);
    const std::uint64_t header = read_at<std::uint16_t>(image, 6);
    const std::uint64_t body = read_at<std::uint64_t>(image, 8);
    if (header < 16 || header > size || body > size - header) {
      return "truncated fatbin: its header announces " + std::to_string(header) + " + " +
             std::to_string(body) + " bytes, the image has " + std::to_string(size);
    }
    // Entries: u32 header size at +4, u64 payload size at +8; the next follows both.
    for (std::uint64_t at = header, end = header + body; at < end;) {
      if (end - at < 16) return "truncated fatbin entry at offset " + std::to_string(at);
      const std::uint64_t entry = read_at<std::uint32_t>(image, at + 4);
      const std::uint64_t payload = read_at<std::uint64_t>(image, at + 8);
      if (entry < 16 || entry > end - at || payload > end - at - entry) {
        return "truncated fatbin entry at offset " + std::to_string(at);
      }
      at += entry + payload;
    }
    return "";
  }
  // ELF64 header: class at 4, e_phoff 32, e_shoff 40, e_phentsize 54, e_phnum 56,
  // e_shentsize 58, e_shnum 60. Section headers: sh_type at 4, sh_offset 24, sh_size 32.
  if (size < 64 || static_cast<unsigned char>(image[4]) != 2) return "not a 64-bit ELF cubin";
  const std::uint64_t phoff = read_at<std::uint64_t>(image, 32);
  const std::uint64_t shoff = read_at<std::uint64_t>(image, 40);
  const std::uint64_t phsize =
      std::uint64_t{read_at<std::uint16_t>(image, 54)} * read_at<std::uint16_t>(image, 56);
  const std::uint64_t shentsize = read_at<std::uint16_t>(image, 58);
  const std::uint64_t shnum = read_at<std::uint16_t>(image, 60);
  if (phoff > size || phsize > size - phoff || shoff > size || shentsize * shnum > size - shoff ||
      (shnum != 0 && shentsize < 64)) {
    return "truncated cubin: its ELF headers point past the " + std::to_string(size) + " bytes";
  }
  for (std::uint64_t i = 0; i < shnum; ++i) {
    const std::uint64_t at = shoff + i * shentsize;
    constexpr std::uint32_t kNoBits = 8;  // SHT_NOBITS: occupies no file space
    if (read_at<std::uint32_t>(image, at + 4) == kNoBits) continue;
    const std::uint64_t offset = read_at<std::uint64_t>(image, at + 24);
    const std::uint64_t bytes = read_at<std::uint64_t>(image, at + 32);
    if (offset > size || bytes > size - offset) {
      return "truncated cubin: section " + std::to_string(i) + " lies past the " +
             std::to_string(size) + " bytes";
    }
  }
  return "";
}

CUmodule as_module(sdk::VendorModule m) {
  return reinterpret_cast<CUmodule>(static_cast<std::uintptr_t>(m));
}

}  // namespace

sdk::VendorModule CudaDevice::vendor_load_module(std::string_view name,
                                                 std::span<const std::byte> image) {
  GPUPLUG_EXPECTS(!image.empty(), GPUPLUG_STATUS_INVALID_IMAGE,
                  "module " + std::string(name) + ": the image is empty");
  // The driver reads fatbins and cubins as structures (wants 8-byte alignment) and PTX as a
  // NUL-terminated string; copy only when the caller's bytes are not already in that form.
  const bool fatbin = starts_with(image, kFatbinMagic);
  const bool binary = fatbin || starts_with(image, kElfMagic);
  if (binary) {
    if (const std::string problem = binary_image_problem(image, fatbin); !problem.empty()) {
      sdk::fail(GPUPLUG_STATUS_INVALID_IMAGE, "module " + std::string(name) + ": " + problem);
    }
  }
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
  make_current();
  CUmodule module = nullptr;
  const CUresult r = api_.module_load_data_ex(&module, data, 2, keys, values);
  if (r != CUDA_SUCCESS) {
    std::string why =
        describe_error(("module " + std::string(name) + ": cuModuleLoadDataEx").c_str(), r);
    jit_log[sizeof jit_log - 1] = '\0';
    if (jit_log[0] != '\0') why += std::string("; JIT log: ") + jit_log;
    sdk::fail(status_of(r) == GPUPLUG_STATUS_OUT_OF_MEMORY ? GPUPLUG_STATUS_OUT_OF_MEMORY
                                                           : GPUPLUG_STATUS_INVALID_IMAGE,
              why);
  }
  return reinterpret_cast<std::uintptr_t>(module);
}

void CudaDevice::vendor_unload_module(sdk::VendorModule module) noexcept {
  {
    std::unique_lock lock(globals_mutex_);
    std::erase_if(globals_, [module](const auto& g) { return g.second.module == module; });
  }
  if (api_.ctx_set_current(context_) != CUDA_SUCCESS) return;
  if (const CUresult r = api_.module_unload(as_module(module)); r != CUDA_SUCCESS) {
    try {
      log(GPUPLUG_LOG_WARNING, describe_error("cuModuleUnload", r));
    } catch (...) {  // logging must not throw out of a noexcept hook
    }
  }
}

std::uint64_t CudaDevice::vendor_get_function(sdk::VendorModule module, const std::string& func) {
  make_current();
  CUfunction f = nullptr;
  const CUresult r = api_.module_get_function(&f, as_module(module), func.c_str());
  if (r == CUDA_ERROR_NOT_FOUND) return 0;
  check(r, ("cuModuleGetFunction(" + func + ")").c_str());
  return reinterpret_cast<std::uintptr_t>(f);
}

std::vector<std::string> CudaDevice::vendor_list_functions(sdk::VendorModule module) {
  std::vector<std::string> names;
  // Drivers before CUDA 12.4 cannot enumerate a module's kernels: the message then names none.
  if (api_.module_get_function_count == nullptr || api_.module_enumerate_functions == nullptr ||
      api_.func_get_name == nullptr) {
    return names;
  }
  make_current();
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

std::optional<std::pair<std::uint64_t, std::uint64_t>> CudaDevice::vendor_get_global(
    sdk::VendorModule module, const std::string& symbol) {
  make_current();
  CUdeviceptr address = 0;
  std::size_t bytes = 0;
  const CUresult r = api_.module_get_global(&address, &bytes, as_module(module), symbol.c_str());
  if (r == CUDA_ERROR_NOT_FOUND) return std::nullopt;
  // Only a successful call defines address and size.
  check(r, ("cuModuleGetGlobal(" + symbol + ")").c_str());
  {
    // Remembered so that copies to and from it pass check_device_range.
    std::unique_lock lock(globals_mutex_);
    globals_.insert_or_assign(address, Global{bytes, module});
  }
  return std::pair<std::uint64_t, std::uint64_t>{address, bytes};
}

std::vector<std::string> CudaDevice::module_file_extensions() const {
  return {".fatbin", ".cubin", ".ptx"};
}

}  // namespace gpuplug::cuda
