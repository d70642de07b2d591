// SPDX-License-Identifier: Apache-2.0
// Module "sync" for the HIP backend: `gate`, a kernel whose completion the host controls, so
// that the conformance suite can hold a stream busy for as long as it likes (docs/kernels.md).
#include <gpuplug/kernel_args.h>
#include <hip/hip_runtime.h>
#include <stdint.h>

// flags[2] after a gate gave up waiting: nothing may hang for good on a test that lost track.
#define GPUPLUG_GATE_TIMED_OUT 0x71Du
// How many polls a gate makes before it gives up: each sleeps about 8k cycles (s_sleep 127 is
// 127 * 64 cycles), so 2^20 polls are some seconds at GPU clocks, never unbounded.
#define GPUPLUG_GATE_POLLS (1u << 20)

// gate(volatile uint32* flags, uint8* dst, uint8 value, uint64 bytes). Launch: grid 1, block 1.
// flags live in managed memory, which the host reads and writes while the kernel runs (it needs
// concurrent managed access). Writes flags[0] = 1 ("started"), waits until flags[1] != 0
// ("released") or the polls run out (then writes flags[2] = 0x71D), then fills dst[0, bytes).
extern "C" __global__ void __launch_bounds__(1)
    gate(volatile uint32_t* flags, uint8_t* dst, uint8_t value, uint64_t bytes) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  flags[0] = 1;
  __threadfence_system();
  uint32_t polls = 0;
  while (flags[1] == 0) {
    if (++polls == GPUPLUG_GATE_POLLS) {
      flags[2] = GPUPLUG_GATE_TIMED_OUT;
      __threadfence_system();
      break;
    }
    __builtin_amdgcn_s_sleep(127);
  }
  for (uint64_t i = 0; i < bytes; ++i) dst[i] = value;
}

// The argument sizes, for plugins that copy arguments (<gpuplug/kernel_args.h>).
extern "C" __device__ __attribute__((used)) const gpuplug_kernel_args_t gate_args = {
    GPUPLUG_KERNEL_ARGS_VERSION, 4, {8, 8, 1, 8}};
