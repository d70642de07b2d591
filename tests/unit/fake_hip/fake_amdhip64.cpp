// SPDX-License-Identifier: Apache-2.0
// A fake HIP runtime (libamdhip64.so) for testing the HIP plugin's logic on machines without an AMD
// GPU.

// Two fake GPUs in host memory, just enough of hip_runtime_api.h for libgpuplug-hip.so:
//   device 0: "gfx90a:sramecc+:xnack-", managed memory supported (so the XNACK warning fires);
//   device 1: "gfx1030", no managed memory.
// It checks what a real runtime would punish: memory and streams are owned by the device that
// made them and only usable while that device is current on the calling thread (the plugin must
// call hipSetDevice on every thread), unknown pointers and streams are errors, and module images
// must be offload bundles or AMDGPU ELF. Pointer queries (hipPointerGetAttributes,
// hipMemGetAddressRange) answer for any device, as a real runtime's do. Modules are read with the
// plugin's own reader (image.hpp); a launch of the kernel "axpy" runs it on the host so that the
// test can see the parameters arrive; any other launch only checks its configuration. Built with
// -DGPUPLUG_FAKE_HIP_TOO_OLD it lacks hipModuleGetGlobal, like a runtime too old for the plugin;
// with -DGPUPLUG_FAKE_HIP_NO_EVENTS it lacks the event entry points (the plugin must still load).
// hipMemcpyPeerAsync and hipHostMalloc/hipHostFree count their calls for the peer copy tests,
// hipMemcpy2DAsync its copies for the pitched copy tests.
// hipHostMalloc'd memory is not zeroed (0xCD, as page-locked memory holds what it held); with
// hipHostMallocMapped, hipHostGetDevicePointer (flags 0) maps a pointer inside it to the same
// address (an AMD GPU reaches mapped host memory at its host address), and copies and memsets
// take it on the device that made it, or on every device when it is also portable.
// Events: work completes when it is queued here, so a recorded event is complete at once; its
// time is the steady clock at hipEventRecord. Events, like streams, belong to the device current
// when they were made, and a destroyed or unknown event is hipErrorInvalidHandle.

#include <hip/hip_runtime_api.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "gpuplug/support/elf_symbols.hpp"
#include "image.hpp"

