// SPDX-License-Identifier: Apache-2.0
// Module "activation", kernel bias_relu: x = max(x + bias[col], 0) over a row-major matrix; a NaN
// sum gives 0, as on CUDA (the comparison is false). Launch: grid = ceil(rows * cols / block).
#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
#include "global_index.glsl"
layout(push_constant) uniform Args {
  uint rows;
  uint cols;
  F32In bias;
  F32Out x;
} args;

void main() {
  const uint64_t i = global_index();
  if (i >= uint64_t(args.rows) * args.cols) return;
  // rows * cols may pass 2^32 elements: x[i] is addressed in 64 bits, bias[i % cols] in 32.
  F32Out x = F32Out(uint64_t(args.x) + 4ul * i);
  const float v = x.v[0] + args.bias.v[uint(i % args.cols)];
  x.v[0] = v > 0.0 ? v : 0.0;
}
