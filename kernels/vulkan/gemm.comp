// SPDX-License-Identifier: Apache-2.0
// Module "gemm", kernels gemm_f32 and gemm_a_e4m3 (built with ROUND_A=1): C = A * B, row-major,
// tiled as the CUDA kernel is. A workgroup of 16 x 16 threads computes 16 rows x 64 columns of C,
// each thread 4 columns strided by 16; K is walked in steps of 16 through shared memory. With
// ROUND_A, A's elements go through E4M3 (no scale) as they are staged; B and the sums stay f32.
// Launch: grid = (ceil(N / 64), ceil(M / 16)), block = (16, 16) (fixed: the tiles are sized by it).
#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "e4m3.glsl"

#ifndef ROUND_A
#define ROUND_A 0
#endif

const uint kRows = 16;
const uint kNTile = 64;
const uint kKTile = 16;
const uint kColsPerThread = kNTile / 16;

layout(local_size_x = 16, local_size_y = 16, local_size_z = 1) in;
layout(push_constant) uniform Args {
  uint M;
  uint N;
  uint K;
  F32In A;
  F32In B;
  F32Out C;
} args;

shared float a_tile[kRows][kKTile];
shared float b_tile[kKTile][kNTile];

// Element [row, col] of a row-major matrix with `cols` columns, addressed in 64 bits.
float load(F32In m, uint row, uint col, uint cols) {
  return F32In(uint64_t(m) + 4ul * (uint64_t(row) * cols + col)).v[0];
}

void main() {
  const uint tx = gl_LocalInvocationID.x;
  const uint ty = gl_LocalInvocationID.y;
  const uint row = gl_WorkGroupID.y * kRows + ty;
  const uint col0 = gl_WorkGroupID.x * kNTile;
  float acc[kColsPerThread];
  for (uint j = 0; j < kColsPerThread; ++j) acc[j] = 0.0;

  for (uint k0 = 0; k0 < args.K; k0 += kKTile) {
    const uint ak = k0 + tx;
    float a = (row < args.M && ak < args.K) ? load(args.A, row, ak, args.K) : 0.0;
#if ROUND_A
    a = uintBitsToFloat(gpuplug_e4m3_to_f32_bits(gpuplug_f32_to_e4m3(a)));
#endif
    a_tile[ty][tx] = a;
    const uint bk = k0 + ty;
    for (uint j = 0; j < kColsPerThread; ++j) {
      const uint c = col0 + tx + 16 * j;
      b_tile[ty][tx + 16 * j] = (bk < args.K && c < args.N) ? load(args.B, bk, c, args.N) : 0.0;
    }
    barrier();
    for (uint kk = 0; kk < kKTile; ++kk) {
      const float av = a_tile[ty][kk];
      for (uint j = 0; j < kColsPerThread; ++j) acc[j] += av * b_tile[kk][tx + 16 * j];
    }
    barrier();
  }
  if (row >= args.M) return;
  for (uint j = 0; j < kColsPerThread; ++j) {
    const uint c = col0 + tx + 16 * j;
    if (c < args.N) F32Out(uint64_t(args.C) + 4ul * (uint64_t(row) * args.N + c)).v[0] = acc[j];
  }
}
