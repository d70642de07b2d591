// SPDX-License-Identifier: Apache-2.0
// Module "e4m3", kernel cast_f32_e4m3: out[i] = E4M3(in[i]). Launch: grid = ceil(n / block).
#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "e4m3.glsl"

layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
#include "global_index.glsl"
layout(push_constant) uniform Args {
  uint n;
  F32In in_;
  U8Out out_;
} args;

void main() {
  const uint64_t g = global_index();
  const uint i = uint(g);  // exact once g < n, a 32-bit count
  if (g < args.n) args.out_.v[i] = uint8_t(gpuplug_f32_to_e4m3(args.in_.v[i]));
}
