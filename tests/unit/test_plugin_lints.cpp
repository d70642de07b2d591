// SPDX-License-Identifier: Apache-2.0
// The file lints of `gpuplug check` (tools/gpuplug/lint.cpp, plugin_elf.cpp) on damaged copies of
// a real plugin: many prefixes and single-byte overwrites of lint_fine.so are read without a
// crash or a read out of bounds (the sanitizer presets run this too), a file that is not a
// well-formed shared object fails every file lint naming itself and is never called loadable;
// and the record the lint child sends back is trusted no more than a case's.
#define BOOST_TEST_MODULE plugin_lints
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <cstddef>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "lint.hpp"
#include "plugin_elf.hpp"

namespace fs = std::filesystem;
using gpuplug::tool::LintResult;

namespace {

const fs::path fine_plugin = GPUPLUG_TEST_LINT_PLUGIN_DIR "/libgpuplug-lint_fine.so";

std::vector<char> bytes_of(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// A folder of its own for the damaged copies, removed at the end.
struct Scratch {
  fs::path dir;
  Scratch() {
    std::string pattern = (fs::temp_directory_path() / "gpuplug-lint-XXXXXX").string();
    BOOST_REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    dir = pattern;
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  fs::path write(const char* data, std::size_t size) const {
    const fs::path file = dir / "libgpuplug-lint_fine.so";
    std::ofstream(file, std::ios::binary | std::ios::trunc).write(data, static_cast<long>(size));
    return file;
  }
};

bool all_ok(const std::vector<LintResult>& results) {
  for (const auto& r : results)
    if (!r.ok()) return false;
  return true;
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_fine_plugin_passes_the_file_lints) {
  bool loadable = false;
  const auto results = gpuplug::tool::lint_file(fine_plugin, loadable);
  BOOST_TEST(loadable);
  BOOST_TEST_REQUIRE(results.size() == 3u);
  for (const auto& r : results) BOOST_TEST(r.ok(), r.name << ": " << r.failure);
  std::string why;
  const auto elf = gpuplug::tool::read_plugin_elf(fine_plugin, why);
  BOOST_TEST_REQUIRE(elf.has_value(), why);
  bool entry = false;
  for (const auto& s : elf->symbols)
    entry = entry || (s.name == "gpuplug_plugin_entry" && s.defined);
  BOOST_TEST(entry);
}

BOOST_AUTO_TEST_CASE(a_prefix_fails_every_file_lint_naming_the_file) {
  const auto image = bytes_of(fine_plugin);
  BOOST_TEST_REQUIRE(image.size() > 4096u);
  const Scratch scratch;
  std::size_t checked = 0;
  for (std::size_t cut = 0; cut < image.size(); cut += cut < 1024 ? 1 : 37) {
    const fs::path file = scratch.write(image.data(), cut);
    bool loadable = true;
    const auto results = gpuplug::tool::lint_file(file, loadable);
    BOOST_TEST_CONTEXT("cut at " << cut << " of " << image.size() << " bytes") {
      BOOST_TEST(!loadable);
      BOOST_TEST_REQUIRE(results.size() == 3u);
      for (const auto& r : results)
        BOOST_TEST(r.failure.starts_with("cannot read '" + file.string() + "': "), r.failure);
    }
    ++checked;
  }
  // Every prefix of the first KiB (the ELF header and program headers), then one in 37 bytes to
  // the end of a file of more than 4 KiB, whatever its size (debug info changes it).
  BOOST_TEST(checked >= 1024u + (4096u - 1024u) / 37u);
}

BOOST_AUTO_TEST_CASE(overwritten_bytes_are_read_in_bounds) {
  // Each byte of the headers in turn set to 0xff, then every 23rd: the reader either
  // refuses the image or reads it; it never reads outside it (the sanitizers would say so) and
  // an image it refuses is never called loadable.
  auto image = bytes_of(fine_plugin);
  const Scratch scratch;
  std::size_t refused = 0, read = 0;
  for (std::size_t at = 0; at < image.size(); at += at < 1024 ? 1 : 23) {
    const char saved = image[at];
    image[at] = static_cast<char>(0xff);
    bool loadable = false;
    const auto results =
        gpuplug::tool::lint_file(scratch.write(image.data(), image.size()), loadable);
    image[at] = saved;
    BOOST_TEST_REQUIRE(results.size() == 3u);
    if (loadable) {
      ++read;
    } else {
      ++refused;
      BOOST_TEST(!all_ok(results));
    }
  }
  BOOST_TEST(refused > 0u);
  BOOST_TEST(read > 0u);  // bytes ld.so never reads (padding, .comment) change nothing
}

BOOST_AUTO_TEST_CASE(the_lint_record_is_checked) {
  const std::vector<LintResult> sent = {{"name", ""}, {"abi_answer", "breaks ABI-4: \\x1b"}};
  std::string defect;
  const auto back = gpuplug::tool::decode_lints(gpuplug::tool::encode_lints(sent), defect);
  BOOST_TEST_REQUIRE(back.has_value(), defect);
  BOOST_TEST(back->at(0).name == "name");
  BOOST_TEST(back->at(0).ok());
  BOOST_TEST(back->at(1).failure == "breaks ABI-4: \\x1b");  // already escaped: kept as sent
  // Raw control characters from a child are escaped before they reach the terminal.
  const auto raw = gpuplug::tool::decode_lints("name\t\x1b[2J\nabi_answer\t\n", defect);
  BOOST_TEST_REQUIRE(raw.has_value(), defect);
  BOOST_TEST(raw->at(0).failure == "\\x1b[2J");
  for (const char* bad :
       {"name\t\n", "name\t\nabi_answer\t", "name\t\nname\t\n", "name\t\nexports\t\n",
        "name\nabi_answer\t\n", "name\t\nabi_answer\t\nabi_answer\t\n"}) {
    BOOST_TEST_CONTEXT("record '" << bad << "'") {
      defect.clear();
      BOOST_TEST(!gpuplug::tool::decode_lints(bad, defect).has_value());
      BOOST_TEST(!defect.empty());
    }
  }
}

BOOST_AUTO_TEST_CASE(loaded_lints_name_an_unloadable_file) {
  const Scratch scratch;
  const fs::path text = scratch.write("not a plugin\n", 13);
  const auto results = gpuplug::tool::lint_loaded(text);
  BOOST_TEST_REQUIRE(results.size() == 2u);
  for (const auto& r : results)
    BOOST_TEST(r.failure.starts_with("cannot load '" + text.string() + "': "), r.failure);
}
