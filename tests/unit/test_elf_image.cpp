// SPDX-License-Identifier: Apache-2.0
// gpuplug::support::validate_elf_shared_object and validate_elf_header: real modules,
// plugins and every library this process loaded pass; hand-made defects are refused with the
// defect named; and 400 mutants of a real module (ELF header, program headers, dynamic section)
// never crash dlopen: each one is refused, or loads, or gets an error from dlopen.

#define BOOST_TEST_MODULE elf_image
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "gpuplug/support/elf_image.hpp"
#include "gpuplug/support/regular_file.hpp"

namespace fs = std::filesystem;
using gpuplug::support::elf_header_size;
using gpuplug::support::host_elf_machine;
using gpuplug::support::validate_elf_header;
using gpuplug::support::validate_elf_shared_object;
using Bytes = std::vector<std::byte>;

namespace {

const fs::path kHostKernels = fs::path(GPUPLUG_TEST_KERNEL_DIR) / "host";
const fs::path kPlugins = GPUPLUG_TEST_PLUGIN_DIR;

Bytes read_bytes(const fs::path& file) {
  std::string why;
  auto bytes = gpuplug::support::read_regular_file(file, std::uint64_t{1} << 30, why);
  BOOST_REQUIRE_MESSAGE(bytes, why);
  return *bytes;
}

const Bytes& axpy() {
  static const Bytes bytes = read_bytes(kHostKernels / "axpy.so");
  return bytes;
}

// ---- reading and patching an image ------------------------------------------------------------

template <class T>
T get(const Bytes& b, std::uint64_t offset) {
  T v{};
  BOOST_REQUIRE(offset + sizeof(T) <= b.size());
  std::memcpy(&v, b.data() + offset, sizeof v);
  return v;
}
template <class T>
void put(Bytes& b, std::uint64_t offset, const T& v) {
  BOOST_REQUIRE(offset + sizeof(T) <= b.size());
  std::memcpy(b.data() + offset, &v, sizeof v);
}

Elf64_Ehdr header(const Bytes& b) { return get<Elf64_Ehdr>(b, 0); }
std::uint64_t phdr_offset(const Bytes& b, std::size_t i) {
  return header(b).e_phoff + i * sizeof(Elf64_Phdr);
}
Elf64_Phdr phdr(const Bytes& b, std::size_t i) { return get<Elf64_Phdr>(b, phdr_offset(b, i)); }

/// The index of the `nth` program header of `type`.
std::size_t find_phdr(const Bytes& b, std::uint32_t type, int nth = 0) {
  for (std::size_t i = 0; i < header(b).e_phnum; ++i)
    if (phdr(b, i).p_type == type && nth-- == 0) return i;
  BOOST_FAIL("no program header of type " << type);
  return 0;
}

/// The file offset of the dynamic entry with `tag`.
std::uint64_t dyn_offset(const Bytes& b, std::int64_t tag) {
  const Elf64_Phdr d = phdr(b, find_phdr(b, PT_DYNAMIC));
  for (std::uint64_t off = d.p_offset; off < d.p_offset + d.p_filesz; off += sizeof(Elf64_Dyn))
    if (get<Elf64_Dyn>(b, off).d_tag == tag) return off;
  BOOST_FAIL("no dynamic entry with tag " << tag);
  return 0;
}
bool has_dyn(const Bytes& b, std::int64_t tag) {
  const Elf64_Phdr d = phdr(b, find_phdr(b, PT_DYNAMIC));
  for (std::uint64_t off = d.p_offset; off < d.p_offset + d.p_filesz; off += sizeof(Elf64_Dyn)) {
    const auto t = get<Elf64_Dyn>(b, off).d_tag;
    if (t == tag) return true;
    if (t == DT_NULL) return false;
  }
  return false;
}
std::uint64_t dyn_value(const Bytes& b, std::int64_t tag) {
  return get<Elf64_Dyn>(b, dyn_offset(b, tag)).d_un.d_val;
}
void set_dyn(Bytes& b, std::int64_t tag, std::uint64_t value) {
  put(b, dyn_offset(b, tag) + offsetof(Elf64_Dyn, d_un), value);
}
void retag(Bytes& b, std::int64_t tag, std::int64_t new_tag) {
  put(b, dyn_offset(b, tag), new_tag);
}

/// The file offset of the address `vaddr` (through the PT_LOADs).
std::uint64_t file_offset_of(const Bytes& b, std::uint64_t vaddr) {
  for (std::size_t i = 0; i < header(b).e_phnum; ++i) {
    const Elf64_Phdr p = phdr(b, i);
    if (p.p_type == PT_LOAD && vaddr >= p.p_vaddr && vaddr < p.p_vaddr + p.p_filesz)
      return p.p_offset + (vaddr - p.p_vaddr);
  }
  BOOST_FAIL("address " << vaddr << " is not in the file");
  return 0;
}

/// The index and file offset of the first DT_RELA relocation `pick` chooses.
std::pair<std::uint64_t, std::uint64_t> find_rela(
    const Bytes& b, const std::function<bool(const Elf64_Rela&)>& pick) {
  const std::uint64_t start = file_offset_of(b, dyn_value(b, DT_RELA));
  for (std::uint64_t k = 0; k < dyn_value(b, DT_RELASZ) / sizeof(Elf64_Rela); ++k)
    if (pick(get<Elf64_Rela>(b, start + k * sizeof(Elf64_Rela))))
      return {k, start + k * sizeof(Elf64_Rela)};
  BOOST_FAIL("no such relocation in DT_RELA");
  return {};
}

/// The index of the first undefined symbol after symbol 0 of .dynsym.
std::uint64_t first_undefined_symbol(const Bytes& b) {
  const Elf64_Ehdr eh = header(b);
  for (std::uint16_t i = 0; i < eh.e_shnum; ++i) {
    const auto sh = get<Elf64_Shdr>(b, eh.e_shoff + i * sizeof(Elf64_Shdr));
    if (sh.sh_type != SHT_DYNSYM) continue;
    for (std::uint64_t k = 1; k < sh.sh_size / sizeof(Elf64_Sym); ++k)
      if (get<Elf64_Sym>(b, sh.sh_offset + k * sizeof(Elf64_Sym)).st_shndx == SHN_UNDEF) return k;
  }
  BOOST_FAIL("no undefined symbol in .dynsym");
  return 0;
}

std::string defect(const Bytes& b) { return validate_elf_shared_object(b).defect; }

/// The validator refuses `image` and its reason contains every one of `parts`.
void refused_with(const Bytes& image, std::initializer_list<std::string> parts) {
  const std::string why = defect(image);
  BOOST_TEST_INFO("defect: " << why);
  BOOST_TEST(!why.empty());
  for (const auto& part : parts)
    BOOST_TEST(why.find(part) != std::string::npos, "expected '" << part << "' in: " << why);
}

std::uint16_t other_machine() { return host_elf_machine == EM_X86_64 ? EM_AARCH64 : EM_X86_64; }

/// A folder under the temp directory, removed with everything in it.
struct TempDir {
  fs::path path;
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "gpuplug-elf-XXXXXX").string();
    BOOST_REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    path = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// ---- loading an image in a child process ------------------------------------------------------

enum class Outcome { loaded, dlopen_error, signal, ldso_assertion, other };

struct LoadResult {
  Outcome outcome;
  std::string detail;  // the signal, the dlopen error, or the ld.so message
};

/// dlopen(RTLD_NOW | RTLD_LOCAL) and dlclose of `image` in a forked child, so that a crash
/// kills the child only. ld.so's assertion failures print "Inconsistency detected by ld.so" and
/// exit with status 127; the child's stderr is kept to recognise them.
LoadResult load_in_child(const Bytes& image, const TempDir& dir) {
  const fs::path so = dir.path / "mutant.so", err = dir.path / "stderr.txt";
  {
    std::ofstream out(so, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(image.data()),
              static_cast<std::streamsize>(image.size()));
  }
  const int err_fd = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  BOOST_REQUIRE(err_fd >= 0);
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  BOOST_REQUIRE(pid >= 0);
  if (pid == 0) {
    // Boost.Test's handlers would turn a crash into an ordinary failed exit: a crash must kill.
    // NOLINTNEXTLINE(concurrency-mt-unsafe): the forked child has one thread
    for (int sig = 1; sig < NSIG; ++sig) ::signal(sig, SIG_DFL);
    sigset_t all;
    sigemptyset(&all);
    ::sigprocmask(SIG_SETMASK, &all, nullptr);  // NOLINT(concurrency-mt-unsafe): one thread
    ::dup2(err_fd, STDERR_FILENO);
    ::alarm(30);  // a loader that loops is a failure too (SIGALRM)
    void* handle = ::dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* e = ::dlerror();  // NOLINT(concurrency-mt-unsafe): one thread
      (void)!::write(STDERR_FILENO, e, std::strlen(e));
      ::_exit(1);
    }
    ::dlclose(handle);
    ::_exit(0);
  }
  ::close(err_fd);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  std::ifstream in(err);
  std::stringstream text;
  text << in.rdbuf();
  const std::string stderr_text = text.str();
  if (WIFSIGNALED(status))
    // NOLINTNEXTLINE(concurrency-mt-unsafe): the test runs on one thread
    return {Outcome::signal, std::string("signal ") + ::strsignal(WTERMSIG(status))};
  const int code = WEXITSTATUS(status);
  if (stderr_text.find("Inconsistency detected by ld.so") != std::string::npos)
    return {Outcome::ldso_assertion, stderr_text};
  if (code == 0) return {Outcome::loaded, {}};
  if (code == 1) return {Outcome::dlopen_error, stderr_text};
  return {Outcome::other, "exit status " + std::to_string(code) + ": " + stderr_text};
}