namespace {

constexpr int kDevices = 2;
constexpr std::size_t kDeviceMemory = std::size_t{1} << 30;
const char* const kArch[kDevices] = {"gfx90a:sramecc+:xnack-", "gfx1030"};
const int kManaged[kDevices] = {1, 0};

struct Allocation {
  int device;
  std::size_t bytes;
};
struct Function {
  std::string name;
};
// One operation a capture recorded. Host pointers are recorded, not their bytes: a replay reads
// and writes host memory as it is then, as the runtime's memcpy nodes do. A launch keeps a copy
// of axpy's four arguments (the only kernel this fake runs), as the runtime copies a kernel's
// arguments when it records the launch.
struct Node {
  enum Kind { copy, copy_2d, memset, launch } kind = copy;
  void* dst = nullptr;
  const void* src = nullptr;
  std::size_t bytes = 0, dpitch = 0, spitch = 0, height = 0;  // copy_2d: bytes is the width
  hipMemcpyKind direction = hipMemcpyHostToDevice;
  unsigned char value = 0;
  const void* function = nullptr;
  unsigned gx = 0, bx = 0;
  std::uint32_t n = 0;
  float a = 0;
  std::uint64_t x = 0, y = 0;
};
struct Graph {
  bool exec;  // a hipGraphExec_t (instantiated) or a hipGraph_t
  std::vector<Node> nodes;
};
struct Module {
  int device;
  std::vector<std::string> kernels;
  // Published objects and their storage: 4-byte ones with the values gpuplug's tests use, others
  // (the 72-byte `<func>_args`) with the bytes the code object gives them.
  std::map<std::string, std::vector<unsigned char>> globals;
  std::map<std::string, std::unique_ptr<Function>> functions;  // handles handed out, by name
};

// Process-wide fake state. Leaked on purpose (never destroyed), like a real runtime's.
struct State {
  std::mutex mutex;
  std::map<void*, Allocation> allocations;
  std::map<hipStream_t, int> streams;  // stream -> device
  std::set<hipStream_t> non_blocking;  // streams made with hipStreamNonBlocking
  struct Event {
    int device;
    bool recorded = false;
    std::chrono::steady_clock::time_point at{};
    // Recorded on a capturing stream: the capture's id, the stream and its recorded operations
    // then (a wait on the event depends on those); capture_id 0 otherwise.
    unsigned long long capture_id = 0;
    hipStream_t capture_stream = nullptr;
    std::size_t capture_ops = 0;
  };
  std::map<hipEvent_t, Event> events;
  struct Capture;
  struct Member {  // a capturing stream: the capture's origin, or a stream forked into it
    std::shared_ptr<Capture> capture;
    std::size_t ops = 0;         // operations recorded from this stream
    std::size_t joined_ops = 0;  // of those, how many another member waited for
  };
  std::map<hipStream_t, Member> members;
  unsigned long long next_capture_id = 1;
  std::set<void*> graphs;  // live hipGraph_t and hipGraphExec_t (both a Graph)
  std::size_t graph_launches = 0;  // replays run (not those recorded into a capture)
  std::size_t event_calls = 0;  // every hipEvent* / hipStreamWaitEvent call (for the tests)
  std::set<Module*> modules;
  std::size_t live[kDevices] = {};
  std::size_t peer_copies = 0;  // hipMemcpyPeerAsync calls that copied (for the tests)
  std::size_t copies_2d = 0;    // hipMemcpy2DAsync calls that copied (for the tests)
  struct Pinned {
    std::size_t bytes = 0;
    unsigned int flags = 0;  // hipHostMallocPortable 0x1, hipHostMallocMapped 0x2, ...
    int device = 0;          // current at hipHostMalloc
  };
  std::map<void*, Pinned> pinned;  // hipHostMalloc'd memory not yet freed
  std::size_t pinned_allocs = 0;
};
struct State::Capture {
  unsigned long long id;  // unique over the process, from 1
  hipStreamCaptureMode mode;
  std::thread::id thread;  // that began it
  hipStream_t origin;
  bool invalidated = false;
  std::vector<Node> nodes;
};
State& state() {
  static State* s = new State;
  return *s;
}

thread_local int t_current = 0;  // like HIP: device 0 until a thread says otherwise

// The mapped host allocation holding `p` (the caller holds the lock), or null.
const std::pair<void* const, State::Pinned>* mapped_of(const void* p) {
  auto it = state().pinned.upper_bound(const_cast<void*>(p));
  if (it == state().pinned.begin()) return nullptr;
  --it;
  const auto offset =
      static_cast<std::size_t>(static_cast<const char*>(p) - static_cast<const char*>(it->first));
  return (it->second.flags & hipHostMallocMapped) != 0 && offset < it->second.bytes ? &*it
                                                                                    : nullptr;
}

// Whether [p, p + bytes) lies in an allocation made on the current device, or in mapped host
// memory this device may reach.
bool owned(const void* p, std::size_t bytes) {
  for (const auto& [base, a] : state().allocations) {
    const auto* b = static_cast<const char*>(base);
    const auto* q = static_cast<const char*>(p);
    if (q >= b && q + bytes <= b + a.bytes) return a.device == t_current;
  }
  if (const auto* m = mapped_of(p)) {
    const auto* end = static_cast<const char*>(m->first) + m->second.bytes;
    return static_cast<const char*>(p) + bytes <= end &&
           ((m->second.flags & hipHostMallocPortable) != 0 || m->second.device == t_current);
  }
  return false;
}

// The allocation holding `p` on any device (the caller holds the lock), or null.
const std::pair<void* const, Allocation>* allocation_of(const void* p) {
  auto it = state().allocations.upper_bound(const_cast<void*>(p));
  if (it == state().allocations.begin()) return nullptr;
  --it;
  const auto offset =
      static_cast<std::size_t>(static_cast<const char*>(p) - static_cast<const char*>(it->first));
  return offset < std::max<std::size_t>(it->second.bytes, 1) ? &*it : nullptr;
}

bool stream_ok(hipStream_t s) {
  if (s == nullptr) return true;
  const auto it = state().streams.find(s);
  return it != state().streams.end() && it->second == t_current;
}

// ---- stream capture (the caller holds the lock) ----
// Whether work on `stream` runs (nullptr returned, *error hipSuccess), is recorded into the
// capture of the returned member, or is refused (*error): the null stream would wait for every
// capturing (blocking) stream (hipErrorStreamCaptureImplicit, invalidating their captures), and
// a member of an invalidated capture is hipErrorStreamCaptureInvalidated.
State::Member* capture_gate(hipStream_t stream, hipError_t* error) {
  *error = hipSuccess;
  if (stream == nullptr) {
    // A non-blocking capturing stream is not ordered with the null stream: it is not affected.
    for (auto& [s, m] : state().members) {
      if (state().non_blocking.contains(s)) continue;
      m.capture->invalidated = true;
      *error = hipErrorStreamCaptureImplicit;
    }
    return nullptr;
  }
  const auto it = state().members.find(stream);
  if (it == state().members.end()) return nullptr;
  if (it->second.capture->invalidated) *error = hipErrorStreamCaptureInvalidated;
  return &it->second;
}
void record(State::Member& m, const Node& n) {
  m.capture->nodes.push_back(n);
  ++m.ops;
}
// A "potentially unsafe" call (hipMalloc, hipFree, ...) while a global capture is active on any
// thread, or a thread-local one begun by this thread: hipErrorStreamCaptureUnsupported, and those
// captures are invalidated.
hipError_t unsafe_call() {
  hipError_t error = hipSuccess;
  for (auto& [s, m] : state().members) {
    State::Capture& c = *m.capture;
    if (c.mode == hipStreamCaptureModeGlobal ||
        (c.mode == hipStreamCaptureModeThreadLocal && c.thread == std::this_thread::get_id())) {
      c.invalidated = true;
      error = hipErrorStreamCaptureUnsupported;
    }
  }
  return error;
}
// Capture `c` ends: its members leave it.
void end_members(const State::Capture* c) {
  std::erase_if(state().members, [&](const auto& entry) { return entry.second.capture.get() == c; });
}

hipError_t allocate(void** ptr, std::size_t size) {
  if (ptr == nullptr) return hipErrorInvalidValue;
  std::lock_guard lock(state().mutex);
  if (const hipError_t e = unsafe_call(); e != hipSuccess) return e;
  if (size > kDeviceMemory - state().live[t_current]) return hipErrorOutOfMemory;
  void* p = std::calloc(1, size == 0 ? 1 : size);
  state().allocations[p] = {t_current, size};
  state().live[t_current] += size;
  *ptr = p;
  return hipSuccess;
}

}  // namespace

