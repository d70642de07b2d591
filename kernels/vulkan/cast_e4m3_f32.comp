// SPDX-License-Identifier: Apache-2.0
// Module "e4m3", kernel cast_e4m3_f32: out[i] = f32(in[i]), stored as bits so that both NaN codes
// arrive as 0x7FC00000 / 0xFFC00000. Launch: grid = ceil(n / block).
#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "e4m3.glsl"

layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
#include "global_index.glsl"
layout(push_constant) uniform Args {
  uint n;
  U8In in_;
  U32Out out_;
} args;

void main() {
  const uint64_t g = global_index();
  const uint i = uint(g);  // exact once g < n, a 32-bit count
  if (g < args.n) args.out_.v[i] = gpuplug_e4m3_to_f32_bits(uint(args.in_.v[i]));
}
