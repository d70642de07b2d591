// SPDX-License-Identifier: Apache-2.0
// create_backend_from_table: a PluginBackend from a table the caller hands over, through the
// loader's own checks, for the ABI skew group of the conformance suite.
#include <boost/dll/shared_library.hpp>
#include <gpuplug/table_backend.hpp>
#include <string>

#include "table/plugin_backend.hpp"
#include "discovery/plugin_loader.hpp"
#include "table/plugin_table.hpp"

namespace gpuplug {

std::shared_ptr<GpuBackend> create_backend_from_table(const std::filesystem::path& plugin_file,
                                                      const gpuplug_plugin_v1& table,
                                                      std::uint32_t ordinal,
                                                      const Options& options) {
  const std::string who = plugin_file.string();
  // The file is trusted no more than discovery trusts a candidate.
  if (auto why = detail::preflight(plugin_file))
    throw Error(Status::unavailable, who, "load", why->message);
  // The same checks, in the same order, as the loader's on the entry point's table: the header
  // first (the only fields read before the major is known), then the copy, then what v1 requires.
  auto refused = [&](const detail::Refusal& r) {
    return Error(Status::invalid_argument, who, "check table", r.message);
  };
  if (auto why = detail::check_header(table)) throw refused(*why);
  const gpuplug_plugin_v1 copy = detail::copy_table(table);
  if (auto why = detail::check_name(copy)) throw refused(*why);
  if (auto why = detail::check_required_slots(copy)) throw refused(*why);

  // Only a table that passed the checks above gets its file loaded (preflighted again there).
  auto library = detail::load_checked_library(plugin_file, "load");
  // PluginBackend copies the table again (copy_table is idempotent on a copy) and resolves the
  // optional slots from that copy, never from `table`.
  return std::make_shared<detail::PluginBackend>(std::move(library), copy, ordinal, options);
}

}  // namespace gpuplug
