// SPDX-License-Identifier: Apache-2.0
#include "results.hpp"

#include <sys/utsname.h>
#include <unistd.h>

#include <array>
#include <boost/property_tree/json_parser.hpp>
#include <boost/property_tree/ptree.hpp>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <sstream>

#include "gpuplug/support/escape.hpp"

namespace gpuplug::tool {

namespace {

using support::json_member;
using support::json_string;

constexpr std::array<std::pair<Verdict, std::string_view>, 7> verdict_names = {{
    {Verdict::passed, "passed"},
    {Verdict::failed, "failed"},
    {Verdict::skipped, "skipped"},
    {Verdict::xfail, "xfail"},
    {Verdict::xpass, "xpass"},
    {Verdict::crashed, "crashed"},
    {Verdict::timed_out, "timed_out"},
}};

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", std::isfinite(s) && s >= 0 ? s : 0.0);
  return buf;
}

}  // namespace

std::string xml_text(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    char32_t cp = 0;
    const std::size_t n = support::utf8_sequence(s, i, cp);
    if (n == 0 || (cp < 0x20 && cp != '\t' && cp != '\n' && cp != '\r') || cp == 0xfffe ||
        cp == 0xffff) {
      out += "\xef\xbf\xbd";
      i += n == 0 ? 1 : n;
      continue;
    }
    switch (cp) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        out.append(s.substr(i, n));
    }
    i += n;
  }
  return out;
}

namespace {

using boost::property_tree::ptree;

[[noreturn]] void bad(const std::string& source, const std::string& why) {
  throw BadResults(source + ": " + why);
}

std::string required_string(const ptree& t, const std::string& key, const std::string& source,
                            std::string_view where) {
  const auto v = t.get_optional<std::string>(key);
  if (!v) bad(source, std::string(where) + "has no \"" + key + "\"");
  return *v;
}

std::string optional_string(const ptree& t, const std::string& key) {
  return t.get<std::string>(key, "");
}

}  // namespace

std::string_view to_string(Verdict v) noexcept {
  for (const auto& [verdict, name] : verdict_names)
    if (verdict == v) return name;
  return "failed";
}

std::optional<Verdict> verdict_named(std::string_view name) noexcept {
  for (const auto& [verdict, n] : verdict_names)
    if (n == name) return verdict;
  return std::nullopt;
}

bool is_failure(Verdict v) noexcept {
  return v == Verdict::failed || v == Verdict::xpass || v == Verdict::crashed ||
         v == Verdict::timed_out;
}

Machine Machine::here() {
  Machine m;
  struct utsname u {};
  if (::uname(&u) == 0) {
    m.hostname = u.nodename;
    m.os = std::string(u.sysname) + " " + u.release;
    m.arch = u.machine;
  }
  if (m.hostname.empty()) m.hostname = "unknown";
  return m;
}

