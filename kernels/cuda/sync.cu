// SPDX-License-Identifier: Apache-2.0
// Module "sync" for the CUDA backend: `gate`, a kernel whose completion the host controls, so
// that the conformance suite can hold a stream busy for as long as it likes (docs/kernels.md).
#include <gpuplug/kernel_args.h>
#include <stdint.h>

// flags[2] after a gate gave up waiting: nothing may hang for good on a test that lost track.
#define GPUPLUG_GATE_TIMED_OUT 0x71Du
// How long a gate waits for its release: about 10 s.
#define GPUPLUG_GATE_LIMIT_NS 10000000000ull

__device__ static uint64_t gate_now_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// gate(volatile uint32* flags, uint8* dst, uint8 value, uint64 bytes). Launch: grid 1, block 1.
// flags live in managed memory, which the host reads and writes while the kernel runs (it needs
// concurrent managed access). Writes flags[0] = 1 ("started"), waits until flags[1] != 0
// ("released") or about 10 s passed (then writes flags[2] = 0x71D), then fills dst[0, bytes).
extern "C" __global__ void gate(volatile uint32_t* flags, uint8_t* dst, uint8_t value,
                                uint64_t bytes) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  flags[0] = 1;
  __threadfence_system();
  const uint64_t start = gate_now_ns();
  while (flags[1] == 0) {
    if (gate_now_ns() - start > GPUPLUG_GATE_LIMIT_NS) {
      flags[2] = GPUPLUG_GATE_TIMED_OUT;
      __threadfence_system();
      break;
    }
    __nanosleep(1000);
  }
  for (uint64_t i = 0; i < bytes; ++i) dst[i] = value;
}

// The argument sizes, for plugins that copy arguments (<gpuplug/kernel_args.h>).
extern "C" __device__ const gpuplug_kernel_args_t gate_args = {
    GPUPLUG_KERNEL_ARGS_VERSION, 4, {8, 8, 1, 8}};
