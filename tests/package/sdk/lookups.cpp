// SPDX-License-Identifier: Apache-2.0
// An out-of-tree device that asks the SDK instead of keeping its own allocation map: its launch
// hook finds the allocation a pointer argument lies in with ledger().find (what a CPU emulator
// needs to bound a kernel's accesses), and the module registry answers lookups by name. Built
// against the installed headers and static SDK only; exits non-zero naming the first mismatch.
#include <gpuplug/e4m3.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <gpuplug/ledger.hpp>
#include <gpuplug/module_registry.hpp>
#include <gpuplug/plugin_sdk.hpp>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sdk = gpuplug::sdk;

namespace {

int failures = 0;

void check(bool ok, const std::string& what) {
  if (!ok) {
    std::printf("FAILED: %s\n", what.c_str());
    ++failures;
  }
}

/// Host memory as a device. Launch takes one argument, a device pointer, and records the
/// allocation the SDK's ledger says it lies in.
class LookupDevice final : public sdk::Device {
 public:
  explicit LookupDevice(const sdk::DeviceConfig& config) : Device(config) {}
  ~LookupDevice() override { shutdown(); }

  std::optional<sdk::LedgerEntry> launched_in;  // written by vendor_launch (one thread here)

  std::uint64_t vendor_alloc(std::uint64_t bytes) override {
    return reinterpret_cast<std::uintptr_t>(new std::byte[bytes]);
  }
  void vendor_free(std::uint64_t ptr, gpuplug_alloc_kind_t) override {
    delete[] reinterpret_cast<std::byte*>(ptr);
  }
  void vendor_memory_info(std::uint64_t& free_bytes, std::uint64_t& total_bytes) override {
    free_bytes = total_bytes = std::uint64_t{1} << 30;
  }
  void vendor_device_info(gpuplug_device_info_t& out) override { out.ordinal = 0; }
  void vendor_copy_h2d(std::uint64_t dst, const void* src, std::uint64_t bytes) override {
    std::memcpy(reinterpret_cast<void*>(dst), src, bytes);
  }
  void vendor_copy_d2h(void* dst, std::uint64_t src, std::uint64_t bytes) override {
    std::memcpy(dst, reinterpret_cast<const void*>(src), bytes);
  }
  void vendor_copy_d2d(std::uint64_t dst, std::uint64_t src, std::uint64_t bytes) override {
    std::memmove(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), bytes);
  }
  void vendor_memset_d8(std::uint64_t dst, std::uint8_t value, std::uint64_t bytes,
                        std::uint64_t) override {
    std::memset(reinterpret_cast<void*>(dst), value, bytes);
  }
  std::uint64_t vendor_stream_create() override { return ++last_stream_; }
  void vendor_stream_destroy(std::uint64_t) override {}
  void vendor_stream_synchronize(std::uint64_t) override {}
  void vendor_synchronize() override {}
  sdk::VendorModule vendor_load_module(std::string_view, std::span<const std::byte>) override {
    return 1;
  }
  void vendor_unload_module(sdk::VendorModule) noexcept override {}
  std::uint64_t vendor_get_function(sdk::VendorModule, const std::string& func) override {
    return func == "touch" ? 0x7000 : 0;
  }
  std::vector<std::string> vendor_list_functions(sdk::VendorModule) override { return {"touch"}; }
  std::optional<sdk::VendorGlobal> vendor_get_global(sdk::VendorModule,
                                                     const std::string&) override {
    return std::nullopt;
  }
  std::vector<std::string> vendor_module_file_extensions() const override { return {".bin"}; }
  void vendor_launch(std::uint64_t, gpuplug_dim3_t, gpuplug_dim3_t, std::uint32_t, std::uint64_t,
                     void** params) override {
    std::uint64_t ptr = 0;
    std::memcpy(&ptr, params[0], sizeof ptr);
    launched_in = ledger().find(ptr);
    if (!launched_in)
      sdk::fail(GPUPLUG_STATUS_INVALID_ARGUMENT, "launch: argument 0 is no live allocation");
  }

