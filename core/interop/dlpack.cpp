// SPDX-License-Identifier: Apache-2.0
// to_dlpack and from_dlpack: gpuplug memory out as DLPack tensors, DLPack tensors in as imports.
#include <gpuplug/dlpack.hpp>
#include <gpuplug/log.hpp>
#include <gpuplug/support/text.hpp>

#include <memory>
#include <utility>

#include "interop/dlpack_layout.hpp"

namespace gpuplug {

namespace {

constexpr const char* op_export = "to_dlpack";
constexpr const char* op_import = "from_dlpack";

std::string device_name(DLDevice device) {
  switch (device.device_type) {
    case kDLCPU: return "kDLCPU:" + std::to_string(device.device_id);
    case kDLCUDA: return "kDLCUDA:" + std::to_string(device.device_id);
    case kDLROCM: return "kDLROCM:" + std::to_string(device.device_id);
    default:
      return "device type " + std::to_string(device.device_type) + ":" +
             std::to_string(device.device_id);
  }
}

/// The DLDevice of `backend`: the vendor's device type and the runtime's ordinal.
DLDevice device_of(GpuBackend& backend, const char* operation) {
  const NativeHandles native = backend.native();
  DLDevice device{kDLCPU, native.device};
  if (native.vendor == "cuda") {
    device.device_type = kDLCUDA;
  } else if (native.vendor == "hip") {
    device.device_type = kDLROCM;
  } else if (native.vendor != "host") {
    throw Error(Status::unsupported, std::string(backend.name()), operation,
                "DLPack has no device type for vendor '" + native.vendor + "'");
  }
  return device;
}

// ---- export

/// What a tensor's deleter needs, owned by the tensor (manager_ctx) and deleted with it.
template <class Managed>
struct Exported {
  Managed managed{};
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;
  GpuBackend* backend = nullptr;
  std::shared_ptr<GpuBackend> keep;  // the shared_ptr overloads: alive until the deleter ends
  DevicePtr ptr;
  bool owns = false;
  std::function<void()> on_delete;

