// SPDX-License-Identifier: Apache-2.0
// DLPack (docs/interop.md): to_dlpack and from_dlpack round trips between two host
// backends (strides, byte offset, read-only, deleter ordering) and their refusals. CTest runs it
// again on the fake HIP runtime (GPUPLUG_TEST_FAKE_HIP=full) for kDLROCM, and on the fake CUDA
// driver's device (GPUPLUG_FAKE_CUDA=device) for kDLCUDA.
#define BOOST_TEST_MODULE dlpack
#include <boost/test/unit_test.hpp>
#include <cstdlib>
#include <cstring>
#include <gpuplug/dlpack.hpp>
#include <gpuplug/gpuplug.hpp>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "contains.hpp"
#include "error_of.hpp"
#include "loader_env.hpp"
#include "test_print.hpp"

using gpuplug::DevicePtr;
using gpuplug::GpuBackend;
using gpuplug::Status;
using namespace gpuplug::test;

BOOST_TEST_GLOBAL_FIXTURE(LoaderEnvironment);

namespace {

constexpr DLDataType f32{kDLFloat, 32, 1};

bool env_is(const char* name, const char* value) {
  const char* env = std::getenv(name);
  return env != nullptr && std::string(env) == value;
}

bool on_fake_hip() { return env_is("GPUPLUG_TEST_FAKE_HIP", "full"); }
bool on_fake_cuda() { return env_is("GPUPLUG_FAKE_CUDA", "device"); }
bool on_fake_gpu() { return on_fake_hip() || on_fake_cuda(); }

/// The backend the cases run on, and the device type its tensors carry.
std::string device_under_test() {
  return on_fake_hip() ? "hip:0!" : on_fake_cuda() ? "cuda:0!" : "host!";
}
DLDeviceType device_type_under_test() {
  return on_fake_hip() ? kDLROCM : on_fake_cuda() ? kDLCUDA : kDLCPU;
}

/// Two backends of one device: what one exports, the other imports (a backend refuses to
/// import memory already on its own ledger).
struct Pair {
  gpuplug::PluginRegistry registry;
  std::shared_ptr<GpuBackend> a, b;
  explicit Pair(const std::string& selector = device_under_test()) {
    registry.discover();
    a = registry.create(selector);
    b = registry.create(selector);
  }
};

/// `n` floats 0, 1, 2, ... on `gpu`.
DevicePtr iota(GpuBackend& gpu, std::size_t n) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), 0.0f);
  const DevicePtr p = gpu.alloc(n * sizeof(float), "test iota");
  gpu.copy_h2d(p, v.data(), n * sizeof(float));
  return p;
}

float read_float(GpuBackend& gpu, DevicePtr p) {
  float f = -1;
  gpu.copy_d2h(&f, p, sizeof f);
  return f;
}

/// A tensor made by "someone else": a vector of floats with a deleter that counts its calls
/// and records what the importing backend's ledger held when it ran.
struct Foreign {
  std::vector<float> values;
  std::vector<std::int64_t> shape, strides;
  DLManagedTensorVersioned managed{};
  int deleted = 0;
  GpuBackend* watch = nullptr;           // whose ledger the deleter looks at
  std::uint64_t live_at_delete = 99;     // that ledger's live count when the deleter ran

  explicit Foreign(std::size_t n, std::vector<std::int64_t> shp, std::vector<std::int64_t> str = {})
      : values(n), shape(std::move(shp)), strides(std::move(str)) {
    std::iota(values.begin(), values.end(), 100.0f);
    managed.version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
    managed.manager_ctx = this;
    managed.deleter = [](DLManagedTensorVersioned* self) {
      auto* f = static_cast<Foreign*>(self->manager_ctx);
      ++f->deleted;
      if (f->watch != nullptr) f->live_at_delete = f->watch->ledger_stats().live_count;
    };
    DLTensor& t = managed.dl_tensor;
    t.data = values.data();
    t.device = {kDLCPU, 0};
    t.ndim = static_cast<std::int32_t>(shape.size());
    t.dtype = f32;
    t.shape = shape.data();
    t.strides = strides.empty() ? nullptr : strides.data();
  }
};

}  // namespace

