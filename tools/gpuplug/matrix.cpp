// SPDX-License-Identifier: Apache-2.0
// `gpuplug matrix [--markdown | --summary] [--messages] [--html OUT.html]
//                 [--baseline OLD.json]... [--allow-new-skips] RESULT.json...`
//
// Reads `gpuplug check --json` records (one per backend and machine), merges them into one table
// and prints it: plain text (default) or Markdown (--markdown, for a CI summary or a pull-request
// comment), or --summary: one row per backend@machine with its counts and the cases that did not
// pass (what `scripts/test` prints last); --messages adds, under the table, the message of every
// cell that did not pass;
// --html OUT.html also writes one self-contained page (no network: inline style and script)
// that filters rows by case name and by result. With --baseline, every cell is compared with the
// same case on the same backend@machine in the baseline records: a case that did not fail and
// now fails is a regression, and so is one that passed and is now skipped (a skipped case checks
// nothing) unless --allow-new-skips; one that failed and now passes is a fix; the exit status
// is 1 when anything regressed, so CI can gate on it.
#include "matrix.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>

#include "gpuplug/support/escape.hpp"
#include "gpuplug/support/regular_file.hpp"

#include "cli.hpp"

namespace gpuplug::tool {

namespace {

constexpr int exit_regressed = 1;
/// A results record of 66 cases is about 20 KB; this only stops a wrong file from being read
/// whole.
constexpr std::uint64_t max_results_bytes = std::uint64_t{64} << 20;

int usage_error(const std::string& message) { return tool::usage_error("matrix", message); }

void print_usage(std::ostream& os) {
  os << "usage: gpuplug matrix [--markdown | --summary] [--messages] [--html OUT.html]\n"
        "                      [--baseline OLD.json]... [--allow-new-skips] RESULT.json...\n"
        "Merges `gpuplug check --json` records (one per backend and machine) into one table:\n"
        "one row per case, one column per backend@machine. Cells: pass, FAIL, skip, xfail,\n"
        "XPASS, CRASH, TIMEOUT, or '-' when the case did not run there.\n"
        "  --markdown        a Markdown table (CI summaries, pull-request comments)\n"
        "  --summary         one row per backend@machine: counts, and the cases that failed\n"
        "  --messages        list the message of every cell that did not pass\n"
        "  --html OUT.html   also write a self-contained page, filterable by case and result\n"
        "  --baseline FILE   an earlier record to compare with (repeatable): cells that newly\n"
        "                    fail are marked 'regressed', cells that newly pass 'fixed'; a\n"
        "                    case that passed and is now skipped or xfail is 'regressed' too\n"
        "  --allow-new-skips a case that passed and is now skipped is no regression\n"
        "Exit status: 0 nothing regressed (always 0 without --baseline), 1 something regressed,\n"
        "2 usage error or bad input (not a results record, the same backend@machine twice).\n";
}

std::string cell_word(Verdict v) {
  switch (v) {
    case Verdict::passed:
      return "pass";
    case Verdict::failed:
      return "FAIL";
    case Verdict::skipped:
      return "skip";
    case Verdict::xfail:
      return "xfail";
    case Verdict::xpass:
      return "XPASS";
    case Verdict::crashed:
      return "CRASH";
    case Verdict::timed_out:
      return "TIMEOUT";
  }
  return "FAIL";
}

std::string change_suffix(Change c) {
  switch (c) {
    case Change::regressed:
      return " (regressed)";
    case Change::fixed:
      return " (fixed)";
    case Change::none:
      break;
  }
  return "";
}

/// Reads and parses every file; BadResults names the file.
std::vector<std::pair<RunRecord, std::string>> read_runs(const std::vector<std::string>& files) {
  std::vector<std::pair<RunRecord, std::string>> runs;
  for (const auto& file : files) {
    std::string why;
    const auto bytes = support::read_regular_file(file, max_results_bytes, why);
    if (!bytes) throw BadResults(support::escape_text(why));
    const std::string_view text(reinterpret_cast<const char*>(bytes->data()), bytes->size());
    runs.emplace_back(parse_results(text, support::escape_text(file)), file);
  }
  return runs;
}

struct Rendered {
  const Matrix& now;
  const Matrix* baseline;  // null without --baseline
  bool allow_new_skips = false;