// ---- the mutants --------------------------------------------------------------------------------

/// splitmix64: a fixed sequence on every platform and standard library.
struct Rng {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  std::uint64_t below(std::uint64_t n) { return next() % n; }
};

struct Mutant {
  Bytes image;
  std::string what;  // the mutations, for failure messages
};

/// `count` mutants of `original`, each with 1 to 4 mutations (a random byte, or a 4- or 8-byte
/// field set to a random or boundary value) in the ELF header (20%), the program header table
/// (40%) or the dynamic section (40%).
std::vector<Mutant> make_mutants(const Bytes& original, std::size_t count, std::uint64_t seed) {
  const Elf64_Ehdr eh = header(original);
  const Elf64_Phdr dyn = phdr(original, find_phdr(original, PT_DYNAMIC));
  struct Region {
    std::uint64_t start, size;
  };
  const Region regions[] = {{0, sizeof(Elf64_Ehdr)},
                            {eh.e_phoff, std::uint64_t{eh.e_phnum} * sizeof(Elf64_Phdr)},
                            {dyn.p_offset, dyn.p_filesz}};
  Rng rng{seed};
  std::vector<Mutant> out;
  for (std::size_t m = 0; m < count; ++m) {
    Mutant mutant{original, {}};
    const std::uint64_t mutations = 1 + rng.below(4);
    for (std::uint64_t k = 0; k < mutations; ++k) {
      const std::uint64_t pick = rng.below(10);
      const Region& r = regions[pick < 2 ? 0 : pick < 6 ? 1 : 2];
      const std::uint64_t kind = rng.below(3);
      std::ostringstream note;
      if (kind == 0) {
        const std::uint64_t off = r.start + rng.below(r.size);
        auto old = static_cast<std::uint8_t>(mutant.image[off]);
        auto value = static_cast<std::uint8_t>(rng.next());
        if (value == old) value ^= 0x01;
        mutant.image[off] = static_cast<std::byte>(value);
        note << "byte " << std::hex << "0x" << off << " 0x" << unsigned(old) << "->0x"
             << unsigned(value);
      } else if (kind == 1) {
        const std::uint64_t off = r.start + 4 * rng.below(r.size / 4);
        const auto old = get<std::uint32_t>(mutant.image, off);
        const std::uint32_t choices[] = {0,
                                         1,
                                         0xffffffffu,
                                         0x7fffffffu,
                                         0x80000000u,
                                         old + 1,
                                         old - 1,
                                         old + 0x1000,
                                         old ^ (1u << rng.below(32)),
                                         static_cast<std::uint32_t>(rng.next())};
        const std::uint32_t value = choices[rng.below(std::size(choices))];
        put(mutant.image, off, value);
        note << "u32 " << std::hex << "0x" << off << " 0x" << old << "->0x" << value;
      } else {
        const std::uint64_t off = r.start + 8 * rng.below(r.size / 8);
        const auto old = get<std::uint64_t>(mutant.image, off);
        const std::uint64_t choices[] = {0,
                                         1,
                                         ~std::uint64_t{0},
                                         std::uint64_t{1} << 63,
                                         0x7fffffffffffffffULL,
                                         old + 1,
                                         old - 1,
                                         old + 8,
                                         old + 0x1000,
                                         old - 0x1000,
                                         old * 2,
                                         original.size(),
                                         original.size() + 1,
                                         old ^ (std::uint64_t{1} << rng.below(64)),
                                         rng.next()};
        const std::uint64_t value = choices[rng.below(std::size(choices))];
        put(mutant.image, off, value);
        note << "u64 " << std::hex << "0x" << off << " 0x" << old << "->0x" << value;
      }
      mutant.what += (mutant.what.empty() ? "" : "; ") + note.str();
    }
    out.push_back(std::move(mutant));
  }
  return out;
}

