// SPDX-License-Identifier: Apache-2.0
// What the built-in layers share (core-private): the link layer.h asks an instance to begin
// with, the calls to the level below, errors through set_error, and tables made from C++ classes.
#pragma once

#include <gpuplug/layer.h>

#include <exception>
#include <gpuplug/support/c_string.hpp>
#include <gpuplug/types.hpp>
#include <new>
#include <stdexcept>
#include <string>

#include "layers/slots.hpp"

namespace gpuplug::detail::layers {

/// What a built-in layer's instance holds first. The core reads `next` at the address it was
/// given as the instance (&link); `self` leads back to the C++ object.
struct Link {
  gpuplug_layer_next_t next;
  void* self;
};

/// The base of a built-in layer: the level below, the services, and which backend it is on.
/// Layer classes derive from it and are made by make_layer (below).
class LayerBase {
 public:
  LayerBase(const gpuplug_layer_next_t& next, const gpuplug_layer_services_t& services,
            std::string backend)
      : link_{next, nullptr}, services_(services), backend_(std::move(backend)) {}
  LayerBase(const LayerBase&) = delete;
  LayerBase& operator=(const LayerBase&) = delete;

  /// "host:0": for messages.
  const std::string& backend() const noexcept { return backend_; }

  /// Passes the call on to the level below, unchanged.
  template <auto Slot, class... A>
  auto call_next(A... args) const {
    return (link_.next.table->*Slot)(link_.next.instance, args...);
  }
  /// True when the level below has the slot (an optional slot may be absent).
  template <auto Slot>
  bool next_has() const noexcept {
    return link_.next.table->*Slot != nullptr;
  }
  /// Returns `status` with `message` as the failure the core reports (layer.h, "Errors").
  gpuplug_status_t fail(gpuplug_status_t status, const std::string& message) const noexcept {
    services_.set_error(services_.user, message.c_str());
    return status;
  }
  void log(gpuplug_log_level_t level, const std::string& message) const noexcept {
    services_.log(services_.user, level, message.c_str());
  }

  gpuplug_instance_t instance() noexcept { return reinterpret_cast<gpuplug_instance_t>(&link_); }
  template <class Layer>
  static Layer& from(gpuplug_instance_t inst) noexcept {
    return *static_cast<Layer*>(reinterpret_cast<Link*>(inst)->self);
  }

  /// Called once by create_layer with the most-derived object.
  void bind(void* self) noexcept { link_.self = self; }

 private:
  Link link_;
  gpuplug_layer_services_t services_;
  std::string backend_;
};

/// A slot as a call of Layer::on<Slot>(args...): for layers that see every call (trace, faults).
template <class Layer, auto Slot>
struct Intercept;
template <class Layer, class R, class... A, R (*gpuplug_plugin_v1::*Slot)(gpuplug_instance_t, A...)>
struct Intercept<Layer, Slot> {
  static R call(gpuplug_instance_t inst, A... args) {
    return LayerBase::from<Layer>(inst).template on<Slot>(args...);
  }
};

/// Sets every layered slot of `table` but last_error to Intercept<Layer, slot>: Layer defines
/// `template <auto Slot, class... A> auto on(A... args)` for all of them (call_next by default).
template <class Layer>
void intercept_every_slot(gpuplug_plugin_v1& table) noexcept {
#define GPUPLUG_INTERCEPT(slot) table.slot = &Intercept<Layer, &gpuplug_plugin_v1::slot>::call;
  GPUPLUG_LAYERED_SLOTS(GPUPLUG_INTERCEPT)
#undef GPUPLUG_INTERCEPT
  table.last_error = nullptr;
}

/// The create slot of a built-in layer: `new Layer(next, services, "<plugin>:<ordinal>",
/// options)`. std::invalid_argument (a bad option) is INVALID_ARGUMENT with its text, any other
/// exception INTERNAL; the text goes to `error`.
template <class Layer>
gpuplug_status_t create_layer(const gpuplug_layer_next_t* next, const char* plugin,
                              std::uint32_t ordinal, const gpuplug_option_t* options,
                              std::uint32_t count, const gpuplug_layer_services_t* services,
                              gpuplug_instance_t* out, char* error, std::size_t error_size) {
  try {
    Options opts;
    for (std::uint32_t i = 0; i < count; ++i) opts[options[i].key] = options[i].value;
    auto* layer = new Layer(*next, *services, std::string(plugin) + ":" + std::to_string(ordinal),
                            opts);
    layer->bind(static_cast<void*>(layer));
    *out = layer->instance();
    return GPUPLUG_STATUS_SUCCESS;
  } catch (const std::invalid_argument& e) {
    support::copy_out(e.what(), error, error_size);
    return GPUPLUG_STATUS_INVALID_ARGUMENT;
  } catch (const std::bad_alloc&) {
    support::copy_out("out of memory", error, error_size);
    return GPUPLUG_STATUS_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    support::copy_out(e.what(), error, error_size);
    return GPUPLUG_STATUS_INTERNAL;
  }
}

/// The destroy slot of a built-in layer.
template <class Layer>
void destroy_layer(gpuplug_instance_t inst) {
  delete &LayerBase::from<Layer>(inst);
}

}  // namespace gpuplug::detail::layers