BOOST_AUTO_TEST_CASE(export_describes_the_memory_and_the_deleter_frees_it) {
  Pair p;
  GpuBackend& gpu = *p.a;
  const DevicePtr ptr = iota(gpu, 24);
  const std::vector<std::int64_t> shape{2, 3, 4};
  int deleted = 0;
  gpuplug::DlpackExportOptions options;
  options.on_delete = [&] { ++deleted; };
  DLManagedTensorVersioned* t = gpuplug::to_dlpack(gpu, ptr, shape, f32, {}, std::move(options));
  BOOST_TEST(t->version.major == 1u);
  BOOST_TEST(t->flags == 0u);
  const DLTensor& d = t->dl_tensor;
  BOOST_TEST(d.device.device_type == device_type_under_test());
  BOOST_TEST(d.device.device_id == gpu.native().device);
  BOOST_TEST(d.data == gpu.native_pointer(ptr));
  BOOST_TEST(d.ndim == 3);
  BOOST_TEST(std::vector<std::int64_t>(d.shape, d.shape + 3) == shape);
  BOOST_TEST(std::vector<std::int64_t>(d.strides, d.strides + 3) == (std::vector<std::int64_t>{12, 4, 1}));
  BOOST_TEST(d.byte_offset == 0u);
  BOOST_TEST(gpu.ledger_stats().live_count == 1u);
  t->deleter(t);  // the tensor owned the allocation
  BOOST_TEST(gpu.ledger_stats().live_count == 0u);
  BOOST_TEST(deleted == 1);
}

// The shared_ptr overloads keep the backend alive for the tensor: its owners may let go first,
// and the deleter (the last owner) still frees through it, then lets it go.
BOOST_AUTO_TEST_CASE(a_shared_export_keeps_its_backend_until_the_deleter_ran) {
  for (const bool versioned : {true, false}) {
    BOOST_TEST_CONTEXT((versioned ? "to_dlpack" : "to_dlpack_unversioned")) {
      Pair p;
      const DevicePtr ptr = iota(*p.a, 8);
      const std::vector<std::int64_t> shape{8};
      int deleted = 0;
      gpuplug::DlpackExportOptions options;
      options.on_delete = [&] { ++deleted; };
      const std::weak_ptr<GpuBackend> watch = p.a;
      DLManagedTensorVersioned* v = nullptr;
      DLManagedTensor* u = nullptr;
      if (versioned)
        v = gpuplug::to_dlpack(p.a, ptr, shape, f32, {}, std::move(options));
      else
        u = gpuplug::to_dlpack_unversioned(p.a, ptr, shape, f32, {}, std::move(options));
      p.a.reset();  // the application's last reference goes first
      BOOST_TEST(!watch.expired());
      std::shared_ptr<GpuBackend> still = watch.lock();
      BOOST_TEST(still->ledger_stats().live_count == 1u);  // the tensor's memory is still there
      BOOST_TEST(read_float(*still, ptr + 7 * sizeof(float)) == 7.0f);
      still->synchronize();
      still.reset();
      if (versioned)
        v->deleter(v);
      else
        u->deleter(u);
      BOOST_TEST(deleted == 1);
      BOOST_TEST(watch.expired());  // the deleter's reference was the last one
    }
  }
  const std::shared_ptr<GpuBackend> none;
  const std::vector<std::int64_t> shape{1};
  BOOST_TEST(error_of([&] { gpuplug::to_dlpack(none, DevicePtr{64}, shape, f32); }).status() ==
             Status::invalid_argument);
}

BOOST_AUTO_TEST_CASE(a_borrowed_export_leaves_the_allocation_to_the_caller) {
  Pair p;
  GpuBackend& gpu = *p.a;
  const DevicePtr ptr = iota(gpu, 4);
  const std::vector<std::int64_t> shape{4};
  gpuplug::DlpackExportOptions options;
  options.transfer_ownership = false;
  DLManagedTensor* t = gpuplug::to_dlpack_unversioned(gpu, ptr, shape, f32, {}, options);
  t->deleter(t);
  BOOST_TEST(gpu.ledger_stats().live_count == 1u);
  BOOST_TEST(read_float(gpu, ptr + 12) == 3.0f);
  gpu.free(ptr);
}