constexpr std::size_t kMutants = 400;

/// The fixed seed, or GPUPLUG_TEST_MUTANT_SEED to explore other mutants by hand.
std::uint64_t mutant_seed() {
  const char* env = std::getenv("GPUPLUG_TEST_MUTANT_SEED");  // NOLINT(concurrency-mt-unsafe)
  return env != nullptr && *env != '\0' ? std::strtoull(env, nullptr, 0) : 0x5eed0f15;
}

}  // namespace

// ---- real objects pass ------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(real_kernel_modules_pass) {
  std::size_t seen = 0;
  for (const auto& entry : fs::directory_iterator(kHostKernels)) {
    if (entry.path().extension() != ".so") continue;
    const Bytes image = read_bytes(entry.path());
    BOOST_TEST_INFO(entry.path().string());
    BOOST_TEST(defect(image) == "");
    BOOST_TEST(validate_elf_header(std::span(image).first(elf_header_size), image.size()).defect ==
               "");
    ++seen;
  }
  BOOST_TEST(seen >= 4u, "host kernel modules found in " << kHostKernels);
}

BOOST_AUTO_TEST_CASE(real_plugins_pass) {
  std::size_t seen = 0;
  for (const auto& entry : fs::directory_iterator(kPlugins)) {
    if (entry.path().extension() != ".so") continue;
    std::string why;
    auto file = gpuplug::support::RegularFile::open(entry.path(), why);
    BOOST_REQUIRE_MESSAGE(file, why);
    const auto head = file->read_head(elf_header_size, why);
    BOOST_REQUIRE_MESSAGE(head, why);
    BOOST_TEST_INFO(entry.path().string());
    BOOST_TEST(validate_elf_header(*head, file->size()).defect == "");
    BOOST_TEST(defect(read_bytes(entry.path())) == "");
    ++seen;
  }
  BOOST_TEST(seen >= 1u, "plugins found in " << kPlugins);
}

