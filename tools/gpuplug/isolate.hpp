// SPDX-License-Identifier: Apache-2.0
// `gpuplug check --isolate`: runs one child process with a time limit and collects, bounded, what
// it says. The check-specific part (which case, the result format) stays in check.cpp.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

namespace gpuplug::tool {

/// The descriptor the child writes its result record to (a pipe, dup2'ed there by run_child).
inline constexpr int child_result_fd = 3;
/// What run_child keeps at most: the result record (more is a defect, not read further), and the
/// tail of the child's stdout and stderr (older bytes are dropped, and output_truncated is set).
inline constexpr std::size_t max_child_result_bytes = 64 * 1024;
inline constexpr std::size_t max_child_output_bytes = 16 * 1024;
/// How long a timed-out child has between SIGTERM and SIGKILL.
inline constexpr std::chrono::seconds child_kill_grace{2};

struct ChildRun {
  std::string spawn_error;  // non-empty: the child never started (the reason)
  bool timed_out = false;   // killed by us at the deadline (then wait_status says how it died)
  int wait_status = 0;      // waitpid's
  std::string result;       // what it wrote to child_result_fd
  bool result_overflow = false;
  std::string output;  // the last max_child_output_bytes of its stdout and stderr, interleaved
  bool output_truncated = false;
  std::chrono::duration<double> elapsed{};
};

/// The option run_child appends, with the result pipe's inode number as its value, so that the
/// child can tell that its descriptor 3 is that pipe (is_result_pipe) and not whatever a caller
/// happened to leave open as 3 (ctest does).
inline constexpr std::string_view result_pipe_option = "--result-pipe";

/// Runs this very program (/proc/self/exe, never a PATH lookup, never a shell) with `args`
/// (args[0] is its argv[0]) followed by result_pipe_option and its value: stdin from /dev/null,
/// stdout and stderr into one pipe, and a pipe on child_result_fd. `timeout` zero means no limit;
/// past it the child gets SIGTERM, then SIGKILL after child_kill_grace, and is reaped. Returns once
/// the child is reaped (output that grandchildren still write afterwards is not waited for).
/// Thread-compatible: no shared state.
ChildRun run_child(const std::vector<std::string>& args, std::chrono::seconds timeout);

/// In the child: true when child_result_fd is the pipe whose inode number `inode_text` names.
bool is_result_pipe(std::string_view inode_text);

/// "SIGSEGV (Segmentation fault)", or "signal N" for one without a name.
std::string signal_name(int sig);

/// How the child ended, in words: "killed by SIGSEGV (...)", "exited with status 3".
std::string describe_wait_status(int wait_status);

}  // namespace gpuplug::tool
