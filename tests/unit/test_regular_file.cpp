// SPDX-License-Identifier: Apache-2.0
// gpuplug::support::RegularFile: only regular files are opened, never blocking on a
// FIFO or a /dev/stdin link; every refusal names what the file is or the errno; a size cap is
// checked before anything is read.

#define BOOST_TEST_MODULE regular_file
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>

#include "gpuplug/support/regular_file.hpp"

namespace fs = std::filesystem;
using gpuplug::support::read_file_head;
using gpuplug::support::read_regular_file;
using gpuplug::support::RegularFile;

namespace {

/// A fresh folder under the temp directory, removed with everything in it.
struct TempDir {
  fs::path path;
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "gpuplug-regular-file-XXXXXX").string();
    BOOST_REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    path = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    fs::permissions(path, fs::perms::owner_all, fs::perm_options::add, ec);
    for (const auto& entry : fs::recursive_directory_iterator(path, ec))
      fs::permissions(entry.path(), fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(path, ec);
  }
  fs::path file(const std::string& name, const std::string& content) const {
    std::ofstream(path / name, std::ios::binary) << content;
    return path / name;
  }
};

std::string as_text(const std::vector<std::byte>& bytes) {
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

/// Runs `attempt` in a child process and returns the reason it wrote, or fails the test when it
/// takes longer than `limit`: a call that blocks must not hang the test run.
std::string in_child_within(std::chrono::milliseconds limit,
                            const std::function<std::string()>& attempt) {
  int out[2];
  BOOST_REQUIRE(::pipe(out) == 0);
  const pid_t pid = ::fork();
  BOOST_REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(out[0]);
    const std::string why = attempt();
    (void)!::write(out[1], why.data(), why.size());
    ::_exit(0);
  }
  ::close(out[1]);
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  pid_t done = 0;
  while ((done = ::waitpid(pid, &status, WNOHANG)) == 0 &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  if (done == 0) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    ::close(out[0]);
    BOOST_FAIL("the call blocked for more than " << limit.count() << " ms");
  }
  std::string why;
  char buf[512];
  ssize_t n = 0;
  while ((n = ::read(out[0], buf, sizeof buf)) > 0) why.append(buf, static_cast<std::size_t>(n));
  ::close(out[0]);
  BOOST_TEST(WIFEXITED(status));
  return why;
}

/// open()'s reason for `path`, or "" when it opened.
std::string open_reason(const fs::path& path) {
  std::string why;
  const auto file = RegularFile::open(path, why);
  return file ? std::string() : why;
}

long max_rss_kib() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

}  // namespace

