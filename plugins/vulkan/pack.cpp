// SPDX-License-Identifier: Apache-2.0
// gpuplug-vulkan-pack: packs glslc's SPIR-V into one Vulkan module container (container.hpp),
// deriving each kernel's workgroup size and arguments from its SPIR-V and publishing
// `<kernel>_args` (<gpuplug/kernel_args.h>) from them.
//
//   gpuplug-vulkan-pack -o gemm.gpvk --kernel gemm_f32=gemm_f32.spv --u32 gemm_f32_n_tile=64
#include <gpuplug/kernel_args.h>

#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <stdexcept>
#include <string>

#include "container.hpp"

namespace {

using gpuplug::vulkan::Container;
using gpuplug::vulkan::ContainerGlobal;
using gpuplug::vulkan::ContainerKernel;

std::vector<std::uint32_t> read_words(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot be opened");
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() % 4 != 0) throw std::runtime_error(path + ": not a whole number of words");
  std::vector<std::uint32_t> words(bytes.size() / 4);
  std::memcpy(words.data(), bytes.data(), bytes.size());
  return words;
}

template <class T>
ContainerGlobal global(std::string name, const T& value) {
  ContainerGlobal g{std::move(name), std::vector<std::byte>(sizeof value)};
  std::memcpy(g.bytes.data(), &value, sizeof value);
  return g;
}

std::pair<std::string, std::string> split(const std::string& arg, const char* flag) {
  const auto eq = arg.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == arg.size())
    throw std::runtime_error(std::string(flag) + " " + arg + ": expected NAME=VALUE");
  return {arg.substr(0, eq), arg.substr(eq + 1)};
}

int run(int argc, char** argv) {
  std::string out;
  Container c;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) throw std::runtime_error(flag + ": missing its value");
    const std::string value = argv[++i];
    if (flag == "-o") {
      out = value;
    } else if (flag == "--kernel") {
      const auto [name, file] = split(value, "--kernel");
      ContainerKernel k;
      k.name = name;
      k.spirv = read_words(file);
      gpuplug::vulkan::SpirvInfo info;
      try {
        info = gpuplug::vulkan::reflect(k.spirv);
      } catch (const std::invalid_argument& e) {
        throw std::runtime_error(file + ": " + e.what());
      }
      k.entry = info.entry;
      k.local_size = info.local_size;
      k.local_size_ids = info.local_size_ids;
      k.push_bytes = info.push_bytes;
      k.args = info.args;
      if (k.args.size() <= GPUPLUG_KERNEL_ARGS_MAX) {
        gpuplug_kernel_args_t args{};
        args.version = GPUPLUG_KERNEL_ARGS_VERSION;
        args.count = static_cast<std::uint32_t>(k.args.size());
        for (std::size_t a = 0; a < k.args.size(); ++a) args.sizes[a] = k.args[a].size;
        c.globals.push_back(global(name + GPUPLUG_KERNEL_ARGS_SUFFIX, args));
      }
      c.kernels.push_back(std::move(k));
    } else if (flag == "--u32") {
      const auto [name, text] = split(value, "--u32");
      std::size_t used = 0;
      unsigned long v = 0;
      try {
        v = std::stoul(text, &used, 0);
      } catch (const std::logic_error&) {  // no number at all, or past unsigned long
        used = 0;
      }
      if (used == 0 || used != text.size() || v > 0xFFFFFFFFul)
        throw std::runtime_error("--u32 " + value + ": not a 32-bit unsigned number");
      c.globals.push_back(global(name, static_cast<std::uint32_t>(v)));
    } else {
      throw std::runtime_error("unknown option " + flag +
                               " (usage: -o OUT --kernel NAME=FILE.spv... --u32 NAME=VALUE...)");
    }
  }
  if (out.empty() || c.kernels.empty()) throw std::runtime_error("need -o OUT and a --kernel");
  const auto bytes = gpuplug::vulkan::write_container(c);
  (void)gpuplug::vulkan::read_container(bytes);  // the names and layout check as the plugin's
  std::ofstream file(out, std::ios::binary | std::ios::trunc);
  file.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!file.flush()) throw std::runtime_error(out + ": cannot be written");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "gpuplug-vulkan-pack: " << e.what() << "\n";
    return 1;
  }
}