  static void deleter(Managed* self) noexcept {
    if (self == nullptr) return;
    std::unique_ptr<Exported> holder(static_cast<Exported*>(self->manager_ctx));
    if (holder->owns) {
      try {
        holder->backend->free(holder->ptr);
      } catch (const std::exception& e) {  // a DLPack deleter cannot report a failure
        log(LogLevel::warning, "dlpack",
            "the deleter of an exported tensor could not free its memory: " + std::string(e.what()));
      }
    }
    if (holder->on_delete) {
      try {
        holder->on_delete();
      } catch (const std::exception& e) {
        log(LogLevel::warning, "dlpack",
            "on_delete of an exported tensor threw: " + std::string(e.what()));
      } catch (...) {
        log(LogLevel::warning, "dlpack", "on_delete of an exported tensor threw");
      }
    }
  }
};

template <class Managed>
Managed* export_tensor(GpuBackend& backend, DevicePtr ptr, std::span<const std::int64_t> shape,
                       DLDataType dtype, std::span<const std::int64_t> strides,
                       DlpackExportOptions options, std::shared_ptr<GpuBackend> keep = {}) {
  const std::string name(backend.name());
  auto refuse = [&](const std::string& why) {
    return Error(Status::invalid_argument, name, op_export, why);
  };
  if (!ptr) throw refuse("null pointer");
  if constexpr (std::is_same_v<Managed, DLManagedTensor>) {
    if (options.read_only)
      throw refuse("read_only: the legacy DLManagedTensor has no flags to carry it "
                   "(use the versioned to_dlpack)");
  }
  auto holder = std::make_unique<Exported<Managed>>();
  detail::DlpackSpan span;
  if (auto why = detail::dlpack_measure(shape, strides, dtype, holder->strides, span); !why.empty())
    throw refuse(why);
  if (options.byte_offset > static_cast<std::uint64_t>(INT64_MAX / 2))
    throw refuse("byte_offset " + std::to_string(options.byte_offset) + " is too large");
  const auto offset = static_cast<std::int64_t>(options.byte_offset);
  if (offset + span.first < 0)
    throw refuse("elements reach " + std::to_string(-(offset + span.first)) +
                 " bytes before the pointer (byte_offset " + std::to_string(options.byte_offset) +
                 ")");
  const DLDevice device = device_of(backend, op_export);
  void* data = backend.native_pointer(ptr);
  if (span.bytes() != 0) {
    // Both ends inside memory the backend knows, at the same distance as in gpuplug's space:
    // native_pointer throws for an address no allocation or import covers.
    const std::uint64_t first = static_cast<std::uint64_t>(offset + span.first);
    const std::uint64_t last = static_cast<std::uint64_t>(offset + span.end - 1);
    for (const std::uint64_t at : {first, last}) {
      void* native = nullptr;
      try {
        native = backend.native_pointer(ptr + at);
      } catch (const Error&) {
        throw refuse("byte " + std::to_string(at) + " of the tensor (" +
                     std::to_string(span.bytes()) + " bytes from byte " + std::to_string(first) +
                     ") is past the memory at " + support::hex(ptr.value));
      }
      if (static_cast<char*>(native) != static_cast<char*>(data) + at)
        throw refuse("the tensor's bytes " + std::to_string(first) + ".." + std::to_string(last) +
                     " are not one range of the memory at " + support::hex(ptr.value));
    }
  }
  backend.synchronize(options.stream);  // the data is ready for any consumer stream

  holder->shape.assign(shape.begin(), shape.end());
  holder->backend = &backend;
  holder->keep = std::move(keep);
  holder->ptr = ptr;
  holder->owns = options.transfer_ownership;
  holder->on_delete = std::move(options.on_delete);
  Managed& m = holder->managed;
  m.dl_tensor.data = data;
  m.dl_tensor.device = device;
  m.dl_tensor.ndim = static_cast<std::int32_t>(shape.size());
  m.dl_tensor.dtype = dtype;
  m.dl_tensor.shape = holder->shape.data();
  m.dl_tensor.strides = holder->strides.data();
  m.dl_tensor.byte_offset = options.byte_offset;
  m.manager_ctx = holder.get();
  m.deleter = &Exported<Managed>::deleter;
  if constexpr (std::is_same_v<Managed, DLManagedTensorVersioned>) {
    m.version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
    m.flags = options.read_only ? DLPACK_FLAG_BITMASK_READ_ONLY : 0;
  }
  return &holder.release()->managed;
}

// ---- import

/// Runs the producer's deleter unless released: from_dlpack consumes the tensor on every path.
template <class Managed>
class Consumed {
 public:
  explicit Consumed(Managed* tensor) : tensor_(tensor) {}
  ~Consumed() {
    if (tensor_ != nullptr && tensor_->deleter != nullptr) tensor_->deleter(tensor_);
  }
  Consumed(const Consumed&) = delete;
  Consumed& operator=(const Consumed&) = delete;
  Managed* release() noexcept { return std::exchange(tensor_, nullptr); }