BOOST_AUTO_TEST_CASE(reads_a_regular_file_whole_or_its_head) {
  TempDir dir;
  const fs::path f = dir.file("module.so", "hello, world");
  std::string why;
  auto file = RegularFile::open(f, why);
  BOOST_REQUIRE_MESSAGE(file, why);
  BOOST_TEST(file->size() == 12u);
  BOOST_TEST(file->path() == f);
  BOOST_TEST(as_text(file->read_head(5, why).value()) == "hello");
  BOOST_TEST(as_text(file->read_head(100, why).value()) == "hello, world");  // shorter file
  BOOST_TEST(as_text(file->read_all(12, why).value()) == "hello, world");    // exactly the cap
  BOOST_TEST(as_text(read_regular_file(f, 1 << 20, why).value()) == "hello, world");
  BOOST_TEST(as_text(read_file_head(f, 4, why).value()) == "hell");
  BOOST_TEST(read_regular_file(dir.file("empty", ""), 0, why).value().empty());

  // The descriptor is close-on-exec, blocking again, and closed with its owner (moves included).
  const int fd = file->fd();
  BOOST_TEST((::fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0);
  BOOST_TEST((::fcntl(fd, F_GETFL) & O_NONBLOCK) == 0);
  RegularFile moved = std::move(*file);
  file.reset();
  BOOST_TEST(::fcntl(fd, F_GETFD) != -1);
  BOOST_TEST(moved.fd() == fd);
  { RegularFile gone = std::move(moved); }
  BOOST_TEST(::fcntl(fd, F_GETFD) == -1);
}

BOOST_AUTO_TEST_CASE(a_fifo_is_refused_at_once) {
  TempDir dir;
  const fs::path fifo = dir.path / "libgpuplug-x.so";
  BOOST_REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // Nobody ever writes to it: a blocking open or read would wait forever.
  const std::string why = in_child_within(std::chrono::milliseconds(2000), [&] {
    std::string reason;
    if (read_regular_file(fifo, 1 << 20, reason)) return std::string("opened");
    return reason;
  });
  BOOST_TEST(why == "'" + fifo.string() + "' is a FIFO, not a regular file");
  // The same through the header-only read.
  BOOST_TEST(in_child_within(std::chrono::milliseconds(2000), [&] {
               std::string reason;
               return read_file_head(fifo, 64, reason) ? std::string("opened") : reason;
             }).find("is a FIFO") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(an_open_descriptor_is_checked_with_fstat) {
  // adopt() is the check that counts after open (the path may be swapped between stat and open).
  int fds[2];
  BOOST_REQUIRE(::pipe(fds) == 0);
  ::close(fds[1]);
  std::string why;
  BOOST_TEST(!RegularFile::adopt(fds[0], "pipe", why));
  BOOST_TEST(why == "'pipe' is a FIFO, not a regular file");
  BOOST_TEST(::fcntl(fds[0], F_GETFD) == -1);  // closed on refusal too

  const int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  BOOST_REQUIRE(null >= 0);
  BOOST_TEST(!RegularFile::adopt(null, "/dev/null", why));
  BOOST_TEST(why == "'/dev/null' is a character device, not a regular file");
}

BOOST_AUTO_TEST_CASE(a_directory_a_device_and_a_socket_are_refused) {
  TempDir dir;
  const fs::path folder = dir.path / "libgpuplug-x.so";
  fs::create_directory(folder);
  BOOST_TEST(open_reason(folder) == "'" + folder.string() + "' is a directory, not a regular file");
  BOOST_TEST(open_reason("/dev/null") == "'/dev/null' is a character device, not a regular file");

  const fs::path sock = dir.path / "socket.so";
  const int s = ::socket(AF_UNIX, SOCK_STREAM, 0);
  BOOST_REQUIRE(s >= 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  BOOST_REQUIRE(sock.string().size() < sizeof addr.sun_path);
  std::strcpy(addr.sun_path, sock.c_str());
  BOOST_REQUIRE(::bind(s, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0);
  BOOST_TEST(open_reason(sock) == "'" + sock.string() + "' is a socket, not a regular file");
  ::close(s);

  // A symbolic link is followed: a link to a regular file opens, a dangling one names errno.
  const fs::path target = dir.file("real.so", "x");
  fs::create_symlink(target, dir.path / "link.so");
  BOOST_TEST(open_reason(dir.path / "link.so").empty());
  fs::create_symlink(dir.path / "nowhere", dir.path / "dangling.so");
  BOOST_TEST(open_reason(dir.path / "dangling.so") == "cannot open '" +
                                                          (dir.path / "dangling.so").string() +
                                                          "': No such file or directory");
}

BOOST_AUTO_TEST_CASE(a_link_to_dev_stdin_never_blocks) {
  TempDir dir;
  const fs::path link = dir.path / "libgpuplug-x.so";
  fs::create_symlink("/dev/stdin", link);
  // Standard input is a pipe nobody writes to (a read would wait forever) ...
  const std::string from_pipe = in_child_within(std::chrono::milliseconds(2000), [&] {
    int fds[2];
    if (::pipe(fds) != 0 || ::dup2(fds[0], STDIN_FILENO) < 0) return std::string("no pipe");
    std::string reason;
    return read_regular_file(link, 1 << 20, reason) ? std::string("opened") : reason;
  });
  BOOST_TEST(from_pipe == "'" + link.string() + "' is a FIFO, not a regular file");
  // ... or a terminal-like device.
  const std::string from_null = in_child_within(std::chrono::milliseconds(2000), [&] {
    const int null = ::open("/dev/null", O_RDONLY);
    if (null < 0 || ::dup2(null, STDIN_FILENO) < 0) return std::string("no /dev/null");
    std::string reason;
    return read_regular_file(link, 1 << 20, reason) ? std::string("opened") : reason;
  });
  BOOST_TEST(from_null == "'" + link.string() + "' is a character device, not a regular file");
}

BOOST_AUTO_TEST_CASE(missing_and_unreadable_files_name_errno) {
  TempDir dir;
  BOOST_TEST(open_reason(dir.path / "missing.so") ==
             "cannot open '" + (dir.path / "missing.so").string() + "': No such file or directory");
  BOOST_TEST(open_reason(dir.path / "missing" / "x.so") ==
             "cannot open '" + (dir.path / "missing" / "x.so").string() +
                 "': No such file or directory");
  const fs::path plain = dir.file("plain", "x");
  BOOST_TEST(open_reason(plain / "x.so").find("Not a directory") != std::string::npos);

  const fs::path locked = dir.file("locked.so", "secret");
  fs::permissions(locked, fs::perms::none);
  const fs::path closed_dir = dir.path / "closed";
  fs::create_directory(closed_dir);
  const fs::path inside = closed_dir / "libgpuplug-x.so";
  std::ofstream(inside) << "x";
  fs::permissions(closed_dir, fs::perms::none);
  if (::geteuid() == 0) {
    BOOST_TEST_MESSAGE(
        "running as root, where file permissions do not apply: the Permission "
        "denied checks are skipped");
    return;
  }
  BOOST_TEST(open_reason(locked) == "cannot open '" + locked.string() + "': Permission denied");
  // A folder without permission is not "does not exist".
  BOOST_TEST(open_reason(inside) == "cannot open '" + inside.string() + "': Permission denied");
}

BOOST_AUTO_TEST_CASE(a_file_over_the_cap_is_refused_by_its_size_before_any_read) {
  TempDir dir;
  const fs::path big = dir.path / "big.so";
  {
    const int fd = ::open(big.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    BOOST_REQUIRE(fd >= 0);
    BOOST_REQUIRE(::ftruncate(fd, off_t{1} << 30) == 0);  // 1 GiB, sparse: no disk used
    ::close(fd);
  }
  const long rss_before = max_rss_kib();
  const auto start = std::chrono::steady_clock::now();
  std::string why;
  BOOST_TEST(!read_regular_file(big, std::uint64_t{64} << 20, why));
  const auto took = std::chrono::steady_clock::now() - start;
  BOOST_TEST(why == "'" + big.string() +
                        "' is 1073741824 bytes (1.0 GiB), more than the limit of 67108864 bytes "
                        "(64.0 MiB)");
  BOOST_TEST(took < std::chrono::milliseconds(500));
  BOOST_TEST(max_rss_kib() - rss_before < 16 * 1024,
             "peak RSS grew by " << (max_rss_kib() - rss_before) << " KiB");
  // Its header can still be read, without reading the rest.
  auto file = RegularFile::open(big, why);
  BOOST_REQUIRE_MESSAGE(file, why);
  BOOST_TEST(file->size() == std::uint64_t{1} << 30);
  BOOST_TEST(file->read_head(64, why).value().size() == 64u);

  const fs::path ten = dir.file("ten", "0123456789");
  BOOST_TEST(read_regular_file(ten, 10, why).has_value());
  BOOST_TEST(!read_regular_file(ten, 9, why));
  BOOST_TEST(why == "'" + ten.string() + "' is 10 bytes, more than the limit of 9 bytes");
}

BOOST_AUTO_TEST_CASE(files_whose_size_fstat_does_not_know_are_read_up_to_the_cap) {
  // /proc files report st_size 0 and have content.
  std::string why;
  const auto status = read_regular_file("/proc/self/status", 1 << 20, why);
  BOOST_REQUIRE_MESSAGE(status, why);
  BOOST_TEST(as_text(*status).find("Pid:") != std::string::npos);
  BOOST_TEST(!read_regular_file("/proc/self/status", 16, why));
  BOOST_TEST(why ==
             "'/proc/self/status' is longer than the limit of 16 bytes (fstat said 0 "
             "bytes)");
}
