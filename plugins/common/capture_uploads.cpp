// SPDX-License-Identifier: Apache-2.0
// CaptureUploads: upload sources staged during a capture, kept by capture, then by graph.
#include "capture_uploads.hpp"

#include <cstring>
#include <utility>

namespace gpuplug::sdk {

const void* CaptureUploads::stage(std::uint64_t capture, const void* src, std::uint64_t bytes) {
  auto copy = std::make_unique<std::byte[]>(bytes);
  std::memcpy(copy.get(), src, bytes);
  const void* staged = copy.get();
  const std::lock_guard lock(mutex_);
  captures_[capture].push_back(std::move(copy));
  return staged;
}

void CaptureUploads::ended(std::uint64_t capture, std::uint64_t graph) noexcept {
  active_.fetch_sub(1, std::memory_order_relaxed);
  Copies copies;
  {
    const std::lock_guard lock(mutex_);
    const auto it = captures_.find(capture);
    if (it == captures_.end()) return;
    copies = std::move(it->second);
    captures_.erase(it);
    if (graph != 0 && !copies.empty()) {
      try {
        graphs_[graph] = std::move(copies);
      } catch (...) {  // no memory: the graph would read freed bytes, so keep them retired
        for (auto& c : copies) retired_.push_back(std::move(c));
      }
    }
  }
}

void CaptureUploads::retire(std::uint64_t graph) noexcept {
  const std::lock_guard lock(mutex_);
  const auto it = graphs_.find(graph);
  if (it == graphs_.end()) return;
  try {
    retired_.reserve(retired_.size() + it->second.size());
    for (auto& c : it->second) retired_.push_back(std::move(c));
    graphs_.erase(it);
  } catch (...) {  // no memory to retire them: the graph keeps them until release_retired
  }
}

void CaptureUploads::release_retired() noexcept {
  Copies done;
  const std::lock_guard lock(mutex_);
  done.swap(retired_);
}

std::size_t CaptureUploads::held() const {
  const std::lock_guard lock(mutex_);
  std::size_t n = retired_.size();
  for (const auto& [id, copies] : captures_) n += copies.size();
  for (const auto& [graph, copies] : graphs_) n += copies.size();
  return n;
}

}  // namespace gpuplug::sdk
