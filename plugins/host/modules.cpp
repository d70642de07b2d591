// SPDX-License-Identifier: Apache-2.0
// Host kernel modules: ELF shared objects loaded from bytes (memfd + dlopen) or from a module
// folder (dlopen by path, so $ORIGIN works), symbols by name, kernel records (the handles).
// image.cpp checks and reads the bytes.
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>

#include <gpuplug/kernel_args.h>

#include <cstring>
#include <optional>
#include <vector>

#include "device.hpp"
#include "gpuplug/support/elf_image.hpp"
#include "gpuplug/support/text.hpp"
#include "image.hpp"

namespace gpuplug::host {
namespace {

/// One loaded module. From bytes, the memfd stays open while the module is loaded: dlopen knows
/// the object by its path "/proc/self/fd/N", so keeping N busy keeps the name unique. From a
/// file, `fd` is -1 and `path` is the file's real path.
struct HostModule {
  void* handle = nullptr;
  int fd = -1;
  std::string name;
  std::string path;                    // what dlopen was given, and what dladdr reports
  std::vector<std::string> functions;  // defined global STT_FUNC symbols of .dynsym, sorted
  std::mutex kernels_mutex;
  // One record per function asked for, with the handle naming it; the handles are removed from
  // the instance's table, then the records freed, with the module.
  struct Kernel {
    std::unique_ptr<KernelRecord> record;
    std::uint64_t handle = 0;
  };
  std::map<std::string, Kernel, std::less<>> kernels;  // kernels_mutex
};

/// Serialises "is this file already loaded?" with loading it by path, across the instances of
/// the process (the dynamic loader is process-wide). Trivially destructible, as plugins need.
std::mutex& path_load_mutex() noexcept {
  static std::mutex mutex;
  static_assert(std::is_trivially_destructible_v<std::mutex>);
  return mutex;
}

/// Module names and dlerror texts (which quote names from the image) are untrusted: bounded
/// and escaped before they reach a message.
constexpr std::size_t kMaxShownBytes = 400;

/// The dependency dlopen could not find, or "" when `why` is about something else. glibc says
/// "<needed>: cannot open shared object file: <errno text>" for a DT_NEEDED entry it did not
/// find, where <needed> is the entry as written (or the module's own path, which `self` is).
std::string missing_dependency(std::string_view why, std::string_view self) {
  constexpr std::string_view marker = ": cannot open shared object file";
  const std::size_t at = why.find(marker);
  if (at == std::string_view::npos || at == 0) return {};
  const std::string_view lib = why.substr(0, at);
  if (lib == self) return {};
  return std::string(lib);
}

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
                "module " + std::string(module) + ": writing the image to a memfd failed: " + support::errno_text(err));
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

// The sizes `<func>_args` publishes (<gpuplug/kernel_args.h>), or none. The module is not trusted
// here: the symbol must be a data object of this module, at least the version-1 struct in size
// and inside one of its mapped segments, with a known version, at most GPUPLUG_KERNEL_ARGS_MAX
// arguments, and each size between 1 and kMaxArgBytes (a bad one is as good as none).
std::optional<std::vector<std::uint32_t>> read_arg_sizes(HostDevice& device, const HostModule& m,
                                                         const std::string& func) {
  constexpr std::uint32_t kMaxArgBytes = 4096;  // CUDA's bound on all of a launch's arguments
  const Elf64_Sym* sym = nullptr;
  const void* address = own_symbol(m, func + GPUPLUG_KERNEL_ARGS_SUFFIX, sym);
  if (address == nullptr || ELF64_ST_TYPE(sym->st_info) != STT_OBJECT ||
      sym->st_size < sizeof(gpuplug_kernel_args_t))
    return std::nullopt;
  const auto at = reinterpret_cast<std::uintptr_t>(address);
  if (device.vendor_owns_range(at, sizeof(gpuplug_kernel_args_t)) == sdk::Access::none)
    return std::nullopt;
  gpuplug_kernel_args_t args{};
  std::memcpy(&args, address, sizeof args);
  if (args.version < 1 || args.count > GPUPLUG_KERNEL_ARGS_MAX) return std::nullopt;
  std::vector<std::uint32_t> sizes(args.sizes, args.sizes + args.count);
  std::uint32_t total = 0;
  for (const std::uint32_t size : sizes) {
    if (size == 0 || size > kMaxArgBytes - total) return std::nullopt;
    total += size;
  }
  return sizes;
}

}  // namespace

sdk::VendorModule HostDevice::vendor_load_module(std::string_view name,
                                                 std::span<const std::byte> image) {
  return load(name, image, {}, nullptr);
}