BOOST_AUTO_TEST_CASE(every_library_of_this_process_passes) {
  // libc, libstdc++, Boost, ld.so itself, sanitizer runtimes: real toolchains' output.
  std::vector<std::string> files;
  ::dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* out) {
        const std::string name = info->dlpi_name == nullptr ? "" : info->dlpi_name;
        if (!name.empty() && name.find("linux-vdso") == std::string::npos)
          static_cast<std::vector<std::string>*>(out)->push_back(name);
        return 0;
      },
      &files);
  BOOST_TEST(files.size() >= 3u);
  for (const auto& f : files) {
    BOOST_TEST_INFO(f);
    BOOST_TEST(defect(read_bytes(f)) == "");
  }
}

// ---- the header ---------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(header_defects_are_named) {
  refused_with({}, {"empty"});
  refused_with(Bytes(axpy().begin(), axpy().begin() + 40), {"only 40 bytes", "64-byte ELF header"});
  Bytes pe(axpy());
  pe[0] = std::byte{'M'};
  pe[1] = std::byte{'Z'};
  refused_with(pe, {"does not start with the ELF magic (7f 45 4c 46) but with 4d 5a 4c 46"});

  Bytes b = axpy();
  b[EI_CLASS] = std::byte{ELFCLASS32};
  refused_with(b, {"a 32-bit ELF file (ELFCLASS32); this process is 64-bit"});
  b = axpy();
  b[EI_DATA] = std::byte{ELFDATA2MSB};
  refused_with(b, {"a big-endian ELF file (ELFDATA2MSB); this process is little-endian"});
  b = axpy();
  b[EI_OSABI] = std::byte{9};
  refused_with(b, {"OS ABI 9"});
  b = axpy();
  b[EI_PAD + 2] = std::byte{1};
  refused_with(b, {"non-zero padding in e_ident"});

  b = axpy();
  put<std::uint16_t>(b, offsetof(Elf64_Ehdr, e_machine), other_machine());
  const std::string other = gpuplug::support::elf_machine_name(other_machine());
  refused_with(b, {"ELF for " + other + ", this process is "});
  if (host_elf_machine == EM_X86_64)
    refused_with(b, {"ELF for aarch64 (EM_AARCH64), this process is x86-64"});
  b = axpy();
  put<std::uint16_t>(b, offsetof(Elf64_Ehdr, e_machine), 4242);
  refused_with(b, {"ELF for machine 4242 (e_machine)"});

  b = axpy();
  put<std::uint16_t>(b, offsetof(Elf64_Ehdr, e_type), ET_EXEC);
  refused_with(b, {"an ELF executable (ET_EXEC), not a shared object (ET_DYN)"});
  b = axpy();
  put<std::uint16_t>(b, offsetof(Elf64_Ehdr, e_phentsize), 32);
  refused_with(b, {"e_phentsize is 32, not 56"});
  b = axpy();
  put<std::uint16_t>(b, offsetof(Elf64_Ehdr, e_ehsize), 52);
  refused_with(b, {"e_ehsize is 52"});
  b = axpy();
  put<std::uint16_t>(b, offsetof(Elf64_Ehdr, e_phnum), 0);
  refused_with(b, {"no program headers"});
  b = axpy();
  put<std::uint64_t>(b, offsetof(Elf64_Ehdr, e_phoff), (b.size() - 16) & ~std::uint64_t{7});
  refused_with(b, {"the program header table", "runs past the end of the"});
  b = axpy();
  put<std::uint64_t>(b, offsetof(Elf64_Ehdr, e_shoff), b.size() - 64);
  refused_with(b, {"the section header table", "runs past the end of the"});
}

BOOST_AUTO_TEST_CASE(the_header_only_check_needs_just_64_bytes) {
  const Bytes& image = axpy();
  const auto head = std::span(image).first(elf_header_size);
  BOOST_TEST(validate_elf_header(head).ok());
  BOOST_TEST(validate_elf_header(head, image.size()).ok());
  // With the file's size it sees a table past the end; without, it cannot.
  BOOST_TEST(!validate_elf_header(head, 1000).ok());
  BOOST_TEST(validate_elf_header(head, 1000).defect.find("runs past the end of the 0x3e8-byte") !=
             std::string::npos);
  Bytes b(head.begin(), head.end());
  put<std::uint16_t>(b, offsetof(Elf64_Ehdr, e_machine), other_machine());
  BOOST_TEST(validate_elf_header(b).defect.find(
                 "ELF for " + gpuplug::support::elf_machine_name(other_machine())) == 0u);
  BOOST_TEST(validate_elf_header(std::span(image).first(20)).defect ==
             "only 20 bytes, shorter than the 64-byte ELF header");
}