std::string utc_now_iso8601() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string to_json(const RunRecord& run) {
  std::size_t counts[3] = {0, 0, 0};  // passed, failed, skipped as `check` counts them
  for (const auto& c : run.cases) {
    if (c.verdict == Verdict::passed) {
      ++counts[0];
    } else if (is_failure(c.verdict)) {
      ++counts[1];
    } else {
      ++counts[2];
    }
  }
  std::string out = "{\n";
  out += "  \"schema\": " + std::to_string(results_schema) + ",\n";
  out += "  \"tool\": \"gpuplug check\",\n";
  out += "  " + json_member("gpuplug_version", run.gpuplug_version) + ",\n";
  out += "  " + json_member("abi_version", run.abi_version) + ",\n";
  out += "  " + json_member("started", run.started) + ",\n";
  out += "  \"machine\": {" + json_member("hostname", run.machine.hostname) + ", " +
         json_member("os", run.machine.os) + ", " + json_member("arch", run.machine.arch) + "},\n";
  out += "  \"backend\": {\n";
  out += "    " + json_member("name", run.backend) + ",\n";
  out += "    " + json_member("plugin", run.plugin) + ",\n";
  out += "    " + json_member("plugin_file", run.plugin_file) + ",\n";
  out += "    \"available\": " + std::string(run.available ? "true" : "false") + ",\n";
  out += "    " + json_member("unavailable_reason", run.unavailable_reason) + ",\n";
  const DeviceRecord& d = run.device;
  out += "    \"device\": {" + json_member("name", d.name) + ", " + json_member("uuid", d.uuid) +
         ", " + json_member("pci", d.pci) + ", " + json_member("class", d.device_class) + ", " +
         json_member("driver_version", d.driver_version) + ", " +
         json_member("runtime_version", d.runtime_version) + "}\n";
  out += "  },\n";
  out += "  \"options\": {\"isolate\": " + std::string(run.isolated ? "true" : "false") +
         ", \"timeout_s\": " + std::to_string(run.timeout_s) + "},\n";
  out += "  \"cases\": [";
  bool first = true;
  for (const auto& c : run.cases) {
    out += first ? "\n" : ",\n";
    first = false;
    out += "    {" + json_member("name", c.name) +
           ", \"status\": " + json_string(to_string(c.verdict)) +
           ", \"seconds\": " + seconds_text(c.seconds) + ", " + json_member("summary", c.summary) +
           ", " + json_member("message", c.message) + ", " +
           json_member("known_failure", c.known_failure) + "}";
  }
  out += first ? "],\n" : "\n  ],\n";
  out += "  \"summary\": {\"passed\": " + std::to_string(counts[0]) +
         ", \"failed\": " + std::to_string(counts[1]) +
         ", \"skipped\": " + std::to_string(counts[2]) + "}\n";
  out += "}\n";
  return out;
}

std::string to_junit(const RunRecord& run) {
  std::size_t failures = 0, skipped = 0;
  double total = 0;
  for (const auto& c : run.cases) {
    failures += is_failure(c.verdict) ? 1 : 0;
    skipped += (c.verdict == Verdict::skipped || c.verdict == Verdict::xfail) ? 1 : 0;
    total += c.seconds;
  }
  const std::string suite = xml_text(run.column());
  std::ostringstream os;
  os << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  // <testsuites> carries no "skipped": the Jenkins/Surefire schema that GitLab and GitHub
  // reporters follow does not allow it there (it does on <testsuite>).
  os << "<testsuites name=\"gpuplug check\" tests=\"" << run.cases.size() << "\" failures=\""
     << failures << "\" errors=\"0\" time=\"" << seconds_text(total) << "\">\n";
  os << "  <testsuite name=\"" << suite << "\" tests=\"" << run.cases.size() << "\" failures=\""
     << failures << "\" errors=\"0\" skipped=\"" << skipped << "\" time=\"" << seconds_text(total)
     << "\" timestamp=\"" << xml_text(run.started) << "\" hostname=\""
     << xml_text(run.machine.hostname) << "\">\n";
  os << "    <properties>\n";
  const std::pair<std::string_view, const std::string*> props[] = {
      {"gpuplug_version", &run.gpuplug_version},
      {"abi_version", &run.abi_version},
      {"plugin", &run.plugin},
      {"plugin_file", &run.plugin_file},
      {"device", &run.device.name},
      {"device_uuid", &run.device.uuid},
      {"device_pci", &run.device.pci},
      {"driver_version", &run.device.driver_version},
      {"runtime_version", &run.device.runtime_version},
      {"os", &run.machine.os}};
  for (const auto& [name, value] : props) {
    os << "      <property name=\"" << name << "\" value=\"" << xml_text(*value) << "\"/>\n";
  }
  os << "    </properties>\n";
  for (const auto& c : run.cases) {
    os << "    <testcase classname=\"" << suite << "\" name=\"" << xml_text(c.name) << "\" time=\""
       << seconds_text(c.seconds) << "\"";
    const std::string message = xml_text(c.message);
    if (is_failure(c.verdict)) {
      os << ">\n      <failure type=\"" << to_string(c.verdict) << "\" message=\"" << message
         << "\">" << message << "</failure>\n    </testcase>\n";
    } else if (c.verdict == Verdict::skipped || c.verdict == Verdict::xfail) {
      const std::string why =
          c.verdict == Verdict::xfail ? "known failure (xfail): " + message : message;
      os << ">\n      <skipped message=\"" << why << "\"/>\n    </testcase>\n";
    } else {
      os << "/>\n";
    }
  }
  if (!run.available) {
    os << "    <system-out>backend unavailable: " << xml_text(run.unavailable_reason)
       << "</system-out>\n";
  }
  os << "  </testsuite>\n</testsuites>\n";
  return os.str();
}

