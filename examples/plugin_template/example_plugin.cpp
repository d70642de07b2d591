// SPDX-License-Identifier: Apache-2.0
// libgpuplug-example.so: a minimal CPU-backed vendor plugin, the starting point for a new vendor.
//
// How to read this file: the SDK (<gpuplug/plugin_sdk.hpp>) turns a class derived from
// sdk::Device plus a description struct (ExamplePlugin, at the bottom) into the C table of
// <gpuplug/abi.h>. The SDK already does the bookkeeping: the allocation ledger, the module
// registry by name (lazy loading from `modules_dir`) and the globals it resolved, the live
// streams, option parsing, device-ordinal and range checks of every copy and memset, per-thread
// error messages and exception fencing. What is left to a vendor is the vendor_* hooks below,
// only the calls into its driver, with a "VENDOR:" comment wherever a real GPU plugin calls its
// driver instead.
//
// The "example" device is the CPU: memory is aligned host memory, every stream runs its work
// at once on the calling thread (so stream order holds trivially), and kernel modules are host
// ELF shared objects using the host kernel calling convention of abi.h. Its modules_dir holds
// the same sample modules as the host backend (CMakeLists.txt copies them), so it passes
// `gpuplug check --plugin libgpuplug-example.so`.
//
// Rules a plugin must keep (docs/plugin-authors.md has the reasons):
//  - no static objects with destructors (the table is a constant; state lives in the Device);
//  - every failure is a sdk::fail(status, message) naming the thing and the reason;
//  - every hook may run on many threads at once (except the destructor).
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <gpuplug/plugin_sdk.hpp>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace example {

using gpuplug::sdk::fail;

constexpr std::uint64_t kAlignment = 256;  // what GPU allocators give, so kernels may rely on it

/// One loaded kernel module. VENDOR: a CUmodule / hipModule_t plus what you need to list its
/// functions for "not found" messages.
struct Module {
  void* handle = nullptr;              // from dlopen
  int fd = -1;                         // the memfd the image was written to (kept open: see load)
  std::vector<std::string> functions;  // exported functions, for "not found" messages
};

Module& as_module(gpuplug::sdk::VendorModule m) {
  return *reinterpret_cast<Module*>(static_cast<std::uintptr_t>(m));
}

bool in_bounds(std::uint64_t offset, std::uint64_t size, std::uint64_t total) {
  return offset <= total && size <= total - offset;
}

template <class T>
T read_at(std::span<const std::byte> image, std::uint64_t offset) {
  T value;
  std::memcpy(&value, image.data() + offset, sizeof value);
  return value;
}

/// dlopen trusts an ELF file's headers: a truncated image would fault inside the loader. Refuse
/// images whose program headers or loadable segments lie outside the bytes we were given.
std::string check_image(std::span<const std::byte> image) {
  if (image.size() < sizeof(Elf64_Ehdr)) return "too short to be an ELF shared object";
  if (std::memcmp(image.data(), ELFMAG, SELFMAG) != 0) return "not an ELF file (bad magic)";
  const auto eh = read_at<Elf64_Ehdr>(image, 0);
  if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_type != ET_DYN) return "not a 64-bit ELF .so";
  if (eh.e_phentsize != sizeof(Elf64_Phdr) ||
      !in_bounds(eh.e_phoff, std::uint64_t{eh.e_phnum} * sizeof(Elf64_Phdr), image.size()))
    return "program headers outside the image (truncated?)";
  for (std::uint16_t i = 0; i < eh.e_phnum; ++i) {
    const auto ph = read_at<Elf64_Phdr>(image, eh.e_phoff + i * sizeof(Elf64_Phdr));
    if (ph.p_type == PT_LOAD && !in_bounds(ph.p_offset, ph.p_filesz, image.size()))
      return "a segment extends past the end of the image (truncated?)";
  }
  return "";
}

