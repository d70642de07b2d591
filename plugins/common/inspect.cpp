// SPDX-License-Identifier: Apache-2.0
// The inspect_module slot (ABI 1.1, kernel preflight): argument checks around a plugin's hook,
// and the packing of its answer into the fixed-size C struct.
#include <algorithm>
#include <cstring>
#include <limits>

#include "gpuplug/support/escape.hpp"
#include "gpuplug/support/failures.hpp"
#include "plugin_sdk.hpp"

// The slot exists from ABI 1.1; built against the frozen 1.0 header (tests/abi) there is nothing to
// define.
#if GPUPLUG_ABI_VERSION_MINOR >= 1

namespace gpuplug::sdk::detail {
namespace {

constexpr std::string_view ellipsis = "...";

/// `text` escaped into `field`, NUL-terminated; cut with "..." when it does not fit.
template <std::size_t N>
void put_text(char (&field)[N], std::string_view text) {
  const std::string safe = support::escape_text(text);
  std::string_view out = safe;
  std::string cut;
  if (out.size() > N - 1) {
    cut = std::string(out.substr(0, N - 1 - ellipsis.size())) + std::string(ellipsis);
    out = cut;
  }
  std::memcpy(field, out.data(), out.size());
  field[out.size()] = '\0';
}

/// The items escaped and joined with `sep`, as many whole items as fit in `field`; when some do
/// not, the list ends with a "..." item, so a reader never takes a cut name for a real one.
template <std::size_t N>
void put_list(char (&field)[N], const std::vector<std::string>& items, char sep) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    const std::string item = support::escape_text(items[i]);
    const std::size_t need = out.size() + (out.empty() ? 0 : 1) + item.size();
    const bool last = i + 1 == items.size();
    // Room must remain for the "..." item unless this is the last one.
    const std::size_t reserve = last ? 0 : 1 + ellipsis.size();
    if (need + reserve > N - 1) {
      if (!out.empty()) out += sep;
      out += ellipsis;
      break;
    }
    if (!out.empty()) out += sep;
    out += item;
  }
  std::memcpy(field, out.data(), out.size());
  field[out.size()] = '\0';
}

void write_inspection(gpuplug_module_inspection_t& out, const ModuleInspection& in) {
  out.loadable = in.loadable ? 1 : 0;
  put_text(out.format, in.format);
  put_text(out.target, in.loadable ? std::string_view(in.target) : std::string_view());
  // Space-separated: a space inside a target would split it, so it becomes '_'.
  std::vector<std::string> targets = in.targets;
  for (std::string& t : targets) std::replace(t.begin(), t.end(), ' ', '_');
  put_list(out.targets, targets, ' ');
  put_text(out.reason, in.loadable ? std::string_view() : std::string_view(in.reason));
  put_list(out.functions, in.functions, '\n');
  put_list(out.symbols, in.symbols, '\n');
}

/// Every field but struct_size zeroed: the caller sees no stale bytes whatever happens next.
void clear(gpuplug_module_inspection_t& out) noexcept {
  const std::uint32_t size = out.struct_size;
  std::memset(&out, 0, sizeof out);
  out.struct_size = size;
}

}  // namespace

gpuplug_status_t inspect_with(const PluginHooks& hooks, std::uint32_t ordinal, const void* image,
                              std::uint64_t size, gpuplug_module_inspection_t* out) noexcept {
  // Without a whole 1.1 struct there is nowhere to write even the reason.
  if (out == nullptr || out->struct_size < sizeof(gpuplug_module_inspection_t))
    return GPUPLUG_STATUS_INVALID_ARGUMENT;
  clear(*out);
  try {
    if (hooks.inspect_module == nullptr)  // not reached through make_table; kept total
      fail(GPUPLUG_STATUS_UNSUPPORTED, std::string("inspect_module is not supported by the ") +
                                           hooks.name + " plugin");
    if (image == nullptr || size == 0)
      fail(GPUPLUG_STATUS_INVALID_IMAGE, "inspect_module: the image is empty");
    constexpr std::uint64_t max_image = std::uint64_t{4} << 30;
    if (size > max_image || size > std::numeric_limits<std::size_t>::max())
      fail(GPUPLUG_STATUS_INVALID_ARGUMENT, "inspect_module: an image of " + std::to_string(size) +
                                                " bytes is larger than the 4 GiB any module needs");
    require_device(hooks, ordinal);
    ModuleInspection result;
    hooks.inspect_module(
        ordinal,
        std::span<const std::byte>(static_cast<const std::byte*>(image),
                                   static_cast<std::size_t>(size)),
        result);
    write_inspection(*out, result);
    return GPUPLUG_STATUS_SUCCESS;
  } catch (...) {
    gpuplug_status_t status = GPUPLUG_STATUS_INTERNAL;
    std::string message;
    try {
      try {
        throw;
      } catch (const Failure& e) {
        status = e.status();
        message = e.what();
      } catch (const std::bad_alloc&) {
        status = GPUPLUG_STATUS_OUT_OF_MEMORY;
        message = "inspect_module: out of host memory";
      } catch (...) {
        message = "inspect_module: internal error: " + support::describe_current_exception();
      }
      clear(*out);
      put_text(out->reason, message);
    } catch (...) {  // no memory even for the message: the status still tells
      clear(*out);
    }
    if (status == GPUPLUG_STATUS_SUCCESS) status = GPUPLUG_STATUS_INTERNAL;
    return status;
  }
}

}  // namespace gpuplug::sdk::detail

#endif  // GPUPLUG_ABI_VERSION_MINOR >= 1