RunRecord parse_results(std::string_view text, const std::string& source) {
  ptree root;
  try {
    std::istringstream in{std::string(text)};
    boost::property_tree::read_json(in, root);
  } catch (const boost::property_tree::json_parser_error& e) {
    bad(source, "not JSON: line " + std::to_string(e.line()) + ": " + e.message());
  }
  const std::string schema = required_string(root, "schema", source, "the document ");
  if (schema != std::to_string(results_schema)) {
    bad(source, "schema " + support::escape_text(schema) +
                    ", but this gpuplug reads results of schema " + std::to_string(results_schema) +
                    " (write them again with this version)");
  }
  RunRecord run;
  run.gpuplug_version = optional_string(root, "gpuplug_version");
  run.abi_version = optional_string(root, "abi_version");
  run.started = optional_string(root, "started");
  run.machine.hostname = required_string(root, "machine.hostname", source, "the document ");
  run.machine.os = optional_string(root, "machine.os");
  run.machine.arch = optional_string(root, "machine.arch");
  run.backend = required_string(root, "backend.name", source, "the document ");
  run.plugin = optional_string(root, "backend.plugin");
  run.plugin_file = optional_string(root, "backend.plugin_file");
  run.available = root.get<std::string>("backend.available", "true") == "true";
  run.unavailable_reason = optional_string(root, "backend.unavailable_reason");
  run.device.name = optional_string(root, "backend.device.name");
  run.device.uuid = optional_string(root, "backend.device.uuid");
  run.device.pci = optional_string(root, "backend.device.pci");
  run.device.device_class = optional_string(root, "backend.device.class");
  run.device.driver_version = optional_string(root, "backend.device.driver_version");
  run.device.runtime_version = optional_string(root, "backend.device.runtime_version");
  const auto cases = root.get_child_optional("cases");
  if (!cases || (cases->empty() && !cases->data().empty()))
    bad(source, "the document has no \"cases\" array");
  std::size_t index = 0;
  for (const auto& [key, c] : *cases) {
    const std::string where = "case " + std::to_string(index++) + " ";
    if (!key.empty()) bad(source, "\"cases\" is not an array");
    CaseRecord r;
    r.name = required_string(c, "name", source, where);
    const std::string status = required_string(c, "status", source, where);
    const auto verdict = verdict_named(status);
    if (!verdict) {
      bad(source, where + "(" + support::escape_text(r.name) + ") has status '" +
                      support::escape_text(status) +
                      "', not one of passed, failed, skipped, "
                      "xfail, xpass, crashed, timed_out");
    }
    r.verdict = *verdict;
    const std::string secs = c.get<std::string>("seconds", "0");
    double s = 0;
    const auto [end, ec] = std::from_chars(secs.data(), secs.data() + secs.size(), s);
    if (ec != std::errc{} || end != secs.data() + secs.size() || !std::isfinite(s) || s < 0)
      bad(source, where + "(" + support::escape_text(r.name) + ") has a bad \"seconds\"");
    r.seconds = s;
    r.summary = optional_string(c, "summary");
    r.message = optional_string(c, "message");
    r.known_failure = optional_string(c, "known_failure");
    run.cases.push_back(std::move(r));
  }
  return run;
}

}  // namespace gpuplug::tool
