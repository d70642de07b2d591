// SPDX-License-Identifier: Apache-2.0
// Module "axpy", kernel axpy: y = a*x + y, one element per thread.
// Launch: grid = ceil(n / block), any block size (the workgroup size is specialized per launch).
#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
#include "global_index.glsl"
layout(push_constant) uniform Args {
  uint n;
  float a;
  F32In x;
  F32Out y;
} args;

void main() {
  const uint64_t g = global_index();
  const uint i = uint(g);  // exact once g < n, a 32-bit count
  if (g < args.n) args.y.v[i] = args.a * args.x.v[i] + args.y.v[i];
}
