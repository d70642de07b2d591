// SPDX-License-Identifier: Apache-2.0
#include "results.hpp"

#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <sstream>

#include "gpuplug/support/escape.hpp"
#include "gpuplug/support/json.hpp"

namespace gpuplug::tool {

namespace {

namespace json = support::json;

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

[[noreturn]] void bad(const std::string& source, const std::string& why) {
  throw BadResults(source + ": " + why);
}

/// The string at `path` ("backend.device.name"), or nullptr when a step is missing or the value
/// is not a string.
const std::string* string_at(const json::value& t, std::string_view path) {
  const json::value* v = &t;
  for (std::size_t at = 0; v && at <= path.size();) {
    const std::size_t dot = std::min(path.find('.', at), path.size());
    v = json::member(*v, path.substr(at, dot - at));
    at = dot + 1;
  }
  return v && v->is_string() ? &v->get_ref<const std::string&>() : nullptr;
}

std::string required_string(const json::value& t, std::string_view path, const std::string& source,
                            std::string_view where) {
  const std::string* v = string_at(t, path);
  if (!v) bad(source, std::string(where) + "has no \"" + std::string(path) + "\"");
  return *v;
}

std::string optional_string(const json::value& t, std::string_view path) {
  const std::string* v = string_at(t, path);
  return v ? *v : std::string();
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
  json::value doc = {{"schema", results_schema}, {"tool", "gpuplug check"}};
  json::set_text(doc, "gpuplug_version", run.gpuplug_version);
  json::set_text(doc, "abi_version", run.abi_version);
  json::set_text(doc, "started", run.started);
  json::value& machine = doc["machine"] = json::value::object();
  json::set_text(machine, "hostname", run.machine.hostname);
  json::set_text(machine, "os", run.machine.os);
  json::set_text(machine, "arch", run.machine.arch);
  json::value& backend = doc["backend"] = json::value::object();
  json::set_text(backend, "name", run.backend);
  json::set_text(backend, "plugin", run.plugin);
  json::set_text(backend, "plugin_file", run.plugin_file);
  backend["available"] = run.available;
  json::set_text(backend, "unavailable_reason", run.unavailable_reason);
  const DeviceRecord& d = run.device;
  json::value& device = backend["device"] = json::value::object();
  json::set_text(device, "name", d.name);
  json::set_text(device, "uuid", d.uuid);
  json::set_text(device, "pci", d.pci);
  json::set_text(device, "class", d.device_class);
  json::set_text(device, "driver_version", d.driver_version);
  json::set_text(device, "runtime_version", d.runtime_version);
  doc["options"] = {{"isolate", run.isolated}, {"timeout_s", run.timeout_s}};
  json::value& cases = doc["cases"] = json::value::array();
  for (const auto& c : run.cases) {
    json::value record = json::value::object();
    json::set_text(record, "name", c.name);
    record["status"] = std::string(to_string(c.verdict));
    // Milliseconds are what a reader of the record can use; more digits are noise.
    const double seconds = std::isfinite(c.seconds) && c.seconds >= 0 ? c.seconds : 0.0;
    record["seconds"] = std::round(seconds * 1000) / 1000;
    json::set_text(record, "summary", c.summary);
    json::set_text(record, "message", c.message);
    json::set_text(record, "known_failure", c.known_failure);
    cases.push_back(std::move(record));
  }
  doc["summary"] = {{"passed", counts[0]}, {"failed", counts[1]}, {"skipped", counts[2]}};
  return json::dump(doc, json::layout::document) + "\n";
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
  std::string error;
  const std::optional<json::value> parsed = json::parse(text, error);
  if (!parsed) bad(source, "not JSON: " + error);
  const json::value& root = *parsed;
  const json::value* schema_value = json::member(root, "schema");
  if (!schema_value) bad(source, "the document has no \"schema\"");
  const std::string schema = json::dump(*schema_value, json::layout::one_line);
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
  const json::value* backend = json::member(root, "backend");
  const json::value* available = backend ? json::member(*backend, "available") : nullptr;
  run.available = !(available && available->is_boolean() && !available->get<bool>());
  run.unavailable_reason = optional_string(root, "backend.unavailable_reason");
  run.device.name = optional_string(root, "backend.device.name");
  run.device.uuid = optional_string(root, "backend.device.uuid");
  run.device.pci = optional_string(root, "backend.device.pci");
  run.device.device_class = optional_string(root, "backend.device.class");
  run.device.driver_version = optional_string(root, "backend.device.driver_version");
  run.device.runtime_version = optional_string(root, "backend.device.runtime_version");
  const json::value* cases = json::member(root, "cases");
  if (!cases || !cases->is_array()) bad(source, "the document has no \"cases\" array");
  std::size_t index = 0;
  for (const json::value& c : *cases) {
    const std::string where = "case " + std::to_string(index++) + " ";
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
    const json::value* secs = json::member(c, "seconds");
    const double s = secs && secs->is_number() ? secs->get<double>() : secs ? -1.0 : 0.0;
    if (!std::isfinite(s) || s < 0)
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
