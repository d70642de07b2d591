// SPDX-License-Identifier: Apache-2.0
// The Vulkan module container's writer and its checking reader (container.hpp).
#include "container.hpp"

#include <cstring>
#include <set>
#include <stdexcept>
#include <utility>

namespace gpuplug::vulkan {
namespace {

constexpr std::size_t kMaxName = 255;
constexpr std::uint32_t kMaxKernels = 4096;
constexpr std::uint32_t kMaxGlobals = 4096;
constexpr std::uint32_t kMaxArgs = 64;
constexpr std::uint32_t kMaxPushBytes = 4096;  // far above any device's limit; launch checks it

[[noreturn]] void bad(const std::string& why) { throw std::invalid_argument(why); }

// `s` for a message: bytes outside printable ASCII as '?' (the container is untrusted).
std::string printable(std::string s) {
  for (char& c : s)
    if (c < 0x20 || c > 0x7e) c = '?';
  return s;
}

class Writer {
 public:
  void u32(std::uint32_t v) {
    for (int b = 0; b < 4; ++b) out_.push_back(static_cast<std::byte>((v >> (8 * b)) & 0xFFu));
  }
  void bytes(const void* p, std::size_t n) {
    const auto* b = static_cast<const std::byte*>(p);
    out_.insert(out_.end(), b, b + n);
  }
  void str(const std::string& s) {
    u32(static_cast<std::uint32_t>(s.size()));
    bytes(s.data(), s.size());
  }
  std::vector<std::byte> take() { return std::move(out_); }

 private:
  std::vector<std::byte> out_;
};

class Reader {
 public:
  explicit Reader(std::span<const std::byte> in) : in_(in) {}
  std::uint32_t u32(const char* what) {
    need(4, what);
    std::uint32_t v = 0;
    for (int b = 0; b < 4; ++b) v |= std::to_integer<std::uint32_t>(in_[at_ + b]) << (8 * b);
    at_ += 4;
    return v;
  }
  std::span<const std::byte> bytes(std::size_t n, const char* what) {
    need(n, what);
    const auto out = in_.subspan(at_, n);
    at_ += n;
    return out;
  }
  std::string name(const char* what) {
    const std::uint32_t n = u32(what);
    if (n == 0 || n > kMaxName)
      bad(std::string(what) + " is " + std::to_string(n) + " bytes (1 to 255 allowed)");
    const auto raw = bytes(n, what);
    std::string s(reinterpret_cast<const char*>(raw.data()), raw.size());
    for (std::size_t i = 0; i < s.size(); ++i) {
      const unsigned char c = static_cast<unsigned char>(s[i]);
      const bool ok = c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
                      (i > 0 && c >= '0' && c <= '9');
      if (!ok) bad(std::string(what) + " '" + printable(s) + "' is not a C identifier");
    }
    return s;
  }
  bool done() const noexcept { return at_ == in_.size(); }
  std::size_t left() const noexcept { return in_.size() - at_; }