BOOST_AUTO_TEST_CASE(round_trip_with_strides_and_byte_offset) {
  Pair p;
  const DevicePtr ptr = iota(*p.a, 40);
  // A 3x4 view, column-major over rows of 5 floats, starting 2 floats in: element (i, j) is
  // float 2 + i + 5j.
  const std::vector<std::int64_t> shape{3, 4}, strides{1, 5};
  gpuplug::DlpackExportOptions options;
  options.byte_offset = 2 * sizeof(float);
  int deleted = 0;
  options.on_delete = [&] { ++deleted; };
  auto* t = gpuplug::to_dlpack(*p.a, ptr, shape, f32, strides, std::move(options));
  const gpuplug::DlpackTensor in = gpuplug::from_dlpack(*p.b, t);
  BOOST_TEST(in.shape == shape);
  BOOST_TEST(in.strides == strides);
  BOOST_TEST(gpuplug::to_string(in.dtype) == "float32");
  BOOST_TEST(!in.read_only);
  BOOST_TEST(in.data == in.memory);  // no negative stride
  // The import covers elements (0,0) to (2,3): floats 2 .. 2 + 2 + 15.
  BOOST_TEST(p.b->native_pointer(in.memory) == p.a->native_pointer(ptr + 8));
  BOOST_TEST(p.b->ledger_stats().live_bytes == 18u * sizeof(float));
  for (std::int64_t i = 0; i < 3; ++i)
    for (std::int64_t j = 0; j < 4; ++j)
      BOOST_TEST(read_float(*p.b, in.data + 4 * static_cast<std::uint64_t>(i + 5 * j)) ==
                 static_cast<float>(2 + i + 5 * j));
  BOOST_TEST(deleted == 0);
  p.b->free(in.memory);  // b forgets it, then a's deleter frees the allocation
  BOOST_TEST(deleted == 1);
  BOOST_TEST(p.b->ledger_stats().live_count == 0u);
  BOOST_TEST(p.a->ledger_stats().live_count == 0u);
}

BOOST_AUTO_TEST_CASE(negative_strides_import_from_the_lowest_byte) {
  Pair p;
  const DevicePtr ptr = iota(*p.a, 4);
  const std::vector<std::int64_t> shape{4}, strides{-1};  // reversed: element 0 is float 3
  gpuplug::DlpackExportOptions options;
  options.byte_offset = 3 * sizeof(float);
  auto* t = gpuplug::to_dlpack(*p.a, ptr, shape, f32, strides, std::move(options));
  const auto in = gpuplug::from_dlpack(*p.b, t);
  BOOST_TEST(p.b->native_pointer(in.memory) == p.a->native_pointer(ptr));
  BOOST_TEST(in.data == in.memory + 12);
  BOOST_TEST(read_float(*p.b, in.data) == 3.0f);
  p.b->free(in.memory);
  BOOST_TEST(p.a->ledger_stats().live_count == 0u);
}

BOOST_AUTO_TEST_CASE(read_only_is_carried_and_can_be_refused) {
  Pair p;
  const std::vector<std::int64_t> shape{2};
  gpuplug::DlpackExportOptions ro;
  ro.read_only = true;
  auto* t = gpuplug::to_dlpack(*p.a, iota(*p.a, 2), shape, f32, {}, ro);
  BOOST_TEST(t->flags == DLPACK_FLAG_BITMASK_READ_ONLY);
  const auto in = gpuplug::from_dlpack(*p.b, t);
  BOOST_TEST(in.read_only);
  p.b->free(in.memory);

  // Asked to be writable: refused, and the tensor is consumed (its memory freed) all the same.
  auto* t2 = gpuplug::to_dlpack(*p.a, iota(*p.a, 2), shape, f32, {}, ro);
  gpuplug::DlpackImportOptions writable;
  writable.writable = true;
  const auto e = error_of([&] { gpuplug::from_dlpack(*p.b, t2, writable); }, Status::invalid_argument);
  BOOST_TEST(contains(e.what(), "from_dlpack: the tensor is read-only"), e.what());
  BOOST_TEST(p.a->ledger_stats().live_count == 0u);
  BOOST_TEST(p.b->ledger_stats().live_count == 0u);

  // The legacy form has no flags: read_only is refused, not dropped.
  const DevicePtr ptr = iota(*p.a, 2);
  const auto e2 = error_of([&] { gpuplug::to_dlpack_unversioned(*p.a, ptr, shape, f32, {}, ro); },
                           Status::invalid_argument);
  BOOST_TEST(contains(e2.what(), "to_dlpack: read_only: the legacy DLManagedTensor has no flags"),
             e2.what());
  p.a->free(ptr);
}

BOOST_AUTO_TEST_CASE(the_producer_deleter_runs_once_after_gpuplug_forgot_the_memory) {
  if (on_fake_gpu()) return;  // a host vector is no GPU memory
  Pair p;
  Foreign f(6, {2, 3});
  f.watch = p.b.get();
  const auto in = gpuplug::from_dlpack(*p.b, &f.managed);
  BOOST_TEST(in.strides == (std::vector<std::int64_t>{3, 1}));  // filled in: row-major
  BOOST_TEST(p.b->native_pointer(in.data) == static_cast<void*>(f.values.data()));
  BOOST_TEST(read_float(*p.b, in.data + 20) == 105.0f);
  BOOST_TEST(f.deleted == 0);
  p.b->free(in.memory);
  BOOST_TEST(f.deleted == 1);
  BOOST_TEST(f.live_at_delete == 0u);  // the ledger had forgotten the import already
  error_of([&] { p.b->free(in.memory); }, Status::invalid_argument);
  BOOST_TEST(f.deleted == 1);

  // A backend destroyed with the import live runs the deleter once, too.
  Foreign g(2, {2});
  gpuplug::from_dlpack(*p.b, &g.managed);
  BOOST_TEST(g.deleted == 0);
  p.b.reset();
  BOOST_TEST(g.deleted == 1);
}