const char* hipGetErrorName(hipError_t error) {
  switch (error) {
    case hipSuccess:
      return "hipSuccess";
    case hipErrorInvalidValue:
      return "hipErrorInvalidValue";
    case hipErrorOutOfMemory:
      return "hipErrorOutOfMemory";
    case hipErrorInvalidConfiguration:
      return "hipErrorInvalidConfiguration";
    case hipErrorInvalidDevicePointer:
      return "hipErrorInvalidDevicePointer";
    case hipErrorNoDevice:
      return "hipErrorNoDevice";
    case hipErrorInvalidDevice:
      return "hipErrorInvalidDevice";
    case hipErrorInvalidImage:
      return "hipErrorInvalidImage";
    case hipErrorInvalidHandle:
      return "hipErrorInvalidHandle";
    case hipErrorNotFound:
      return "hipErrorNotFound";
    case hipErrorIllegalState:
      return "hipErrorIllegalState";
    case hipErrorIllegalAddress:
      return "hipErrorIllegalAddress";
    case hipErrorStreamCaptureUnsupported:
      return "hipErrorStreamCaptureUnsupported";
    case hipErrorStreamCaptureInvalidated:
      return "hipErrorStreamCaptureInvalidated";
    case hipErrorStreamCaptureMerge:
      return "hipErrorStreamCaptureMerge";
    case hipErrorStreamCaptureUnmatched:
      return "hipErrorStreamCaptureUnmatched";
    case hipErrorStreamCaptureUnjoined:
      return "hipErrorStreamCaptureUnjoined";
    case hipErrorStreamCaptureIsolation:
      return "hipErrorStreamCaptureIsolation";
    case hipErrorStreamCaptureImplicit:
      return "hipErrorStreamCaptureImplicit";
    case hipErrorCapturedEvent:
      return "hipErrorCapturedEvent";
    case hipErrorStreamCaptureWrongThread:
      return "hipErrorStreamCaptureWrongThread";
    default:
      return "hipErrorUnknown";
  }
}
const char* hipGetErrorString(hipError_t error) {
  return error == hipErrorOutOfMemory ? "out of memory" : hipGetErrorName(error);
}
hipError_t hipInit(unsigned int) { return hipSuccess; }
hipError_t hipRuntimeGetVersion(int* v) { return *v = 60032830, hipSuccess; }  // "6.0"
hipError_t hipDriverGetVersion(int* v) { return *v = 60141134, hipSuccess; }  // "6.1.41134"
hipError_t hipGetDeviceCount(int* count) { return *count = kDevices, hipSuccess; }
hipError_t hipGetDevice(int* device) { return *device = t_current, hipSuccess; }
hipError_t hipSetDevice(int device) {
  if (device < 0 || device >= kDevices) return hipErrorInvalidDevice;
  t_current = device;
  return hipSuccess;
}
hipError_t hipDeviceGetName(char* name, int len, hipDevice_t device) {
  if (device < 0 || device >= kDevices) return hipErrorInvalidDevice;
  std::snprintf(name, static_cast<std::size_t>(len), "Fake AMD GPU %d", device);
  return hipSuccess;
}
hipError_t hipDeviceGetUuid(hipUUID* uuid, hipDevice_t device) {
  if (device < 0 || device >= kDevices) return hipErrorInvalidDevice;
  std::memcpy(uuid->bytes, device == 0 ? "0123456789abcdef" : "fedcba9876543210", 16);
  return hipSuccess;
}
hipError_t hipDeviceTotalMem(size_t* bytes, hipDevice_t device) {
  if (device < 0 || device >= kDevices) return hipErrorInvalidDevice;
  return *bytes = kDeviceMemory, hipSuccess;
}
hipError_t hipDeviceGetAttribute(int* value, hipDeviceAttribute_t attr, int device) {
  if (device < 0 || device >= kDevices) return hipErrorInvalidDevice;
  if (attr == hipDeviceAttributeMultiprocessorCount) return *value = 104 + device, hipSuccess;
  if (attr == hipDeviceAttributeManagedMemory) return *value = kManaged[device], hipSuccess;
  if (attr == hipDeviceAttributeConcurrentManagedAccess) return *value = 0, hipSuccess;
  // Identity and capabilities (ABI 1.1): an MI200-like wave64 board and an integrated wave32 one.
  if (attr == hipDeviceAttributeWarpSize) return *value = device == 0 ? 64 : 32, hipSuccess;
  if (attr == hipDeviceAttributeMaxSharedMemoryPerBlock)
    return *value = device == 0 ? 65536 : 32768, hipSuccess;
  if (attr == hipDeviceAttributeIntegrated) return *value = device, hipSuccess;
  return hipErrorInvalidValue;
}
// Device 0 at 0000:c1:00.0, device 1 in another PCI domain, 0001:02:00.0.
hipError_t hipDeviceGetPCIBusId(char* bus_id, int len, int device) {
  if (device < 0 || device >= kDevices) return hipErrorInvalidDevice;
  if (bus_id == nullptr || len <= 0) return hipErrorInvalidValue;
  std::snprintf(bus_id, static_cast<std::size_t>(len), "%s",
                device == 0 ? "0000:c1:00.0" : "0001:02:00.0");
  return hipSuccess;
}
hipError_t hipGetDeviceProperties(hipDeviceProp_t* props, int device) {
  if (device < 0 || device >= kDevices) return hipErrorInvalidDevice;
  std::memset(props, 0, sizeof *props);
  std::snprintf(props->name, sizeof props->name, "Fake AMD GPU %d", device);
  std::snprintf(props->gcnArchName, sizeof props->gcnArchName, "%s", kArch[device]);
  return hipSuccess;
}
hipError_t hipMemGetInfo(size_t* free_bytes, size_t* total) {
  std::lock_guard lock(state().mutex);
  *total = kDeviceMemory;
  *free_bytes = kDeviceMemory - state().live[t_current];
  return hipSuccess;
}

hipError_t hipMalloc(void** ptr, size_t size) { return allocate(ptr, size); }
hipError_t hipMallocManaged(void** ptr, size_t size, unsigned int flags) {
  if (!kManaged[t_current] || flags != hipMemAttachGlobal) return hipErrorNotSupported;
  return allocate(ptr, size);
}
hipError_t hipFree(void* ptr) {
  if (ptr == nullptr) return hipSuccess;
  std::lock_guard lock(state().mutex);
  if (const hipError_t e = unsafe_call(); e != hipSuccess) return e;
  const auto it = state().allocations.find(ptr);
  if (it == state().allocations.end() || it->second.device != t_current)
    return hipErrorInvalidDevicePointer;
  state().live[t_current] -= it->second.bytes;
  state().allocations.erase(it);
  std::free(ptr);
  return hipSuccess;
}