/// The defined global functions of the image's .dynsym (section headers), sorted.
std::vector<std::string> exported_functions(std::span<const std::byte> image) {
  std::vector<std::string> out;
  const auto eh = read_at<Elf64_Ehdr>(image, 0);
  if (eh.e_shentsize != sizeof(Elf64_Shdr) ||
      !in_bounds(eh.e_shoff, std::uint64_t{eh.e_shnum} * sizeof(Elf64_Shdr), image.size()))
    return out;
  for (std::uint32_t i = 0; i < eh.e_shnum; ++i) {
    const auto sh = read_at<Elf64_Shdr>(image, eh.e_shoff + i * sizeof(Elf64_Shdr));
    if (sh.sh_type != SHT_DYNSYM || sh.sh_link >= eh.e_shnum) continue;
    const auto str = read_at<Elf64_Shdr>(image, eh.e_shoff + sh.sh_link * sizeof(Elf64_Shdr));
    if (!in_bounds(sh.sh_offset, sh.sh_size, image.size()) ||
        !in_bounds(str.sh_offset, str.sh_size, image.size()))
      continue;
    for (std::uint64_t k = 1; k < sh.sh_size / sizeof(Elf64_Sym); ++k) {
      const auto s = read_at<Elf64_Sym>(image, sh.sh_offset + k * sizeof(Elf64_Sym));
      if (ELF64_ST_TYPE(s.st_info) != STT_FUNC || s.st_shndx == SHN_UNDEF ||
          s.st_name >= str.sh_size)
        continue;
      const char* name = reinterpret_cast<const char*>(image.data() + str.sh_offset + s.st_name);
      const std::string text(name, strnlen(name, str.sh_size - s.st_name));
      if (!text.empty() && text[0] != '_') out.push_back(text);  // not _init/_fini
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

/// The CPU as a device. All state is per instance: two instances share nothing. Before a hook
/// runs, the SDK has checked its arguments: every device range of a copy or memset lies in a
/// live allocation, a module global get_global resolved, or a range vendor_owns_range accepts;
/// every stream is 0 or live (launch's excepted); zero-byte copies never arrive.
class ExampleDevice final : public gpuplug::sdk::Device {
 public:
  explicit ExampleDevice(const gpuplug::sdk::DeviceConfig& config) : Device(config) {}
  // Releases what is left while our members still exist (the SDK's destroy already did this).
  ~ExampleDevice() override { shutdown(); }

  // ---- memory. VENDOR: cuMemAlloc / hipMalloc; throw OUT_OF_MEMORY when the driver says so.
  std::uint64_t vendor_alloc(std::uint64_t bytes) override { return allocate(bytes); }
  std::uint64_t vendor_alloc_managed(std::uint64_t bytes) override { return allocate(bytes); }
  void vendor_free(std::uint64_t ptr, gpuplug_alloc_kind_t /*kind*/) override {
    std::free(reinterpret_cast<void*>(ptr));
  }
  void vendor_memory_info(std::uint64_t& free_bytes, std::uint64_t& total_bytes) override {
    struct sysinfo si {};
    ::sysinfo(&si);
    total_bytes = std::uint64_t{si.totalram} * si.mem_unit;
    free_bytes = std::min(total_bytes, std::uint64_t{si.freeram} * si.mem_unit);
  }
  void vendor_device_info(gpuplug_device_info_t& out) override { describe(config().ordinal, out); }
  // Pointers neither the ledger nor the module globals know: refused (the default). VENDOR: ask
  // the driver whether it is memory of this device (cuPointerGetAttribute, hipPointerGetAttributes)
  // and return gpuplug::sdk::Access::read_write when the whole range is.
  // gpuplug::sdk::Access vendor_owns_range(std::uint64_t ptr, std::uint64_t bytes) override;
  // A hook that needs the allocation a device pointer lies in asks the SDK's ledger instead of
  // keeping its own map: ledger().find(ptr) is {ptr, bytes, kind} of the live allocation holding
  // it (<gpuplug/ledger.hpp>); modules() answers module and function lookups by name
  // (<gpuplug/module_registry.hpp>). docs/plugin-authors.md, "Lookups a hook may make".

  // ---- copies. VENDOR: cuMemcpy*; the async ones on the stream's handle.
  void vendor_copy_h2d(std::uint64_t dst, const void* src, std::uint64_t bytes) override {
    std::memcpy(reinterpret_cast<void*>(dst), src, bytes);
  }
  void vendor_copy_d2h(void* dst, std::uint64_t src, std::uint64_t bytes) override {
    std::memcpy(dst, reinterpret_cast<const void*>(src), bytes);
  }
  void vendor_copy_d2d(std::uint64_t dst, std::uint64_t src, std::uint64_t bytes) override {
    std::memmove(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), bytes);
  }
  // The async copies are optional (vendor_copy_*_async): the SDK's defaults synchronize the
  // stream, then make the synchronous copy, which keeps stream order. Work on a stream runs at
  // once here, so the defaults are all this device needs. VENDOR: override them with
  // cuMemcpy*Async on the stream's handle, so that the host does not wait.
  void vendor_memset_d8(std::uint64_t dst, std::uint8_t value, std::uint64_t bytes,
                        std::uint64_t /*stream*/) override {
    std::memset(reinterpret_cast<void*>(dst), value, bytes);
  }

  // ---- streams: opaque non-zero values (0 is the default stream); the SDK keeps the live ones.
  // VENDOR: cuStreamCreate / cuStreamSynchronize + cuStreamDestroy.
  std::uint64_t vendor_stream_create() override { return ++last_stream_; }
  void vendor_stream_destroy(std::uint64_t /*stream*/) override {}  // its work is done already
  void vendor_stream_synchronize(std::uint64_t /*stream*/) override {}
  void vendor_synchronize() override {}

  // ---- modules. The SDK's registry owns names, lazy loading and errors for unknown modules;
  // we turn bytes into a loaded module. VENDOR: cuModuleLoadData.
  gpuplug::sdk::VendorModule vendor_load_module(std::string_view name,
                                                std::span<const std::byte> image) override {
    const std::string module(name);
    if (const std::string why = check_image(image); !why.empty())
      fail(GPUPLUG_STATUS_INVALID_IMAGE, "module " + module + ": " + why);
    // dlopen wants a file: write the image to an anonymous memfd and open /proc/self/fd/N.
    // The fd stays open while the module is loaded, which keeps the path (and so dlopen's idea
    // of which object this is) unique.
    auto m = std::make_unique<Module>();
    m->fd = ::memfd_create(("gpuplug-example-" + module).c_str(), MFD_CLOEXEC);
    if (m->fd < 0) fail(GPUPLUG_STATUS_DEVICE_ERROR, "module " + module + ": memfd_create failed");
    if (::write(m->fd, image.data(), image.size()) != static_cast<ssize_t>(image.size())) {
      ::close(m->fd);
      fail(GPUPLUG_STATUS_DEVICE_ERROR, "module " + module + ": cannot write the image");
    }
    const std::string path = "/proc/self/fd/" + std::to_string(m->fd);
    m->handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (m->handle == nullptr) {
      const char* err = ::dlerror();
      ::close(m->fd);
      fail(GPUPLUG_STATUS_INVALID_IMAGE,
           "module " + module + ": " + (err != nullptr ? err : "dlopen failed"));
    }
    m->functions = exported_functions(image);
    return reinterpret_cast<std::uintptr_t>(m.release());
  }
  void vendor_unload_module(gpuplug::sdk::VendorModule module) noexcept override {
    std::unique_ptr<Module> m(&as_module(module));
    ::dlclose(m->handle);
    ::close(m->fd);
  }
  std::uint64_t vendor_get_function(gpuplug::sdk::VendorModule module,
                                    const std::string& func) override {
    const Module& m = as_module(module);
    // Only functions: a published global of the same name must not become a "kernel".
    if (!std::binary_search(m.functions.begin(), m.functions.end(), func)) return 0;
    return reinterpret_cast<std::uintptr_t>(::dlsym(m.handle, func.c_str()));
  }
  std::vector<std::string> vendor_list_functions(gpuplug::sdk::VendorModule module) override {
    return as_module(module).functions;
  }
  /// Published metadata (gemm_f32_n_tile, gemm_a_e4m3_a_e4m3, ...) is an exported object; its
  /// size comes from the symbol table. The SDK remembers it, so copies from it pass its checks.
  std::optional<gpuplug::sdk::VendorGlobal> vendor_get_global(gpuplug::sdk::VendorModule module,
                                                              const std::string& symbol) override {
    void* address = ::dlsym(as_module(module).handle, symbol.c_str());
    if (address == nullptr) return std::nullopt;
    Dl_info info{};
    void* entry = nullptr;  // the symbol's ElfW(Sym), for its size and type
    const int found = ::dladdr1(address, &info, &entry, RTLD_DL_SYMENT);
    const auto* sym = static_cast<const ElfW(Sym)*>(entry);
    if (found == 0 || sym == nullptr || ELF64_ST_TYPE(sym->st_info) != STT_OBJECT)
      return std::nullopt;
    // Published metadata is a constant in a read-only segment here, so copies may only read it.
    // VENDOR: a GPU's module globals are device memory kernels may write: leave `writable` true.
    return gpuplug::sdk::VendorGlobal{reinterpret_cast<std::uintptr_t>(address), sym->st_size,
                                      /*writable=*/false};
  }
  std::vector<std::string> vendor_module_file_extensions() const override { return {".so"}; }

  // ---- launch: the hot path. The host calling convention (abi.h): the kernel is called once
  // per block with the block's indices; it loops over the block's threads itself. Blocks run
  // one after another here; a real CPU backend would spread them over a worker pool. The SDK
  // leaves launch's stream unchecked (the hot path); a GPU driver refuses a bad handle itself.
  // VENDOR: cuLaunchKernel(function, grid, block, shared_bytes, stream, params).
  void vendor_launch(std::uint64_t function, gpuplug_dim3_t grid, gpuplug_dim3_t block,
                     std::uint32_t shared_bytes, std::uint64_t stream, void** params) override {
    streams().check("launch", stream);
    if (grid.x == 0 || grid.y == 0 || grid.z == 0 || block.x == 0 || block.y == 0 || block.z == 0)
      fail(GPUPLUG_STATUS_INVALID_ARGUMENT, "launch: empty grid or block");
    const auto kernel = reinterpret_cast<gpuplug_host_kernel_fn>(function);
    // Shared memory for one block at a time; allocated per launch to keep the example short.
    std::unique_ptr<std::byte[]> shared(shared_bytes ? new std::byte[shared_bytes] : nullptr);
    gpuplug_host_block_t b{grid, block, {0, 0, 0}, shared_bytes, shared.get()};
    for (b.block_idx.z = 0; b.block_idx.z < grid.z; ++b.block_idx.z)
      for (b.block_idx.y = 0; b.block_idx.y < grid.y; ++b.block_idx.y)
        for (b.block_idx.x = 0; b.block_idx.x < grid.x; ++b.block_idx.x) kernel(&b, params);
  }

  /// Shared by the plugin-level describe_device and the instance's device_info.
  static void describe(std::uint32_t ordinal, gpuplug_device_info_t& out) {
    out.ordinal = ordinal;
    std::snprintf(out.name, sizeof out.name, "example CPU device");
    std::snprintf(out.arch, sizeof out.arch, "host");
    struct sysinfo si {};
    ::sysinfo(&si);
    out.total_memory = std::uint64_t{si.totalram} * si.mem_unit;
    out.free_memory = std::min(out.total_memory, std::uint64_t{si.freeram} * si.mem_unit);
    out.compute_units = std::max(1u, std::thread::hardware_concurrency());
    out.managed_memory = 1;  // all of it is host memory
  }

 private:
  static std::uint64_t allocate(std::uint64_t bytes) {
    const std::uint64_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
    void* p = rounded < bytes ? nullptr : std::aligned_alloc(kAlignment, rounded);
    if (p == nullptr)
      fail(GPUPLUG_STATUS_OUT_OF_MEMORY, "alloc: " + std::to_string(bytes) + " bytes: no memory");
    return reinterpret_cast<std::uintptr_t>(p);
  }

  std::atomic<std::uint64_t> last_stream_{0};
};

/// The plugin description GPUPLUG_DEFINE_PLUGIN turns into the C table. `name` is the selector
/// name ("example", "example:0", "example!") and must match the file libgpuplug-example.so.
struct ExamplePlugin {
  static constexpr const char* name = "example";
  static constexpr const char* vendor = "Example Corp";
  static constexpr const char* version = "0.1.0";
  /// Option keys beyond the common device_memory_limit and modules_dir; others are refused.
  static constexpr std::array<std::string_view, 0> extra_options{};

  /// Is the vendor usable here? Never fails for "no driver": it reports it. Runs once per
  /// process; the SDK keeps the result. VENDOR: dlopen the driver, check its version, count
  /// devices; say why in the message when unavailable.
  static void probe(gpuplug_probe_result_t& out) {
    gpuplug::sdk::fill_probe(out, GPUPLUG_PROBE_AVAILABLE, 1, "example CPU device");
  }

  /// Called only for an ordinal below probe's device_count (the SDK checks it once, for all).
  static void describe_device(std::uint32_t ordinal, gpuplug_device_info_t& out) {
    ExampleDevice::describe(ordinal, out);
  }
  static std::unique_ptr<gpuplug::sdk::Device> create(const gpuplug::sdk::DeviceConfig& config) {
    return std::make_unique<ExampleDevice>(config);
  }
};

}  // namespace example

GPUPLUG_DEFINE_PLUGIN(example::ExamplePlugin)
