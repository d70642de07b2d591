// SPDX-License-Identifier: Apache-2.0
// GpuBackend's counted launch: the arguments checked against what the kernel's module publishes
// (`<func>_args`), then handed to the backend's primitive launch as one pointer each.
#include <array>
#include <gpuplug/backend.hpp>
#include <string>

namespace gpuplug {

namespace {

/// "4 arguments (4, 4, 8, 8 bytes)"
std::string describe(std::size_t count, auto size_of) {
  std::string text = std::to_string(count) + (count == 1 ? " argument" : " arguments");
  if (count == 0) return text;
  text += " (";
  for (std::size_t i = 0; i < count; ++i) text += (i ? ", " : "") + std::to_string(size_of(i));
  return text + " bytes)";
}

}  // namespace

const KernelSignature* GpuBackend::kernel_signature(KernelHandle) const noexcept { return nullptr; }

void GpuBackend::launch(KernelHandle f, Dim3 grid, Dim3 block, std::uint32_t shared_bytes,
                        Stream stream, std::span<const KernelArg> args) {
  if (args.size() > max_launch_args) {
    throw Error(Status::invalid_argument, std::string(name()), "launch",
                std::to_string(args.size()) + " arguments, more than a launch takes (" +
                    std::to_string(max_launch_args) + ")");
  }
  if (const KernelSignature* sig = kernel_signature(f)) {
    bool same = sig->sizes.size() == args.size();
    for (std::size_t i = 0; same && i < args.size(); ++i) same = sig->sizes[i] == args[i].size();
    if (!same) {
      // The cold path: a launch that would read past its arguments (or misread them) on the
      // device is refused before it reaches the plugin.
      throw Error(Status::invalid_argument, std::string(name()), "launch",
                  "kernel " + sig->name + " takes " +
                      describe(sig->sizes.size(), [&](std::size_t i) { return sig->sizes[i]; }) +
                      ", given " +
                      describe(args.size(), [&](std::size_t i) { return args[i].size(); }));
    }
  }
  std::array<void*, max_launch_args> params;  // only the first args.size() are read
  for (std::size_t i = 0; i < args.size(); ++i) params[i] = const_cast<void*>(args[i].data());
  launch(f, grid, block, shared_bytes, stream, params.data());
}

}  // namespace gpuplug