hipError_t hipPointerGetAttributes(hipPointerAttribute_t* attributes, const void* ptr) {
  std::lock_guard lock(state().mutex);
  const auto* a = allocation_of(ptr);
  if (attributes == nullptr || a == nullptr) return hipErrorInvalidValue;
  *attributes = hipPointerAttribute_t{};
  attributes->memoryType = hipMemoryTypeDevice;
  attributes->device = a->second.device;
  attributes->devicePointer = const_cast<void*>(ptr);
  return hipSuccess;
}
hipError_t hipMemGetAddressRange(hipDeviceptr_t* base, size_t* size, hipDeviceptr_t ptr) {
  std::lock_guard lock(state().mutex);
  const auto* a = allocation_of(ptr);
  if (base == nullptr || size == nullptr || a == nullptr) return hipErrorNotFound;
  *base = a->first;
  *size = a->second.bytes;
  return hipSuccess;
}

namespace {
// Each kind of work: checked, then done when `run` (the caller holds the lock).
hipError_t copy_now(const Node& n, bool run) {
  const bool dst_device = n.direction == hipMemcpyHostToDevice || n.direction == hipMemcpyDeviceToDevice;
  const bool src_device = n.direction == hipMemcpyDeviceToHost || n.direction == hipMemcpyDeviceToDevice;
  if ((dst_device && !owned(n.dst, n.bytes)) || (src_device && !owned(n.src, n.bytes)))
    return hipErrorInvalidValue;
  if (run) std::memmove(n.dst, n.src, n.bytes);
  return hipSuccess;
}
hipError_t copy_2d_now(const Node& n, bool run);
hipError_t memset_now(const Node& n, bool run);
hipError_t launch_now(const Node& n, bool run);
hipError_t node_now(const Node& n, bool run) {
  switch (n.kind) {
    case Node::copy: return copy_now(n, run);
    case Node::copy_2d: return copy_2d_now(n, run);
    case Node::memset: return memset_now(n, run);
    case Node::launch: return launch_now(n, run);
  }
  return hipErrorInvalidValue;
}
// Work `n` queued on `stream`: done, recorded into the stream's capture after the checks the
// runtime makes when it records it, or refused.
hipError_t queue(const Node& n, hipStream_t stream) {
  if (!stream_ok(stream)) return hipErrorInvalidHandle;
  hipError_t e = hipSuccess;
  State::Member* m = capture_gate(stream, &e);
  if (e != hipSuccess) return e;
  if (m == nullptr) return node_now(n, true);
  if ((e = node_now(n, false)) != hipSuccess) return e;
  record(*m, n);
  return hipSuccess;
}
}  // namespace

hipError_t hipMemcpyAsync(void* dst, const void* src, size_t bytes, hipMemcpyKind kind,
                          hipStream_t stream) {
  std::lock_guard lock(state().mutex);
  Node n;
  n.dst = dst;
  n.src = src;
  n.bytes = bytes;
  n.direction = kind;
  return queue(n, stream);
}
// As HIP's runtime: width or height 0 copies nothing; a pitch below the width is
// hipErrorInvalidPitchValue; every row of a device side must lie in an allocation of the current
// device (hipErrorInvalidValue), checked for all rows before any is copied.
hipError_t hipMemcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                            size_t height, hipMemcpyKind kind, hipStream_t stream) {
  std::lock_guard lock(state().mutex);
  if (!stream_ok(stream)) return hipErrorInvalidHandle;
  if (width == 0 || height == 0) return hipSuccess;
  if (dpitch < width || spitch < width) return hipErrorInvalidPitchValue;
  if (kind != hipMemcpyHostToDevice && kind != hipMemcpyDeviceToHost &&
      kind != hipMemcpyDeviceToDevice && kind != hipMemcpyHostToHost)
    return hipErrorInvalidMemcpyDirection;
  if (dst == nullptr || src == nullptr) return hipErrorInvalidValue;
  Node n;
  n.kind = Node::copy_2d;
  n.dst = dst;
  n.src = src;
  n.bytes = width;
  n.dpitch = dpitch;
  n.spitch = spitch;
  n.height = height;
  n.direction = kind;
  return queue(n, stream);
}
namespace {
hipError_t copy_2d_now(const Node& n, bool run) {
  const bool dst_device = n.direction == hipMemcpyHostToDevice || n.direction == hipMemcpyDeviceToDevice;
  const bool src_device = n.direction == hipMemcpyDeviceToHost || n.direction == hipMemcpyDeviceToDevice;
  auto* to = static_cast<char*>(n.dst);
  const auto* from = static_cast<const char*>(n.src);
  for (size_t r = 0; r < n.height; ++r) {
    if ((dst_device && !owned(to + r * n.dpitch, n.bytes)) ||
        (src_device && !owned(from + r * n.spitch, n.bytes)))
      return hipErrorInvalidValue;
  }
  if (!run) return hipSuccess;
  for (size_t r = 0; r < n.height; ++r) std::memmove(to + r * n.dpitch, from + r * n.spitch, n.bytes);
  ++state().copies_2d;
  return hipSuccess;
}
}  // namespace
hipError_t hipMemcpy(void* dst, const void* src, size_t bytes, hipMemcpyKind kind) {
  return hipMemcpyAsync(dst, src, bytes, kind, nullptr);
}
// Peer copies: each range must lie in an allocation of the device named for it, and the stream
// must be the current device's (as for every stream argument here).
hipError_t hipMemcpyPeerAsync(void* dst, int dst_device, const void* src, int src_device,
                              size_t bytes, hipStream_t stream) {
  std::lock_guard lock(state().mutex);
  if (!stream_ok(stream)) return hipErrorInvalidHandle;
  const auto* d = allocation_of(dst);
  const auto* s = allocation_of(src);
  const auto inside = [](const auto* a, const void* p, std::size_t n) {
    return static_cast<const char*>(p) + n <= static_cast<const char*>(a->first) + a->second.bytes;
  };
  if (d == nullptr || s == nullptr || d->second.device != dst_device ||
      s->second.device != src_device || !inside(d, dst, bytes) || !inside(s, src, bytes))
    return hipErrorInvalidValue;
  std::memmove(dst, src, bytes);
  ++state().peer_copies;
  return hipSuccess;
}

