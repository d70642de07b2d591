// SPDX-License-Identifier: Apache-2.0
// Internal: JSON documents with nlohmann/json, written with gpuplug's escaping and layout and read
// from untrusted text with a nesting limit, every failure a message instead of an exception.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "gpuplug/support/escape.hpp"

namespace gpuplug::support::json {

/// A document: members keep the order they were added in, so output reads as it was written.
using value = nlohmann::ordered_json;

/// How `dump` lays a document out. Separators are always ", " and ": ".
enum class layout {
  one_line,  // the whole document on one line
  document,  // one member or element per line for the top object, every array of objects and
             // every object holding one; everything else on one line
};

namespace detail {

inline bool is_list_of_objects(const value& v) {
  return v.is_array() && !v.empty() && v.front().is_object();
}

inline bool holds_list_of_objects(const value& v) {
  for (const auto& [key, member] : v.items())
    if (is_list_of_objects(member)) return true;
  return false;
}

inline void dump_to(std::string& out, const value& v, layout how, int depth) {
  const std::string indent(static_cast<std::size_t>(2 * (depth + 1)), ' ');
  const std::string close_indent(static_cast<std::size_t>(2 * depth), ' ');
  if (v.is_object()) {
    if (v.empty()) {
      out += "{}";
      return;
    }
    const bool lines = how == layout::document && (depth == 0 || holds_list_of_objects(v));
    out += '{';
    bool first = true;
    for (const auto& [key, member] : v.items()) {
      out += first ? "" : ",";
      out += lines ? "\n" + indent : (first ? "" : " ");
      first = false;
      out += json_string(key) + ": ";
      dump_to(out, member, how, depth + 1);
    }
    out += lines ? "\n" + close_indent + "}" : "}";
  } else if (v.is_array()) {
    if (v.empty()) {
      out += "[]";
      return;
    }
    const bool lines = how == layout::document && is_list_of_objects(v);
    out += '[';
    bool first = true;
    for (const value& element : v) {
      out += first ? "" : ",";
      out += lines ? "\n" + indent : (first ? "" : " ");
      first = false;
      dump_to(out, element, how, depth + 1);
    }
    out += lines ? "\n" + close_indent + "]" : "]";
  } else if (v.is_string()) {
    out += json_string(v.get_ref<const std::string&>());
  } else {
    out += v.dump();  // numbers, booleans and null: nothing to escape
  }
}

struct too_deep {};

}  // namespace detail

/// The document as text (no trailing newline). Strings are written with json_string, so the text
/// is valid UTF-8 whatever bytes they hold; never throws but std::bad_alloc.
inline std::string dump(const value& v, layout how) {
  std::string out;
  detail::dump_to(out, v, how, 0);
  return out;
}

/// `key: text`, and `key_bytes: <hex>` after it when text is not UTF-8 (json_string then
/// replaces its bad bytes with U+FFFD; the hex keeps them exactly): see json_member.
inline void set_text(value& object, std::string_view key, std::string_view text) {
  object[std::string(key)] = std::string(text);
  if (!is_valid_utf8(text)) object[std::string(key) + "_bytes"] = hex_bytes(text);
}

/// Nesting deeper than this is refused by `parse` (no document of gpuplug's nests past 4).
inline constexpr int max_depth = 64;

/// The document in `text`, or nullopt with `error` saying where and why ("line 3, column 7:
/// syntax error ...", "nested deeper than 64 levels"). Never throws but std::bad_alloc.
inline std::optional<value> parse(std::string_view text, std::string& error) {
  const auto limit = [](int depth, value::parse_event_t, value&) {
    if (depth > max_depth) throw detail::too_deep{};
    return true;
  };
  try {
    return value::parse(text.begin(), text.end(), limit);
  } catch (const detail::too_deep&) {
    error = "nested deeper than " + std::to_string(max_depth) + " levels";
  } catch (const nlohmann::json::parse_error& e) {
    const std::string what = e.what();
    const std::size_t at = what.find("parse error at ");
    error = at == std::string::npos ? what : what.substr(at + 15);
  } catch (const nlohmann::json::exception& e) {
    error = e.what();
  }
  return std::nullopt;
}

/// The member `key` of `object`, or nullptr when `object` is no object or has no such member.
inline const value* member(const value& object, std::string_view key) {
  if (!object.is_object()) return nullptr;
  const auto it = object.find(std::string(key));
  return it == object.end() ? nullptr : &*it;
}

/// A value for a message: its JSON text, cut to 40 bytes, escaped for a terminal.
inline std::string shown(const value& v) {
  std::string text = dump(v, layout::one_line);
  if (text.size() > 40) text = text.substr(0, 40) + "...";
  return escape_text(text);
}

}  // namespace gpuplug::support::json
