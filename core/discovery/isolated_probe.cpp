// SPDX-License-Identifier: Apache-2.0
// Isolated probing: the parent side (spawn every child, poll their pipes together, reap, judge),
// the child side (gpuplug-probe's main) and the bounded record they exchange.
#include "discovery/isolated_probe.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <gpuplug/log.hpp>
#include <gpuplug/support/plugin_name.hpp>
#include <gpuplug/support/text.hpp>
#include <thread>

extern char** environ;  // NOLINT: POSIX

namespace gpuplug::detail {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

constexpr std::string_view channel = "registry";
constexpr int record_fd = 3;        // where the child writes (dup2'ed from the pipe)
constexpr char stage_frame = 'S';   // 'S' <stage byte>
constexpr char record_frame = 'R';  // 'R' <u32 length> <record>
// "GPR2": the device fields of ABI 1.1 (identity, capabilities) and concurrent_managed_access
// follow managed_memory. Parent and child are the same libgpuplug, so there is one layout.
constexpr std::uint32_t record_magic = 0x32525047;
constexpr std::uint32_t max_devices = 1024;
// Frames beyond the record: stage frames are two bytes, at most a few of them.
constexpr std::size_t max_stream_bytes = max_probe_record_bytes + 64;

// ---- the record --------------------------------------------------------------------------------

void put_u64(std::string& out, std::uint64_t v) {
  out.append(reinterpret_cast<const char*>(&v), 8);
}
void put_str(std::string& out, std::string_view s) {
  s = s.substr(0, max_probe_field_bytes);
  put_u64(out, s.size());
  out.append(s);
}

/// Reads fields from a record; the first defect sticks and every later read yields zero.
class Reader {
 public:
  explicit Reader(std::string_view data) : rest_(data) {}
  std::uint64_t u64(const char* what) {
    if (!defect_.empty()) return 0;
    if (rest_.size() < 8) return fail(std::string("truncated at ") + what), 0;
    std::uint64_t v;
    std::memcpy(&v, rest_.data(), 8);
    rest_.remove_prefix(8);
    return v;
  }
  std::string str(const char* what, std::size_t cap = max_probe_field_bytes) {
    const std::uint64_t n = u64(what);
    if (!defect_.empty()) return {};
    if (n > cap)
      return fail(std::string(what) + " claims " + std::to_string(n) + " bytes (the limit is " +
                  std::to_string(cap) + ")"),
             std::string();
    if (n > rest_.size()) return fail(std::string("truncated in ") + what), std::string();
    std::string s(rest_.substr(0, n));
    rest_.remove_prefix(n);
    return s;
  }
  void fail(std::string why) {
    if (defect_.empty()) defect_ = std::move(why);
  }
  bool at_end() const { return rest_.empty(); }
  const std::string& defect() const { return defect_; }

 private:
  std::string_view rest_;
  std::string defect_;
};

// ---- the child ---------------------------------------------------------------------------------

bool write_all(const void* data, std::size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(record_fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

void send_stage(LoadStage stage) {
  const char frame[2] = {stage_frame, static_cast<char>(stage)};
  write_all(frame, sizeof frame);
}

// ---- the parent --------------------------------------------------------------------------------

/// One child and what it sent so far.
struct Child {
  pid_t pid = -1;
  int fd = -1;            // read end of its pipe; -1 once closed
  std::string stream;     // frames received, at most max_stream_bytes
  bool overflow = false;  // it sent more than max_stream_bytes
  bool reaped = false;
  int status = 0;       // waitpid's
  bool killed = false;  // by us, at the deadline
  std::string spawn_error;
};

std::string signal_name(int sig) {
  const char* abbrev = ::sigabbrev_np(sig);
  std::string name =
      abbrev != nullptr ? "SIG" + std::string(abbrev) : "signal " + std::to_string(sig);
  if (const char* text = ::strsignal(sig)) name += std::string(" (") + text + ")";
  return name;
}

std::string seconds_text(std::chrono::milliseconds t) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g s", static_cast<double>(t.count()) / 1000.0);
  return text;
}

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

/// Starts `helper FILE` with the write end of a pipe as fd 3, stdin from /dev/null, stderr shared.
void spawn(Child& c, const fs::path& helper, const fs::path& file) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    c.spawn_error = "cannot create a pipe: " + support::errno_text(errno);
    return;
  }
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  ::posix_spawn_file_actions_init(&actions);
  ::posix_spawnattr_init(&attr);
  ::posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  ::posix_spawn_file_actions_adddup2(&actions, fds[1], record_fd);  // clears close-on-exec
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  ::posix_spawnattr_setsigmask(&attr, &none);
  ::posix_spawnattr_setsigdefault(&attr, &defaults);
  ::posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  std::string helper_arg = helper.string(), file_arg = file.string();
  char* argv[] = {helper_arg.data(), file_arg.data(), nullptr};
  const int err = ::posix_spawn(&c.pid, helper.c_str(), &actions, &attr, argv, environ);
  ::posix_spawn_file_actions_destroy(&actions);
  ::posix_spawnattr_destroy(&attr);
  ::close(fds[1]);
  if (err != 0) {
    ::close(fds[0]);
    c.pid = -1;
    c.spawn_error = "cannot start '" + helper.string() + "': " + support::errno_text(err);
    return;
  }
  c.fd = fds[0];
}

