// SPDX-License-Identifier: Apache-2.0
// The path rule for plugin files: a file the process loads, and every folder above it, must be
// changeable only by root or the effective user (ssh's rule for its key files).
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <gpuplug/support/text.hpp>
#include <string>

#include "discovery/plugin_loader.hpp"

namespace gpuplug::detail {

namespace fs = std::filesystem;

namespace {

std::string octal_mode(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

/// Why `path` (the file itself or a folder above it) lets a user other than root and the
/// effective user change what `path` leads to; nothing when it does not.
///  - owned by someone else: that owner can change it (and its mode);
///  - group-writable, with a group other than root's and the effective group;
///  - world-writable, unless it is a folder with the sticky bit owned by root or the effective
///    user (/tmp): there others can add entries but neither rename nor replace ours, and what
///    they add is owned by them, so the owner rule refuses it.
std::optional<std::string> untrusted(const fs::path& path, const struct stat& st, bool folder) {
  const std::string what = folder ? "folder '" + path.string() + "'" : std::string("the file");
  const uid_t euid = ::geteuid();
  if (st.st_uid != 0 && st.st_uid != euid) {
    return what + " is owned by uid " + std::to_string(st.st_uid) + ", neither root nor uid " +
           std::to_string(euid);
  }
  if ((st.st_mode & S_IWGRP) != 0 && st.st_gid != 0 && st.st_gid != ::getegid()) {
    return what + " is writable by group " + std::to_string(st.st_gid) + " (mode " +
           octal_mode(st.st_mode) + ")";
  }
  if ((st.st_mode & S_IWOTH) != 0 && !(folder && (st.st_mode & S_ISVTX) != 0)) {
    return what + " is writable by other users (mode " + octal_mode(st.st_mode) + ")";
  }
  return std::nullopt;
}

}  // namespace

std::optional<Refusal> check_path_trust(const fs::path& file) {
  const auto refuse = [&file](const std::string& why) {
    return Refusal{PluginReason::untrusted_path, "untrusted path: '" + file.string() + "': " + why};
  };
  std::error_code ec;
  // The real path: a symbolic link on the way is only a name; what is loaded is its target.
  const fs::path real = fs::canonical(fs::absolute(file, ec), ec);
  if (ec) return refuse("cannot resolve it: " + ec.message());
  fs::path at = real;
  for (bool folder = false;; folder = true) {
    struct stat st {};
    if (::stat(at.c_str(), &st) != 0)
      return refuse("cannot stat '" + at.string() + "': " + support::errno_text(errno));
    if (auto why = untrusted(at, st, folder)) return refuse(*why);
    if (at == at.root_path() || !at.has_relative_path()) break;
    at = at.parent_path();
  }
  return std::nullopt;
}

}  // namespace gpuplug::detail
