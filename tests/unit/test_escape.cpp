// SPDX-License-Identifier: Apache-2.0
// gpuplug::support escape functions: no untrusted byte reaches a terminal or a JSON
// document unescaped, and JSON output is always valid UTF-8.
#define BOOST_TEST_MODULE escape
#include <boost/test/unit_test.hpp>

#include <gpuplug/support/escape.hpp>

#include <string>
#include <string_view>

using gpuplug::support::escape_text;
using gpuplug::support::hex_bytes;
using gpuplug::support::is_valid_utf8;
using gpuplug::support::json_string;
using namespace std::string_view_literals;

BOOST_AUTO_TEST_CASE(utf8_validation) {
  BOOST_TEST(is_valid_utf8(""));
  BOOST_TEST(is_valid_utf8("plain ascii"));
  BOOST_TEST(is_valid_utf8("gr\xc3\xbc\xc3\x9f \xe2\x82\xac \xf0\x9f\x98\x80"));  // ü ß € 😀
  BOOST_TEST(!is_valid_utf8("caf\xe9"));              // Latin-1 é
  BOOST_TEST(!is_valid_utf8("\x80"));                 // stray continuation
  BOOST_TEST(!is_valid_utf8("\xe2\x82"));             // truncated
  BOOST_TEST(!is_valid_utf8("\xc0\xaf"));             // overlong '/'
  BOOST_TEST(!is_valid_utf8("\xed\xa0\x80"));         // surrogate U+D800
  BOOST_TEST(!is_valid_utf8("\xf4\x90\x80\x80"));     // past U+10FFFF
  BOOST_TEST(!is_valid_utf8("\xff"));
  BOOST_TEST(is_valid_utf8("nul\0inside"sv));
}

BOOST_AUTO_TEST_CASE(text_escapes_controls_so_no_line_can_be_forged) {
  BOOST_TEST(escape_text("1.0\r\n[host] available") == "1.0\\r\\n[host] available");
  BOOST_TEST(escape_text("\x1b[31mred\x1b[0m") == "\\x1b[31mred\\x1b[0m");
  BOOST_TEST(escape_text("a\tb\x7f" "c\0d"sv) == "a\\tb\\x7fc\\x00d");
  BOOST_TEST(escape_text("\xc2\x9b" "31m") == "\\u009b31m");   // C1 CSI as UTF-8
  BOOST_TEST(escape_text("\x9b" "31m") == "\\x9b31m");         // C1 CSI as a raw byte
  BOOST_TEST(escape_text("caf\xe9") == "caf\\xe9");            // Latin-1 file name
  BOOST_TEST(escape_text("back\\slash") == "back\\\\slash");   // unambiguous
  BOOST_TEST(escape_text("gr\xc3\xbc\xc3\x9f \xe2\x82\xac") == "gr\xc3\xbc\xc3\x9f \xe2\x82\xac");
  // Every byte value: the output never holds a control byte and is always UTF-8.
  for (int b = 0; b < 256; ++b) {
    const std::string in(1, static_cast<char>(b));
    const std::string out = escape_text(in);
    BOOST_TEST_INFO("byte " << b);
    BOOST_TEST(is_valid_utf8(out));
    for (const unsigned char c : out) BOOST_TEST_REQUIRE((c >= 0x20 && c != 0x7f));
  }
}

BOOST_AUTO_TEST_CASE(json_is_valid_utf8_with_invalid_bytes_replaced) {
  BOOST_TEST(json_string("plain") == "\"plain\"");
  BOOST_TEST(json_string("q\"b\\") == "\"q\\\"b\\\\\"");
  BOOST_TEST(json_string("1.0\r\n\x1b") == "\"1.0\\r\\n\\u001b\"");
  BOOST_TEST(json_string("\x7f\xc2\x85") == "\"\\u007f\\u0085\"");
  BOOST_TEST(json_string("caf\xe9") == "\"caf\xef\xbf\xbd\"");          // U+FFFD for the byte
  BOOST_TEST(json_string("\xe2\x82\xe2\x82\xac") == "\"\xef\xbf\xbd\xef\xbf\xbd\xe2\x82\xac\"");
  BOOST_TEST(json_string("\xe2\x82\xac") == "\"\xe2\x82\xac\"");         // valid passes
  for (int b = 0; b < 256; ++b) {
    BOOST_TEST_INFO("byte " << b);
    const std::string out = json_string(std::string(1, static_cast<char>(b)) + "x\xff");
    BOOST_TEST(is_valid_utf8(out));
    for (const unsigned char c : out) BOOST_TEST_REQUIRE(c >= 0x20);
  }
  BOOST_TEST(hex_bytes("1.\xff") == "312eff");
  BOOST_TEST(hex_bytes("") == "");
}
