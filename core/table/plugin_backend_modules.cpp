// SPDX-License-Identifier: Apache-2.0
// PluginBackend's modules and kernels: loading, resolving (with each kernel's signature, for the
// counted launches) and the primitive launch, over the plugin's C table.
#include "table/plugin_backend.hpp"

#include <memory>
#include <string>

namespace gpuplug::detail {

// ---- modules ------------------------------------------------------------------------------------

/// `name` as the C string the ABI takes. A name with a NUL byte would reach the plugin cut short
/// (and could name another module), so it is refused here, naming the operation.
std::string PluginBackend::c_name(std::string_view name, const char* op, const char* what) const {
  if (name.find('\0') != std::string_view::npos)
    throw Error(Status::invalid_argument, name_, op,
                std::string("the ") + what + " name contains a NUL byte");
  return std::string(name);
}

void PluginBackend::load_module(std::string_view name, std::span<const std::byte> image) {
  const std::string n = c_name(name, "load_module", "module");
  check(table_.load_module(instance_, n.c_str(), image.data(), image.size()), "load_module");
}

void PluginBackend::load_module_path(std::string_view name, const std::filesystem::path& file) {
  const std::string n = c_name(name, "load_module_file", "module");
  const gpuplug_status_t status = optional_.load_module_file(*this, n.c_str(), file.c_str());
  // The plugin's message says why; the core names the module and the file in every case.
  if (status != GPUPLUG_STATUS_SUCCESS) [[unlikely]]
    throw_status(status, "load_module_file (module " + n + ", file '" + file.string() + "')");
}

void PluginBackend::unload_module(std::string_view name) {
  const std::string n = c_name(name, "unload_module", "module");
  const gpuplug_status_t status = optional_.unload_module(*this, n.c_str());
  // After the plugin, so that a concurrent miss cannot memoize a handle of the old module
  // again; whatever the status, since a handle of a half-unloaded module is not to be trusted.
  op_cache().forget_module(name);
  check(status, "unload_module");
}

bool PluginBackend::has_module(std::string_view name) {
  const std::string n = c_name(name, "has_module", "module");
  std::int32_t out = 0;
  check(table_.has_module(instance_, n.c_str(), &out), "has_module");
  return out != 0;
}

KernelHandle PluginBackend::kernel(std::string_view module, std::string_view func) {
  const std::string m = c_name(module, "kernel", "module");
  const std::string f = c_name(func, "kernel", "function");
  std::uint64_t out = 0;
  check(table_.get_function(instance_, m.c_str(), f.c_str(), &out), "kernel");
  if (out == 0) {
    throw Error(Status::internal, name_, "kernel",
                "the plugin returned a null handle for " + m + "::" + f);
  }
  const KernelHandle handle{out};
  // The signature counted launches are checked against. Optional metadata: a module without
  // it, or a backend that cannot read it now, leaves the kernel's launches unchecked.
  std::unique_ptr<const KernelSignature> sig;
  try {
    sig = read_kernel_signature(*this, m, f);
  } catch (const Error& e) {
    // Reading it is a synchronous copy, which a stream capture does not allow (docs/graphs.md):
    // said now, rather than left as a poisoned capture the caller did not see coming.
    if (e.status() == Status::capture_invalidated)
      throw Error(Status::capture_invalidated, name_, "kernel",
                  "reading " + m + "::" + f + "_args (a synchronous copy) invalidated the active "
                  "capture: resolve kernels before begin_capture (" + e.message() + ")");
  }
  signatures_.set(handle, std::move(sig));
  return handle;
}

const KernelSignature* PluginBackend::kernel_signature(KernelHandle f) const noexcept {
  return signatures_.find(f);
}

std::optional<DeviceSymbol> PluginBackend::device_symbol(std::string_view module,
                                                         std::string_view symbol) {
  const std::string m = c_name(module, "device_symbol", "module");
  const std::string s = c_name(symbol, "device_symbol", "symbol");
  std::uint64_t address = 0;
  std::uint64_t size = 0;
  const gpuplug_status_t st = table_.get_global(instance_, m.c_str(), s.c_str(), &address, &size);
  if (st == GPUPLUG_STATUS_NOT_FOUND) {
    // NOT_FOUND covers both a missing symbol (nullopt, by contract) and a missing module (an
    // error): tell them apart on this cold path only.
    std::string why = last_error();
    if (!has_module(module)) {
      throw Error(Status::not_found, name_, "device_symbol",
                  why.empty() ? "module " + m + " not found" : why);
    }
    return std::nullopt;
  }
  check(st, "device_symbol");
  return DeviceSymbol{DevicePtr{address}, static_cast<std::size_t>(size)};
}

// ---- work ---------------------------------------------------------------------------------------

void PluginBackend::launch(KernelHandle f, Dim3 grid, Dim3 block, std::uint32_t shared_bytes,
                           Stream stream, void** params) {
  // The hot path: one indirect call, nothing allocated, no lock.
  check(
      table_.launch(instance_, f.value, gpuplug_dim3_t{grid.x, grid.y, grid.z},
                    gpuplug_dim3_t{block.x, block.y, block.z}, shared_bytes, stream.value, params),
      "launch");
}

}  // namespace gpuplug::detail
