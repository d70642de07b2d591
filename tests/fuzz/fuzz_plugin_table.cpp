// SPDX-License-Identifier: Apache-2.0
// Fuzz target: the core's loading and validation of a plugin table
// (PluginRegistry::add_plugin_file).
//
// The input builds a table in a heap block exactly as large as the table claims (so ASan flags
// any read past struct_size): random struct_size and abi_version, a random name (sometimes
// invalid or null), any subset of slots null, and the rest stubs whose answers also come from
// the input (probe status, reason, device count and an unterminated message; device descriptions
// of random bytes; create's error text; lengths returned by last_error). A tiny plugin,
// libgpuplug-fuzztable.so, hands that table to the registry.
//
// Properties: loading never throws and never crashes; a null table, another major version, a
// table below GPUPLUG_PLUGIN_V1_MIN_SIZE, a bad name or a null required slot leaves the plugin
// "failed" with the matching reason; otherwise it is available (with exactly the devices probe
// counted) or unavailable with a message; creating a backend of it either works or throws
// gpuplug::Error.
#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <filesystem>
#include <gpuplug/gpuplug.hpp>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "fuzz_input.hpp"

namespace {

using gpuplug::fuzz::broken;

/// What the stubs answer during one input.
struct Script {
  gpuplug_status_t probe_status = 0;
  gpuplug_probe_reason_t probe_reason = 0;
  std::uint32_t device_count = 0;
  std::string probe_message;  // copied raw, possibly filling the field without a NUL
  gpuplug_status_t describe_status = 0;
  std::string device_bytes;  // copied raw over the device description
  gpuplug_status_t create_status = 0;
  std::string create_error;  // copied raw into the caller's error buffer
  gpuplug_status_t other_status = 0;
  std::size_t other_length = 0;  // what last_error / ledger_report claim to have written
};
Script script;

gpuplug_status_t stub_probe(gpuplug_probe_result_t* out) {
  out->reason = script.probe_reason;
  out->device_count = script.device_count;
  std::memcpy(out->message, script.probe_message.data(),
              std::min(script.probe_message.size(), sizeof out->message));
  return script.probe_status;
}

gpuplug_status_t stub_describe(std::uint32_t, gpuplug_device_info_t* out) {
  // Everything after struct_size, as random as the input makes it (strings unterminated too).
  auto* bytes = reinterpret_cast<unsigned char*>(out) + sizeof out->struct_size;
  const std::size_t room = sizeof *out - sizeof out->struct_size;
  std::memcpy(bytes, script.device_bytes.data(), std::min(script.device_bytes.size(), room));
  return script.describe_status;
}

gpuplug_status_t stub_create(std::uint32_t, const gpuplug_option_t*, std::uint32_t,
                             const gpuplug_host_services_t*, gpuplug_instance_t* out, char* error,
                             std::size_t error_size) {
  if (error != nullptr && error_size > 0) {
    std::memcpy(error, script.create_error.data(),
                std::min(script.create_error.size(), error_size));
  }
  // A "successful" create hands out a dummy instance that every other stub ignores.
  *out = script.create_status == GPUPLUG_STATUS_SUCCESS
             ? reinterpret_cast<gpuplug_instance_t>(&script)
             : nullptr;
  return script.create_status;
}

void stub_destroy(gpuplug_instance_t) {}

/// Every other slot: answers the scripted status (or length), writes nothing.
template <class Fn>
struct Stub;
template <class R, class... A>
struct Stub<R (*)(A...)> {
  static R call(A...) {
    if constexpr (std::is_void_v<R>) {
      return;
    } else if constexpr (std::is_same_v<R, std::size_t>) {
      return script.other_length;
    } else {
      return static_cast<R>(script.other_status);
    }
  }
};
template <class Fn>
void set_stub(Fn& slot) {
  slot = &Stub<Fn>::call;
}

/// Slot setters in table order, so a bit of the input nulls each one.
void fill_slots(gpuplug_plugin_v1& t, std::uint64_t null_mask) {
  std::size_t bit = 0;
  auto maybe = [&](auto& slot, auto value) {
    slot = ((null_mask >> bit++) & 1u) != 0 ? nullptr : value;
  };
  maybe(t.probe, &stub_probe);
  maybe(t.describe_device, &stub_describe);
  maybe(t.create, &stub_create);
  maybe(t.destroy, &stub_destroy);
  auto generic = [&](auto& slot) {
    using Fn = std::remove_reference_t<decltype(slot)>;
    maybe(slot, &Stub<Fn>::call);
  };
  generic(t.last_error);
  generic(t.alloc);
  generic(t.alloc_managed);
  generic(t.free);
  generic(t.memory_info);
  generic(t.device_info);
  generic(t.copy_h2d);
  generic(t.copy_d2h);
  generic(t.copy_d2d);
  generic(t.copy_h2d_async);
  generic(t.copy_d2h_async);
  generic(t.copy_d2d_async);
  generic(t.memset_d8);
  generic(t.stream_create);
  generic(t.stream_destroy);
  generic(t.stream_synchronize);
  generic(t.synchronize);
  generic(t.load_module);
  generic(t.unload_module);
  generic(t.has_module);
  generic(t.get_function);
  generic(t.get_global);
  generic(t.launch);
  generic(t.ledger_stats);
  generic(t.ledger_report);
  generic(t.sweep_unreleased);
  generic(t.load_module_file);  // optional, appended after the first release
}

bool required_slots_present(const gpuplug_plugin_v1& t) {
  const void* required[] = {reinterpret_cast<const void*>(t.probe),
                            reinterpret_cast<const void*>(t.describe_device),
                            reinterpret_cast<const void*>(t.create),
                            reinterpret_cast<const void*>(t.destroy),
                            reinterpret_cast<const void*>(t.last_error),
                            reinterpret_cast<const void*>(t.alloc),
                            reinterpret_cast<const void*>(t.free),
                            reinterpret_cast<const void*>(t.memory_info),
                            reinterpret_cast<const void*>(t.device_info),
                            reinterpret_cast<const void*>(t.copy_h2d),
                            reinterpret_cast<const void*>(t.copy_d2h),
                            reinterpret_cast<const void*>(t.copy_d2d),
                            reinterpret_cast<const void*>(t.memset_d8),
                            reinterpret_cast<const void*>(t.stream_create),
                            reinterpret_cast<const void*>(t.stream_destroy),
                            reinterpret_cast<const void*>(t.stream_synchronize),
                            reinterpret_cast<const void*>(t.synchronize),
                            reinterpret_cast<const void*>(t.load_module),
                            reinterpret_cast<const void*>(t.has_module),
                            reinterpret_cast<const void*>(t.get_function),
                            reinterpret_cast<const void*>(t.get_global),
                            reinterpret_cast<const void*>(t.launch),
                            reinterpret_cast<const void*>(t.ledger_stats),
                            reinterpret_cast<const void*>(t.sweep_unreleased)};
  return std::all_of(std::begin(required), std::end(required),
                     [](const void* p) { return p != nullptr; });
}

bool valid_name(const char* name) {
  if (name == nullptr || *name == '\0') return false;
  for (const char* c = name; *c != '\0'; ++c) {
    if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_')) return false;
  }
  return true;
}

std::string describe(const gpuplug::PluginInfo& info) {
  return "state " + std::string(gpuplug::to_string(info.state)) + ", reason " +
         std::string(gpuplug::to_string(info.reason)) + ": " + info.message;
}

void (*set_table)(const gpuplug_plugin_v1*) = nullptr;
std::string plugin_path;  // libgpuplug-fuzztable.so

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  gpuplug::set_log_level(gpuplug::LogLevel::error);  // refused plugins are logged by design
  // Beside the executable's folder as built (the tree may have moved), else where it was built.
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  const auto moved = exe.parent_path() / GPUPLUG_FUZZ_TABLE_PLUGIN_FROM_BIN;
  plugin_path = !ec && std::filesystem::exists(moved, ec) ? moved.lexically_normal().string()
                                                          : std::string(GPUPLUG_FUZZ_TABLE_PLUGIN);
  // Kept open for the whole run, so each registry's load is only a reference count.
  void* plugin = ::dlopen(plugin_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (plugin == nullptr) broken("cannot load " + plugin_path + ": " + ::dlerror());
  set_table = reinterpret_cast<void (*)(const gpuplug_plugin_v1*)>(
      ::dlsym(plugin, "gpuplug_fuzz_set_table"));
  if (set_table == nullptr) broken("the fuzz plugin exports no gpuplug_fuzz_set_table");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (set_table == nullptr) LLVMFuzzerInitialize(nullptr, nullptr);
  gpuplug::fuzz::Input in(data, size);

  // ---- the table header and identity
  const std::uint8_t flags = in.integral<std::uint8_t>();
  const bool null_table = (flags & 0x03) == 0x03;
  std::uint32_t struct_size = in.integral<std::uint16_t>();
  if ((flags & 0x04) == 0) {  // mostly plausible: the whole table or a prefix of whole slots
    constexpr std::size_t slots = sizeof(gpuplug_plugin_v1) / sizeof(void*);
    struct_size = static_cast<std::uint32_t>(sizeof(gpuplug_plugin_v1) -
                                             (struct_size % slots) * sizeof(void*));
  }
  if ((flags & 0x08) != 0) struct_size = in.integral<std::uint32_t>();  // sometimes anything
  std::uint32_t abi_version = in.integral<std::uint32_t>();
  // Mostly our major; the minor mostly one this host asked for or below (ABI-4 refuses a later
  // one, so a random minor would leave few tables for the checks past the header).
  if ((flags & 0x10) == 0) {
    const std::uint32_t minor = (flags & 0x80) != 0
                                    ? abi_version & 0xFFFF
                                    : (abi_version & 0xFFFF) % (GPUPLUG_ABI_VERSION_MINOR + 1);
    abi_version = GPUPLUG_MAKE_VERSION(GPUPLUG_ABI_VERSION_MAJOR, minor);
  }
  static constexpr std::array<const char*, 4> names{"fuzz", "fz_0", "Fuzz", "fuzz-x"};
  const std::uint8_t name_pick = in.integral<std::uint8_t>();
  std::string name = name_pick < 200 ? names[name_pick % names.size()] : in.string(24);
  const std::string vendor = in.string(16), version = in.string(16);
  const std::uint64_t null_mask = (flags & 0x20) != 0 ? in.integral<std::uint64_t>() : 0;

  // ---- what the stubs answer
  script = Script{};
  script.probe_status = in.integral<std::uint8_t>() % 11;
  if ((flags & 0x40) == 0) script.probe_status = GPUPLUG_STATUS_SUCCESS;
  script.probe_reason = in.integral<std::int8_t>() % 6;
  script.device_count = in.integral<std::uint8_t>() % 9;
  script.probe_message = in.string(600);
  script.describe_status = in.integral<std::uint8_t>() % 4 == 0 ? GPUPLUG_STATUS_INVALID_ARGUMENT
                                                                : GPUPLUG_STATUS_SUCCESS;
  script.device_bytes = in.string(sizeof(gpuplug_device_info_t) + 8);
  script.create_status = in.integral<std::uint8_t>() % 10;
  script.create_error = in.string(1200);
  script.other_status = in.integral<std::uint8_t>() % 11;
  script.other_length = in.integral<std::uint16_t>();

  // ---- the table, in a block of exactly the size it claims (at least its 8-byte header)
  gpuplug_plugin_v1 t{};
  t.struct_size = struct_size;
  t.abi_version = abi_version;
  const bool null_name = (null_mask >> 62) & 1u;
  t.name = null_name ? nullptr : name.c_str();
  t.vendor = (null_mask >> 61) & 1u ? nullptr : vendor.c_str();
  t.version = (null_mask >> 60) & 1u ? nullptr : version.c_str();
  fill_slots(t, null_mask);
  const std::size_t claimed = std::max<std::size_t>(struct_size, 8);
  const std::size_t block =
      std::min<std::size_t>(claimed, sizeof t + 256);  // the host reads at most sizeof t
  std::unique_ptr<unsigned char[]> table(new unsigned char[block]);
  std::memset(table.get(), 0xA5, block);
  std::memcpy(table.get(), &t, std::min(block, sizeof t));
  set_table(null_table ? nullptr : reinterpret_cast<const gpuplug_plugin_v1*>(table.get()));

  // ---- load it
  gpuplug::PluginInfo info;
  auto registry = std::make_unique<gpuplug::PluginRegistry>();
  try {
    // In-process: the table lives in this process's memory, which a probe child would not see.
    info = registry->add_plugin_file(plugin_path, {gpuplug::ProbeMode::in_process, std::nullopt});
  } catch (const std::exception& e) {
    broken(std::string("add_plugin_file threw: ") + e.what());
  }

  // ---- what the registry must have concluded
  using gpuplug::PluginReason;
  using gpuplug::PluginState;
  auto expect_failed = [&](std::initializer_list<PluginReason> reasons, const char* why) {
    if (info.state != PluginState::failed ||
        std::find(reasons.begin(), reasons.end(), info.reason) == reasons.end()) {
      broken(std::string(why) + ", but the registry says " + describe(info));
    }
  };
  const bool later_minor = GPUPLUG_ABI_MINOR(abi_version) > GPUPLUG_ABI_VERSION_MINOR;
  const bool table_ok = !null_table &&
                        GPUPLUG_ABI_MAJOR(abi_version) == GPUPLUG_ABI_VERSION_MAJOR &&
                        !later_minor && struct_size >= GPUPLUG_PLUGIN_V1_MIN_SIZE;
  if (null_table) {
    expect_failed({PluginReason::entry_returned_null}, "the entry returned null");
  } else if (GPUPLUG_ABI_MAJOR(abi_version) != GPUPLUG_ABI_VERSION_MAJOR) {
    expect_failed({PluginReason::abi_mismatch}, "the table has another major version");
  } else if (later_minor) {
    expect_failed({PluginReason::abi_mismatch}, "the table answers a later minor (ABI-4)");
    if (info.message.find("breaks ABI-4") == std::string::npos)
      broken("a later minor was refused without naming ABI-4: " + describe(info));
  } else if (struct_size < GPUPLUG_PLUGIN_V1_MIN_SIZE) {
    expect_failed({PluginReason::table_too_small}, "the table is below the v1 minimum size");
  } else if (null_name || !valid_name(name.c_str())) {
    expect_failed({PluginReason::abi_mismatch}, "the name is null or not [a-z0-9_]+");
  } else if (!required_slots_present(t)) {
    expect_failed({PluginReason::abi_mismatch}, "a required slot is null");
  } else if (info.state == PluginState::failed) {
    broken("a valid table was refused: " + describe(info));
  }
  if (info.state != PluginState::available && info.message.empty())
    broken("no message for " + describe(info));
  if (info.state == PluginState::available) {
    if (!table_ok) broken("an invalid table is available");
    if (info.devices.size() != script.device_count) {
      broken("probe counted " + std::to_string(script.device_count) +
             " devices, the registry lists " + std::to_string(info.devices.size()));
    }
    for (std::size_t i = 0; i < info.devices.size(); ++i) {
      if (info.devices[i].ordinal != i)
        broken("device " + std::to_string(i) + " has ordinal " +
               std::to_string(info.devices[i].ordinal));
    }
    // Creating a backend either works or is a gpuplug::Error; both are fine here.
    try {
      auto gpu = registry->create(info.name + ":0!");
      (void)gpu->name();
    } catch (const gpuplug::Error&) {
    } catch (const std::exception& e) {
      broken(std::string("create threw a non-gpuplug exception: ") + e.what());
    }
  }
  registry.reset();
  set_table(nullptr);
  return 0;
}
