// SPDX-License-Identifier: Apache-2.0
// The executor's pitched 2D copy: one queued operation for all the rows, with the host source
// staged into a buffer the operation owns when the caller may reuse it at once.
#include <cstring>
#include <memory>
#include <utility>

#include "driver.hpp"

namespace gpuplug::host {

/// The rows of one 2D copy. `staged`, when set, holds the source rows packed (src points into it).
struct Executor::Pitched {
  std::byte* dst;
  std::size_t dst_pitch;
  const std::byte* src;
  std::size_t src_pitch;
  std::size_t width;
  std::size_t height;
  std::unique_ptr<std::byte[]> staged;
};

void Executor::run_2d(const Pitched& rows) noexcept {
  for (std::size_t r = 0; r < rows.height; ++r)
    std::memmove(rows.dst + r * rows.dst_pitch, rows.src + r * rows.src_pitch, rows.width);
}

void Executor::copy_2d(std::uint64_t stream, void* dst, std::size_t dst_pitch, const void* src,
                       std::size_t src_pitch, std::size_t width, std::size_t height,
                       bool stage_source) {
  Pitched now{static_cast<std::byte*>(dst), dst_pitch, static_cast<const std::byte*>(src),
              src_pitch, width, height, nullptr};
  if (stream == 0) {  // the legacy default stream: after every stream, in the calling thread
    wait_blocking();
    run_2d(now);
    return;
  }
  auto rows = std::make_shared<Pitched>(std::move(now));
  if (stage_source) {
    // width * height <= the source's span, which the SDK checked fits the address space.
    rows->staged = std::make_unique_for_overwrite<std::byte[]>(width * height);
    for (std::size_t r = 0; r < height; ++r)
      std::memcpy(rows->staged.get() + r * width, rows->src + r * src_pitch, width);
    rows->src = rows->staged.get();
    rows->src_pitch = width;
  }
  Item item{Item::Kind::copy_2d, nullptr, nullptr, 0, 0, nullptr};
  item.pitched = std::move(rows);
  enqueue(stream, item);
}

}  // namespace gpuplug::host
