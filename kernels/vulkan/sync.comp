// SPDX-License-Identifier: Apache-2.0
// Module "sync", kernel gate: a kernel whose completion the host controls, so that the
// conformance suite can hold a stream busy for as long as it likes (docs/kernels.md).
// Launch: grid 1, block 1. Writes flags[0] = 1 ("started"), polls until flags[1] != 0
// ("released") or it gave up (then flags[2] = 0x71D), then fills dst[0, bytes) with value.
//
// lavapipe ends an invocation's loops after 65,535 iterations in all, so the gate polls at most
// kPolls times with a chain of 8192 dependent steps between two polls, written out by the
// preprocessor (no loop iterations; a loop unrolled by the compiler costs glslc gigabytes), which
// spaces the polls so that giving up takes seconds, not milliseconds (about 4 s on lavapipe on a
// 2-core AMD EPYC, after about 1.8 s to compile). What the polls leave of the budget bounds the
// fill (kMaxFill bytes; more is not written).
#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;

// The host reads and writes the flags while the kernel runs: every access goes to memory.
layout(buffer_reference, std430, buffer_reference_align = 4) coherent volatile buffer GateFlags {
  uint v[];
};

layout(push_constant) uniform Args {
  GateFlags flags;
  U8Out dst;
  uint8_t value;
  uint64_t bytes;
} args;

const uint kTimedOut = 0x71Du;
const uint kPolls = 60000u;

// One step: a division and a square root that depend on the step before.
#define GATE_STEP x = sqrt(1.0 / (x + 1.0) + 1.0);
#define GATE_STEPS_4 GATE_STEP GATE_STEP GATE_STEP GATE_STEP
#define GATE_STEPS_32 GATE_STEPS_4 GATE_STEPS_4 GATE_STEPS_4 GATE_STEPS_4 GATE_STEPS_4 \
    GATE_STEPS_4 GATE_STEPS_4 GATE_STEPS_4
#define GATE_STEPS_256 GATE_STEPS_32 GATE_STEPS_32 GATE_STEPS_32 GATE_STEPS_32 GATE_STEPS_32 \
    GATE_STEPS_32 GATE_STEPS_32 GATE_STEPS_32
#define GATE_STEPS_2048 GATE_STEPS_256 GATE_STEPS_256 GATE_STEPS_256 GATE_STEPS_256 \
    GATE_STEPS_256 GATE_STEPS_256 GATE_STEPS_256 GATE_STEPS_256
#define GATE_STEPS_8192 GATE_STEPS_2048 GATE_STEPS_2048 GATE_STEPS_2048 GATE_STEPS_2048

const uint64_t kMaxFill = 4096ul;

void main() {
  if (gl_GlobalInvocationID != uvec3(0)) return;
  args.flags.v[0] = 1u;
  memoryBarrierBuffer();
  float x = float(args.bytes & 0xfful) + 2.0;  // known only at run time: the chain stays
  bool released = false;
  for (uint p = 0u; p < kPolls; ++p) {
    if (args.flags.v[1] != 0u) {
      released = true;
      break;
    }
    GATE_STEPS_8192
  }
  if (!released) args.flags.v[2] = kTimedOut;
  // x stays between 1 and 1.5 and bytes is whole, so this never stores: it keeps the chain.
  if (x == float(args.bytes) + 0.5) args.flags.v[3] = 1u;
  memoryBarrierBuffer();
  const uint64_t n = min(args.bytes, kMaxFill);
  for (uint64_t i = 0ul; i < n; ++i) args.dst.v[uint(i)] = args.value;
}