// Loading by path keeps $ORIGIN (the folder of the path given to dlopen), so a module can find a
// sibling library through RUNPATH $ORIGIN. The path is the file's realpath: $ORIGIN is then the
// folder the file really lies in, and the path is the one glibc also uses to recognise it.
//
// Time of check, time of use: the bytes validated were read through the registry's descriptor,
// and dlopen opens the path again. Both the descriptor and the path are stat()ed before dlopen
// and the path again after it; unless all three agree on device, inode, size, mtime and ctime
// (any write, rename over, chmod or utimes changes one of them), the load is refused (undone
// when dlopen already ran). Residual risk: a file written in place between the registry's read
// and the first fstat here (microseconds; a rename over it is caught by the inode), or a change
// that restores every one of those fields, would go unnoticed; both need write access to a
// module folder, and whoever has that can already put any valid code there. Module folders must be writable by trusted users only (as any
// library folder).
//
// One file, one copy per instance: the dynamic loader hands back the copy it has when the same
// file is opened again, which would share the module's globals (device memory on a GPU, private
// per instance) between instances. So when the file is already loaded in the process (another
// instance has it, or a copy an earlier unload could not unmap), this instance loads its own
// copy from the bytes through a memfd instead; that copy's dependencies are matched by soname
// with the ones already loaded.
sdk::VendorModule HostDevice::vendor_load_module_file(std::string_view name,
                                                      std::span<const std::byte> image,
                                                      const support::RegularFile& file) {
  std::error_code ec;
  const std::filesystem::path real = std::filesystem::canonical(file.path(), ec);
  if (ec)
    sdk::fail(GPUPLUG_STATUS_NOT_FOUND, "module " + bounded_text(name, kMaxShownBytes) +
                                            ": cannot resolve the path of " +
                                            bounded_text(file.path().string(), kMaxShownBytes) +
                                            ": " + ec.message());
  std::lock_guard lock(path_load_mutex());
  // RTLD_NOLOAD reads no more of the file than the ELF header glibc checks; the full validation
  // of the bytes comes first anyway (load checks them before it opens anything).
  if (is_elf(image) && support::validate_elf_shared_object(image).ok() &&
      image_problem(image).empty()) {
    if (void* existing = dlopen(real.c_str(), RTLD_LAZY | RTLD_NOLOAD); existing != nullptr) {
      dlclose(existing);
      log(GPUPLUG_LOG_DEBUG, "module " + bounded_text(name, kMaxShownBytes) + ": " +
                                 bounded_text(real.string(), kMaxShownBytes) +
                                 " is already loaded in this process; this instance loads its "
                                 "own copy from memory");
      return load(name, image, {}, nullptr);
    }
  }
  return load(name, image, real.string(), &file);
}

namespace {

struct FileId {
  dev_t dev;
  ino_t ino;
  off_t size;
  timespec mtime;
  timespec ctime;
  bool operator==(const FileId& o) const noexcept {
    return dev == o.dev && ino == o.ino && size == o.size && mtime.tv_sec == o.mtime.tv_sec &&
           mtime.tv_nsec == o.mtime.tv_nsec && ctime.tv_sec == o.ctime.tv_sec &&
           ctime.tv_nsec == o.ctime.tv_nsec;
  }
};

FileId file_id(const struct stat& st) noexcept {
  return {st.st_dev, st.st_ino, st.st_size, st.st_mtim, st.st_ctim};
}

}  // namespace

