// SPDX-License-Identifier: Apache-2.0
// DLPack: gpuplug memory handed to array libraries as DLManagedTensorVersioned (or the legacy
// DLManagedTensor), and theirs taken in as gpuplug memory (docs/interop.md, "DLPack").
#pragma once

#include <gpuplug/config.hpp>  // first: the C++20 check, the export region

// DLPack 1.x. An installed gpuplug carries the DLPack header it was built with, as
// <gpuplug/third_party/dlpack.h>, and uses that one whatever else is on the include path (Debian
// 12's libdlpack-dev is 0.6, which has no DLManagedTensorVersioned). In gpuplug's own build tree
// it is <dlpack/dlpack.h> of dlpack::dlpack. Only builds of gpuplug made with DLPack
// (GPUPLUG_WITH_DLPACK) install this header and export the functions below.
#if __has_include(<gpuplug/third_party/dlpack.h>)
#include <gpuplug/third_party/dlpack.h>
#else
#include <dlpack/dlpack.h>
#endif

#include <gpuplug/backend.hpp>
#include <gpuplug/types.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#if !defined(DLPACK_MAJOR_VERSION) || DLPACK_MAJOR_VERSION != 1
#error "<gpuplug/dlpack.hpp> needs DLPack 1.x, and this translation unit included another <dlpack/dlpack.h> (Debian 12's is 0.6) before it: include <gpuplug/dlpack.hpp> first, or not that header"
#endif