// ---- program headers ----------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(program_header_defects_are_named) {
  // A truncated image: the last PT_LOAD's bytes are missing.
  const std::size_t last_load = [] {
    std::size_t last = 0;
    for (std::size_t i = 0; i < header(axpy()).e_phnum; ++i)
      if (phdr(axpy(), i).p_type == PT_LOAD) last = i;
    return last;
  }();
  const Elf64_Phdr last = phdr(axpy(), last_load);
  Bytes b(axpy().begin(), axpy().begin() + static_cast<std::ptrdiff_t>(last.p_offset + 8));
  refused_with(b, {"the section header table", "runs past the end of the"});
  put<std::uint64_t>(b, offsetof(Elf64_Ehdr, e_shoff), 0);  // no section headers to cut
  put<std::uint16_t>(b, offsetof(Elf64_Ehdr, e_shnum), 0);
  put<std::uint16_t>(b, offsetof(Elf64_Ehdr, e_shstrndx), 0);
  refused_with(b,
               {"program header " + std::to_string(last_load) + " (PT_LOAD): file range " +
                gpuplug::support::hex(last.p_offset) + "+" + gpuplug::support::hex(last.p_filesz) +
                " runs past the end of the " + gpuplug::support::hex(b.size()) + "-byte image"});
  b = axpy();
  put<std::uint64_t>(b, phdr_offset(b, last_load) + offsetof(Elf64_Phdr, p_filesz), 0x50000);
  refused_with(b, {"program header " + std::to_string(last_load) + " (PT_LOAD): file range " +
                   gpuplug::support::hex(last.p_offset) + "+0x50000 runs past the end of the " +
                   gpuplug::support::hex(b.size()) + "-byte image"});

  b = axpy();
  put<std::uint64_t>(b, phdr_offset(b, last_load) + offsetof(Elf64_Phdr, p_filesz),
                     last.p_memsz + 0x10);
  refused_with(b, {"is larger than p_memsz"});

  b = axpy();
  put<std::uint64_t>(b, phdr_offset(b, last_load) + offsetof(Elf64_Phdr, p_align), 0x3000);
  refused_with(b, {"p_align 0x3000 is not a power of two"});
  b = axpy();
  put<std::uint64_t>(b, phdr_offset(b, last_load) + offsetof(Elf64_Phdr, p_align), 0x10);
  refused_with(b, {"p_align 0x10 is not a multiple of the"});
  b = axpy();
  put<std::uint64_t>(b, phdr_offset(b, last_load) + offsetof(Elf64_Phdr, p_vaddr),
                     last.p_vaddr + 8);
  refused_with(b, {"are not congruent"});
  b = axpy();
  put<std::uint32_t>(b, phdr_offset(b, last_load) + offsetof(Elf64_Phdr, p_flags), PF_W);
  refused_with(b, {"not readable"});

  // PT_LOADs out of order.
  b = axpy();
  const std::size_t first_load = find_phdr(b, PT_LOAD);
  const auto a = phdr(b, first_load), c = phdr(b, first_load + 1);
  put(b, phdr_offset(b, first_load), c);
  put(b, phdr_offset(b, first_load + 1), a);
  refused_with(b, {"PT_LOADs must be in ascending p_vaddr order"});

  // PT_DYNAMIC: missing, twice, outside every segment, in the zero-filled part, no DT_NULL.
  const std::size_t dyn = find_phdr(axpy(), PT_DYNAMIC);
  b = axpy();
  put<std::uint32_t>(b, phdr_offset(b, dyn), PT_NULL);
  refused_with(b, {"no PT_DYNAMIC program header"});
  b = axpy();
  put<std::uint32_t>(b, phdr_offset(b, find_phdr(b, PT_NOTE)), PT_DYNAMIC);
  refused_with(b, {"a second PT_DYNAMIC"});
  b = axpy();
  put<std::uint64_t>(b, phdr_offset(b, dyn) + offsetof(Elf64_Phdr, p_vaddr),
                     last.p_vaddr + last.p_memsz + 0x10000);
  refused_with(b, {"program header " + std::to_string(dyn) + " (PT_DYNAMIC): memory",
                   "is outside every PT_LOAD"});
  b = axpy();
  put<std::uint64_t>(b, phdr_offset(b, dyn) + offsetof(Elf64_Phdr, p_offset), last.p_offset);
  refused_with(b, {"(PT_DYNAMIC): p_offset", "disagrees with the PT_LOAD"});
  b = axpy();
  put<std::uint64_t>(b, phdr_offset(b, dyn) + offsetof(Elf64_Phdr, p_filesz), 0x18);
  refused_with(b, {"is not a whole number of 16-byte entries"});

  b = axpy();
  put<std::uint32_t>(b, phdr_offset(b, find_phdr(b, PT_GNU_STACK)) + offsetof(Elf64_Phdr, p_flags),
                     PF_R | PF_W | PF_X);
  refused_with(b, {"(PT_GNU_STACK): asks for an executable stack"});

  b = axpy();
  const std::size_t relro = find_phdr(b, PT_GNU_RELRO);
  put<std::uint64_t>(b, phdr_offset(b, relro) + offsetof(Elf64_Phdr, p_memsz), 0x100000);
  refused_with(b, {"(PT_GNU_RELRO)", "runs past the end of program header"});

  b = axpy();
  const std::size_t note = find_phdr(b, PT_NOTE);
  put<std::uint32_t>(b, phdr(b, note).p_offset, 0x7ffffff0);  // n_namesz of the first note
  refused_with(b, {"(PT_NOTE): note 0", "runs past the end of the segment"});
}

