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
  struct Event {
    int device;
    bool recorded = false;
    std::chrono::steady_clock::time_point at{};
  };
  std::map<hipEvent_t, Event> events;
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

hipError_t allocate(void** ptr, std::size_t size) {
  if (ptr == nullptr) return hipErrorInvalidValue;
  std::lock_guard lock(state().mutex);
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

hipError_t hipMemcpyAsync(void* dst, const void* src, size_t bytes, hipMemcpyKind kind,
                          hipStream_t stream) {
  std::lock_guard lock(state().mutex);
  if (!stream_ok(stream)) return hipErrorInvalidHandle;
  const bool dst_device = kind == hipMemcpyHostToDevice || kind == hipMemcpyDeviceToDevice;
  const bool src_device = kind == hipMemcpyDeviceToHost || kind == hipMemcpyDeviceToDevice;
  if ((dst_device && !owned(dst, bytes)) || (src_device && !owned(src, bytes)))
    return hipErrorInvalidValue;
  std::memmove(dst, src, bytes);
  return hipSuccess;
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
  const bool dst_device = kind == hipMemcpyHostToDevice || kind == hipMemcpyDeviceToDevice;
  const bool src_device = kind == hipMemcpyDeviceToHost || kind == hipMemcpyDeviceToDevice;
  auto* to = static_cast<char*>(dst);
  const auto* from = static_cast<const char*>(src);
  for (size_t r = 0; r < height; ++r) {
    if ((dst_device && !owned(to + r * dpitch, width)) ||
        (src_device && !owned(from + r * spitch, width)))
      return hipErrorInvalidValue;
  }
  for (size_t r = 0; r < height; ++r) std::memmove(to + r * dpitch, from + r * spitch, width);
  ++state().copies_2d;
  return hipSuccess;
}
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
  if (!stream_ok(stream)) return hipErrorInvalidHandle;
  if (!owned(dst, count)) return hipErrorInvalidValue;
  std::memset(dst, value, count);
  return hipSuccess;
}

hipError_t hipStreamCreate(hipStream_t* stream) {
  std::lock_guard lock(state().mutex);
  *stream = reinterpret_cast<hipStream_t>(new char);
  state().streams[*stream] = t_current;
  return hipSuccess;
}
hipError_t hipStreamDestroy(hipStream_t stream) {
  std::lock_guard lock(state().mutex);
  if (stream == nullptr || !stream_ok(stream)) return hipErrorInvalidHandle;
  state().streams.erase(stream);
  delete reinterpret_cast<char*>(stream);
  return hipSuccess;
}
hipError_t hipStreamSynchronize(hipStream_t stream) {
  std::lock_guard lock(state().mutex);
  return stream_ok(stream) ? hipSuccess : hipErrorInvalidHandle;
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
hipError_t hipEventRecord(hipEvent_t event, hipStream_t stream) {
  std::lock_guard lock(state().mutex);
  State::Event* e = event_of(event);
  if (e == nullptr || !stream_ok(stream)) return hipErrorInvalidHandle;
  e->recorded = true;
  e->at = std::chrono::steady_clock::now();
  return hipSuccess;
}
hipError_t hipEventSynchronize(hipEvent_t event) {
  std::lock_guard lock(state().mutex);
  return event_of(event) != nullptr ? hipSuccess : hipErrorInvalidHandle;
}
hipError_t hipEventQuery(hipEvent_t event) {
  std::lock_guard lock(state().mutex);
  return event_of(event) != nullptr ? hipSuccess : hipErrorInvalidHandle;
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
hipError_t hipStreamWaitEvent(hipStream_t stream, hipEvent_t event, unsigned int flags) {
  std::lock_guard lock(state().mutex);
  if (flags != 0) return hipErrorInvalidValue;
  return event_of(event) != nullptr && stream_ok(stream) ? hipSuccess : hipErrorInvalidHandle;
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
  const auto& fn = *reinterpret_cast<const Function*>(f);
  if (fn.name == "axpy") {  // y = a*x + y over the whole grid
    const std::uint32_t n = *static_cast<std::uint32_t*>(params[0]);
    const float a = *static_cast<float*>(params[1]);
    auto* x = reinterpret_cast<const float*>(*static_cast<std::uint64_t*>(params[2]));
    auto* y = reinterpret_cast<float*>(*static_cast<std::uint64_t*>(params[3]));
    if (std::uint64_t{gx} * bx < n || !owned(x, n * 4ull) || !owned(y, n * 4ull))
      return hipErrorInvalidValue;
    for (std::uint32_t i = 0; i < n; ++i) y[i] = a * x[i] + y[i];
  }
  return hipSuccess;
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