GPUPLUG_API_BEGIN
namespace gpuplug {

/// How to_dlpack hands memory out.
struct DlpackExportOptions {
  /// The tensor's element (0, ..., 0) is at ptr + byte_offset (DLTensor::byte_offset), so that
  /// `ptr` can stay the allocation a transferred tensor frees.
  std::uint64_t byte_offset = 0;
  /// DLPACK_FLAG_BITMASK_READ_ONLY on the versioned tensor: consumers must not write. The legacy
  /// DLManagedTensor has no flags; it is refused there rather than dropped.
  bool read_only = false;
  /// true: the tensor owns the allocation `ptr`, and its deleter frees it through the backend's
  /// free (the caller must not free it). false: the caller keeps the allocation and must not
  /// free it before the deleter has run (on_delete says when).
  bool transfer_ownership = true;
  /// Runs once in the deleter, after the allocation was freed (transfer) or left alone (borrow),
  /// on the consumer's thread. An exception from it is logged (channel "dlpack") and dropped:
  /// a DLPack deleter cannot fail.
  std::function<void()> on_delete;
  /// The stream whose work writes the memory. to_dlpack synchronizes it before returning, so
  /// the data is ready for whatever stream the consumer uses (the producer's side of the DLPack
  /// stream rule).
  Stream stream = {};
};

/// Exports `shape` elements of `dtype` at `ptr` (memory of `backend`) as a DLPack 1.0 tensor.
///   - DLDevice: kDLCUDA, kDLROCM or kDLCPU with the runtime's ordinal, from backend.native();
///     data: backend.native_pointer(ptr); byte_offset as asked.
///   - strides: in elements, negative ones allowed; empty means compact row-major. The tensor
///     always carries explicit strides (some consumers mishandle a null one).
///   - dtype: lanes 1; int and uint of 8, 16, 32, 64 bits, float of 16, 32, 64, bfloat16,
///     complex of 64 and 128, bool of 8.
/// The deleter (called by the consumer, exactly once, from any thread) frees `ptr` through
/// backend.free when ownership was transferred, then runs on_delete. `backend` must outlive
/// the tensor: it is the backend the deleter frees through. The overloads that take a
/// shared_ptr keep the backend alive themselves until the deleter has run, so the backend's
/// owners may let go of it in any order with the tensor's consumer (what a Python binding or
/// any consumer the application does not control needs).
/// Thread-safety: as the backend's members. Errors (nothing is allocated or transferred then):
/// Error(invalid_argument) naming the argument for a null `ptr`, a negative extent, strides of
/// another rank, a dtype not above, elements that reach before `ptr` or past the memory the
/// backend knows at `ptr`, or read_only on the legacy form; Error(unsupported) for a backend
/// without native handles (a plugin older than ABI 1.2) or a vendor DLPack has no device for.
DLManagedTensorVersioned* to_dlpack(GpuBackend& backend, DevicePtr ptr,
                                    std::span<const std::int64_t> shape, DLDataType dtype,
                                    std::span<const std::int64_t> strides = {},
                                    DlpackExportOptions options = {});
/// The same, sharing ownership of `backend` with the tensor until its deleter has run.
/// Error(invalid_argument) for a null `backend`.
DLManagedTensorVersioned* to_dlpack(std::shared_ptr<GpuBackend> backend, DevicePtr ptr,
                                    std::span<const std::int64_t> shape, DLDataType dtype,
                                    std::span<const std::int64_t> strides = {},
                                    DlpackExportOptions options = {});
/// The same as the legacy DLManagedTensor, for consumers that speak only DLPack < 1.0 (NumPy
/// 1.24's `__dlpack__` capsule "dltensor", PyTorch 1.13's from_dlpack). It has no flags, so
/// read_only is refused.
DLManagedTensor* to_dlpack_unversioned(GpuBackend& backend, DevicePtr ptr,
                                       std::span<const std::int64_t> shape, DLDataType dtype,
                                       std::span<const std::int64_t> strides = {},
                                       DlpackExportOptions options = {});
/// The same, sharing ownership of `backend` with the tensor until its deleter has run.
DLManagedTensor* to_dlpack_unversioned(std::shared_ptr<GpuBackend> backend, DevicePtr ptr,
                                       std::span<const std::int64_t> shape, DLDataType dtype,
                                       std::span<const std::int64_t> strides = {},
                                       DlpackExportOptions options = {});

/// How from_dlpack takes memory in.
struct DlpackImportOptions {
  /// true: a read-only tensor is refused (the caller means to write). false: it is accepted and
  /// DlpackTensor::read_only says so. gpuplug cannot enforce it: device memory has no read-only
  /// mapping here, so not writing is the application's promise.
  bool writable = false;
  /// The ledger's call site for the import (kind external).
  std::string_view site = "dlpack";
};

/// A tensor from_dlpack took in: memory on the backend's ledger (kind external) and its layout.
struct DlpackTensor {
  /// The imported range, from the lowest to the highest byte the elements use. free(memory)
  /// when done: gpuplug forgets it, then runs the producer's deleter (exactly once).
  DevicePtr memory;
  /// Element (0, ..., 0); equals memory unless strides are negative.
  DevicePtr data;
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;  // in elements; filled in (row-major) when the producer gave none
  DLDataType dtype{};
  bool read_only = false;
};

/// Imports a DLPack tensor onto `backend`, which must be the tensor's device (kDLCUDA, kDLROCM,
/// kDLCPU as native().vendor, and the runtime ordinal as native().device).
/// Ownership: from_dlpack consumes `tensor` whatever happens. On success the producer's deleter
/// runs once gpuplug has forgotten the memory (free(memory), or the backend's destruction with
/// the import still live); on an error it runs before from_dlpack throws. The caller never
/// touches `tensor` again.
/// Streams: from_dlpack does not synchronize. The DLPack rule is that the producer makes the
/// data ready on the stream the consumer named when it asked for the tensor (Python's
/// `__dlpack__(stream=...)`): name native(s).stream of the gpuplug stream `s` that will use it,
/// or synchronize the producer before the exchange.
/// Errors, each naming the reason: Error(invalid_argument) for a null tensor, a DLPack major
/// version other than 1, another device type or ordinal, a dtype to_dlpack would refuse, a
/// negative extent or a byte_offset over 2^62, a null data pointer, a read-only tensor when
/// `writable`, or memory import_memory refuses; Error(unsupported) for a backend without import.
DlpackTensor from_dlpack(GpuBackend& backend, DLManagedTensorVersioned* tensor,
                         const DlpackImportOptions& options = {});
/// The same for the legacy DLManagedTensor (no version, no flags: never read-only).
DlpackTensor from_dlpack(GpuBackend& backend, DLManagedTensor* tensor,
                         const DlpackImportOptions& options = {});

/// "float32", "int8", "bfloat16", "bool", "complex64"; "dtype code C bits B lanes L" otherwise.
std::string to_string(DLDataType dtype);

}  // namespace gpuplug
GPUPLUG_API_END