// Pinned host memory: plain host memory, remembered so that hipHostFree refuses anything else.
hipError_t hipHostMalloc(void** ptr, size_t size, unsigned int flags) {
  if (ptr == nullptr || size == 0 || (flags & ~0xFu) != 0) return hipErrorInvalidValue;
  std::lock_guard lock(state().mutex);
  *ptr = std::malloc(size);
  if (*ptr == nullptr) return hipErrorOutOfMemory;
  std::memset(*ptr, 0xCD, size);
  state().pinned[*ptr] = State::Pinned{size, flags, t_current};
  ++state().pinned_allocs;
  return hipSuccess;
}
hipError_t hipHostGetDevicePointer(void** device, void* host, unsigned int flags) {
  if (device == nullptr || flags != 0) return hipErrorInvalidValue;
  std::lock_guard lock(state().mutex);
  if (mapped_of(host) == nullptr) return hipErrorInvalidValue;
  *device = host;
  return hipSuccess;
}
hipError_t hipHostFree(void* ptr) {
  if (ptr == nullptr) return hipSuccess;
  std::lock_guard lock(state().mutex);
  if (state().pinned.erase(ptr) == 0) return hipErrorInvalidValue;
  std::free(ptr);
  return hipSuccess;
}

hipError_t hipMemsetD8Async(hipDeviceptr_t dst, unsigned char value, size_t count,
                            hipStream_t stream) {
  std::lock_guard lock(state().mutex);
  Node n;
  n.kind = Node::memset;
  n.dst = dst;
  n.bytes = count;
  n.value = value;
  return queue(n, stream);
}
namespace {
hipError_t memset_now(const Node& n, bool run) {
  if (!owned(n.dst, n.bytes)) return hipErrorInvalidValue;
  if (run) std::memset(n.dst, n.value, n.bytes);
  return hipSuccess;
}
}  // namespace

hipError_t hipStreamCreateWithFlags(hipStream_t* stream, unsigned int flags) {
  if (stream == nullptr || (flags & ~unsigned{hipStreamNonBlocking}) != 0)
    return hipErrorInvalidValue;
  std::lock_guard lock(state().mutex);
  *stream = reinterpret_cast<hipStream_t>(new char);
  state().streams[*stream] = t_current;
  if (flags == hipStreamNonBlocking) state().non_blocking.insert(*stream);
  return hipSuccess;
}
hipError_t hipStreamCreate(hipStream_t* stream) { return hipStreamCreateWithFlags(stream, 0); }
hipError_t hipStreamDestroy(hipStream_t stream) {
  std::lock_guard lock(state().mutex);
  if (stream == nullptr || !stream_ok(stream)) return hipErrorInvalidHandle;
  // A capturing stream leaves its capture, invalidating it; without its origin it is gone.
  if (const auto it = state().members.find(stream); it != state().members.end()) {
    const std::shared_ptr<State::Capture> c = it->second.capture;
    c->invalidated = true;
    if (c->origin == stream) {
      end_members(c.get());
    } else {
      state().members.erase(it);
    }
  }
  state().streams.erase(stream);
  state().non_blocking.erase(stream);
  delete reinterpret_cast<char*>(stream);
  return hipSuccess;
}
// A synchronize would wait for work a capture only records: hipErrorStreamCaptureUnsupported,
// and the capture is invalidated (hipErrorStreamCaptureInvalidated once it is).
hipError_t hipStreamSynchronize(hipStream_t stream) {
  std::lock_guard lock(state().mutex);
  if (!stream_ok(stream)) return hipErrorInvalidHandle;
  hipError_t e = hipSuccess;
  State::Member* m = capture_gate(stream, &e);
  if (m != nullptr && e == hipSuccess) {
    m->capture->invalidated = true;
    e = hipErrorStreamCaptureUnsupported;
  }
  return e;
}

#ifndef GPUPLUG_FAKE_HIP_NO_EVENTS
namespace {
// The event `e` of the current device (the caller holds the lock), or null.
State::Event* event_of(hipEvent_t e) {
  ++state().event_calls;
  const auto it = state().events.find(e);
  return it != state().events.end() && it->second.device == t_current ? &it->second : nullptr;
}
}  // namespace

hipError_t hipEventCreate(hipEvent_t* event) {
  if (event == nullptr) return hipErrorInvalidValue;
  std::lock_guard lock(state().mutex);
  ++state().event_calls;
  *event = reinterpret_cast<hipEvent_t>(new char);
  state().events[*event] = State::Event{t_current};
  return hipSuccess;
}
hipError_t hipEventDestroy(hipEvent_t event) {
  std::lock_guard lock(state().mutex);
  if (event_of(event) == nullptr) return hipErrorInvalidHandle;
  state().events.erase(event);
  delete reinterpret_cast<char*>(event);
  return hipSuccess;
}
namespace {
// The member `e` was last recorded on in a capture still active, or null.
State::Member* capturing_recorder(const State::Event& e) {
  if (e.capture_id == 0) return nullptr;
  const auto it = state().members.find(e.capture_stream);
  return it != state().members.end() && it->second.capture->id == e.capture_id ? &it->second
                                                                               : nullptr;
}
// An event last recorded in an active capture has no completion to wait for or ask about.
hipError_t event_done(hipEvent_t event) {
  const State::Event* e = event_of(event);
  if (e == nullptr) return hipErrorInvalidHandle;
  return capturing_recorder(*e) != nullptr ? hipErrorCapturedEvent : hipSuccess;
}
}  // namespace

