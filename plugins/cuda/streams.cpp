// SPDX-License-Identifier: Apache-2.0
// CudaDevice's streams (blocking or non-blocking, as the ABI's flags say) and events.
#include <string>

#include "device.hpp"

namespace gpuplug::cuda {

// ---- streams ---------------------------------------------------------------------------------

// The ABI's stream flags are CUDA's, value for value.
static_assert(GPUPLUG_STREAM_BLOCKING == CU_STREAM_DEFAULT);
static_assert(GPUPLUG_STREAM_NON_BLOCKING == CU_STREAM_NON_BLOCKING);

std::uint64_t CudaDevice::vendor_stream_create() {
  return vendor_stream_create_flags(CU_STREAM_DEFAULT);
}

std::uint64_t CudaDevice::vendor_stream_create_flags(std::uint32_t flags) {
  const ContextScope current = make_current();
  CUstream s = nullptr;
  check(api_.stream_create(&s, flags), "cuStreamCreate");
  return reinterpret_cast<std::uintptr_t>(s);
}

void CudaDevice::vendor_stream_destroy(std::uint64_t stream) {
  const ContextScope current = make_current();
  // The ABI promises the stream's work is done when destroy returns; cuStreamDestroy alone
  // returns at once and lets the work finish later.
  const CUresult synced = api_.stream_synchronize(as_stream(stream));
  check(api_.stream_destroy(as_stream(stream)), "cuStreamDestroy");
  check(synced, "cuStreamSynchronize before cuStreamDestroy");
}

void CudaDevice::vendor_stream_synchronize(std::uint64_t stream) {
  const ContextScope current = make_current();
  if (const CUresult r = api_.stream_synchronize(as_stream(stream)); r != CUDA_SUCCESS)
    throw_error(r, "cuStreamSynchronize of stream " + std::to_string(stream));
}

void CudaDevice::vendor_synchronize() {
  const ContextScope current = make_current();
  check(api_.ctx_synchronize(), "cuCtxSynchronize");
  release_retired_uploads();  // every replay has completed
}

// ---- events ----------------------------------------------------------------------------------
// The SDK's EventSet has checked every handle, so the driver only sees events of this backend.

void CudaDevice::require_events(const char* op) const {
  if (const char* missing = api_.missing_event_entry_point(); missing != nullptr) [[unlikely]]
    sdk::fail(GPUPLUG_STATUS_UNSUPPORTED,
              std::string(op) + ": events are not supported: the CUDA driver " +
                  version_text(api_.driver_version) + " does not provide " + missing);
}

std::uint64_t CudaDevice::vendor_event_create() {
  require_events("event_create");
  const ContextScope current = make_current();
  CUevent e = nullptr;
  check(api_.event_create(&e, CU_EVENT_DEFAULT), "cuEventCreate");  // timing enabled
  return reinterpret_cast<std::uintptr_t>(e);
}

void CudaDevice::vendor_event_destroy(std::uint64_t event) {
  require_events("event_destroy");
  const ContextScope current = make_current();
  check(api_.event_destroy(as_event(event)), "cuEventDestroy");
}

void CudaDevice::vendor_event_record(std::uint64_t event, std::uint64_t stream) {
  require_events("event_record");
  const ContextScope current = make_current();
  check(api_.event_record(as_event(event), as_stream(stream)), "cuEventRecord");
}

void CudaDevice::vendor_stream_wait_event(std::uint64_t stream, std::uint64_t event) {
  require_events("stream_wait_event");
  const ContextScope current = make_current();
  check(api_.stream_wait_event(as_stream(stream), as_event(event), 0), "cuStreamWaitEvent");
}

void CudaDevice::vendor_event_synchronize(std::uint64_t event) {
  require_events("event_synchronize");
  const ContextScope current = make_current();
  check(api_.event_synchronize(as_event(event)), "cuEventSynchronize");
}

bool CudaDevice::vendor_event_query(std::uint64_t event) {
  require_events("event_query");
  const ContextScope current = make_current();
  const CUresult r = api_.event_query(as_event(event));
  if (r == CUDA_ERROR_NOT_READY) return false;
  check(r, "cuEventQuery");
  return true;
}

float CudaDevice::vendor_event_elapsed_ms(std::uint64_t start, std::uint64_t end) {
  require_events("event_elapsed_ms");
  const ContextScope current = make_current();
  float ms = 0;
  const CUresult r = api_.event_elapsed_time(&ms, as_event(start), as_event(end));
  if (r == CUDA_ERROR_NOT_READY)
    sdk::fail(GPUPLUG_STATUS_UNAVAILABLE,
              "cuEventElapsedTime: an event has not completed (not ready)");
  check(r, "cuEventElapsedTime");
  return ms;
}

}  // namespace gpuplug::cuda
