// SPDX-License-Identifier: Apache-2.0
// The `sync` layer: a synchronize after every launch, the way a CUDA developer debugs an
// asynchronous fault (CUDA_LAUNCH_BLOCKING=1), for every vendor. Kernel names come from the
// get_function calls that made the handles.
#include "layers/sync.hpp"

#include <cstdint>
#include <gpuplug/support/escape.hpp>
#include <gpuplug/support/failures.hpp>
#include <gpuplug/support/text.hpp>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>

#include "layers/layer_support.hpp"

namespace gpuplug::detail {

namespace {

using P = gpuplug_plugin_v1;

/// The longest module or function name the layer keeps for its messages (names come from the
/// caller and are not trusted for length or encoding).
constexpr std::size_t max_name = 256;

class SyncLayer : public layers::LayerBase {
 public:
  SyncLayer(const gpuplug_layer_next_t& next, const gpuplug_layer_services_t& services,
            std::string backend, const Options& /*own_options*/)
      : LayerBase(next, services, std::move(backend)) {}

  gpuplug_status_t get_function(const char* module, const char* func, std::uint64_t* out) {
    const gpuplug_status_t st = call_next<&P::get_function>(module, func, out);
    if (st == GPUPLUG_STATUS_SUCCESS && out != nullptr && module != nullptr && func != nullptr) {
      std::string name = support::escape_text(support::fixed_string(module, max_name)) +
                         "::" + support::escape_text(support::fixed_string(func, max_name));
      std::unique_lock lock(mutex_);
      names_[*out] = std::move(name);
    }
    return st;
  }

  gpuplug_status_t launch(std::uint64_t function, gpuplug_dim3_t grid, gpuplug_dim3_t block,
                          std::uint32_t shared_bytes, std::uint64_t stream, void** params) {
    gpuplug_status_t st =
        call_next<&P::launch>(function, grid, block, shared_bytes, stream, params);
    const char* when = "launch of ";
    if (st == GPUPLUG_STATUS_SUCCESS && !capturing(stream)) {
      st = call_next<&P::stream_synchronize>(stream);
      when = "synchronize after the launch of ";
    }
    if (st == GPUPLUG_STATUS_SUCCESS) return st;
    return fail(st, std::string("sync: ") + when + kernel_name(function) + " on stream " +
                        support::hex(stream) + ": " + message_below());
  }

 private:
  std::string kernel_name(std::uint64_t function) const {
    std::shared_lock lock(mutex_);
    const auto it = names_.find(function);
    return it != names_.end() ? it->second
                              : "kernel " + support::hex(function) + " (not resolved here)";
  }
  /// A launch into a capture is recorded, not run: nothing to wait for, and a synchronize would
  /// invalidate the capture.
  bool capturing(std::uint64_t stream) const {
    if (stream == 0 || !next_has<&P::stream_is_capturing>()) return false;
    std::int32_t capturing = 0;
    return call_next<&P::stream_is_capturing>(stream, &capturing) == GPUPLUG_STATUS_SUCCESS &&
           capturing != 0;
  }
  /// The level below's message for the failure it just returned on this thread.
  std::string message_below() const {
    char buf[1024] = {};
    call_next<&P::last_error>(buf, sizeof buf);
    return support::fixed_string(buf, sizeof buf);
  }

  mutable std::shared_mutex mutex_;
  std::unordered_map<std::uint64_t, std::string> names_;  // guarded by mutex_
};

/// A slot as a call of SyncLayer::*Member; exceptions (bad_alloc of a name) stay on this side.
template <auto Member>
struct Thunk;
template <class... A, gpuplug_status_t (SyncLayer::*Member)(A...)>
struct Thunk<Member> {
  static gpuplug_status_t call(gpuplug_instance_t inst, A... args) noexcept {
    SyncLayer& self = layers::LayerBase::from<SyncLayer>(inst);
    try {
      return (self.*Member)(args...);
    } catch (const std::bad_alloc&) {
      return self.fail(GPUPLUG_STATUS_OUT_OF_MEMORY, "sync: out of memory for a kernel name");
    } catch (...) {
      return self.fail(GPUPLUG_STATUS_INTERNAL, "sync: " + support::describe_current_exception());
    }
  }
};

gpuplug_plugin_v1 sync_table() noexcept {
  gpuplug_plugin_v1 t{};
  t.struct_size = sizeof t;
  t.abi_version = GPUPLUG_ABI_VERSION;
  t.destroy = &layers::destroy_layer<SyncLayer>;
  t.get_function = &Thunk<&SyncLayer::get_function>::call;
  t.launch = &Thunk<&SyncLayer::launch>::call;
  return t;
}

}  // namespace

const gpuplug_layer_v1& sync_layer() noexcept {
  static const gpuplug_plugin_v1 slots = sync_table();
  static const gpuplug_layer_v1 layer{
      sizeof(gpuplug_layer_v1),
      GPUPLUG_LAYER_VERSION,
      "sync",
      "synchronizes after every launch, so a kernel's fault fails the launch that caused it",
      nullptr,
      &layers::create_layer<SyncLayer>,
      &slots};
  return layer;
}

}  // namespace gpuplug::detail