// On a capturing stream the record is captured (the event marks the stream's point in the
// capture, for forks and joins), not done.
hipError_t hipEventRecord(hipEvent_t event, hipStream_t stream) {
  std::lock_guard lock(state().mutex);
  State::Event* e = event_of(event);
  if (e == nullptr || !stream_ok(stream)) return hipErrorInvalidHandle;
  hipError_t error = hipSuccess;
  if (const State::Member* m = capture_gate(stream, &error); error != hipSuccess) {
    return error;
  } else if (m != nullptr) {
    e->capture_id = m->capture->id;
    e->capture_stream = stream;
    e->capture_ops = m->ops;
    return hipSuccess;
  }
  e->capture_id = 0;
  e->recorded = true;
  e->at = std::chrono::steady_clock::now();
  return hipSuccess;
}
hipError_t hipEventSynchronize(hipEvent_t event) {
  std::lock_guard lock(state().mutex);
  return event_done(event);
}
hipError_t hipEventQuery(hipEvent_t event) {
  std::lock_guard lock(state().mutex);
  return event_done(event);
}
hipError_t hipEventElapsedTime(float* ms, hipEvent_t start, hipEvent_t stop) {
  if (ms == nullptr) return hipErrorInvalidValue;
  std::lock_guard lock(state().mutex);
  const State::Event* a = event_of(start);
  const State::Event* b = event_of(stop);
  if (a == nullptr || b == nullptr || !a->recorded || !b->recorded) return hipErrorInvalidHandle;
  *ms = std::chrono::duration<float, std::milli>(b->at - a->at).count();
  return hipSuccess;
}
// A wait on an event recorded in an active capture forks a stream that does not capture into
// it, or (from another member) joins the recorder's work up to the record back; a capturing
// stream waiting on an event from outside its capture would cross its boundary
// (hipErrorStreamCaptureIsolation), on one from another capture would merge the two
// (hipErrorStreamCaptureMerge): both invalidate.
hipError_t hipStreamWaitEvent(hipStream_t stream, hipEvent_t event, unsigned int flags) {
  std::lock_guard lock(state().mutex);
  if (flags != 0) return hipErrorInvalidValue;
  const State::Event* e = event_of(event);
  if (e == nullptr || !stream_ok(stream)) return hipErrorInvalidHandle;
  hipError_t error = hipSuccess;
  State::Member* m = capture_gate(stream, &error);
  if (error != hipSuccess) return error;
  State::Member* recorder = capturing_recorder(*e);
  if (recorder == nullptr) {
    if (m == nullptr) return hipSuccess;
    m->capture->invalidated = true;
    return hipErrorStreamCaptureIsolation;
  }
  if (m == nullptr) {
    state().members[stream] = State::Member{recorder->capture};
  } else if (m->capture != recorder->capture) {
    m->capture->invalidated = recorder->capture->invalidated = true;
    return hipErrorStreamCaptureMerge;
  } else if (recorder != m && e->capture_ops > recorder->joined_ops) {
    recorder->joined_ops = e->capture_ops;
  }
  return hipSuccess;
}
#endif

// For the tests (dlsym): how many event calls reached the runtime.
extern "C" __attribute__((visibility("default"))) std::size_t gpuplug_fake_hip_event_calls() {
  std::lock_guard lock(state().mutex);
  return state().event_calls;
}

namespace {
// The objects of `code` larger than 4 bytes (up to a page), with their initial bytes: the section
// contents at the symbol's address, as a runtime would load them. One without file contents
// (.bss) or outside its section is skipped.
void add_object_bytes(std::span<const std::byte> code, Module& m) {
  namespace support = gpuplug::support;
  constexpr std::array<std::uint32_t, 2> tables{support::elf_sht_symtab, support::elf_sht_dynsym};
  std::string why;
  const auto table = support::read_elf64_symbols(code, tables, why);
  if (!table) return;
  for (const support::ElfSymbolInfo& s : table->symbols) {
    if (s.type != 1 || s.size <= 4 || s.size > 4096 || s.section >= table->sections.size())
      continue;
    const support::ElfSection& sec = table->sections[s.section];
    if (sec.type == support::elf_sht_nobits || sec.type == 0 || s.value < sec.addr || s.value - sec.addr > sec.size ||
        sec.size - (s.value - sec.addr) < s.size)
      continue;
    const auto at = code.subspan(sec.offset + (s.value - sec.addr), s.size);
    auto& bytes = m.globals[s.name];
    bytes.resize(s.size);
    std::memcpy(bytes.data(), at.data(), s.size);
  }
}
}  // namespace