/// Reads what is there; closes the pipe at end of file or when the stream is over its cap.
void drain(Child& c) {
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(c.fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) return close_fd(c.fd);
    if (c.stream.size() + static_cast<std::size_t>(n) > max_stream_bytes) {
      c.overflow = true;
      return close_fd(c.fd);
    }
    c.stream.append(buf, static_cast<std::size_t>(n));
  }
}

/// The frames a child sent: the last stage it announced, and its record if one came whole.
struct Frames {
  LoadStage stage = LoadStage::open;
  std::optional<std::string_view> record;
  std::string defect;
};

Frames parse_frames(std::string_view s) {
  Frames f;
  while (!s.empty()) {
    if (s[0] == stage_frame) {
      if (s.size() < 2) break;  // cut short: the child died while writing
      const auto stage = static_cast<unsigned char>(s[1]);
      if (stage > static_cast<unsigned char>(LoadStage::done)) {
        f.defect = "unknown stage " + std::to_string(stage);
        return f;
      }
      f.stage = static_cast<LoadStage>(stage);
      s.remove_prefix(2);
    } else if (s[0] == record_frame) {
      if (s.size() < 5) break;
      std::uint32_t n;
      std::memcpy(&n, s.data() + 1, 4);
      if (n > max_probe_record_bytes) {
        f.defect = "a record of " + std::to_string(n) + " bytes (the limit is " +
                   std::to_string(max_probe_record_bytes) + ")";
        return f;
      }
      if (s.size() - 5 < n) break;
      f.record = s.substr(5, n);
      if (s.size() - 5 > n) f.defect = "bytes after its record";
      return f;
    } else {
      f.defect = "a frame of unknown type " + std::to_string(static_cast<unsigned char>(s[0]));
      return f;
    }
  }
  return f;
}

/// What a finished child makes of its entry.
void judge(PluginEntry& e, const Child& c, std::chrono::milliseconds timeout) {
  const auto fail = [&e](PluginReason reason, std::string message) {
    e.info.state = PluginState::failed;
    e.info.reason = reason;
    e.info.message = std::move(message);
    e.info.devices.clear();
    e.loaded.reset();
  };
  if (!c.spawn_error.empty())
    return fail(PluginReason::probe_failed, "probe failed: " + c.spawn_error);
  const Frames f = parse_frames(c.stream);
  const std::string during = " " + std::string(describe_stage(f.stage));
  if (c.overflow) {
    return fail(PluginReason::probe_failed, "probe failed: the probe process sent more than " +
                                                std::to_string(max_stream_bytes) + " bytes");
  }
  if (!f.defect.empty()) {
    return fail(PluginReason::probe_failed, "probe failed: malformed probe record: " + f.defect);
  }
  if (f.record) {
    auto decoded = decode_probe_record(*f.record);
    if (auto* defect = std::get_if<std::string>(&decoded)) {
      return fail(PluginReason::probe_failed, "probe failed: malformed probe record: " + *defect);
    }
    const fs::path path = e.info.path;
    e.info = std::move(std::get<PluginInfo>(decoded));
    e.info.path = path;
    if (e.info.state != PluginState::failed) e.loaded = std::make_shared<LoadedPlugin>();
    return;
  }
  if (c.killed) {
    return fail(PluginReason::timed_out, "timed out: the probe did not finish within " +
                                             seconds_text(timeout) + during +
                                             "; killed with SIGKILL");
  }
  if (WIFSIGNALED(c.status)) {
    return fail(PluginReason::crashed,
                "crashed: the probe died of " + signal_name(WTERMSIG(c.status)) + during);
  }
  const int code = WIFEXITED(c.status) ? WEXITSTATUS(c.status) : -1;
  return fail(PluginReason::exited, "exited: the probe process exited with status " +
                                        std::to_string(code) + during +
                                        ", before it sent its record");
}

}  // namespace