// ---- the dynamic section and its tables -------------------------------------------------------

BOOST_AUTO_TEST_CASE(dynamic_section_defects_are_named) {
  Bytes b = axpy();
  const Elf64_Phdr dyn = phdr(b, find_phdr(b, PT_DYNAMIC));
  // No DT_NULL: every entry from the first DT_NULL on becomes DT_DEBUG.
  for (std::uint64_t off = dyn_offset(b, DT_NULL); off < dyn.p_offset + dyn.p_filesz; off += 16)
    put<std::int64_t>(b, off, DT_DEBUG);
  refused_with(b, {"no DT_NULL among the " + std::to_string(dyn.p_filesz / 16) + " entries"});

  b = axpy();
  set_dyn(b, DT_STRTAB, 0x7fff0000);
  refused_with(b, {"DT_STRTAB (dynamic entry", "0x7fff0000+", "is outside every PT_LOAD"});
  b = axpy();
  set_dyn(b, DT_STRSZ, 0x100000);
  refused_with(b, {"DT_STRTAB", "runs past the end of program header"});
  b = axpy();
  // Modules are built without RUNPATH and may need nothing: then an entry ld.so only uses as
  // a hint (DT_RELACOUNT) becomes a DT_NEEDED, so that a string tag exists to break.
  if (!has_dyn(b, DT_RUNPATH) && !has_dyn(b, DT_NEEDED) && !has_dyn(b, DT_SONAME)) {
    BOOST_REQUIRE_MESSAGE(has_dyn(b, DT_RELACOUNT), "axpy.so has no string tag and no DT_RELACOUNT");
    retag(b, DT_RELACOUNT, DT_NEEDED);
  }
  const std::int64_t string_tag = has_dyn(b, DT_RUNPATH)  ? DT_RUNPATH
                                  : has_dyn(b, DT_NEEDED) ? DT_NEEDED
                                                          : DT_SONAME;
  set_dyn(b, string_tag, dyn_value(b, DT_STRSZ) + 5);
  const std::string string_tag_name = string_tag == DT_RUNPATH  ? "DT_RUNPATH"
                                      : string_tag == DT_NEEDED ? "DT_NEEDED"
                                                                : "DT_SONAME";
  refused_with(b, {string_tag_name + " (dynamic entry", "is past the end of the",
                   "-byte string table (DT_STRSZ)"});
  b = axpy();
  retag(b, DT_STRTAB, DT_NULL + 0x40);  // an unknown tag: DT_STRTAB is gone
  refused_with(b, {"no DT_STRTAB"});
  b = axpy();
  retag(b, DT_SYMENT, DT_STRSZ);
  refused_with(b, {"a second DT_STRSZ"});

  // Tags ld.so dereferences without checking, and values it asserts on.
  b = axpy();
  retag(b, DT_RELAENT, DT_DEBUG);
  refused_with(b, {"DT_RELA (dynamic entry", "without DT_RELAENT"});
  b = axpy();
  set_dyn(b, DT_RELAENT, 16);
  refused_with(b, {"DT_RELAENT (dynamic entry", "is 16, not 24"});
  b = axpy();
  if (has_dyn(b, DT_PLTREL))
    set_dyn(b, DT_PLTREL, 24);
  else
    retag(b, DT_SYMENT, DT_PLTREL);
  refused_with(b, {"DT_PLTREL (dynamic entry", "is 24, not DT_RELA (7)"});
  b = axpy();
  retag(b, DT_SYMENT, DT_TEXTREL);
  refused_with(b, {"DT_TEXTREL", "text relocations"});
  b = axpy();
  retag(b, DT_INIT_ARRAYSZ, DT_DEBUG);
  refused_with(b, {"DT_INIT_ARRAY (dynamic entry", "without DT_INIT_ARRAYSZ"});

  // The terminating DT_NULL turned into DT_FILTER "": ld.so asserts when the module closes.
  b = axpy();
  put<std::int64_t>(b, dyn_offset(b, DT_NULL), DT_FILTER);
  refused_with(b, {"DT_FILTER (dynamic entry", "names no file (an empty string)"});

  // Pointers moved inside a segment: only the section headers can tell.
  b = axpy();
  set_dyn(b, DT_INIT, dyn_value(b, DT_INIT) + 4);
  refused_with(b, {"DT_INIT (dynamic entry", "is not the start of a function"});
  b = axpy();
  const std::uint64_t init_array_size = dyn_value(b, DT_INIT_ARRAYSZ);
  set_dyn(b, DT_INIT_ARRAYSZ, init_array_size + 8);
  refused_with(b,
               {"DT_INIT_ARRAYSZ (dynamic entry",
                "is not the " + gpuplug::support::hex(init_array_size) + "-byte size of section"});
  b = axpy();
  set_dyn(b, DT_SYMTAB, dyn_value(b, DT_SYMTAB) + 24);
  refused_with(b, {"DT_SYMTAB (dynamic entry", "is not the address of the SHT_DYNSYM section"});
  b = axpy();
  set_dyn(b, DT_RELASZ, dyn_value(b, DT_RELASZ) - 24);
  refused_with(b, {"is not a run of SHT_RELA sections"});

  // The tables themselves.
  b = axpy();
  const std::uint64_t gnu_hash = file_offset_of(b, dyn_value(b, DT_GNU_HASH));
  put<std::uint32_t>(b, gnu_hash + 8, 3);  // bloom filter size
  refused_with(b, {"DT_GNU_HASH (dynamic entry", "bloom filter size 3 is not a power of two"});
  // Relocations: a GOT slot's, and the one that relocates the first init array entry.
  const auto [got_index, got_rela] = find_rela(
      axpy(), [](const Elf64_Rela& r) { return ELF64_R_TYPE(r.r_info) == R_X86_64_GLOB_DAT; });
  const auto got_reloc = get<Elf64_Rela>(axpy(), got_rela);
  b = axpy();
  put<std::uint64_t>(b, got_rela + offsetof(Elf64_Rela, r_offset), dyn_value(b, DT_INIT));
  refused_with(b, {"relocation " + std::to_string(got_index) + " of DT_RELA (R_X86_64_GLOB_DAT",
                   ": target", "which is not writable"});
  b = axpy();
  put<std::uint64_t>(b, got_rela + offsetof(Elf64_Rela, r_info),
                     ELF64_R_INFO(100000, R_X86_64_GLOB_DAT));
  refused_with(b, {"symbol index 100000 is not below the"});
  b = axpy();
  put<std::uint64_t>(b, got_rela + offsetof(Elf64_Rela, r_info), ELF64_R_INFO(1, R_X86_64_COPY));
  refused_with(b, {"a copy relocation, which only executables may use"});
  b = axpy();
  put<std::uint64_t>(b, got_rela + offsetof(Elf64_Rela, r_info),
                     ELF64_R_INFO(0, R_X86_64_GLOB_DAT));
  refused_with(b, {"names symbol 0 instead of a symbol"});
  b = axpy();
  put<std::uint64_t>(b, got_rela + offsetof(Elf64_Rela, r_offset), got_reloc.r_offset + 1);
  refused_with(b, {"fills a GOT slot at an address that is not 8-byte aligned"});
  if (has_dyn(axpy(), DT_RELACOUNT)) {
    b = axpy();
    set_dyn(b, DT_RELACOUNT, dyn_value(b, DT_RELACOUNT) + 1);
    refused_with(b, {"DT_RELACOUNT says the first"});
  }
  // An init array entry nothing relocates would be called at its link-time address.
  const std::uint64_t init_array = dyn_value(axpy(), DT_INIT_ARRAY);
  const auto [init_index, init_rela] =
      find_rela(axpy(), [&](const Elf64_Rela& r) { return r.r_offset == init_array; });
  b = axpy();
  put<std::uint64_t>(b, init_rela + offsetof(Elf64_Rela, r_info), ELF64_R_INFO(0, R_X86_64_NONE));
  if (has_dyn(b, DT_RELACOUNT) && init_index < dyn_value(b, DT_RELACOUNT)) {
    refused_with(b, {"relocation " + std::to_string(init_index) + " of DT_RELA (R_X86_64_NONE",
                     "DT_RELACOUNT says the first"});
    set_dyn(b, DT_RELACOUNT, init_index);
  }
  refused_with(b, {"DT_INIT_ARRAY (dynamic entry", "entry 0", "no relocation adjusts it"});
  b = axpy();
  put<std::int64_t>(b, init_rela + offsetof(Elf64_Rela, r_addend), 0x8);  // into the ELF header
  refused_with(b, {"DT_INIT_ARRAY (dynamic entry", "called by ld.so", "which is not executable"});

  // An undefined symbol made local or hidden would bind to the module's own base address.
  const std::uint64_t undefined = first_undefined_symbol(axpy());
  const std::uint64_t sym =
      file_offset_of(axpy(), dyn_value(axpy(), DT_SYMTAB)) + undefined * sizeof(Elf64_Sym);
  const std::string sym_name = "symbol " + std::to_string(undefined) + " of DT_SYMTAB";
  b = axpy();
  put<std::uint8_t>(b, sym + offsetof(Elf64_Sym, st_info), ELF64_ST_INFO(STB_LOCAL, STT_NOTYPE));
  refused_with(b, {sym_name, "is undefined but local"});
  b = axpy();
  put<std::uint8_t>(b, sym + offsetof(Elf64_Sym, st_other), STV_HIDDEN);
  refused_with(b, {sym_name, "is undefined but not of default visibility"});
}

