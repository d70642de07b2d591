// SPDX-License-Identifier: Apache-2.0
// Host kernel modules: ELF shared objects loaded from bytes (memfd + dlopen), symbols by name
// (image.cpp checks and reads the bytes).
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "device.hpp"
#include "gpuplug/support/elf_image.hpp"
#include "gpuplug/support/text.hpp"
#include "image.hpp"

namespace gpuplug::host {
namespace {

/// One loaded module. The memfd stays open while the module is loaded: dlopen knows the object
/// by its path "/proc/self/fd/N", so keeping N busy keeps the name unique (see load_image).
struct HostModule {
  void* handle = nullptr;
  int fd = -1;
  std::string name;
  std::string path;                    // what dlopen was given, and what dladdr reports
  std::vector<std::string> functions;  // defined global STT_FUNC symbols of .dynsym, sorted
};

HostModule& as_module(sdk::VendorModule m) {
  return *reinterpret_cast<HostModule*>(static_cast<std::uintptr_t>(m));
}

[[noreturn]] void invalid(std::string_view module, const std::string& why) {
  sdk::fail(GPUPLUG_STATUS_INVALID_IMAGE, "module " + std::string(module) + ": " + why);
}

void write_all(int fd, std::span<const std::byte> image, std::string_view module) {
  std::size_t done = 0;
  while (done < image.size()) {
    const ssize_t n = ::write(fd, image.data() + done, image.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      sdk::fail(err == ENOSPC || err == ENOMEM ? GPUPLUG_STATUS_OUT_OF_MEMORY
                                               : GPUPLUG_STATUS_DEVICE_ERROR,
                "module " + std::string(module) +
                    ": writing the image to a memfd failed: " + support::errno_text(err));
    }
    done += static_cast<std::size_t>(n);
  }
}

std::string fd_path(int fd) { return "/proc/self/fd/" + std::to_string(fd); }

/// Looks `name` up in this module only: dlsym on a handle also searches the module's
/// dependencies (libc...), so the symbol must come from the module's own file. Returns the
/// address and fills `sym` with its dynamic symbol entry.
void* own_symbol(const HostModule& m, const std::string& name, const Elf64_Sym*& sym) {
  sym = nullptr;
  dlerror();  // NOLINT(concurrency-mt-unsafe): glibc keeps dlerror state per thread
  void* address = dlsym(m.handle, name.c_str());
  if (address == nullptr) return nullptr;
  Dl_info info{};
  void* extra = nullptr;
  if (dladdr1(address, &info, &extra, RTLD_DL_SYMENT) == 0 || info.dli_fname == nullptr ||
      m.path != info.dli_fname || info.dli_saddr != address)
    return nullptr;
  sym = static_cast<const Elf64_Sym*>(extra);
  return sym == nullptr ? nullptr : address;
}

}  // namespace

sdk::VendorModule HostDevice::vendor_load_module(std::string_view name,
                                                 std::span<const std::byte> image) {
  auto m = std::make_unique<HostModule>();
  m->name = std::string(name);
  // Bytes that are not ELF at all go to dlopen, which rejects them safely and says why.
  if (is_elf(image)) {
    // The whole structure ld.so trusts is checked first: a corrupt module must be refused here,
    // not crash the process inside dlopen (a module is still code that runs in the process).
    if (const support::ElfVerdict v = support::validate_elf_shared_object(image); !v.ok())
      invalid(name, "not a valid ELF shared object: " + v.defect);
    if (std::string why = image_problem(image); !why.empty())
      invalid(name, "not a valid ELF shared object: " + why);
    m->functions = exported_functions(image);
  }
  const std::string memfd_name = "gpuplug:" + m->name.substr(0, 200);  // memfd names: < 250
  m->fd = memfd_create(memfd_name.c_str(), MFD_CLOEXEC);
  if (m->fd < 0)
    sdk::fail(errno == ENOMEM || errno == EMFILE || errno == ENFILE ? GPUPLUG_STATUS_OUT_OF_MEMORY
                                                                    : GPUPLUG_STATUS_DEVICE_ERROR,
              "module " + m->name + ": memfd_create failed: " + support::errno_text(errno));
  std::vector<int> spare_fds;  // closed on every path out
  const auto cleanup = [&](bool keep_module_fd) noexcept {
    for (int fd : spare_fds) ::close(fd);
    if (!keep_module_fd) ::close(m->fd);
  };
  try {
    write_all(m->fd, image, name);
    // glibc recognises an object already loaded under the same path string. A module that could
    // not be unloaded (dlclose is a no-op for objects with unique symbols) keeps its old
    // "/proc/self/fd/N" name, so move to another descriptor number until the path is unused.
    for (;;) {
      m->path = fd_path(m->fd);
      void* stale = dlopen(m->path.c_str(), RTLD_LAZY | RTLD_NOLOAD);
      if (stale == nullptr) break;
      dlclose(stale);
      const int other = ::dup(m->fd);
      if (other < 0)
        sdk::fail(GPUPLUG_STATUS_DEVICE_ERROR,
                  "module " + m->name + ": dup failed: " + support::errno_text(errno));
      spare_fds.push_back(m->fd);
      m->fd = other;
    }
    dlerror();  // NOLINT(concurrency-mt-unsafe): per thread in glibc
    m->handle = dlopen(m->path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (m->handle == nullptr) {
      const char* why = dlerror();  // NOLINT(concurrency-mt-unsafe)
      invalid(name, std::string("not a valid ELF shared object (") + std::to_string(image.size()) +
                        " bytes): " + (why != nullptr ? why : "dlopen failed"));
    }
    // Record where the module's memory lies, so that copies may name it (vendor_owns_range).
    // dlopen succeeded, so the image is ELF and its headers were checked.
    link_map* map = nullptr;
    if (dlinfo(m->handle, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr)
      add_segments(image_segments(image, map->l_addr), reinterpret_cast<std::uintptr_t>(m.get()));
  } catch (...) {
    if (m->handle != nullptr) dlclose(m->handle);
    cleanup(false);
    throw;
  }
  cleanup(true);
  return static_cast<sdk::VendorModule>(reinterpret_cast<std::uintptr_t>(m.release()));
}

void HostDevice::vendor_unload_module(sdk::VendorModule module) noexcept {
  HostModule* m = &as_module(module);
  remove_segments(reinterpret_cast<std::uintptr_t>(m));
  if (m->handle != nullptr && dlclose(m->handle) != 0) {
    const char* why = dlerror();  // NOLINT(concurrency-mt-unsafe)
    try {
      log(GPUPLUG_LOG_WARNING,
          "module " + m->name + ": dlclose failed: " + (why != nullptr ? why : "unknown error"));
    } catch (...) {  // no memory for the message
    }
  }
  if (m->fd >= 0) ::close(m->fd);
  delete m;
}

std::uint64_t HostDevice::vendor_get_function(sdk::VendorModule module, const std::string& func) {
  const HostModule& m = as_module(module);
  const Elf64_Sym* sym = nullptr;
  void* address = own_symbol(m, func, sym);
  if (address == nullptr) return 0;
  const unsigned type = ELF64_ST_TYPE(sym->st_info);
  if (type != STT_FUNC && type != STT_GNU_IFUNC) return 0;  // e.g. a data symbol of that name
  return reinterpret_cast<std::uintptr_t>(address);
}

std::vector<std::string> HostDevice::vendor_list_functions(sdk::VendorModule module) {
  return as_module(module).functions;
}

std::optional<sdk::VendorGlobal> HostDevice::vendor_get_global(sdk::VendorModule module,
                                                               const std::string& symbol) {
  const HostModule& m = as_module(module);
  const Elf64_Sym* sym = nullptr;
  void* address = own_symbol(m, symbol, sym);
  if (address == nullptr || ELF64_ST_TYPE(sym->st_info) != STT_OBJECT) return std::nullopt;
  const auto at = reinterpret_cast<std::uintptr_t>(address);
  // A const global lies in a read-only segment: the SDK then refuses copies into it.
  return sdk::VendorGlobal{at, sym->st_size,
                           vendor_owns_range(at, sym->st_size) == sdk::Access::read_write};
}

}  // namespace gpuplug::host