sdk::VendorModule HostDevice::load(std::string_view name, std::span<const std::byte> image,
                                   const std::string& path, const support::RegularFile* file) {
  auto m = std::make_unique<HostModule>();
  m->name = std::string(name);
  const std::string shown_name = bounded_text(name, kMaxShownBytes);
  // Bytes that are not ELF at all go to dlopen, which rejects them safely and says why.
  if (is_elf(image)) {
    // The whole structure ld.so trusts is checked first: a corrupt module must be refused here,
    // not crash the process inside dlopen (a module is still code that runs in the process).
    if (const support::ElfVerdict v = support::validate_elf_shared_object(image); !v.ok())
      invalid(shown_name, "not a valid ELF shared object: " + v.defect);
    if (std::string why = image_problem(image); !why.empty())
      invalid(shown_name, "not a valid ELF shared object: " + why);
    m->functions = exported_functions(image);
  }
  FileId validated{};
  if (file != nullptr) {
    struct stat fd_st {}, path_st {};
    if (::fstat(file->fd(), &fd_st) != 0 || ::stat(path.c_str(), &path_st) != 0 ||
        !(file_id(fd_st) == file_id(path_st)) ||
        static_cast<std::uint64_t>(fd_st.st_size) != image.size())
      sdk::fail(GPUPLUG_STATUS_INVALID_IMAGE,
                "module " + shown_name + ": " + bounded_text(path, kMaxShownBytes) +
                    " changed while it was being loaded; try again");
    validated = file_id(fd_st);
  }

  std::vector<int> spare_fds;  // closed on every path out
  const auto cleanup = [&](bool keep_module_fd) noexcept {
    for (int fd : spare_fds) ::close(fd);
    if (!keep_module_fd && m->fd >= 0) ::close(m->fd);
  };
  try {
    if (file == nullptr) {
      const std::string memfd_name = "gpuplug:" + m->name.substr(0, 200);  // memfd names: < 250
      m->fd = memfd_create(memfd_name.c_str(), MFD_CLOEXEC);
      if (m->fd < 0)
        sdk::fail(errno == ENOMEM || errno == EMFILE || errno == ENFILE
                      ? GPUPLUG_STATUS_OUT_OF_MEMORY
                      : GPUPLUG_STATUS_DEVICE_ERROR,
                  "module " + shown_name + ": memfd_create failed: " + support::errno_text(errno));
      write_all(m->fd, image, shown_name);
      // glibc recognises an object already loaded under the same path string. A module that
      // could not be unloaded (dlclose is a no-op for objects with unique symbols) keeps its old
      // "/proc/self/fd/N" name, so move to another descriptor number until the path is unused.
      for (;;) {
        m->path = fd_path(m->fd);
        void* stale = dlopen(m->path.c_str(), RTLD_LAZY | RTLD_NOLOAD);
        if (stale == nullptr) break;
        dlclose(stale);
        const int other = ::dup(m->fd);
        if (other < 0)
          sdk::fail(GPUPLUG_STATUS_DEVICE_ERROR,
                    "module " + shown_name + ": dup failed: " + support::errno_text(errno));
        spare_fds.push_back(m->fd);
        m->fd = other;
      }
    } else {
      m->path = path;
    }
    dlerror();  // NOLINT(concurrency-mt-unsafe): per thread in glibc
    m->handle = dlopen(m->path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (m->handle == nullptr) {
      const char* why_c = dlerror();  // NOLINT(concurrency-mt-unsafe)
      const std::string why = why_c != nullptr ? why_c : "dlopen failed";
      if (const std::string lib = missing_dependency(why, m->path); !lib.empty())
        sdk::fail(GPUPLUG_STATUS_NOT_FOUND,
                  "module " + shown_name + " needs " + bounded_text(lib, kMaxShownBytes) +
                      ", which was not found (looked in the module's RUNPATH, LD_LIBRARY_PATH "
                      "and the system's library folders): " +
                      bounded_text(why, kMaxShownBytes));
      invalid(shown_name, "not a valid ELF shared object (" + std::to_string(image.size()) +
                              " bytes): " + bounded_text(why, kMaxShownBytes));
    }
    if (file != nullptr) {
      struct stat after {};
      if (::stat(path.c_str(), &after) != 0 || !(file_id(after) == validated))
        sdk::fail(GPUPLUG_STATUS_INVALID_IMAGE,
                  "module " + shown_name + ": " + bounded_text(path, kMaxShownBytes) +
                      " changed while it was being loaded (the loaded copy was unloaded); try "
                      "again");
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
  {
    std::lock_guard lock(m->kernels_mutex);
    for (const auto& [name, kernel] : m->kernels) kernel_handles_.remove(kernel.handle);
  }
  if (m->handle != nullptr && dlclose(m->handle) != 0) {
    const char* why = dlerror();  // NOLINT(concurrency-mt-unsafe)
    try {
      log(GPUPLUG_LOG_WARNING, "module " + bounded_text(m->name, kMaxShownBytes) +
                                   ": dlclose failed: " +
                                   bounded_text(why != nullptr ? why : "unknown error",
                                                kMaxShownBytes));
    } catch (...) {  // no memory for the message
    }
  }
  if (m->fd >= 0) ::close(m->fd);
  delete m;  // and its kernel records, which no handle names any more
}

std::uint64_t HostDevice::vendor_get_function(sdk::VendorModule module, const std::string& func) {
  HostModule& m = as_module(module);
  {
    std::lock_guard lock(m.kernels_mutex);
    if (auto it = m.kernels.find(func); it != m.kernels.end()) return it->second.handle;
  }
  const Elf64_Sym* sym = nullptr;
  void* address = own_symbol(m, func, sym);
  if (address == nullptr) return 0;
  const unsigned type = ELF64_ST_TYPE(sym->st_info);
  if (type != STT_FUNC && type != STT_GNU_IFUNC) return 0;  // e.g. a data symbol of that name
  // The handle names a record, not the address: launch checks the handle first (its instance,
  // its slot) and, when the kernel throws, names it. Names are escaped once here.
  auto record = std::make_unique<KernelRecord>(KernelRecord{
      reinterpret_cast<gpuplug_host_kernel_fn>(address),
      bounded_text(m.name, kMaxShownBytes) + "::" + bounded_text(func, kMaxShownBytes),
      bounded_text(func, kMaxShownBytes), read_arg_sizes(*this, m, func)});
  std::lock_guard lock(m.kernels_mutex);
  auto [it, inserted] = m.kernels.try_emplace(func);  // or a racing thread's
  if (inserted) {
    try {
      it->second.handle = kernel_handles_.add(record.get());
    } catch (...) {
      m.kernels.erase(it);
      throw;
    }
    it->second.record = std::move(record);
  }
  return it->second.handle;
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