BOOST_AUTO_TEST_CASE(without_section_headers_the_bounds_checks_still_hold) {
  // sstrip-style: no section headers. The module still passes; defects that bounds can see are
  // still refused.
  Bytes b = axpy();
  put<std::uint64_t>(b, offsetof(Elf64_Ehdr, e_shoff), 0);
  put<std::uint16_t>(b, offsetof(Elf64_Ehdr, e_shnum), 0);
  put<std::uint16_t>(b, offsetof(Elf64_Ehdr, e_shstrndx), 0);
  BOOST_TEST(defect(b) == "");
  Bytes c = b;
  set_dyn(c, DT_STRTAB, 0x7fff0000);
  refused_with(c, {"DT_STRTAB", "is outside every PT_LOAD"});
  c = b;
  set_dyn(c, DT_INIT, dyn_value(c, DT_INIT_ARRAY));
  refused_with(c, {"DT_INIT (dynamic entry", "which is not executable"});
}

// ---- the mutation test --------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(no_mutant_of_a_real_module_crashes_dlopen) {
  TempDir dir;
  const auto mutants = make_mutants(axpy(), kMutants, mutant_seed());
  std::size_t refused = 0, loaded = 0, dlopen_errors = 0;
  std::set<std::string> distinct;
  for (std::size_t m = 0; m < mutants.size(); ++m) {
    const auto verdict = validate_elf_shared_object(mutants[m].image);
    if (!verdict) {
      ++refused;
      distinct.insert(verdict.defect);
      BOOST_TEST(!verdict.defect.empty());
      continue;
    }
    const LoadResult r = load_in_child(mutants[m].image, dir);
    BOOST_TEST_INFO("mutant " << m << " (" << mutants[m].what << ")");
    BOOST_TEST((r.outcome == Outcome::loaded || r.outcome == Outcome::dlopen_error),
               "accepted by the validator, then: " << r.detail);
    loaded += r.outcome == Outcome::loaded;
    dlopen_errors += r.outcome == Outcome::dlopen_error;
  }
  BOOST_TEST_MESSAGE(kMutants << " mutants of axpy.so (seed " << mutant_seed() << "): " << refused
                              << " refused by the validator (" << distinct.size()
                              << " distinct reasons), " << loaded << " accepted and loaded, "
                              << dlopen_errors << " accepted with a dlopen error");
  BOOST_TEST(refused + loaded + dlopen_errors == kMutants);
}