 private:
  Managed* tensor_;
};

template <class Managed>
DlpackTensor import_tensor(GpuBackend& backend, Managed* tensor, const DlpackImportOptions& options) {
  const std::string name(backend.name());
  auto refuse = [&](const std::string& why) {
    return Error(Status::invalid_argument, name, op_import, why);
  };
  if (tensor == nullptr) throw refuse("null tensor");
  Consumed<Managed> consumed(tensor);
  DlpackTensor out;
  if constexpr (std::is_same_v<Managed, DLManagedTensorVersioned>) {
    // A different major version may lay the rest out differently: only the deleter is safe.
    if (tensor->version.major != DLPACK_MAJOR_VERSION)
      throw refuse("DLPack version " + std::to_string(tensor->version.major) + "." +
                   std::to_string(tensor->version.minor) + ", gpuplug reads " +
                   std::to_string(DLPACK_MAJOR_VERSION) + ".x");
    out.read_only = (tensor->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0;
    if (out.read_only && options.writable)
      throw refuse("the tensor is read-only (DLPACK_FLAG_BITMASK_READ_ONLY) and writable was asked");
  }
  const DLTensor& t = tensor->dl_tensor;
  const DLDevice want = device_of(backend, op_import);
  if (t.device.device_type != want.device_type || t.device.device_id != want.device_id)
    throw refuse("the tensor is on " + device_name(t.device) + ", this backend is " +
                 device_name(want));
  if (t.ndim < 0 || (t.ndim > 0 && t.shape == nullptr))
    throw refuse("ndim " + std::to_string(t.ndim) + " with " + (t.shape ? "a" : "no") + " shape");
  const auto rank = static_cast<std::size_t>(t.ndim);
  const std::span<const std::int64_t> shape(t.shape, rank);
  std::span<const std::int64_t> strides;
  if (t.strides != nullptr) strides = {t.strides, rank};
  detail::DlpackSpan span;
  if (auto why = detail::dlpack_measure(shape, strides, t.dtype, out.strides, span); !why.empty())
    throw refuse(why);
  // Negative strides may reach below `data`: NumPy exports a reversed view with data at element
  // 0, which is the highest address. The import starts at the lowest byte the elements use.
  if (t.byte_offset > static_cast<std::uint64_t>(INT64_MAX / 2))
    throw refuse("byte_offset " + std::to_string(t.byte_offset) + " is too large");
  if (t.data == nullptr && span.bytes() != 0) throw refuse("null data pointer");
  out.shape.assign(shape.begin(), shape.end());
  out.dtype = t.dtype;

  // The import covers the bytes the elements use, so that gpuplug's range checks match them.
  char* first = static_cast<char*>(t.data) + static_cast<std::int64_t>(t.byte_offset) + span.first;
  Managed* producer = consumed.release();
  try {
    out.memory = backend.import_memory(
        first, span.bytes(), [producer]() noexcept {
          if (producer->deleter != nullptr) producer->deleter(producer);
        },
        options.site);
  } catch (...) {
    // import_memory keeps nothing when it throws: the callback never ran.
    if (producer->deleter != nullptr) producer->deleter(producer);
    throw;
  }
  out.data = out.memory + static_cast<std::uint64_t>(-span.first);
  return out;
}

}  // namespace

DLManagedTensorVersioned* to_dlpack(GpuBackend& backend, DevicePtr ptr,
                                    std::span<const std::int64_t> shape, DLDataType dtype,
                                    std::span<const std::int64_t> strides,
                                    DlpackExportOptions options) {
  return export_tensor<DLManagedTensorVersioned>(backend, ptr, shape, dtype, strides,
                                                 std::move(options));
}

DLManagedTensor* to_dlpack_unversioned(GpuBackend& backend, DevicePtr ptr,
                                       std::span<const std::int64_t> shape, DLDataType dtype,
                                       std::span<const std::int64_t> strides,
                                       DlpackExportOptions options) {
  return export_tensor<DLManagedTensor>(backend, ptr, shape, dtype, strides, std::move(options));
}

namespace {
GpuBackend& shared_backend(const std::shared_ptr<GpuBackend>& backend) {
  if (!backend) throw Error(Status::invalid_argument, "", op_export, "null backend");
  return *backend;
}
}  // namespace

DLManagedTensorVersioned* to_dlpack(std::shared_ptr<GpuBackend> backend, DevicePtr ptr,
                                    std::span<const std::int64_t> shape, DLDataType dtype,
                                    std::span<const std::int64_t> strides,
                                    DlpackExportOptions options) {
  GpuBackend& gpu = shared_backend(backend);
  return export_tensor<DLManagedTensorVersioned>(gpu, ptr, shape, dtype, strides,
                                                 std::move(options), std::move(backend));
}

DLManagedTensor* to_dlpack_unversioned(std::shared_ptr<GpuBackend> backend, DevicePtr ptr,
                                       std::span<const std::int64_t> shape, DLDataType dtype,
                                       std::span<const std::int64_t> strides,
                                       DlpackExportOptions options) {
  GpuBackend& gpu = shared_backend(backend);
  return export_tensor<DLManagedTensor>(gpu, ptr, shape, dtype, strides, std::move(options),
                                        std::move(backend));
}

DlpackTensor from_dlpack(GpuBackend& backend, DLManagedTensorVersioned* tensor,
                         const DlpackImportOptions& options) {
  return import_tensor(backend, tensor, options);
}

DlpackTensor from_dlpack(GpuBackend& backend, DLManagedTensor* tensor,
                         const DlpackImportOptions& options) {
  return import_tensor(backend, tensor, options);
}

}  // namespace gpuplug
