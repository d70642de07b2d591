// SPDX-License-Identifier: Apache-2.0
// PluginBackend's interop handles (ABI 1.2): native handles, native pointers, imported memory
// and streams, and the on_release callbacks the core runs once the plugin forgot a range.
#include <gpuplug/log.hpp>
#include <gpuplug/support/c_string.hpp>
#include <gpuplug/support/failures.hpp>
#include <gpuplug/support/text.hpp>

#include "table/plugin_backend.hpp"

namespace gpuplug::detail {

NativeHandles PluginBackend::native(Stream stream) {
  gpuplug_native_handles_t raw{};
  raw.struct_size = sizeof raw;
  check(optional_.native_handles(*this, stream.value, &raw), "native");
  NativeHandles out;
  out.vendor = support::fixed_string(raw.vendor, sizeof raw.vendor);
  out.device = raw.device;
  out.context = raw.context;
  out.stream = raw.stream;
  return out;
}

void* PluginBackend::native_pointer(DevicePtr ptr) {
  void* out = nullptr;
  check(optional_.native_pointer(*this, ptr.value, &out), "native_pointer");
  return out;
}

DevicePtr PluginBackend::import_memory(void* native, std::size_t bytes,
                                       std::function<void()> on_release, std::string_view site) {
  const std::string tag = c_name(site, "import_memory", "site");
  const std::uint64_t ptr = imports_.add(
      std::move(on_release),
      [&] {
        std::uint64_t out = 0;
        check(optional_.import_memory(*this, native, bytes, tag.c_str(), &out), "import_memory");
        if (out == 0)
          throw Error(Status::internal, std::string(name()), "import_memory",
                      "the plugin returned the null pointer for " +
                          support::hex(reinterpret_cast<std::uintptr_t>(native)));
        return out;
      },
      // No memory to record the callback: the range leaves the plugin's ledger again.
      [&](std::uint64_t p) noexcept { (void)table_.free(instance_, p); });
  return DevicePtr{ptr};
}

Stream PluginBackend::import_stream(void* native_stream) {
  std::uint64_t out = 0;
  check(optional_.import_stream(*this, native_stream, &out), "import_stream");
  if (out == 0)
    throw Error(Status::internal, std::string(name()), "import_stream",
                "the plugin returned the default stream (0) for native stream " +
                    support::hex(reinterpret_cast<std::uintptr_t>(native_stream)));
  return Stream{out};
}

void PluginBackend::release_all_imports(const char* when) noexcept {
  try {
    auto callbacks = imports_.take_all();
    if (callbacks.empty()) return;
    log(LogLevel::warning, name(),
        std::string(when) + ": " + std::to_string(callbacks.size()) +
            " imported range(s) still live (first at " + support::hex(callbacks.front().first) +
            "): forgotten, not freed; running their on_release");
    for (auto& [ptr, on_release] : callbacks) {
      try {
        on_release();
      } catch (...) {
        log(LogLevel::error, name(),
            std::string(when) + ": the on_release of the range imported at " + support::hex(ptr) +
                " threw: " + support::describe_current_exception());
      }
    }
  } catch (...) {
    // No memory to take the callbacks out: they cannot run; say so if anything can.
    try {
      log(LogLevel::error, name(), std::string(when) + ": imported ranges' on_release not run: " +
                                       support::describe_current_exception());
    } catch (...) {
    }
  }
}

}  // namespace gpuplug::detail
