// SPDX-License-Identifier: Apache-2.0
// Kernel-binary preflight on host: PluginRegistry::inspect_module against the real
// host modules, modules for another machine, truncated, mutated and garbage images, plugins
// without the slot or without a device, many threads at once; and the SDK's C edge of the slot
// (argument checks, the list cut short with "..."), driven through the host plugin's table.

#define BOOST_TEST_MODULE test_inspect_module
#include <elf.h>

#include <algorithm>
#include <atomic>
#include <stdexcept>
#include <boost/test/unit_test.hpp>
#include <cstring>
#include <filesystem>
#include <gpuplug/gpuplug.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "contains.hpp"
#include "gpuplug/support/files.hpp"
#include "loader_env.hpp"
#include "plugin_table_harness.hpp"
#include "test_print.hpp"

namespace fs = std::filesystem;
using gpuplug::test::contains;

namespace gpuplug::test {
std::filesystem::path plugin_under_test() { return host_plugin_file(); }
}  // namespace gpuplug::test

using gpuplug::test::LoaderEnvironment;
BOOST_TEST_GLOBAL_FIXTURE(LoaderEnvironment);

namespace {


std::vector<std::byte> read(const fs::path& file) {
  std::string why;
  auto bytes = gpuplug::support::read_file(file, why);
  BOOST_TEST_REQUIRE(bytes.has_value(), "cannot read " << file << ": " << why);
  return *bytes;
}

const fs::path kKernels = fs::path(GPUPLUG_TEST_KERNEL_DIR) / "host";
const fs::path kTestKernels = GPUPLUG_TEST_HOST_KERNEL_DIR;

/// One registry for the process (discovery probes in child processes: do it once).
gpuplug::PluginRegistry& registry() {
  static gpuplug::PluginRegistry* r = [] {
    auto* reg = new gpuplug::PluginRegistry;  // lives for the process, like the plugins it loads
    reg->discover();
    return reg;
  }();
  return *r;
}

/// The error inspect_module throws for `image` on host:0; fails the case when it returns.
gpuplug::Error inspect_error(std::span<const std::byte> image, std::string_view plugin = "host",
                             std::uint32_t ordinal = 0) {
  try {
    registry().inspect_module(plugin, ordinal, image);
  } catch (const gpuplug::Error& e) {
    return e;
  }
  BOOST_FAIL("inspect_module accepted the image");
  throw std::logic_error("unreachable");  // BOOST_FAIL throws
}

const char* machine_name() {
#if defined(__x86_64__)
  return "x86_64";
#elif defined(__aarch64__)
  return "aarch64";
#else
  return "";
#endif
}

}  // namespace

BOOST_AUTO_TEST_CASE(gemm_module_loads_here_with_its_kernels_and_tiles) {
  const auto m = registry().inspect_module("host", 0, read(kKernels / "gemm.so"));
  BOOST_TEST(m.loadable);
  BOOST_TEST(m.format == "ELF shared object");
  BOOST_TEST(m.target == machine_name());
  BOOST_TEST(m.targets == std::vector<std::string>{machine_name()}, boost::test_tools::per_element());
  BOOST_TEST(m.reason.empty());
  BOOST_TEST(m.functions == (std::vector<std::string>{"gemm_a_e4m3", "gemm_f32"}),
             boost::test_tools::per_element());
  BOOST_TEST((m.value_of("gemm_f32_n_tile") == std::optional<std::uint32_t>(128)));
  BOOST_TEST((m.value_of("gemm_a_e4m3_n_tile") == std::optional<std::uint32_t>(128)));
  BOOST_TEST((m.value_of("gemm_a_e4m3_a_e4m3") == std::optional<std::uint32_t>(1)));
  BOOST_TEST(!m.truncated);

  const auto axpy = registry().inspect_module("host", 0, read(kKernels / "axpy.so"));
  BOOST_TEST(axpy.loadable);
  BOOST_TEST(axpy.functions == std::vector<std::string>{"axpy"}, boost::test_tools::per_element());
  BOOST_TEST(!axpy.value_of("axpy_n_tile").has_value());
}

BOOST_AUTO_TEST_CASE(a_global_that_is_not_4_bytes_is_listed_without_a_value) {
  const auto m = registry().inspect_module("host", 0, read(kTestKernels / "bad_n_tile.so"));
  BOOST_TEST(m.loadable);
  const auto it = std::find_if(m.symbols.begin(), m.symbols.end(),
                               [](const auto& s) { return s.name == "gemm_f32_n_tile"; });
  BOOST_TEST_REQUIRE((it != m.symbols.end()));
  BOOST_TEST(!it->value.has_value());  // 2 bytes: no 4-byte value to report
}

