/* SPDX-License-Identifier: Apache-2.0
 * The `<func>_args` metadata: the argument sizes of a kernel, published by its module.
 *
 * Why: launch's `params` (one pointer per argument, as cuLaunchKernel takes them) are valid only
 * during the launch call. A plugin that runs a launch later (queued behind a busy stream, on a
 * worker thread, in an emulator) must copy the argument values before launch returns, and for
 * that it needs their sizes, which params itself does not carry. Every sample kernel of every
 * vendor publishes them beside the kernel as a global named `<func>_args` (e.g. `axpy_args`),
 * read like the other published metadata (`gemm_f32_n_tile`): through get_global, and on a GPU
 * with the module-global API (cuModuleGetGlobal, hipModuleGetGlobal) plus a copy.
 *
 *   host:      extern "C" GPUPLUG_PLUGIN_EXPORT const gpuplug_kernel_args_t axpy_args = ...;
 *   CUDA/HIP:  extern "C" __device__ const gpuplug_kernel_args_t axpy_args = ...;
 *
 * Plain C with fixed-size fields, so host compilers, nvcc and hipcc lay it out alike (72 bytes,
 * no padding). A reader checks `version` first: a later version only appends fields, so a reader
 * of version N reads what it knows of any version >= N. See docs/kernels.md.
 */
#ifndef GPUPLUG_KERNEL_ARGS_H
#define GPUPLUG_KERNEL_ARGS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version this header describes. */
#define GPUPLUG_KERNEL_ARGS_VERSION 1u
/* The most arguments the sizes array describes; a kernel with more publishes no `<func>_args`. */
#define GPUPLUG_KERNEL_ARGS_MAX 16u
/* The suffix appended to a kernel's name to form its metadata symbol's name. */
#define GPUPLUG_KERNEL_ARGS_SUFFIX "_args"

typedef struct gpuplug_kernel_args_t {
  uint32_t version;                        /* GPUPLUG_KERNEL_ARGS_VERSION */
  uint32_t count;                          /* arguments, at most GPUPLUG_KERNEL_ARGS_MAX */
  uint32_t sizes[GPUPLUG_KERNEL_ARGS_MAX]; /* bytes of argument i (i < count); 0 past count */
} gpuplug_kernel_args_t;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* GPUPLUG_KERNEL_ARGS_H */
