// SPDX-License-Identifier: Apache-2.0
// Replays fuzzer inputs without libFuzzer: `<target>_replay FILE_OR_DIR...` feeds every file to the
// target's LLVMFuzzerTestOneInput once. Built with the normal compiler in every test build, so
// the regression inputs (tests/fuzz/regressions/<target>/) and the seed corpus run under CTest,
// sanitizers included. A broken property aborts, which CTest reports as a failure.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);
extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int* argc, char*** argv);

namespace {

int replay(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "replay: cannot read %s\n", file.c_str());
    return 1;
  }
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)),
                                std::istreambuf_iterator<char>());
  std::printf("replay: %s (%zu bytes)\n", file.c_str(), bytes.size());
  std::fflush(stdout);  // the file's name is out before a crash
  LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (LLVMFuzzerInitialize != nullptr) LLVMFuzzerInitialize(&argc, &argv);
  int errors = 0;
  std::size_t count = 0;
  for (int i = 1; i < argc; ++i) {
    const std::filesystem::path arg(argv[i]);
    std::error_code ec;
    if (std::filesystem::is_directory(arg, ec)) {
      std::vector<std::filesystem::path> files;
      for (const auto& entry : std::filesystem::directory_iterator(arg)) {
        if (entry.is_regular_file() && entry.path().filename().string()[0] != '.')
          files.push_back(entry.path());
      }
      std::sort(files.begin(), files.end());
      for (const auto& f : files) {
        errors += replay(f);
        ++count;
      }
    } else if (std::filesystem::exists(arg, ec)) {
      errors += replay(arg);
      ++count;
    }  // a missing folder is an empty corpus: nothing found yet
  }
  std::printf("replay: %zu input(s), %d unreadable\n", count, errors);
  return errors == 0 ? 0 : 1;
}