hipError_t hipModuleLoadData(hipModule_t* module, const void* image) {
  namespace hip = gpuplug::hip;
  // No size is given; the fake trusts the plugin to have checked the image (it reads at most the
  // bundle's declared extent, as the real runtime does).
  const auto* bytes = static_cast<const std::byte*>(image);
  std::span<const std::byte> head(bytes, 32);
  std::size_t size = 0;
  if (hip::is_offload_bundle(head)) {
    // Extent: the end of the last entry (a real runtime walks the same header).
    std::uint64_t count = 0;
    std::memcpy(&count, bytes + 24, 8);
    std::size_t at = 32;
    for (std::uint64_t i = 0; i < count; ++i) {
      std::uint64_t offset = 0, entry = 0, id = 0;
      std::memcpy(&offset, bytes + at, 8);
      std::memcpy(&entry, bytes + at + 8, 8);
      std::memcpy(&id, bytes + at + 16, 8);
      size = std::max<std::size_t>(size, offset + entry);
      at += 24 + id;
    }
  } else {
    return hipErrorInvalidImage;  // the fake reads bundles only
  }
  const std::span<const std::byte> whole(bytes, size);
  const auto code = hip::select_code_object(whole, kArch[t_current]);
  const auto symbols = hip::read_elf_symbols(code);
  if (!symbols) return hipErrorInvalidImage;
  auto m = std::make_unique<Module>();
  m->device = t_current;
  m->kernels = hip::kernel_names(*symbols);
  for (const hip::ElfSymbol& s : *symbols)  // published metadata, with the values gpuplug uses
    if (s.type == 1 && s.size == 4) {
      const std::uint32_t value = s.name.ends_with("_n_tile") ? 64u : 1u;
      auto& bytes = m->globals[s.name];
      bytes.resize(4);
      std::memcpy(bytes.data(), &value, 4);
    }
  add_object_bytes(code, *m);
  std::lock_guard lock(state().mutex);
  *module = reinterpret_cast<hipModule_t>(m.get());
  state().modules.insert(m.release());
  return hipSuccess;
}
hipError_t hipModuleUnload(hipModule_t module) {
  std::lock_guard lock(state().mutex);
  auto* m = reinterpret_cast<Module*>(module);
  if (state().modules.erase(m) == 0) return hipErrorInvalidHandle;
  for (auto& [name, value] : m->globals) state().allocations.erase(value.data());
  delete m;
  return hipSuccess;
}
hipError_t hipModuleGetFunction(hipFunction_t* function, hipModule_t module, const char* name) {
  std::lock_guard lock(state().mutex);
  auto* m = reinterpret_cast<Module*>(module);
  if (state().modules.count(m) == 0) return hipErrorInvalidHandle;
  if (std::find(m->kernels.begin(), m->kernels.end(), name) == m->kernels.end())
    return hipErrorNotFound;
  auto& slot = m->functions[name];
  if (!slot) slot = std::make_unique<Function>(Function{name});
  *function = reinterpret_cast<hipFunction_t>(slot.get());
  return hipSuccess;
}
#ifndef GPUPLUG_FAKE_HIP_TOO_OLD
hipError_t hipModuleGetGlobal(hipDeviceptr_t* address, size_t* bytes, hipModule_t module,
                              const char* name) {
  std::lock_guard lock(state().mutex);
  auto* m = reinterpret_cast<Module*>(module);
  if (state().modules.count(m) == 0) return hipErrorInvalidHandle;
  const auto it = m->globals.find(name);
  if (it == m->globals.end()) return hipErrorNotFound;
  // Device memory of the module's device, so that the plugin can copy the value back.
  if (state().allocations.count(it->second.data()) == 0) {
    state().allocations[it->second.data()] = {m->device, it->second.size()};
  }
  *address = it->second.data();
  *bytes = it->second.size();
  return hipSuccess;
}
#endif
hipError_t hipModuleLaunchKernel(hipFunction_t f, unsigned int gx, unsigned int gy, unsigned int gz,
                                 unsigned int bx, unsigned int by, unsigned int bz,
                                 unsigned int shared, hipStream_t stream, void** params,
                                 void** extra) {
  std::lock_guard lock(state().mutex);
  if (!stream_ok(stream)) return hipErrorInvalidHandle;
  if (f == nullptr || extra != nullptr) return hipErrorInvalidValue;
  if (gx * gy * gz == 0 || bx * by * bz == 0 || bx * by * bz > 1024 || shared > 65536)
    return hipErrorInvalidConfiguration;
  Node node;
  node.kind = Node::launch;
  node.function = f;
  node.gx = gx;
  node.bx = bx;
  if (reinterpret_cast<const Function*>(f)->name == "axpy") {  // its arguments, copied
    node.n = *static_cast<std::uint32_t*>(params[0]);
    node.a = *static_cast<float*>(params[1]);
    node.x = *static_cast<std::uint64_t*>(params[2]);
    node.y = *static_cast<std::uint64_t*>(params[3]);
  }
  return queue(node, stream);
}
namespace {
hipError_t launch_now(const Node& node, bool run) {
  const auto& fn = *reinterpret_cast<const Function*>(node.function);
  if (fn.name != "axpy") return hipSuccess;  // y = a*x + y over the whole grid
  auto* x = reinterpret_cast<const float*>(node.x);
  auto* y = reinterpret_cast<float*>(node.y);
  if (std::uint64_t{node.gx} * node.bx < node.n || !owned(x, node.n * 4ull) ||
      !owned(y, node.n * 4ull))
    return hipErrorInvalidValue;
  if (run)
    for (std::uint32_t i = 0; i < node.n; ++i) y[i] = node.a * x[i] + y[i];
  return hipSuccess;
}
}  // namespace