BOOST_AUTO_TEST_CASE(from_dlpack_refuses_bad_tensors_and_consumes_them) {
  if (on_fake_gpu()) return;  // the layouts are the same everywhere; host vectors are host memory
  Pair p;
  GpuBackend& gpu = *p.b;
  error_of([&] { gpuplug::from_dlpack(gpu, static_cast<DLManagedTensorVersioned*>(nullptr)); },
           Status::invalid_argument);
  struct Case {
    const char* name;
    std::function<void(Foreign&)> spoil;
    const char* reason;
  };
  const std::vector<Case> cases{
      {"version", [](Foreign& f) { f.managed.version.major = 2; }, "DLPack version 2.0, gpuplug reads 1.x"},
      {"device type", [](Foreign& f) { f.managed.dl_tensor.device = {kDLCUDA, 0}; },
       "the tensor is on kDLCUDA:0, this backend is kDLCPU:0"},
      {"device id", [](Foreign& f) { f.managed.dl_tensor.device.device_id = 3; },
       "the tensor is on kDLCPU:3, this backend is kDLCPU:0"},
      {"dtype bits", [](Foreign& f) { f.managed.dl_tensor.dtype = {kDLFloat, 24, 1}; },
       "unsupported dtype float24"},
      {"lanes", [](Foreign& f) { f.managed.dl_tensor.dtype = {kDLFloat, 32, 4}; },
       "unsupported dtype dtype code 2 bits 32 lanes 4"},
      {"negative extent", [](Foreign& f) { f.shape[0] = -2; }, "shape [-2, 3] has a negative extent"},
      {"no shape", [](Foreign& f) { f.managed.dl_tensor.shape = nullptr; }, "ndim 2 with no shape"},
      {"bool width", [](Foreign& f) { f.managed.dl_tensor.dtype = {kDLBool, 16, 1}; },
       "unsupported dtype bool16"},
      {"null data", [](Foreign& f) { f.managed.dl_tensor.data = nullptr; }, "null data pointer"},
  };
  for (const auto& c : cases) {
    Foreign f(6, {2, 3});
    c.spoil(f);
    const auto e = error_of([&] { gpuplug::from_dlpack(gpu, &f.managed); }, Status::invalid_argument);
    BOOST_TEST(contains(e.what(), std::string("host:0: from_dlpack: ") + c.reason), c.name << ": " << e.what());
    BOOST_TEST(f.deleted == 1, c.name);
  }
  BOOST_TEST(gpu.ledger_stats().live_count == 0u);
}

BOOST_AUTO_TEST_CASE(to_dlpack_refuses_bad_layouts_and_keeps_the_memory) {
  Pair p;
  GpuBackend& gpu = *p.a;
  const DevicePtr ptr = iota(gpu, 8);
  const std::vector<std::int64_t> two{2, 4}, eight{8}, nine{9}, one{1}, back{-4, 1};
  auto refused = [&](auto&& call, const std::string& reason) {
    const auto e = error_of(call, Status::invalid_argument);
    BOOST_TEST(contains(e.what(), "to_dlpack: " + reason), e.what());
  };
  refused([&] { gpuplug::to_dlpack(gpu, DevicePtr{}, eight, f32); }, "null pointer");
  refused([&] { gpuplug::to_dlpack(gpu, ptr, two, f32, one); },
          "strides [1] have rank 1, shape [2, 4] has rank 2");
  refused([&] { gpuplug::to_dlpack(gpu, ptr, eight, DLDataType{kDLOpaqueHandle, 64, 1}); },
          "unsupported dtype dtype code 3 bits 64 lanes 1");
  refused([&] { gpuplug::to_dlpack(gpu, ptr, nine, f32); }, "byte 35 of the tensor");
  gpuplug::DlpackExportOptions past;
  past.byte_offset = 4;
  refused([&] { gpuplug::to_dlpack(gpu, ptr, eight, f32, {}, past); }, "byte 35 of the tensor");
  refused([&] { gpuplug::to_dlpack(gpu, ptr, two, f32, back); },
          "elements reach 16 bytes before the pointer");
  // The producer's stream is synchronized before the tensor is handed out: an unknown one fails.
  gpuplug::DlpackExportOptions on_stream;
  on_stream.stream = gpuplug::Stream{0xdead};
  const auto e = error_of([&] { gpuplug::to_dlpack(gpu, ptr, eight, f32, {}, on_stream); });
  BOOST_TEST(contains(e.what(), "synchronize"), e.what());
  BOOST_TEST(gpu.ledger_stats().live_count == 1u);  // nothing was transferred
  gpu.free(ptr);
}