// Not run by default: what the same mutants do to dlopen without the validator, to show that
// the test above would fail without it. Run with --run_test=mutants_without_the_validator.
BOOST_AUTO_TEST_CASE(mutants_without_the_validator, *boost::unit_test::disabled()) {
  TempDir dir;
  const auto mutants = make_mutants(axpy(), kMutants, mutant_seed());
  std::size_t counts[5] = {}, crashes_refused = 0;
  for (std::size_t m = 0; m < mutants.size(); ++m) {
    const LoadResult r = load_in_child(mutants[m].image, dir);
    ++counts[static_cast<int>(r.outcome)];
    const bool crashed = r.outcome == Outcome::signal || r.outcome == Outcome::ldso_assertion ||
                         r.outcome == Outcome::other;
    const auto verdict = validate_elf_shared_object(mutants[m].image);
    crashes_refused += crashed && !verdict.ok();
    if (crashed)
      BOOST_TEST_MESSAGE("mutant " << m << " (" << mutants[m].what
                                   << "): " << r.detail.substr(0, 160) << " | validator: "
                                   << (verdict ? std::string("accepts") : verdict.defect));
  }
  BOOST_TEST_MESSAGE(kMutants << " mutants of axpy.so (seed " << mutant_seed()
                              << ") loaded without the validator: " << counts[int(Outcome::signal)]
                              << " killed by a signal, " << counts[int(Outcome::ldso_assertion)]
                              << " ld.so assertions, " << counts[int(Outcome::other)]
                              << " other exits, " << counts[int(Outcome::loaded)] << " loaded, "
                              << counts[int(Outcome::dlopen_error)] << " dlopen errors; the "
                              << "validator refuses " << crashes_refused << " of the crashes");
}