BOOST_AUTO_TEST_CASE(a_module_for_another_machine_does_not_load_and_says_why) {
  auto image = read(kKernels / "gemm.so");
  const std::uint16_t other = std::string_view(machine_name()) == "aarch64" ? EM_X86_64 : EM_AARCH64;
  std::memcpy(image.data() + offsetof(Elf64_Ehdr, e_machine), &other, sizeof other);
  const auto m = registry().inspect_module("host", 0, image);
  BOOST_TEST(!m.loadable);
  const std::string other_name = other == EM_AARCH64 ? "aarch64" : "x86_64";
  BOOST_TEST(m.targets == std::vector<std::string>{other_name}, boost::test_tools::per_element());
  BOOST_TEST(contains(m.reason, "built for " + other_name), m.reason);
  BOOST_TEST(contains(m.reason, std::string("this machine is ") + machine_name()), m.reason);
  BOOST_TEST(m.target.empty());
  // What it defines is still listed: the preflight says what would be missing, not only that.
  BOOST_TEST(m.functions == (std::vector<std::string>{"gemm_a_e4m3", "gemm_f32"}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(truncated_and_garbage_images_are_invalid_image_with_a_reason) {
  const auto image = read(kKernels / "gemm.so");
  for (const std::size_t size : {std::size_t{1}, std::size_t{4}, std::size_t{63}, std::size_t{64},
                                 std::size_t{200}, image.size() / 2, image.size() - 1}) {
    BOOST_TEST_CONTEXT("truncated to " << size << " of " << image.size() << " bytes") {
      const auto e = inspect_error(std::span(image).first(size));
      BOOST_TEST(e.status() == gpuplug::Status::invalid_image);
      BOOST_TEST(e.operation() == "inspect_module");
      BOOST_TEST(e.backend() == "host:0");
      BOOST_TEST(!e.message().empty());
    }
  }
  BOOST_TEST(contains(inspect_error(std::span(image).first(image.size() / 2)).message(), "truncated"));
  const std::string text = "this is not a kernel module\n";
  const auto garbage = inspect_error(std::as_bytes(std::span(text)));
  BOOST_TEST(garbage.status() == gpuplug::Status::invalid_image);
  BOOST_TEST(contains(garbage.message(), "not an ELF file"), garbage.message());
  const auto empty = inspect_error({});
  BOOST_TEST(empty.status() == gpuplug::Status::invalid_image);
  BOOST_TEST(contains(empty.message(), "empty"), empty.message());
}

namespace {
/// Section header `index` of the ELF64 `image`, for the tests that corrupt one field.
Elf64_Shdr* section_header(std::vector<std::byte>& image, std::size_t index) {
  Elf64_Ehdr header;
  std::memcpy(&header, image.data(), sizeof header);
  return reinterpret_cast<Elf64_Shdr*>(image.data() + header.e_shoff) + index;
}
}  // namespace

BOOST_AUTO_TEST_CASE(a_string_table_turned_into_an_empty_header_is_not_read_past_the_image) {
  // The bytes of the table a symbol table links to, or of the section-name table, are checked
  // whatever the section's type: an SHT_NULL header there carries an offset nobody validated.
  const auto original = read(kKernels / "gemm.so");
  Elf64_Ehdr header;
  std::memcpy(&header, original.data(), sizeof header);
  auto image = original;
  std::size_t dynsym = 0;  // the table the host plugin reads: what dlsym can find
  for (std::size_t i = 0; i < header.e_shnum; ++i)
    if (section_header(image, i)->sh_type == SHT_DYNSYM) dynsym = i;
  BOOST_TEST_REQUIRE(dynsym != 0);
  Elf64_Shdr* strings = section_header(image, section_header(image, dynsym)->sh_link);
  strings->sh_type = SHT_NULL;
  strings->sh_offset = 0x7fff'0000'0000;
  const auto e = inspect_error(image);
  BOOST_TEST(e.status() == gpuplug::Status::invalid_image);
  BOOST_TEST(contains(e.message(), "symbol table"), e.message());
  BOOST_TEST(contains(e.message(), "holds no bytes inside the image"), e.message());

  // The section-name table likewise: the loader's own check then refuses the image by name.
  image = original;
  Elf64_Shdr* names = section_header(image, header.e_shstrndx);
  names->sh_type = SHT_NULL;
  names->sh_offset = 0x7fff'0000'0000;
  const auto unnamed = inspect_error(image);
  BOOST_TEST(unnamed.status() == gpuplug::Status::invalid_image);
  BOOST_TEST(contains(unnamed.message(), "section name table"), unnamed.message());
}

BOOST_AUTO_TEST_CASE(mutated_images_never_crash) {
  // Random bytes changed anywhere (headers, section table, string tables): an answer or
  // invalid_image, never a crash or a read out of bounds (ASan runs this too).
  const auto original = read(kKernels / "gemm.so");
  std::mt19937 rng(16);
  int answered = 0, refused = 0;
  for (int i = 0; i < 300; ++i) {
    auto image = original;
    const int flips = 1 + static_cast<int>(rng() % 8);
    for (int k = 0; k < flips; ++k) {
      // Half of the flips land in the ELF and section headers, where they matter most.
      const std::size_t at = (k % 2 == 0) ? rng() % 64 : rng() % image.size();
      image[at] = static_cast<std::byte>(rng());
    }
    try {
      registry().inspect_module("host", 0, image);
      ++answered;
    } catch (const gpuplug::Error& e) {
      BOOST_TEST(e.status() == gpuplug::Status::invalid_image, e.what());
      BOOST_TEST(!e.message().empty());
      ++refused;
    }
  }
  BOOST_TEST_MESSAGE(answered << " answered, " << refused << " refused");
  BOOST_TEST(refused > 0);
}

BOOST_AUTO_TEST_CASE(unknown_plugin_absent_device_and_unavailable_plugin_are_errors) {
  const auto image = read(kKernels / "axpy.so");
  const auto unknown = inspect_error(image, "nosuch");
  BOOST_TEST(unknown.status() == gpuplug::Status::not_found);
  BOOST_TEST(contains(unknown.message(), "no plugin named 'nosuch'"), unknown.message());
  const auto no_device = inspect_error(image, "host", 1);
  BOOST_TEST(no_device.status() == gpuplug::Status::not_found);
  BOOST_TEST(contains(no_device.message(), "no device 1"), no_device.message());
  // The fake "driver_missing" plugin (tests/unit/fake_plugins) is discovered but unavailable.
  const auto missing = inspect_error(image, "fake_missing");
  BOOST_TEST(missing.status() == gpuplug::Status::unavailable);
  BOOST_TEST(contains(missing.message(), "driver missing: libfakegpu.so.1 not found"),
             missing.message());
}

BOOST_AUTO_TEST_CASE(a_plugin_built_before_abi_1_1_is_unsupported) {
  // The real host plugin republished with the first release's struct_size; the copy keeps the
  // real inspect_module pointer past struct_size, which the core must not read.
  gpuplug::PluginRegistry old;
  const auto info = old.add_plugin_file(GPUPLUG_TEST_OLD_HOST_PLUGIN,
                                        {gpuplug::ProbeMode::in_process, std::nullopt});
  BOOST_TEST_REQUIRE((info.state == gpuplug::PluginState::available), info.message);
  try {
    old.inspect_module("host_v1_0", 0, read(kKernels / "axpy.so"));
    BOOST_FAIL("a 1.0 table answered inspect_module");
  } catch (const gpuplug::Error& e) {
    BOOST_TEST(e.status() == gpuplug::Status::unsupported);
    BOOST_TEST(contains(e.message(), "predates the inspect_module slot of ABI 1.1"), e.message());
  }
}

BOOST_AUTO_TEST_CASE(many_threads_inspect_at_once) {
  const auto good = read(kKernels / "gemm.so");
  const auto bad = std::vector<std::byte>(good.begin(), good.begin() + good.size() / 2);
  const auto expected = registry().inspect_module("host", 0, good);
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 40; ++i) {
        try {
          const auto m = registry().inspect_module("host", 0, (t + i) % 3 == 0 ? bad : good);
          if (m.functions != expected.functions || m.value_of("gemm_f32_n_tile") != 128u)
            ++mismatches;
        } catch (const gpuplug::Error& e) {
          if (e.status() != gpuplug::Status::invalid_image) ++mismatches;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  BOOST_TEST(mismatches.load() == 0);
}

// ---- the slot through the host plugin's C table (the SDK's edge) ------------------------------

BOOST_AUTO_TEST_CASE(slot_checks_its_arguments) {
  const gpuplug_plugin_v1& t = gpuplug::test::table();
  BOOST_TEST_REQUIRE(t.struct_size >= GPUPLUG_PLUGIN_V1_1_SIZE);
  BOOST_TEST_REQUIRE(t.inspect_module != nullptr);
  const auto image = read(kKernels / "axpy.so");
  BOOST_TEST(t.inspect_module(0, image.data(), image.size(), nullptr) ==
             GPUPLUG_STATUS_INVALID_ARGUMENT);

  // A struct_size below the 1.1 struct: refused, and nothing past struct_size written.
  auto out = std::make_unique<gpuplug_module_inspection_t>();
  std::memset(out.get(), 0x5a, sizeof *out);
  out->struct_size = sizeof(gpuplug_module_inspection_t) - 1;
  BOOST_TEST(t.inspect_module(0, image.data(), image.size(), out.get()) ==
             GPUPLUG_STATUS_INVALID_ARGUMENT);
  BOOST_TEST(out->format[0] == 0x5a);

  out->struct_size = sizeof *out;
  BOOST_TEST(t.inspect_module(0, nullptr, 16, out.get()) == GPUPLUG_STATUS_INVALID_IMAGE);
  BOOST_TEST(contains(out->reason, "empty"), out->reason);
  BOOST_TEST(t.inspect_module(0, image.data(), 0, out.get()) == GPUPLUG_STATUS_INVALID_IMAGE);
  // Larger than any module: refused before a byte is read (the buffer is much smaller).
  BOOST_TEST(t.inspect_module(0, image.data(), std::uint64_t{5} << 30, out.get()) ==
             GPUPLUG_STATUS_INVALID_ARGUMENT);
  BOOST_TEST(contains(out->reason, "larger than"), out->reason);
  BOOST_TEST(t.inspect_module(7, image.data(), image.size(), out.get()) ==
             GPUPLUG_STATUS_UNAVAILABLE);
  BOOST_TEST(out->reason[0] != '\0');
  // A success leaves no stale reason behind.
  BOOST_TEST(t.inspect_module(0, image.data(), image.size(), out.get()) == GPUPLUG_STATUS_SUCCESS);
  BOOST_TEST(out->loadable == 1);
  BOOST_TEST(out->reason[0] == '\0');
  BOOST_TEST(std::string(out->functions) == "axpy");
}

BOOST_AUTO_TEST_CASE(a_list_that_does_not_fit_ends_with_an_ellipsis_and_no_cut_name) {
  const auto image = read(kTestKernels / "many_kernels.so");
  const gpuplug_plugin_v1& t = gpuplug::test::table();
  auto out = std::make_unique<gpuplug_module_inspection_t>();
  out->struct_size = sizeof *out;
  BOOST_TEST_REQUIRE(t.inspect_module(0, image.data(), image.size(), out.get()) ==
                     GPUPLUG_STATUS_SUCCESS);
  const std::string functions(out->functions, strnlen(out->functions, sizeof out->functions));
  BOOST_TEST(functions.size() < sizeof out->functions);
  BOOST_TEST(functions.ends_with("\n..."), functions.substr(functions.size() - 60));

  const auto m = registry().inspect_module("host", 0, image);
  BOOST_TEST(m.truncated);
  BOOST_TEST(m.functions.size() > 50u);
  BOOST_TEST(m.functions.size() < 256u);
  for (const std::string& f : m.functions) {
    BOOST_TEST_CONTEXT(f) {
      BOOST_TEST(f.starts_with("kernel_with_a_name_long_enough_to_fill_"));
      BOOST_TEST(f.size() == std::string("kernel_with_a_name_long_enough_to_fill_0000").size());
    }
  }
}

// ---- the core against a plugin that does not play by the rules --------------------------------

BOOST_AUTO_TEST_CASE(the_core_reads_a_plugin_s_answer_only_within_its_fields) {
  gpuplug::PluginRegistry hostile;
  const auto info = hostile.add_plugin_file(GPUPLUG_TEST_HOSTILE_INSPECT_PLUGIN,
                                            {gpuplug::ProbeMode::in_process, std::nullopt});
  BOOST_TEST_REQUIRE((info.state == gpuplug::PluginState::available), info.message);
  const std::string image = "anything";
  const auto m = hostile.inspect_module("hostile_inspect", 0, std::as_bytes(std::span(image)));
  const gpuplug_module_inspection_t raw{};
  BOOST_TEST(!m.loadable);  // 7 is not 1
  BOOST_TEST(m.format == std::string(sizeof raw.format, 'F'));
  BOOST_TEST(m.target == std::string(sizeof raw.target, 'T'));
  BOOST_TEST(m.reason == std::string(sizeof raw.reason, 'R'));
  BOOST_TEST(m.targets == std::vector<std::string>{std::string(sizeof raw.targets, 'G')},
             boost::test_tools::per_element());
  BOOST_TEST(m.functions.size() == 1u);
  BOOST_TEST(m.functions.front().size() == sizeof raw.functions);
  BOOST_TEST_REQUIRE(m.symbols.size() == 3u);
  BOOST_TEST(m.symbols[0].name == "n=99999999999");  // past 32 bits: no value, the text kept
  BOOST_TEST(!m.symbols[0].value.has_value());
  BOOST_TEST(m.symbols[1].name == "m");
  BOOST_TEST((m.symbols[1].value == std::optional<std::uint32_t>(7)));
  BOOST_TEST(m.symbols[2].name.size() == sizeof raw.symbols - 18);

  const std::string failing = "fail here";
  try {
    hostile.inspect_module("hostile_inspect", 0, std::as_bytes(std::span(failing)));
    BOOST_FAIL("an error status was taken for an answer");
  } catch (const gpuplug::Error& e) {
    BOOST_TEST(e.status() == gpuplug::Status::invalid_image);
    BOOST_TEST(e.message() == std::string(sizeof raw.reason, 'R'));
  }
}
