// SPDX-License-Identifier: Apache-2.0
// The `faults` layer: counts the calls of the operations its spec names, per backend, and fails
// the chosen ones, before the level below is called or (mode `after`) after it, undoing what the
// call made. The spec's grammar is fault_spec.hpp's.
#include "layers/faults.hpp"

#include <array>
#include <atomic>
#include <gpuplug/support/text.hpp>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "layers/fault_spec.hpp"
#include "layers/layer_support.hpp"

namespace gpuplug::detail {

namespace {

using layers::fault_slot_count;
using layers::fault_slot_index;
using layers::FaultRule;
using P = gpuplug_plugin_v1;

class FaultsLayer : public layers::LayerBase {
 public:
  FaultsLayer(const gpuplug_layer_next_t& next, const gpuplug_layer_services_t& services,
              std::string backend, const Options& own_options)
      : LayerBase(next, services, std::move(backend)) {
    if (const auto it = own_options.find("faults"); it != own_options.end()) {
      spec_ = support::trim(it->second);
    }
    rules_ = layers::parse_fault_spec(spec_);
    for (const FaultRule& r : rules_) {
      const std::string_view op = layers::fault_slot_names()[r.slot];
      if (r.after && (op == "load_module" || op == "load_module_file") &&
          !next_has<&P::unload_module>()) {
        throw std::invalid_argument("faults='" + spec_ + "': '" + r.text + "': the plugin under " +
                                    this->backend() +
                                    " cannot unload modules, so a load cannot be undone (use "
                                    "before)");
      }
    }
    // Rules are fixed from here on: the slots read them without a lock.
    for (const FaultRule& r : rules_) rules_by_slot_[r.slot].push_back(&r);
    if (rules_.empty()) {
      log(GPUPLUG_LOG_WARNING,
          "layer 'faults' is enabled without a spec (option faults= or "
          "GPUPLUG_FAULTS): it injects nothing");
    }
  }
  FaultsLayer(const FaultsLayer&) = delete;
  FaultsLayer& operator=(const FaultsLayer&) = delete;
  ~FaultsLayer() {
    const std::uint64_t n = injected_.load();
    if (n != 0) {
      log(GPUPLUG_LOG_INFO, "layer 'faults' injected " + std::to_string(n) +
                                (n == 1 ? " fault" : " faults") + " (faults='" + spec_ + "')");
    }
  }

  template <auto Slot, class... A>
  auto on(A... args) {
    using R = decltype(call_next<Slot>(args...));
    if constexpr (!std::is_same_v<R, gpuplug_status_t>) {
      return call_next<Slot>(args...);  // ledger_report: nothing to fail
    } else {
      constexpr std::size_t slot = fault_slot_index<Slot>();
      static_assert(slot < fault_slot_count);
      const auto& rules = rules_by_slot_[slot];
      if (rules.empty()) return call_next<Slot>(args...);
      // Counted whether or not a fault fires: "call N" is the Nth call of the operation on this
      // backend, whichever thread made it.
      const std::uint64_t call = calls_[slot].fetch_add(1, std::memory_order_relaxed) + 1;
      const FaultRule* rule = nullptr;
      for (const FaultRule* r : rules) {
        if (r->trigger.fires(slot, call)) {
          rule = r;
          break;
        }
      }
      if (rule == nullptr) return call_next<Slot>(args...);
      injected_.fetch_add(1, std::memory_order_relaxed);
      const std::string what =
          std::string("injected fault: ") + slot_name<Slot>() + " call " + std::to_string(call);
      const std::string spec = " (faults='" + spec_ + "')";
      if (!rule->after) return fail(rule->status, what + spec);
      const gpuplug_status_t status = call_next<Slot>(args...);
      if (status != GPUPLUG_STATUS_SUCCESS) return status;  // the plugin's own failure stands
      const gpuplug_status_t undone = undo<Slot>(args...);
      const std::string how =
          undone == GPUPLUG_STATUS_SUCCESS
              ? ", after the call, which was undone"
              : ", after the call; undoing it failed with status " + std::to_string(undone);
      return fail(rule->status, what + how + spec);
    }
  }

 private:
  /// Releases what a successful call of Slot made, through the level below (so the layers above
  /// never see it). Slots that make nothing have nothing to undo.
  template <auto Slot, class... A>
  gpuplug_status_t undo(A... args) const {
    const std::tuple<A...> a(args...);
    if constexpr (same_slot<Slot, &P::alloc> || same_slot<Slot, &P::alloc_managed>) {
      return call_next<&P::free>(*std::get<2>(a));
    } else if constexpr (same_slot<Slot, &P::alloc_host_mapped>) {
      return call_next<&P::free_host_mapped>(*std::get<2>(a));
    } else if constexpr (same_slot<Slot, &P::stream_create>) {
      return call_next<&P::stream_destroy>(*std::get<0>(a));
    } else if constexpr (same_slot<Slot, &P::event_create>) {
      return call_next<&P::event_destroy>(*std::get<0>(a));
    } else if constexpr (same_slot<Slot, &P::load_module> ||
                         same_slot<Slot, &P::load_module_file>) {
      return call_next<&P::unload_module>(std::get<0>(a));  // checked present at create
#if GPUPLUG_ABI_VERSION_MINOR >= 3
    } else if constexpr (same_slot<Slot, &P::stream_end_capture>) {
      return call_next<&P::graph_destroy>(*std::get<1>(a));  // the graph made is destroyed
    } else if constexpr (same_slot<Slot, &P::stream_create_with_flags>) {
      return call_next<&P::stream_destroy>(*std::get<1>(a));
    } else if constexpr (same_slot<Slot, &P::alloc_arena>) {
      return call_next<&P::free_arena>(*std::get<2>(a));
#endif
    } else {
      return GPUPLUG_STATUS_SUCCESS;
    }
  }

  std::string spec_;
  std::vector<FaultRule> rules_;
  std::array<std::vector<const FaultRule*>, fault_slot_count> rules_by_slot_{};
  std::array<std::atomic<std::uint64_t>, fault_slot_count> calls_{};  // per slot, from 1
  std::atomic<std::uint64_t> injected_{0};
};

gpuplug_plugin_v1 faults_table() noexcept {
  gpuplug_plugin_v1 t{};
  t.struct_size = sizeof t;
  t.abi_version = GPUPLUG_ABI_VERSION;
  t.destroy = &layers::destroy_layer<FaultsLayer>;
  layers::intercept_every_slot<FaultsLayer>(t);
  return t;
}

const char* const faults_keys[] = {"faults", nullptr};

}  // namespace

const gpuplug_layer_v1& faults_layer() noexcept {
  // Function-local, so the table exists whenever the catalog first asks (no static init order);
  // both are trivially destructible.
  static const gpuplug_plugin_v1 slots = faults_table();
  static const gpuplug_layer_v1 layer{
      sizeof(gpuplug_layer_v1),
      GPUPLUG_LAYER_VERSION,
      "faults",
      "fails chosen calls with a chosen status (faults=op@N=status;...)",
      faults_keys,
      &layers::create_layer<FaultsLayer>,
      &slots};
  return layer;
}

}  // namespace gpuplug::detail
