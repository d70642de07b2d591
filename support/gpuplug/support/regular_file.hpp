// SPDX-License-Identifier: Apache-2.0
// Internal: opening a file for reading only when it is a regular file, never blocking on a FIFO or
// a device, and reading its header or, under a size cap checked before any byte is read, all of it.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpuplug/support/text.hpp"

namespace gpuplug::support {

/// What a file of this st_mode is, for messages: "a directory", "a FIFO", "a character device",
/// "a block device", "a socket", "a symbolic link", "a regular file".
inline std::string_view file_type_name(mode_t mode) noexcept {
  switch (mode & S_IFMT) {
    case S_IFREG:
      return "a regular file";
    case S_IFDIR:
      return "a directory";
    case S_IFIFO:
      return "a FIFO";
    case S_IFCHR:
      return "a character device";
    case S_IFBLK:
      return "a block device";
    case S_IFSOCK:
      return "a socket";
    case S_IFLNK:
      return "a symbolic link";
    default:
      return "a file of unknown type";
  }
}

/// A regular file open for reading. Owns its descriptor (close-on-exec) and closes it when
/// destroyed; movable, not copyable. Reads use pread, so they do not move a file position and
/// concurrent reads of one RegularFile are safe.
///
/// Every failure is reported as nullopt plus `why`, a message that names the file:
///   "'/p/libgpuplug-x.so' is a directory, not a regular file"
///   "cannot open '/p/libgpuplug-x.so': Permission denied"
///   "'/p/big.so' is 1073741824 bytes (1.0 GiB), more than the limit of 67108864 bytes (64.0 MiB)"
///   "cannot read '/p/x.so': Input/output error"
class RegularFile {
 public:
  /// Opens `path` (symbolic links followed) if it is a regular file. Never blocks and never opens
  /// anything else: the path is stat()ed first, so a directory, FIFO, device or socket is refused
  /// without being opened (opening a device can have effects; opening a FIFO for reading would
  /// block until a writer comes). Then it is opened with O_RDONLY | O_NONBLOCK | O_CLOEXEC |
  /// O_NOCTTY and fstat()ed, and that answer is the one that counts: the path may have been
  /// replaced in between. O_NONBLOCK is cleared once the file is known to be regular.
  static std::optional<RegularFile> open(const std::filesystem::path& path, std::string& why) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
      why = "cannot open '" + path.string() + "': " + errno_text(errno);
      return std::nullopt;
    }
    if (!S_ISREG(st.st_mode)) {
      why = not_regular(path, st.st_mode);
      return std::nullopt;
    }
    int fd = -1;
    do {
      fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0) {
      why = "cannot open '" + path.string() + "': " + errno_text(errno);
      return std::nullopt;
    }
    return adopt(fd, path, why);
  }

  /// Takes ownership of the open descriptor `fd` (closed on every path, failure included) and
  /// checks with fstat that it is a regular file; `name` is what messages call it.
  static std::optional<RegularFile> adopt(int fd, std::filesystem::path name, std::string& why) {
    RegularFile file(fd, std::move(name));
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      why = "cannot read '" + file.path_.string() + "': " + errno_text(errno);
      return std::nullopt;
    }
    if (!S_ISREG(st.st_mode)) {
      why = not_regular(file.path_, st.st_mode);
      return std::nullopt;
    }
    file.size_ = static_cast<std::uint64_t>(st.st_size);
    // Reads of a regular file never wait, but some file systems (FUSE) honour O_NONBLOCK with
    // EAGAIN; the flag was only there for the open.
    if (const int flags = ::fcntl(fd, F_GETFL); flags >= 0 && (flags & O_NONBLOCK) != 0)
      ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    return file;
  }

  RegularFile(RegularFile&& other) noexcept
      : fd_(std::exchange(other.fd_, -1)), size_(other.size_), path_(std::move(other.path_)) {}
  RegularFile& operator=(RegularFile&& other) noexcept {
    if (this != &other) {
      close_fd();
      fd_ = std::exchange(other.fd_, -1);
      size_ = other.size_;
      path_ = std::move(other.path_);
    }
    return *this;
  }
  RegularFile(const RegularFile&) = delete;
  RegularFile& operator=(const RegularFile&) = delete;
  ~RegularFile() { close_fd(); }

  /// The descriptor, still owned by this object.
  int fd() const noexcept { return fd_; }
  /// The size fstat reported when the file was opened.
  std::uint64_t size() const noexcept { return size_; }
  /// The name messages use.
  const std::filesystem::path& path() const noexcept { return path_; }

  /// The first min(`bytes`, length of the file) bytes: a header, without reading the rest. A
  /// result shorter than `bytes` means the file is shorter; the caller judges whether that is
  /// enough.
  std::optional<std::vector<std::byte>> read_head(std::size_t bytes, std::string& why) const {
    std::vector<std::byte> out(static_cast<std::size_t>(std::min<std::uint64_t>(bytes, size_)));
    std::size_t done = 0;
    if (!read_into(out, done, why)) return std::nullopt;
    out.resize(done);
    return out;
  }

  /// The whole file, when it is at most `max_bytes` long. The size fstat reported is checked
  /// first, so a file over the cap is refused without reading or allocating anything; a file
  /// that grows past the cap while it is read is refused too. Files whose fstat size is 0 but
  /// that have content (/proc) are read up to the cap.
  std::optional<std::vector<std::byte>> read_all(std::uint64_t max_bytes, std::string& why) const {
    if (size_ > max_bytes) {
      why = too_large(size_, max_bytes);
      return std::nullopt;
    }
    std::vector<std::byte> out(static_cast<std::size_t>(size_));
    std::size_t done = 0;
    for (;;) {
      if (!read_into(out, done, why)) return std::nullopt;
      if (done < out.size()) break;  // the file ended first
      // The buffer is full: one more byte tells whether the file goes on (it grew since fstat,
      // or it is a /proc file whose fstat size is 0).
      std::byte next{};
      ssize_t n = -1;
      do {
        n = ::pread(fd_, &next, 1, static_cast<off_t>(done));
      } while (n < 0 && errno == EINTR);
      if (n < 0) {
        why = "cannot read '" + path_.string() + "': " + errno_text(errno);
        return std::nullopt;
      }
      if (n == 0) break;
      if (done >= max_bytes) {
        why = "'" + path_.string() + "' is longer than the limit of " + describe_bytes(max_bytes) +
              " (fstat said " + describe_bytes(size_) + ")";
        return std::nullopt;
      }
      const std::uint64_t grown = std::max<std::uint64_t>(4096, 2 * std::uint64_t{done});
      out.resize(static_cast<std::size_t>(std::min(max_bytes, grown)));
      out[done++] = next;
    }
    out.resize(done);
    return out;
  }

 private:
  RegularFile(int fd, std::filesystem::path path) noexcept : fd_(fd), path_(std::move(path)) {}

  void close_fd() noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  static std::string not_regular(const std::filesystem::path& path, mode_t mode) {
    return "'" + path.string() + "' is " + std::string(file_type_name(mode)) +
           ", not a regular file";
  }

  std::string too_large(std::uint64_t size, std::uint64_t max_bytes) const {
    return "'" + path_.string() + "' is " + describe_bytes(size) + ", more than the limit of " +
           describe_bytes(max_bytes);
  }

  /// Fills `out` from offset `done` on until it is full or the file ends; `done` is advanced.
  bool read_into(std::vector<std::byte>& out, std::size_t& done, std::string& why) const {
    while (done < out.size()) {
      const ssize_t n =
          ::pread(fd_, out.data() + done, out.size() - done, static_cast<off_t>(done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        why = "cannot read '" + path_.string() + "': " + errno_text(errno);
        return false;
      }
      if (n == 0) break;
      done += static_cast<std::size_t>(n);
    }
    return true;
  }

  int fd_ = -1;
  std::uint64_t size_ = 0;
  std::filesystem::path path_;
};

/// The first min(`bytes`, file length) bytes of the regular file `path` (RegularFile::open, then
/// read_head): how a caller checks a header without reading the whole file.
inline std::optional<std::vector<std::byte>> read_file_head(const std::filesystem::path& path,
                                                            std::size_t bytes, std::string& why) {
  const auto file = RegularFile::open(path, why);
  if (!file) return std::nullopt;
  return file->read_head(bytes, why);
}

/// The whole regular file `path` when it is at most `max_bytes` long (RegularFile::open, then
/// read_all); a larger file is refused by its size, before anything is read.
inline std::optional<std::vector<std::byte>> read_regular_file(const std::filesystem::path& path,
                                                               std::uint64_t max_bytes,
                                                               std::string& why) {
  const auto file = RegularFile::open(path, why);
  if (!file) return std::nullopt;
  return file->read_all(max_bytes, why);
}

}  // namespace gpuplug::support