#ifndef GPUPLUG_FAKE_HIP_NO_GRAPHS
// ---- capture and graphs ----
// A capture is begun on one stream (its origin) and holds the nodes recorded from its members:
// the origin and every stream forked into it. End-capture is hipErrorStreamCaptureUnjoined when
// a forked member has work no other member waited for. A hipGraph_t and a hipGraphExec_t are
// both a Graph with its own copy of the nodes; a replay runs them in recording order.
hipError_t hipStreamBeginCapture(hipStream_t stream, hipStreamCaptureMode mode) {
  std::lock_guard lock(state().mutex);
  if (mode < hipStreamCaptureModeGlobal || mode > hipStreamCaptureModeRelaxed)
    return hipErrorInvalidValue;
  if (stream == nullptr) return hipErrorStreamCaptureUnsupported;  // the null stream
  if (!stream_ok(stream)) return hipErrorInvalidHandle;
  if (state().members.contains(stream)) return hipErrorIllegalState;
  auto c = std::make_shared<State::Capture>(
      State::Capture{state().next_capture_id++, mode, std::this_thread::get_id(), stream});
  state().members[stream] = State::Member{std::move(c)};
  return hipSuccess;
}
// Only on the origin (hipErrorStreamCaptureUnmatched), from the thread that began it unless
// relaxed (hipErrorStreamCaptureWrongThread); both leave the capture going. Otherwise it ends.
hipError_t hipStreamEndCapture(hipStream_t stream, hipGraph_t* graph) {
  if (graph == nullptr) return hipErrorInvalidValue;
  *graph = nullptr;
  std::lock_guard lock(state().mutex);
  if (!stream_ok(stream)) return hipErrorInvalidHandle;
  const auto it = state().members.find(stream);
  if (it == state().members.end()) return hipErrorIllegalState;
  const std::shared_ptr<State::Capture> c = it->second.capture;
  if (c->origin != stream) return hipErrorStreamCaptureUnmatched;
  if (c->mode != hipStreamCaptureModeRelaxed && c->thread != std::this_thread::get_id())
    return hipErrorStreamCaptureWrongThread;
  hipError_t e = c->invalidated ? hipErrorStreamCaptureInvalidated : hipSuccess;
  for (const auto& [s, m] : state().members)
    if (e == hipSuccess && m.capture == c && s != c->origin && m.ops > m.joined_ops)
      e = hipErrorStreamCaptureUnjoined;
  end_members(c.get());
  if (e != hipSuccess) return e;
  auto* g = new Graph{false, std::move(c->nodes)};
  state().graphs.insert(g);
  *graph = reinterpret_cast<hipGraph_t>(g);
  return hipSuccess;
}
namespace {
// The capture status of `stream` (the caller holds the lock); the null stream while a stream
// captures is hipErrorStreamCaptureImplicit, without invalidating.
hipError_t capture_status(hipStream_t stream, hipStreamCaptureStatus* status,
                          unsigned long long* id) {
  if (status == nullptr) return hipErrorInvalidValue;
  if (stream == nullptr && !state().members.empty()) return hipErrorStreamCaptureImplicit;
  if (!stream_ok(stream)) return hipErrorInvalidHandle;
  const auto it = state().members.find(stream);
  *status = it == state().members.end()          ? hipStreamCaptureStatusNone
            : it->second.capture->invalidated ? hipStreamCaptureStatusInvalidated
                                              : hipStreamCaptureStatusActive;
  if (id != nullptr && it != state().members.end()) *id = it->second.capture->id;
  return hipSuccess;
}
Graph* graph_of(const void* g, bool exec) {
  const auto it = state().graphs.find(const_cast<void*>(g));
  if (it == state().graphs.end()) return nullptr;
  auto* graph = static_cast<Graph*>(*it);
  return graph->exec == exec ? graph : nullptr;
}
hipError_t destroy_graph(const void* g, bool exec) {
  std::lock_guard lock(state().mutex);
  Graph* graph = graph_of(g, exec);
  if (graph == nullptr) return hipErrorInvalidValue;
  state().graphs.erase(graph);
  delete graph;
  return hipSuccess;
}
}  // namespace
hipError_t hipStreamIsCapturing(hipStream_t stream, hipStreamCaptureStatus* status) {
  std::lock_guard lock(state().mutex);
  return capture_status(stream, status, nullptr);
}
hipError_t hipStreamGetCaptureInfo(hipStream_t stream, hipStreamCaptureStatus* status,
                                   unsigned long long* id) {
  std::lock_guard lock(state().mutex);
  return capture_status(stream, status, id);
}
hipError_t hipGraphInstantiateWithFlags(hipGraphExec_t* exec, hipGraph_t graph,
                                        unsigned long long flags) {
  if (exec == nullptr || flags != 0) return hipErrorInvalidValue;
  std::lock_guard lock(state().mutex);
  const Graph* g = graph_of(graph, false);
  if (g == nullptr) return hipErrorInvalidValue;
  auto* made = new Graph{true, g->nodes};
  state().graphs.insert(made);
  *exec = reinterpret_cast<hipGraphExec_t>(made);
  return hipSuccess;
}
hipError_t hipGraphDestroy(hipGraph_t graph) { return destroy_graph(graph, false); }
hipError_t hipGraphExecDestroy(hipGraphExec_t exec) { return destroy_graph(exec, true); }
// The nodes run in order (a replay: counted), or are recorded into the stream's capture. A node
// whose memory has gone since the capture is hipErrorIllegalAddress, as a real replay's fault.
hipError_t hipGraphLaunch(hipGraphExec_t exec, hipStream_t stream) {
  std::lock_guard lock(state().mutex);
  const Graph* g = graph_of(exec, true);
  if (g == nullptr) return hipErrorInvalidValue;
  if (!stream_ok(stream)) return hipErrorInvalidHandle;
  hipError_t e = hipSuccess;
  State::Member* m = capture_gate(stream, &e);
  if (e != hipSuccess) return e;
  for (const Node& n : g->nodes) {
    if (m != nullptr) {
      record(*m, n);
    } else if (node_now(n, true) != hipSuccess) {
      return hipErrorIllegalAddress;
    }
  }
  if (m == nullptr) ++state().graph_launches;
  return hipSuccess;
}
#endif

// For the tests (dlsym): replays run, and live graphs (hipGraph_t and hipGraphExec_t).
extern "C" __attribute__((visibility("default"))) std::size_t gpuplug_fake_hip_graph_launches() {
  std::lock_guard lock(state().mutex);
  return state().graph_launches;
}
extern "C" __attribute__((visibility("default"))) std::size_t gpuplug_fake_hip_live_graphs() {
  std::lock_guard lock(state().mutex);
  return state().graphs.size();
}

// For the tests (dlsym): peer copies made, pinned buffers ever allocated and still live.
extern "C" __attribute__((visibility("default"))) std::size_t gpuplug_fake_hip_peer_copies() {
  std::lock_guard lock(state().mutex);
  return state().peer_copies;
}
extern "C" __attribute__((visibility("default"))) std::size_t gpuplug_fake_hip_pinned_allocs() {
  std::lock_guard lock(state().mutex);
  return state().pinned_allocs;
}
extern "C" __attribute__((visibility("default"))) std::size_t gpuplug_fake_hip_pinned_live() {
  std::lock_guard lock(state().mutex);
  return state().pinned.size();
}
extern "C" __attribute__((visibility("default"))) std::size_t gpuplug_fake_hip_copies_2d() {
  std::lock_guard lock(state().mutex);
  return state().copies_2d;
}