std::string encode_probe_record(const PluginInfo& info) {
  std::string out;
  put_u64(out, record_magic);
  put_u64(out, static_cast<std::uint64_t>(info.state));
  put_u64(out, static_cast<std::uint64_t>(info.reason));
  put_u64(out, info.abi_version);
  put_str(out, info.name);
  put_str(out, info.vendor);
  put_str(out, info.version);
  put_str(out, info.message);
  const std::size_t count = std::min<std::size_t>(info.devices.size(), max_devices);
  put_u64(out, count);
  for (std::size_t i = 0; i < count; ++i) {
    const DeviceInfo& d = info.devices[i];
    put_u64(out, d.ordinal);
    put_str(out, d.name);
    put_str(out, d.uuid);
    put_str(out, d.arch);
    put_u64(out, d.total_memory);
    put_u64(out, d.free_memory);
    put_u64(out, d.compute_units);
    put_u64(out, d.managed_memory ? 1 : 0);
    put_u64(out, d.concurrent_managed_access ? 1 : 0);
    put_u64(out, d.pci ? 1 : 0);
    const PciAddress pci = d.pci.value_or(PciAddress{});
    put_u64(out, pci.domain);
    put_u64(out, pci.bus);
    put_u64(out, pci.device);
    put_u64(out, pci.function);
    put_u64(out, d.pci_vendor_id);
    put_u64(out, d.pci_device_id);
    put_u64(out, d.warp_size);
    put_u64(out, d.max_shared_memory_per_block);
    put_str(out, d.driver_version);
    put_str(out, d.runtime_version);
    put_u64(out, static_cast<std::uint64_t>(static_cast<std::int64_t>(d.device_class)));
    put_u64(out, d.peak_gflops);
  }
  return out;
}

std::variant<PluginInfo, std::string> decode_probe_record(std::string_view record) {
  Reader r(record);
  PluginInfo info;
  if (r.u64("magic") != record_magic && r.defect().empty()) return std::string("bad magic");
  const std::uint64_t state = r.u64("state");
  const std::uint64_t reason = r.u64("reason");
  const std::uint64_t abi = r.u64("abi_version");
  info.name = r.str("name", 256);
  info.vendor = r.str("vendor");
  info.version = r.str("version");
  info.message = r.str("message");
  const std::uint64_t count = r.u64("device count");
  if (count > max_devices) r.fail("device count " + std::to_string(count));
  for (std::uint64_t i = 0; i < count && r.defect().empty(); ++i) {
    DeviceInfo d;
    const std::uint64_t ordinal = r.u64("ordinal");
    d.ordinal = static_cast<std::uint32_t>(ordinal);
    if (ordinal != i)
      r.fail("device " + std::to_string(i) + " has ordinal " + std::to_string(ordinal));
    d.name = r.str("device name");
    d.uuid = r.str("device uuid");
    d.arch = r.str("device arch");
    d.total_memory = r.u64("total_memory");
    d.free_memory = r.u64("free_memory");
    const std::uint64_t units = r.u64("compute_units");
    d.compute_units = static_cast<std::uint32_t>(std::min<std::uint64_t>(units, UINT32_MAX));
    const std::uint64_t managed = r.u64("managed_memory");
    if (managed > 1) r.fail("managed_memory " + std::to_string(managed));
    d.managed_memory = managed == 1;
    const std::uint64_t concurrent = r.u64("concurrent_managed_access");
    if (concurrent > 1) r.fail("concurrent_managed_access " + std::to_string(concurrent));
    d.concurrent_managed_access = concurrent == 1;
    // The child ran to_device_info, which only yields valid values; anything else is a defect.
    const std::uint64_t has_pci = r.u64("has_pci");
    const std::uint64_t domain = r.u64("pci_domain");
    const std::uint64_t bus = r.u64("pci_bus");
    const std::uint64_t device = r.u64("pci_device");
    const std::uint64_t function = r.u64("pci_function");
    if (has_pci > 1 || domain > UINT32_MAX || bus > 0xff || device > 0x1f || function > 7)
      r.fail("device " + std::to_string(i) + " PCI address");
    if (has_pci == 1)
      d.pci = PciAddress{static_cast<std::uint32_t>(domain), static_cast<std::uint32_t>(bus),
                         static_cast<std::uint32_t>(device), static_cast<std::uint32_t>(function)};
    const std::uint64_t vendor_id = r.u64("pci_vendor_id");
    const std::uint64_t device_id = r.u64("pci_device_id");
    const std::uint64_t warp = r.u64("warp_size");
    if (vendor_id > 0xffff || device_id > 0xffff || warp > UINT32_MAX)
      r.fail("device " + std::to_string(i) + " PCI ids or warp size");
    d.pci_vendor_id = static_cast<std::uint32_t>(vendor_id);
    d.pci_device_id = static_cast<std::uint32_t>(device_id);
    d.warp_size = static_cast<std::uint32_t>(warp);
    d.max_shared_memory_per_block = r.u64("max_shared_memory_per_block");
    d.driver_version = r.str("driver_version", 64);
    d.runtime_version = r.str("runtime_version", 64);
    const std::uint64_t device_class = r.u64("device_class");
    if (device_class > GPUPLUG_DEVICE_CLASS_EMULATOR)
      r.fail("device_class " + std::to_string(device_class));
    d.device_class = static_cast<DeviceClass>(device_class);
    d.peak_gflops = r.u64("peak_gflops");
    info.devices.push_back(std::move(d));
  }
  if (!r.defect().empty()) return r.defect();
  if (!r.at_end()) return std::string("bytes after the last field");
  if (state > static_cast<std::uint64_t>(PluginState::failed)) {
    return "unknown state " + std::to_string(state);
  }
  if (reason > static_cast<std::uint64_t>(PluginReason::probe_failed)) {
    return "reason " + std::to_string(reason) + " (not one a probe can give)";
  }
  if (abi > UINT32_MAX) return "abi_version " + std::to_string(abi);
  info.state = static_cast<PluginState>(state);
  info.reason = static_cast<PluginReason>(reason);
  info.abi_version = static_cast<std::uint32_t>(abi);
  if (info.state != PluginState::failed && !support::valid_plugin_name(info.name)) {
    return std::string("a usable plugin with an invalid name");
  }
  if ((info.state == PluginState::available) != (info.reason == PluginReason::none)) {
    return "state " + std::string(to_string(info.state)) + " with reason " +
           std::string(to_string(info.reason));
  }
  if (info.state == PluginState::available && info.devices.empty()) {
    return std::string("available with no device");
  }
  if (info.state != PluginState::available && !info.devices.empty()) {
    return std::string("devices listed for an unusable plugin");
  }
  return info;
}

