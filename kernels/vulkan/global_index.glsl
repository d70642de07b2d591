// SPDX-License-Identifier: Apache-2.0
// The element index of a one-dimensional launch (grid = ceil(n / block), any block size): 64-bit,
// as the CUDA kernels compute it, so that a grid split by the plugin still indexes exactly.
// Include it after the `layout(local_size_x_id = ...) in;` line: before it, glslang reads
// gl_WorkGroupSize as the constant (1, 1, 1), not the specialization constants.
uint64_t global_index() {
  return uint64_t(gl_WorkGroupID.x) * uint64_t(gl_WorkGroupSize.x) +
         uint64_t(gl_LocalInvocationID.x);
}
