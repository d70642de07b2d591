// SPDX-License-Identifier: Apache-2.0
// Internal: escaping of untrusted text (plugin strings, file names) for terminals and for JSON.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace gpuplug::support {

/// The length (1 to 4) of the well-formed UTF-8 sequence at s[at], or 0 when the byte there does
/// not start one: a stray continuation byte, a truncated sequence, an overlong form, a UTF-16
/// surrogate (U+D800..U+DFFF) or a code point past U+10FFFF (RFC 3629). `cp` gets the code point.
inline std::size_t utf8_sequence(std::string_view s, std::size_t at, char32_t& cp) noexcept {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char b0 = byte(at);
  if (b0 < 0x80) {
    cp = b0;
    return 1;
  }
  std::size_t len = 0;
  char32_t min = 0;
  if ((b0 & 0xe0) == 0xc0) {
    len = 2, cp = b0 & 0x1f, min = 0x80;
  } else if ((b0 & 0xf0) == 0xe0) {
    len = 3, cp = b0 & 0x0f, min = 0x800;
  } else if ((b0 & 0xf8) == 0xf0) {
    len = 4, cp = b0 & 0x07, min = 0x10000;
  } else {
    return 0;
  }
  if (s.size() - at < len) return 0;
  for (std::size_t i = 1; i < len; ++i) {
    if ((byte(at + i) & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (byte(at + i) & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return len;
}

/// True when s is well-formed UTF-8 as a whole.
inline bool is_valid_utf8(std::string_view s) noexcept {
  char32_t cp = 0;
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = utf8_sequence(s, i, cp);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

/// The bytes of s in lowercase hex, two digits each ("1.0\xff" -> "312e30ff").
inline std::string hex_bytes(std::string_view s) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * s.size());
  for (const unsigned char c : s) {
    out += digits[c >> 4];
    out += digits[c & 0x0f];
  }
  return out;
}

/// Text for a terminal, one line: printable UTF-8 passes; everything that could move the cursor,
/// end the line or start an escape sequence is escaped, so untrusted text cannot forge output:
/// backslash -> \\, tab/newline/carriage return -> \t \n \r, any other C0 byte, DEL and every
/// byte that is not part of well-formed UTF-8 -> \xNN (ESC is \x1b), and the C1 controls
/// U+0080..U+009F (which some terminals obey) -> \u0080..\u009f. Reversible: a backslash in the
/// output always starts an escape.
inline std::string escape_text(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  char buf[8];
  for (std::size_t i = 0; i < s.size();) {
    char32_t cp = 0;
    const std::size_t n = utf8_sequence(s, i, cp);
    if (n == 0 || cp < 0x20 || cp == 0x7f) {
      const auto c = static_cast<unsigned char>(s[i]);
      if (c == '\t') {
        out += "\\t";
      } else if (c == '\n') {
        out += "\\n";
      } else if (c == '\r') {
        out += "\\r";
      } else {
        std::snprintf(buf, sizeof buf, "\\x%02x", c);
        out += buf;
      }
      ++i;
      continue;
    }
    if (cp >= 0x80 && cp <= 0x9f) {
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(cp));
      out += buf;
    } else if (cp == '\\') {
      out += "\\\\";
    } else {
      out.append(s.substr(i, n));
    }
    i += n;
  }
  return out;
}

/// A JSON string literal (RFC 8259) that is always valid UTF-8: quote and backslash escaped,
/// C0 controls as \b \f \n \r \t or \u00XX, DEL and the C1 controls as \u007f..\u009f (legal
/// raw, escaped so that no terminal obeys them), and each byte that is not part of well-formed
/// UTF-8 replaced by U+FFFD (so the value is lossy exactly when is_valid_utf8(s) is false;
/// callers that need the bytes add them with hex_bytes, see `gpuplug list --help`).
inline std::string json_string(std::string_view s) {
  std::string out = "\"";
  out.reserve(s.size() + 2);
  char buf[8];
  for (std::size_t i = 0; i < s.size();) {
    char32_t cp = 0;
    const std::size_t n = utf8_sequence(s, i, cp);
    if (n == 0) {
      out += "\xef\xbf\xbd";  // U+FFFD REPLACEMENT CHARACTER, for this one byte
      ++i;
      continue;
    }
    switch (cp) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (cp < 0x20 || (cp >= 0x7f && cp <= 0x9f)) {
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(cp));
          out += buf;
        } else {
          out.append(s.substr(i, n));
        }
    }
    i += n;
  }
  return out + "\"";
}

/// `"key": "value"`, followed by `<sep>"key_bytes": "<hex>"` when value is not UTF-8 (json_string
/// then replaced its bad bytes with U+FFFD; the hex keeps them exactly). The JSON of `gpuplug
/// list` and `gpuplug modules`, documented in `gpuplug list --help`.
inline std::string json_member(std::string_view key, std::string_view value,
                               std::string_view sep = ", ") {
  std::string out = json_string(key) + ": " + json_string(value);
  if (!is_valid_utf8(value)) {
    out += std::string(sep) + json_string(std::string(key) + "_bytes") + ": " +
           json_string(hex_bytes(value));
  }
  return out;
}

}  // namespace gpuplug::support
