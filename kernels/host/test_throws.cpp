// SPDX-License-Identifier: Apache-2.0
// Test-only module "test_throws": kernels that throw, for the executor's failure reporting
// (a kernel that throws must fail its launch, not terminate the process).
#include <atomic>
#include <stdexcept>
#include <string>

#include <gpuplug/host_kernel.hpp>

using namespace gpuplug::host_kernels;

namespace {
/// Not derived from std::exception: reported as "unknown exception".
struct NotAStdException {
  int code;
};
}  // namespace

// throw_runtime(uint32 fail_block, uint32* ran): the block whose linear x index is fail_block
// throws std::runtime_error("boom in block <i>"); every other block adds 1 to *ran.
GPUPLUG_HOST_KERNEL(throw_runtime) {
  const std::uint32_t fail_block = arg<std::uint32_t>(params, 0);
  if (block->block_idx.x == fail_block)
    throw std::runtime_error("boom in block " + std::to_string(block->block_idx.x));
  std::atomic_ref<std::uint32_t>(*ptr<std::uint32_t>(params, 1)).fetch_add(1);
}

// throw_other(): every block throws a type that is not a std::exception.
GPUPLUG_HOST_KERNEL(throw_other) {
  (void)block;
  (void)params;
  throw NotAStdException{7};
}

// throw_hostile(): throws a std::runtime_error whose what() is 100000 bytes of text with a
// terminal escape, newlines and invalid UTF-8: a message the backend must bound and escape.
GPUPLUG_HOST_KERNEL(throw_hostile) {
  (void)block;
  (void)params;
  std::string what = "evil\x1b[31mred\nforged log line\xff\xfe";
  what.append(100000, 'x');
  throw std::runtime_error(what);
}

// count(uint32* n): adds 1 to *n per block; the good kernel that must still run afterwards.
GPUPLUG_HOST_KERNEL(count) {
  (void)block;
  std::atomic_ref<std::uint32_t>(*ptr<std::uint32_t>(params, 0)).fetch_add(1);
}
GPUPLUG_HOST_KERNEL_ARGS(count, 1, {8});