 private:
  std::uint64_t last_stream_ = 0;
};

struct LookupPlugin {
  static constexpr const char* name = "lookup";
  static constexpr const char* vendor = "package test";
  static constexpr const char* version = "1";
  static constexpr std::array<std::string_view, 0> extra_options{};
  static void probe(gpuplug_probe_result_t& out) {
    sdk::fill_probe(out, GPUPLUG_PROBE_AVAILABLE, 1, "one host device");
  }
  static void describe_device(std::uint32_t, gpuplug_device_info_t&) {}
  static std::unique_ptr<sdk::Device> create(const sdk::DeviceConfig& config) {
    return std::make_unique<LookupDevice>(config);
  }
};

}  // namespace

int main() {
  // The table as GPUPLUG_DEFINE_PLUGIN builds it, called the way a host calls it.
  const gpuplug_plugin_v1 t = sdk::detail::make_table<LookupPlugin>();
  gpuplug_instance_t inst = nullptr;
  char error[256] = {};
  if (t.create(0, nullptr, 0, nullptr, &inst, error, sizeof error) != GPUPLUG_STATUS_SUCCESS) {
    std::printf("FAILED: create: %s\n", error);
    return 1;
  }
  auto& device = *reinterpret_cast<LookupDevice*>(inst);

  std::uint64_t buffer = 0;
  check(t.alloc(inst, 4096, "buffer", &buffer) == GPUPLUG_STATUS_SUCCESS, "alloc 4096");
  std::uint64_t interior = buffer + 1000;
  void* params[] = {&interior};
  check(t.launch(inst, 0x7000, {1, 1, 1}, {1, 1, 1}, 0, 0, params) == GPUPLUG_STATUS_SUCCESS,
        "launch with a pointer inside the allocation");
  check(
      device.launched_in && device.launched_in->ptr == buffer && device.launched_in->bytes == 4096,
      "ledger().find(buffer + 1000) is the 4096-byte allocation at buffer");
  std::uint64_t outside = buffer + 4096;
  params[0] = &outside;
  check(
      t.launch(inst, 0x7000, {1, 1, 1}, {1, 1, 1}, 0, 0, params) == GPUPLUG_STATUS_INVALID_ARGUMENT,
      "launch with a pointer one past the allocation is refused");
  check(device.ledger().counters().live_count == 1, "ledger().counters().live_count == 1");

  const std::byte image[8] = {};
  check(t.load_module(inst, "kernels", image, sizeof image) == GPUPLUG_STATUS_SUCCESS,
        "load_module");
  sdk::ModuleRegistry& modules = device.modules();
  check(modules.has("kernels") && modules.names() == std::vector<std::string>{"kernels"},
        "modules().names() == {kernels}");
  check(modules.get_function("kernels", "touch") == 0x7000, "modules().get_function");
  try {
    modules.get_function("kernels", "missing");
    check(false, "modules().get_function of a missing kernel throws");
  } catch (const sdk::Failure& f) {
    check(f.status() == GPUPLUG_STATUS_NOT_FOUND &&
              std::string(f.what()).find("kernels has: touch") != std::string::npos,
          std::string("the not-found message lists the module's kernels: ") + f.what());
  }

  // The reference E4M3 encoder: saturating, round to nearest even.
  check(gpuplug_f32_to_e4m3(448.0f) == 0x7E && gpuplug_f32_to_e4m3(1e6f) == 0x7E,
        "gpuplug_f32_to_e4m3 saturates to 0x7E");

  check(t.free(inst, buffer) == GPUPLUG_STATUS_SUCCESS, "free");
  check(!device.ledger().find(buffer), "a freed allocation is gone from the ledger");
  t.destroy(inst);
  if (failures == 0) std::printf("sdk lookups: ok\n");
  return failures == 0 ? 0 : 1;
}
