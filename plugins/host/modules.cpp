// SPDX-License-Identifier: Apache-2.0
// Host kernel modules: ELF shared objects loaded from bytes (memfd + dlopen), symbols by name.
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "device.hpp"

namespace gpuplug::host {
namespace {

#if defined(__x86_64__)
constexpr std::uint16_t kMachine = EM_X86_64;
#elif defined(__aarch64__)
constexpr std::uint16_t kMachine = EM_AARCH64;
#elif defined(__powerpc64__)
constexpr std::uint16_t kMachine = EM_PPC64;
#elif defined(__riscv) && __riscv_xlen == 64
constexpr std::uint16_t kMachine = EM_RISCV;
#else
#error "the host backend needs a 64-bit ELF target it knows"
#endif

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

/// strerror for messages, thread-safe (the GNU strerror_r returns the text).
std::string errno_text(int err) {
  char buf[128];
  return strerror_r(err, buf, sizeof buf);
}

[[noreturn]] void invalid(std::string_view module, const std::string& why) {
  sdk::fail(GPUPLUG_STATUS_INVALID_IMAGE, "module " + std::string(module) + ": " + why);
}

bool in_bounds(std::uint64_t offset, std::uint64_t size, std::uint64_t total) {
  return offset <= total && size <= total - offset;
}

template <class T>
T read_at(std::span<const std::byte> image, std::uint64_t offset) {
  T value;
  std::memcpy(&value, image.data() + offset, sizeof value);  // images need not be aligned
  return value;
}

/// Checks what dlopen trusts without checking: that the program headers and every loadable
/// segment lie inside the image (a truncated image would otherwise fault inside the loader).
/// Returns "" when the image looks loadable; a reason otherwise. Images that are not ELF at all
/// are left to dlopen, whose message then names the problem.
std::string check_segments(std::span<const std::byte> image) {
  const auto eh = read_at<Elf64_Ehdr>(image, 0);
  if (eh.e_ident[EI_CLASS] != ELFCLASS64) return "";  // dlopen reports "wrong ELF class"
  if (eh.e_type != ET_DYN)
    return "an ELF file of type " + std::to_string(eh.e_type) + ", not a shared object";
  if (eh.e_machine != kMachine) return "";  // dlopen names the machine mismatch
  if (eh.e_phentsize != sizeof(Elf64_Phdr)) return "unexpected program header size";
  if (!in_bounds(eh.e_phoff, std::uint64_t{eh.e_phnum} * sizeof(Elf64_Phdr), image.size()))
    return "program headers lie outside the image (truncated?)";
  for (std::uint16_t i = 0; i < eh.e_phnum; ++i) {
    const auto ph = read_at<Elf64_Phdr>(image, eh.e_phoff + std::uint64_t{i} * sizeof(Elf64_Phdr));
    if (ph.p_type == PT_LOAD && !in_bounds(ph.p_offset, ph.p_filesz, image.size()))
      return "segment " + std::to_string(i) + " extends past the end of the image (" +
             std::to_string(image.size()) + " bytes; truncated?)";
  }
  return "";
}

/// The loadable segments of an image loaded at `base`, read-only where PT_GNU_RELRO covers them
/// (those come first, so a lookup that takes the first match sees them as read-only).
template <class Segment>
std::vector<Segment> image_segments(std::span<const std::byte> image, std::uint64_t base,
                                    std::uintptr_t module) {
  std::vector<Segment> relro, loads;
  const auto eh = read_at<Elf64_Ehdr>(image, 0);
  for (std::uint16_t i = 0; i < eh.e_phnum; ++i) {
    const auto ph = read_at<Elf64_Phdr>(image, eh.e_phoff + std::uint64_t{i} * sizeof(Elf64_Phdr));
    const Segment s{base + ph.p_vaddr, base + ph.p_vaddr + ph.p_memsz, (ph.p_flags & PF_W) != 0,
                    module};
    if (ph.p_type == PT_LOAD && ph.p_memsz != 0) loads.push_back(s);
    if (ph.p_type == PT_GNU_RELRO && ph.p_memsz != 0)
      relro.push_back({s.begin, s.end, false, module});
  }
  relro.insert(relro.end(), loads.begin(), loads.end());
  return relro;
}

/// Names of the defined global functions in the image's .dynsym, sorted. Empty when the image
/// has no section headers (then "not found" messages cannot list functions).
std::vector<std::string> list_dynsym_functions(std::span<const std::byte> image) {
  std::vector<std::string> out;
  const auto eh = read_at<Elf64_Ehdr>(image, 0);
  if (eh.e_shoff == 0 || eh.e_shentsize != sizeof(Elf64_Shdr) ||
      !in_bounds(eh.e_shoff, std::uint64_t{eh.e_shnum} * sizeof(Elf64_Shdr), image.size()))
    return out;
  const auto section = [&](std::uint32_t i) {
    return read_at<Elf64_Shdr>(image, eh.e_shoff + std::uint64_t{i} * sizeof(Elf64_Shdr));
  };
  for (std::uint32_t i = 0; i < eh.e_shnum; ++i) {
    const Elf64_Shdr sym = section(i);
    if (sym.sh_type != SHT_DYNSYM || sym.sh_entsize != sizeof(Elf64_Sym) ||
        sym.sh_link >= eh.e_shnum)
      continue;
    const Elf64_Shdr str = section(sym.sh_link);
    if (!in_bounds(sym.sh_offset, sym.sh_size, image.size()) ||
        !in_bounds(str.sh_offset, str.sh_size, image.size()))
      continue;
    const char* strings = reinterpret_cast<const char*>(image.data() + str.sh_offset);
    for (std::uint64_t k = 1; k < sym.sh_size / sizeof(Elf64_Sym); ++k) {
      const auto s = read_at<Elf64_Sym>(image, sym.sh_offset + k * sizeof(Elf64_Sym));
      if (ELF64_ST_TYPE(s.st_info) != STT_FUNC || ELF64_ST_BIND(s.st_info) != STB_GLOBAL ||
          s.st_shndx == SHN_UNDEF || s.st_name >= str.sh_size)
        continue;
      const std::size_t max = static_cast<std::size_t>(str.sh_size - s.st_name);
      const std::string name(strings + s.st_name, strnlen(strings + s.st_name, max));
      // _init/_fini and other reserved names are the toolchain's, not kernels.
      if (!name.empty() && name[0] != '_') out.push_back(name);
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
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
                    ": writing the image to a memfd failed: " + errno_text(err));
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
  if (image.size() >= sizeof(Elf64_Ehdr) && std::memcmp(image.data(), ELFMAG, SELFMAG) == 0) {
    if (std::string why = check_segments(image); !why.empty())
      invalid(name, "not a valid ELF shared object: " + why);
    m->functions = list_dynsym_functions(image);
  }
  const std::string memfd_name = "gpuplug:" + m->name.substr(0, 200);  // memfd names: < 250
  m->fd = memfd_create(memfd_name.c_str(), MFD_CLOEXEC);
  if (m->fd < 0)
    sdk::fail(errno == ENOMEM || errno == EMFILE || errno == ENFILE ? GPUPLUG_STATUS_OUT_OF_MEMORY
                                                                    : GPUPLUG_STATUS_DEVICE_ERROR,
              "module " + m->name + ": memfd_create failed: " + errno_text(errno));
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
                  "module " + m->name + ": dup failed: " + errno_text(errno));
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
    // Record where the module's globals live, so that copies may name them (see
    // check_device_range). dlopen succeeded, so the image is ELF and its headers were checked.
    link_map* map = nullptr;
    if (dlinfo(m->handle, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr)
      add_segments(
          image_segments<Segment>(image, map->l_addr, reinterpret_cast<std::uintptr_t>(m.get())));
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

std::optional<std::pair<std::uint64_t, std::uint64_t>> HostDevice::vendor_get_global(
    sdk::VendorModule module, const std::string& symbol) {
  const HostModule& m = as_module(module);
  const Elf64_Sym* sym = nullptr;
  void* address = own_symbol(m, symbol, sym);
  if (address == nullptr || ELF64_ST_TYPE(sym->st_info) != STT_OBJECT) return std::nullopt;
  return std::pair<std::uint64_t, std::uint64_t>(reinterpret_cast<std::uintptr_t>(address),
                                                 sym->st_size);
}

}  // namespace gpuplug::host