std::vector<PluginEntry> probe_isolated(std::span<const ProbeJob> jobs, const fs::path& helper,
                                        std::chrono::milliseconds timeout) {
  std::vector<Child> children(jobs.size());
  const auto deadline = Clock::now() + timeout;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    log(LogLevel::debug, channel, "probing '" + jobs[i].file.string() + "' in a child process");
    spawn(children[i], helper, jobs[i].file);
    if (children[i].fd >= 0) ::fcntl(children[i].fd, F_SETFL, O_NONBLOCK);
  }
  // Read every pipe until it ends or the deadline passes.
  for (;;) {
    std::vector<pollfd> fds;
    std::vector<Child*> owners;
    for (Child& c : children) {
      if (c.fd >= 0) {
        fds.push_back({c.fd, POLLIN, 0});
        owners.push_back(&c);
      }
    }
    if (fds.empty()) break;
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) break;
    const int n = ::poll(fds.data(), fds.size(), static_cast<int>(left.count()));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    for (std::size_t k = 0; k < fds.size(); ++k) {
      if (fds[k].revents != 0) drain(*owners[k]);
    }
  }
  // Reap: a child whose pipe ended is leaving; give it until the deadline, then kill it.
  for (;;) {
    bool waiting = false;
    for (Child& c : children) {
      if (c.pid < 0 || c.reaped) continue;
      const pid_t r = ::waitpid(c.pid, &c.status, WNOHANG);
      if (r == c.pid || (r < 0 && errno != EINTR))
        c.reaped = true;
      else
        waiting = true;
    }
    if (!waiting || Clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::vector<PluginEntry> entries(jobs.size());
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    Child& c = children[i];
    if (c.pid >= 0 && !c.reaped) {
      // A complete record counts even if the child lingers afterwards; it is killed either way.
      c.killed = !parse_frames(c.stream).record.has_value();
      ::kill(c.pid, SIGKILL);
      while (::waitpid(c.pid, &c.status, 0) < 0 && errno == EINTR) {
      }
      c.reaped = true;
    }
    close_fd(c.fd);
    PluginEntry& e = entries[i];
    e.info.path = jobs[i].file;
    e.info.name = jobs[i].file.stem().string();
    e.canonical = jobs[i].canonical;
    judge(e, c, timeout);
  }
  return entries;
}

int probe_helper_main(int argc, char** argv) {
  struct stat st {};
  if (argc != 2 || ::fstat(record_fd, &st) != 0 || !S_ISFIFO(st.st_mode)) {
    std::fprintf(stderr,
                 "usage: gpuplug-probe FILE\n"
                 "libgpuplug starts this helper to probe a plugin in a process of its own; it "
                 "writes its answer to file descriptor 3, which must be a pipe.\n");
    return 2;
  }
  const fs::path file(argv[1]);
  PluginEntry e = load_plugin(file, file, &send_stage);
  const std::string record = encode_probe_record(e.info);
  std::string frame(1, record_frame);
  const auto n = static_cast<std::uint32_t>(record.size());
  frame.append(reinterpret_cast<const char*>(&n), 4);
  frame += record;
  const bool sent = write_all(frame.data(), frame.size());
  // Leave without the plugin's static destructors or unload: the answer is all that was asked.
  std::fflush(stderr);
  ::_exit(sent ? 0 : 1);
}

}  // namespace gpuplug::detail