BOOST_AUTO_TEST_CASE(an_empty_tensor_round_trips) {
  Pair p;
  const DevicePtr ptr = p.a->alloc(16, "test empty");
  const std::vector<std::int64_t> shape{0, 3};
  auto* t = gpuplug::to_dlpack(*p.a, ptr, shape, f32);
  const auto in = gpuplug::from_dlpack(*p.b, t);
  BOOST_TEST(in.shape == shape);
  p.b->free(in.memory);
  BOOST_TEST(p.a->ledger_stats().live_count == 0u);
}

BOOST_AUTO_TEST_CASE(another_device_is_refused) {
  gpuplug::PluginRegistry registry;
  registry.discover();
  auto host = registry.create("host!");
  const std::vector<std::int64_t> shape{4};
  if (on_fake_cuda()) {  // the fake driver has one device: its tensor on host
    auto gpu = registry.create("cuda:0!");
    auto* t = gpuplug::to_dlpack(*gpu, iota(*gpu, 4), shape, f32);
    BOOST_TEST(t->dl_tensor.device.device_type == kDLCUDA);
    const auto e = error_of([&] { gpuplug::from_dlpack(*host, t); }, Status::invalid_argument);
    BOOST_TEST(contains(e.what(), "the tensor is on kDLCUDA:0, this backend is kDLCPU:0"), e.what());
    BOOST_TEST(gpu->ledger_stats().live_count == 0u);
    return;
  }
  if (!on_fake_hip()) {
    auto* t = gpuplug::to_dlpack(*host, iota(*host, 4), shape, f32);
    t->dl_tensor.device = {kDLROCM, 1};  // as a HIP backend's tensor would say
    const auto e = error_of([&] { gpuplug::from_dlpack(*host, t); }, Status::invalid_argument);
    BOOST_TEST(contains(e.what(), "the tensor is on kDLROCM:1, this backend is kDLCPU:0"), e.what());
    BOOST_TEST(host->ledger_stats().live_count == 0u);  // consumed: the deleter freed it
    return;
  }
  auto gpu0 = registry.create("hip:0!");
  auto gpu1 = registry.create("hip:1!");
  auto* t = gpuplug::to_dlpack(*gpu1, iota(*gpu1, 4), shape, f32);
  BOOST_TEST(t->dl_tensor.device.device_type == kDLROCM);
  BOOST_TEST(t->dl_tensor.device.device_id == 1);
  const auto e = error_of([&] { gpuplug::from_dlpack(*gpu0, t); }, Status::invalid_argument);
  BOOST_TEST(contains(e.what(), "hip:0: from_dlpack: the tensor is on kDLROCM:1, this backend is kDLROCM:0"),
             e.what());
  auto* t2 = gpuplug::to_dlpack(*gpu0, iota(*gpu0, 4), shape, f32);
  const auto e2 = error_of([&] { gpuplug::from_dlpack(*host, t2); }, Status::invalid_argument);
  BOOST_TEST(contains(e2.what(), "the tensor is on kDLROCM:0, this backend is kDLCPU:0"), e2.what());
  BOOST_TEST(gpu0->ledger_stats().live_count == 0u);
  BOOST_TEST(gpu1->ledger_stats().live_count == 0u);
}

BOOST_AUTO_TEST_CASE(dtype_names) {
  BOOST_TEST(gpuplug::to_string(DLDataType{kDLFloat, 16, 1}) == "float16");
  BOOST_TEST(gpuplug::to_string(DLDataType{kDLBfloat, 16, 1}) == "bfloat16");
  BOOST_TEST(gpuplug::to_string(DLDataType{kDLInt, 8, 1}) == "int8");
  BOOST_TEST(gpuplug::to_string(DLDataType{kDLUInt, 64, 1}) == "uint64");
  BOOST_TEST(gpuplug::to_string(DLDataType{kDLBool, 8, 1}) == "bool");
  BOOST_TEST(gpuplug::to_string(DLDataType{kDLComplex, 64, 1}) == "complex64");
  BOOST_TEST(gpuplug::to_string(DLDataType{kDLFloat, 32, 4}) == "dtype code 2 bits 32 lanes 4");
}
