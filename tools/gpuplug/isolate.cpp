// SPDX-License-Identifier: Apache-2.0
// Running one child with a deadline: posix_spawn of /proc/self/exe, two pipes polled together,
// SIGTERM then SIGKILL at the deadline, and a reap that never leaves a zombie.
#include "isolate.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <gpuplug/support/text.hpp>
#include <optional>

extern char** environ;  // NOLINT: POSIX

namespace gpuplug::tool {

namespace {

using Clock = std::chrono::steady_clock;

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

/// Reads what is there without blocking. The result pipe stops at its cap (overflow); the
/// output keeps only its tail. Closes the descriptor at end of file.
void drain(int& fd, std::string& into, bool keep_tail, std::size_t cap, bool& over) {
  char buf[4096];
  while (fd >= 0) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) return close_fd(fd);
    into.append(buf, static_cast<std::size_t>(n));
    if (into.size() > cap) {
      over = true;
      if (!keep_tail) {
        into.resize(cap);
        return close_fd(fd);
      }
      into.erase(0, into.size() - cap);
    }
  }
}

}  // namespace

bool is_result_pipe(std::string_view inode_text) {
  struct stat st {};
  if (::fstat(child_result_fd, &st) != 0 || !S_ISFIFO(st.st_mode)) return false;
  return !inode_text.empty() && std::to_string(st.st_ino) == inode_text;
}

std::string signal_name(int sig) {
  const char* abbrev = ::sigabbrev_np(sig);
  std::string name =
      abbrev != nullptr ? "SIG" + std::string(abbrev) : "signal " + std::to_string(sig);
  if (const char* text = ::strsignal(sig)) name += std::string(" (") + text + ")";
  return name;
}

std::string describe_wait_status(int status) {
  if (WIFSIGNALED(status)) return "killed by " + signal_name(WTERMSIG(status));
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  return "ended with wait status " + std::to_string(status);
}

ChildRun run_child(const std::vector<std::string>& args, std::chrono::seconds timeout) {
  ChildRun run;
  const auto start = Clock::now();
  int out_pipe[2], result_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) {
    run.spawn_error = "cannot create a pipe: " + support::errno_text(errno);
    return run;
  }
  if (::pipe2(result_pipe, O_CLOEXEC) != 0) {
    run.spawn_error = "cannot create a pipe: " + support::errno_text(errno);
    ::close(out_pipe[0]);
    ::close(out_pipe[1]);
    return run;
  }
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  ::posix_spawn_file_actions_init(&actions);
  ::posix_spawnattr_init(&attr);
  ::posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  // dup2 clears close-on-exec on the target; everything else of ours stays closed in the child.
  ::posix_spawn_file_actions_adddup2(&actions, out_pipe[1], STDOUT_FILENO);
  ::posix_spawn_file_actions_adddup2(&actions, out_pipe[1], STDERR_FILENO);
  ::posix_spawn_file_actions_adddup2(&actions, result_pipe[1], child_result_fd);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int sig : {SIGPIPE, SIGTERM, SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT})
    sigaddset(&defaults, sig);
  ::posix_spawnattr_setsigmask(&attr, &none);
  ::posix_spawnattr_setsigdefault(&attr, &defaults);
  ::posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  struct stat pipe_stat {};
  ::fstat(result_pipe[0], &pipe_stat);
  std::vector<std::string> storage = args;
  storage.emplace_back(result_pipe_option);
  storage.push_back(std::to_string(pipe_stat.st_ino));
  std::vector<char*> argv;
  for (auto& a : storage) argv.push_back(a.data());
  argv.push_back(nullptr);
  // The kernel's link to this program: neither PATH nor argv[0] can redirect it.
  pid_t pid = -1;
  const int err = ::posix_spawn(&pid, "/proc/self/exe", &actions, &attr, argv.data(), environ);
  ::posix_spawn_file_actions_destroy(&actions);
  ::posix_spawnattr_destroy(&attr);
  ::close(out_pipe[1]);
  ::close(result_pipe[1]);
  int out_fd = out_pipe[0], result_fd = result_pipe[0];
  if (err != 0) {
    close_fd(out_fd);
    close_fd(result_fd);
    run.spawn_error = "cannot start /proc/self/exe: " + support::errno_text(err);
    return run;
  }
  ::fcntl(out_fd, F_SETFL, O_NONBLOCK);
  ::fcntl(result_fd, F_SETFL, O_NONBLOCK);

  const bool limited = timeout.count() > 0;
  const auto deadline = start + timeout;
  std::optional<Clock::time_point> termed_at;
  for (;;) {
    pollfd fds[2];
    nfds_t n = 0;
    for (int fd : {out_fd, result_fd}) {
      if (fd >= 0) fds[n++] = pollfd{fd, POLLIN, 0};
    }
    // Short slices: the child is reaped promptly even when a grandchild keeps a pipe open.
    ::poll(n > 0 ? fds : nullptr, n, 50);
    drain(out_fd, run.output, true, max_child_output_bytes, run.output_truncated);
    drain(result_fd, run.result, false, max_child_result_bytes, run.result_overflow);
    int status = 0;
    pid_t r = ::waitpid(pid, &status, WNOHANG);
    while (r < 0 && errno == EINTR) r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid || r < 0) {
      run.wait_status = r == pid ? status : 0;
      drain(out_fd, run.output, true, max_child_output_bytes, run.output_truncated);
      drain(result_fd, run.result, false, max_child_result_bytes, run.result_overflow);
      break;
    }
    const auto now = Clock::now();
    if (limited && !termed_at && now >= deadline) {
      run.timed_out = true;
      ::kill(pid, SIGTERM);
      termed_at = now;
    } else if (termed_at && now >= *termed_at + child_kill_grace) {
      ::kill(pid, SIGKILL);  // repeated each slice until the reap: harmless
    }
  }
  close_fd(out_fd);
  close_fd(result_fd);
  run.elapsed = Clock::now() - start;
  return run;
}

}  // namespace gpuplug::tool