  const CaseRecord* before(std::size_t row, std::size_t column) const {
    if (baseline == nullptr) return nullptr;
    const auto r = std::find(baseline->rows.begin(), baseline->rows.end(), now.rows[row]);
    const auto c =
        std::find(baseline->columns.begin(), baseline->columns.end(), now.columns[column]);
    if (r == baseline->rows.end() || c == baseline->columns.end()) return nullptr;
    return baseline->at(static_cast<std::size_t>(r - baseline->rows.begin()),
                        static_cast<std::size_t>(c - baseline->columns.begin()));
  }
  Change change(std::size_t row, std::size_t column) const {
    const CaseRecord* rec = now.at(row, column);
    if (rec == nullptr || baseline == nullptr) return Change::none;
    return compare(before(row, column), *rec, allow_new_skips);
  }
  std::string cell(std::size_t row, std::size_t column) const {
    const CaseRecord* rec = now.at(row, column);
    if (rec == nullptr) return "-";
    return cell_word(rec->verdict) + change_suffix(change(row, column));
  }
};

std::string markdown_text(std::string_view s) {
  std::string out;
  for (const char ch : support::escape_text(s)) {
    if (ch == '\\' || ch == '|' || ch == '*' || ch == '`' || ch == '<' || ch == '>' || ch == '[')
      out += '\\';
    out += ch;
  }
  return out;
}

void print_text(const Rendered& m, std::ostream& os) {
  std::vector<std::size_t> width(m.now.columns.size() + 1, 4);
  for (const auto& r : m.now.rows) width[0] = std::max(width[0], support::escape_text(r).size());
  for (std::size_t c = 0; c < m.now.columns.size(); ++c) {
    width[c + 1] = std::max(width[c + 1], support::escape_text(m.now.columns[c]).size());
    for (std::size_t r = 0; r < m.now.rows.size(); ++r)
      width[c + 1] = std::max(width[c + 1], m.cell(r, c).size());
  }
  // Every cell padded to its column's width but the last of a line (no trailing blanks).
  const std::size_t last = m.now.columns.size();
  const auto line = [&](const std::vector<std::string>& cells) {
    std::string text;
    for (std::size_t i = 0; i < cells.size(); ++i) {
      std::string cell = cells[i];
      if (i < last) cell.resize(std::max(cell.size(), width[i]), ' ');
      text += (i == 0 ? "" : "  ") + cell;
    }
    os << text << "\n";
  };
  std::vector<std::string> head = {"case"};
  for (const auto& c : m.now.columns) head.push_back(support::escape_text(c));
  line(head);
  for (std::size_t r = 0; r < m.now.rows.size(); ++r) {
    std::vector<std::string> cells = {support::escape_text(m.now.rows[r])};
    for (std::size_t c = 0; c < m.now.columns.size(); ++c) cells.push_back(m.cell(r, c));
    line(cells);
  }
}

void print_markdown(const Rendered& m, std::ostream& os) {
  os << "| case |";
  for (const auto& c : m.now.columns) os << " " << markdown_text(c) << " |";
  os << "\n|---|";
  for (std::size_t c = 0; c < m.now.columns.size(); ++c) os << "---|";
  os << "\n";
  for (std::size_t r = 0; r < m.now.rows.size(); ++r) {
    os << "| " << markdown_text(m.now.rows[r]) << " |";
    for (std::size_t c = 0; c < m.now.columns.size(); ++c) {
      const CaseRecord* rec = m.now.at(r, c);
      const bool loud =
          rec != nullptr && (is_failure(rec->verdict) || m.change(r, c) != Change::none);
      os << " " << (loud ? "**" + m.cell(r, c) + "**" : m.cell(r, c)) << " |";
    }
    os << "\n";
  }
}

/// One row per column: its counts by verdict and the names of the cases that failed (or were
/// not run, for an unavailable backend, with the reason).
void print_summary(const Rendered& m, const std::vector<RunRecord>& runs, std::ostream& os) {
  std::size_t width = 7;
  for (const auto& c : m.now.columns) width = std::max(width, support::escape_text(c).size());
  const auto pad = [&](std::string s) {
    s.resize(std::max(s.size(), width), ' ');
    return s;
  };
  os << pad("backend") << "  passed  failed  skipped  note\n";
  for (std::size_t c = 0; c < m.now.columns.size(); ++c) {
    std::size_t passed = 0, failed = 0, skipped = 0;
    std::string bad, known;
    for (std::size_t r = 0; r < m.now.rows.size(); ++r) {
      const CaseRecord* rec = m.now.at(r, c);
      if (rec == nullptr) continue;
      if (rec->verdict == Verdict::passed) {
        ++passed;
      } else if (is_failure(rec->verdict)) {
        ++failed;
        bad += (bad.empty() ? "" : ", ") + m.now.rows[r] + " (" + cell_word(rec->verdict) +
               change_suffix(m.change(r, c)) + ")";
      } else {
        ++skipped;
        if (rec->verdict == Verdict::xfail) known += (known.empty() ? "" : ", ") + m.now.rows[r];
      }
    }
    std::string note;
    if (c < runs.size() && !runs[c].available) note = "not run: " + runs[c].unavailable_reason;
    if (!bad.empty()) note += (note.empty() ? "" : "; ") + std::string("failed: ") + bad;
    if (!known.empty()) note += (note.empty() ? "" : "; ") + std::string("xfail: ") + known;
    char counts[64];
    std::snprintf(counts, sizeof counts, "  %6zu  %6zu  %7zu  ", passed, failed, skipped);
    std::string line =
        pad(support::escape_text(m.now.columns[c])) + counts + support::escape_text(note);
    while (!line.empty() && line.back() == ' ') line.pop_back();
    os << line << "\n";
  }
}

void print_messages(const Rendered& m, bool markdown, std::ostream& os) {
  bool any = false;
  for (std::size_t r = 0; r < m.now.rows.size(); ++r) {
    for (std::size_t c = 0; c < m.now.columns.size(); ++c) {
      const CaseRecord* rec = m.now.at(r, c);
      if (rec == nullptr || rec->verdict == Verdict::passed) continue;
      if (!any) os << (markdown ? "\n### Messages\n\n" : "\nmessages:\n");
      any = true;
      const std::string head = m.now.rows[r] + " @ " + m.now.columns[c] + ": " + m.cell(r, c);
      if (markdown) {
        os << "- " << markdown_text(head) << ": " << markdown_text(rec->message) << "\n";
      } else {
        os << "  " << support::escape_text(head) << ": " << support::escape_text(rec->message)
           << "\n";
      }
    }
  }
}

std::string css_class(const CaseRecord* rec, Change change) {
  if (rec == nullptr) return "none";
  std::string cls(to_string(rec->verdict));
  if (change == Change::regressed) cls += " regressed";
  if (change == Change::fixed) cls += " fixed";
  return cls;
}

void write_html(const Rendered& m, std::ostream& os) {
  os << R"(<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>gpuplug test matrix</title>
<style>
body{font:14px system-ui,sans-serif;margin:1.5em}
table{border-collapse:collapse}th,td{border:1px solid #ccc;padding:3px 8px;text-align:left}
th{background:#f3f3f3;position:sticky;top:0}
td.passed{background:#e6f4e6}td.failed,td.crashed,td.timed_out,td.xpass{background:#f8d7d7;font-weight:bold}
td.skipped,td.xfail{background:#f4f4e0}td.none{color:#999}
td.regressed{outline:3px solid #c00}td.fixed{outline:3px solid #090}
#controls{margin-bottom:1em}#controls label{margin-right:1em}
</style></head><body>
<h1>gpuplug test matrix</h1>
<div id="controls"><input id="filter" placeholder="filter cases" size="30">
)";
  for (const char* v : {"passed", "failed", "skipped", "xfail", "xpass", "crashed", "timed_out"})
    os << "<label><input type=\"checkbox\" class=\"show\" value=\"" << v << "\" checked> " << v
       << "</label>";
  os << "<label><input type=\"checkbox\" id=\"changed\"> only changes against the baseline"
        "</label></div>\n";
  os << "<table id=\"matrix\"><thead><tr><th>case</th>";
  for (const auto& c : m.now.columns) os << "<th>" << xml_text(c) << "</th>";
  os << "</tr></thead><tbody>\n";
  for (std::size_t r = 0; r < m.now.rows.size(); ++r) {
    os << "<tr><td class=\"case\">" << xml_text(m.now.rows[r]) << "</td>";
    for (std::size_t c = 0; c < m.now.columns.size(); ++c) {
      const CaseRecord* rec = m.now.at(r, c);
      const Change ch = m.change(r, c);
      os << "<td class=\"" << css_class(rec, ch) << "\"";
      if (rec != nullptr && !rec->message.empty())
        os << " title=\"" << xml_text(rec->message) << "\"";
      os << ">" << xml_text(m.cell(r, c)) << "</td>";
    }
    os << "</tr>\n";
  }
  os << "</tbody></table>\n<p id=\"count\"></p>\n";
  os << R"(<script>
(function(){
  var rows=[].slice.call(document.querySelectorAll('#matrix tbody tr'));
  function apply(){
    var text=document.getElementById('filter').value.toLowerCase();
    var show={};[].forEach.call(document.querySelectorAll('input.show'),function(b){show[b.value]=b.checked;});
    var changed=document.getElementById('changed').checked, n=0;
    rows.forEach(function(tr){
      var cells=[].slice.call(tr.querySelectorAll('td')).slice(1);
      var ok=tr.cells[0].textContent.toLowerCase().indexOf(text)>=0;
      ok=ok&&cells.some(function(td){return td.classList.length&&show[td.classList[0]];});
      if(changed)ok=ok&&cells.some(function(td){return td.classList.contains('regressed')||td.classList.contains('fixed');});
      tr.style.display=ok?'':'none';if(ok)n++;
    });
    document.getElementById('count').textContent=n+' of '+rows.length+' cases shown';
  }
  // A link can carry a view: #filter=TEXT fills the filter, #changed ticks "only changes".
  var hash=decodeURIComponent(location.hash.slice(1));
  if(hash.indexOf('filter=')===0)document.getElementById('filter').value=hash.slice(7);
  if(hash==='changed')document.getElementById('changed').checked=true;
  document.getElementById('filter').addEventListener('input',apply);
  [].forEach.call(document.querySelectorAll('#controls input[type=checkbox]'),function(b){b.addEventListener('change',apply);});
  apply();
})();
</script>
</body></html>
)";
}

}  // namespace

const CaseRecord* Matrix::at(std::size_t row, std::size_t column) const {
  const auto it = cells.find({row, column});
  return it == cells.end() ? nullptr : &it->second;
}

Matrix merge(std::span<const std::pair<RunRecord, std::string>> runs) {
  Matrix m;
  std::map<std::string, std::string> column_source;  // column -> the file it came from
  std::map<std::string, std::string> versions;       // gpuplug version -> first file
  for (const auto& [run, source] : runs) {
    const std::string column = run.column();
    if (const auto it = column_source.find(column); it != column_source.end()) {
      throw BadResults(support::escape_text(source) + " and " + support::escape_text(it->second) +
                       " both hold " + support::escape_text(column) +
                       " (the same backend on the same machine twice): give each run once");
    }
    column_source.emplace(column, source);
    versions.emplace(run.gpuplug_version, source);
    const std::size_t c = m.columns.size();
    m.columns.push_back(column);
    for (const auto& rec : run.cases) {
      auto r = std::find(m.rows.begin(), m.rows.end(), rec.name);
      if (r == m.rows.end()) r = m.rows.insert(m.rows.end(), rec.name);
      const auto row = static_cast<std::size_t>(r - m.rows.begin());
      if (!m.cells.emplace(std::pair{row, c}, rec).second) {
        throw BadResults(support::escape_text(source) + ": case " + support::escape_text(rec.name) +
                         " appears twice");
      }
    }
  }
  if (versions.size() > 1) {
    std::string note = "the records come from different gpuplug versions:";
    for (const auto& [version, source] : versions)
      note += " " + support::escape_text(version) + " (" + support::escape_text(source) + ")";
    m.notes.push_back(note + "; a case that exists in one version only shows '-' elsewhere");
  }
  return m;
}

Change compare(const CaseRecord* before, const CaseRecord& now, bool allow_new_skips) noexcept {
  if (before == nullptr) return Change::none;
  const bool failed_before = is_failure(before->verdict);
  const bool fails_now = is_failure(now.verdict);
  if (!failed_before && fails_now) return Change::regressed;
  // A skipped (or known-failing) case checks nothing: a pass turned into one is a lost check.
  const bool skipped_now = now.verdict == Verdict::skipped || now.verdict == Verdict::xfail;
  if (before->verdict == Verdict::passed && skipped_now && !allow_new_skips)
    return Change::regressed;
  if (failed_before && now.verdict == Verdict::passed) return Change::fixed;
  return Change::none;
}

int run_matrix(std::span<const std::string_view> args) {
  bool markdown = false, messages = false, summary = false, allow_new_skips = false;
  std::optional<std::string> html;
  std::vector<std::string> files, baselines;
  CommandLine cli("matrix", print_usage);
  cli.flag("--markdown", markdown);
  cli.flag("--summary", summary);
  cli.flag("--messages", messages);
  cli.value("--html", html, "a file to write");
  cli.values("--baseline", baselines, "a results file");
  cli.flag("--allow-new-skips", allow_new_skips);
  cli.positionals("results", files);
  if (const auto status = cli.parse(args)) return *status;
  if (files.empty()) return usage_error("no results files (RESULT.json from gpuplug check --json)");
  if (markdown && summary) return usage_error("--markdown and --summary exclude each other");

  Matrix now, before;
  std::vector<RunRecord> runs;  // in column order, for --summary's unavailable notes
  try {
    const auto read = read_runs(files);
    for (const auto& [run, source] : read) runs.push_back(run);
    now = merge(read);
    if (!baselines.empty()) before = merge(read_runs(baselines));
  } catch (const BadResults& e) {
    std::cerr << "gpuplug matrix: " << e.what() << "\n";
    return exit_usage;
  }
  const Rendered view{now, baselines.empty() ? nullptr : &before, allow_new_skips};
  for (const auto& n : now.notes) std::cout << (markdown ? "> note: " : "note: ") << n << "\n";
  if (markdown) {
    print_markdown(view, std::cout);
  } else if (summary) {
    print_summary(view, runs, std::cout);
  } else {
    print_text(view, std::cout);
  }
  if (messages) print_messages(view, markdown, std::cout);

  std::size_t failing = 0, regressed = 0, fixed = 0;
  for (std::size_t r = 0; r < now.rows.size(); ++r) {
    for (std::size_t c = 0; c < now.columns.size(); ++c) {
      const CaseRecord* rec = now.at(r, c);
      if (rec == nullptr) continue;
      failing += is_failure(rec->verdict) ? 1 : 0;
      const Change ch = view.change(r, c);
      regressed += ch == Change::regressed ? 1 : 0;
      fixed += ch == Change::fixed ? 1 : 0;
    }
  }
  std::cout << (markdown ? "\n" : "") << now.rows.size() << " cases on " << now.columns.size()
            << " backends: " << failing << " failing cells";
  if (!baselines.empty())
    std::cout << "; against the baseline: " << regressed << " regressed, " << fixed << " fixed";
  std::cout << "\n";

  if (html) {
    std::ofstream out(*html, std::ios::binary | std::ios::trunc);
    write_html(view, out);
    out.close();
    if (!out) {
      std::cerr << "gpuplug matrix: cannot write '" << support::escape_text(*html) << "'\n";
      return exit_usage;
    }
  }
  return regressed > 0 ? exit_regressed : 0;
}

}  // namespace gpuplug::tool