 private:
  void need(std::size_t n, const char* what) const {
    if (n > in_.size() - at_)
      bad(std::string("the container ends inside ") + what + " (at byte " + std::to_string(at_) +
          " of " + std::to_string(in_.size()) + ")");
  }
  std::span<const std::byte> in_;
  std::size_t at_ = 0;
};

// Checks `k`'s layout against its SPIR-V and records the SPIR-V's capabilities in it.
void check_against_spirv(ContainerKernel& k) {
  SpirvInfo info = reflect(k.spirv);
  const auto same_args = [&] {
    if (info.args.size() != k.args.size()) return false;
    for (std::size_t i = 0; i < k.args.size(); ++i)
      if (info.args[i].offset != k.args[i].offset || info.args[i].size != k.args[i].size)
        return false;
    return true;
  };
  if (info.entry != k.entry) bad("its SPIR-V's entry point is " + info.entry + ", not " + k.entry);
  if (!same_args() || info.push_bytes != k.push_bytes)
    bad("its argument layout differs from its SPIR-V's push-constant block");
  if (info.local_size_ids != k.local_size_ids ||
      (k.local_size_ids[0] == kNoSpecId && info.local_size != k.local_size))
    bad("its workgroup size differs from its SPIR-V's");
  k.capabilities = std::move(info.capabilities);
}

}  // namespace

std::vector<std::byte> write_container(const Container& c) {
  Writer w;
  w.bytes(kContainerMagic, sizeof kContainerMagic);
  w.u32(kContainerVersion);
  w.u32(static_cast<std::uint32_t>(c.kernels.size()));
  w.u32(static_cast<std::uint32_t>(c.globals.size()));
  for (const ContainerKernel& k : c.kernels) {
    w.str(k.name);
    w.str(k.entry);
    for (const std::uint32_t v : k.local_size) w.u32(v);
    for (const std::uint32_t v : k.local_size_ids) w.u32(v);
    w.u32(k.push_bytes);
    w.u32(static_cast<std::uint32_t>(k.args.size()));
    for (const PushArg& a : k.args) {
      w.u32(a.offset);
      w.u32(a.size);
    }
    w.u32(static_cast<std::uint32_t>(k.spirv.size() * 4));
    for (const std::uint32_t word : k.spirv) w.u32(word);
  }
  for (const ContainerGlobal& g : c.globals) {
    w.str(g.name);
    w.u32(static_cast<std::uint32_t>(g.bytes.size()));
    w.bytes(g.bytes.data(), g.bytes.size());
  }
  return w.take();
}

Container read_container(std::span<const std::byte> bytes) {
  if (bytes.size() < sizeof kContainerMagic ||
      std::memcmp(bytes.data(), kContainerMagic, sizeof kContainerMagic) != 0)
    bad("not a gpuplug Vulkan module (no GPVKMOD magic at its start)");
  Reader r(bytes.subspan(sizeof kContainerMagic));
  if (const std::uint32_t v = r.u32("the version"); v != kContainerVersion)
    bad("container version " + std::to_string(v) + " is not " + std::to_string(kContainerVersion));
  const std::uint32_t kernels = r.u32("the kernel count");
  const std::uint32_t globals = r.u32("the global count");
  if (kernels > kMaxKernels || globals > kMaxGlobals || (kernels + globals) * 8u > r.left())
    bad("the container claims " + std::to_string(kernels) + " kernels and " +
        std::to_string(globals) + " globals, more than its size holds");
  Container c;
  std::set<std::string, std::less<>> names;
  const auto unique = [&](const std::string& name) {
    if (!names.insert(name).second) bad("the name " + name + " appears twice");
  };
  for (std::uint32_t i = 0; i < kernels; ++i) {
    ContainerKernel k;
    k.name = r.name("a kernel name");
    unique(k.name);
    const std::string what = "kernel " + k.name;
    try {
      k.entry = r.name("the entry point name");
      for (auto& v : k.local_size) v = r.u32("the workgroup size");
      for (auto& v : k.local_size_ids) v = r.u32("the workgroup size ids");
      k.push_bytes = r.u32("the push-constant size");
      const std::uint32_t args = r.u32("the argument count");
      if (k.push_bytes > kMaxPushBytes || args > kMaxArgs)
        bad(std::to_string(args) + " arguments in " + std::to_string(k.push_bytes) +
            " bytes is past the format's limits");
      for (std::uint32_t a = 0; a < args; ++a) {
        const std::uint32_t offset = r.u32("an argument offset");
        const std::uint32_t size = r.u32("an argument size");
        if (size == 0 || size > 8 || offset > k.push_bytes || size > k.push_bytes - offset)
          bad("argument " + std::to_string(a) + " lies outside the push constants");
        k.args.push_back({offset, size});
      }
      const std::uint32_t spirv_bytes = r.u32("the SPIR-V size");
      if (spirv_bytes % 4 != 0) bad("its SPIR-V is not a whole number of words");
      const auto raw = r.bytes(spirv_bytes, "the SPIR-V");
      k.spirv.resize(spirv_bytes / 4);
      for (std::size_t w = 0; w < k.spirv.size(); ++w)
        for (int b = 0; b < 4; ++b)
          k.spirv[w] |= std::to_integer<std::uint32_t>(raw[4 * w + b]) << (8 * b);
      check_against_spirv(k);
    } catch (const std::invalid_argument& e) {
      bad(what + ": " + e.what());
    }
    c.kernels.push_back(std::move(k));
  }
  for (std::uint32_t i = 0; i < globals; ++i) {
    ContainerGlobal g;
    g.name = r.name("a global name");
    unique(g.name);
    const std::uint32_t size = r.u32("a global size");
    if (size == 0) bad("global " + g.name + " is empty");
    const auto raw = r.bytes(size, "a global's bytes");
    g.bytes.assign(raw.begin(), raw.end());
    c.globals.push_back(std::move(g));
  }
  if (!r.done()) bad(std::to_string(r.left()) + " bytes follow the container's last entry");
  return c;
}

}  // namespace gpuplug::vulkan
