// SPDX-License-Identifier: Apache-2.0
// Teardown against the real host plugin: reverse order, past failures, one error naming each.
#define BOOST_TEST_MODULE teardown
#include <boost/test/unit_test.hpp>

#include <gpuplug/gpuplug.hpp>

#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "contains.hpp"
#include "counting_backend.hpp"
#include "host_backend.hpp"
#include "test_print.hpp"

namespace {

using gpuplug::DevicePtr;
using gpuplug::Error;
using gpuplug::GpuBackend;
using gpuplug::ModelResource;
using gpuplug::OpCache;
using gpuplug::Status;
using gpuplug::Teardown;
using gpuplug::test::contains;
using gpuplug::test::CountingBackend;
using gpuplug::test::Host;

// A device buffer a model holds; records the order of releases in a shared log.
class Buffer final : public ModelResource<GpuBackend> {
 public:
  Buffer(GpuBackend& gpu, std::string label, std::vector<std::string>& order)
      : label_(std::move(label)), order_(order), ptr_(gpu.alloc(256, "test Buffer")) {}
  std::string_view label() const override { return label_; }
  void release(GpuBackend& gpu) override {
    order_.push_back(label_);
    if (ptr_) gpu.free(std::exchange(ptr_, DevicePtr{}));
  }
  bool released() const { return !ptr_; }

 private:
  std::string label_;
  std::vector<std::string>& order_;
  DevicePtr ptr_;
};

// A resource whose release always fails, with a gpuplug::Error or another exception.
class Failing final : public ModelResource<GpuBackend> {
 public:
  Failing(std::string label, bool gpuplug_error, std::vector<std::string>& order)
      : label_(std::move(label)), gpuplug_error_(gpuplug_error), order_(order) {}
  std::string_view label() const override { return label_; }
  void release(GpuBackend& gpu) override {
    order_.push_back(label_);
    ++calls;
    if (gpuplug_error_) throw Error(Status::device_error, std::string(gpu.name()), "device lost");
    throw std::runtime_error("file handle already closed");
  }
  int calls = 0;

 private:
  std::string label_;
  bool gpuplug_error_;
  std::vector<std::string>& order_;
};

}  // namespace

BOOST_AUTO_TEST_SUITE(teardown)

BOOST_AUTO_TEST_CASE(empty_teardown_is_a_no_op) {
  Host host;
  Teardown t;
  BOOST_TEST(t.size() == 0u);
  t.release_all(*host.gpu);
}

BOOST_AUTO_TEST_CASE(releases_in_reverse_order_of_adding) {
  Host host;
  std::vector<std::string> order;
  Buffer weights(*host.gpu, "weights", order);
  Buffer kv(*host.gpu, "kv cache", order);
  Buffer act(*host.gpu, "activations", order);
  Teardown t;
  t.add(weights);
  t.add(kv);
  t.add(act);
  BOOST_TEST(t.size() == 3u);
  t.release_all(*host.gpu);
  BOOST_TEST(order == (std::vector<std::string>{"activations", "kv cache", "weights"}),
             boost::test_tools::per_element());
  BOOST_TEST(weights.released());
  BOOST_TEST(kv.released());
  BOOST_TEST(act.released());
  BOOST_TEST(host.gpu->live_alloc_count() == 0u);
  t.release_all(*host.gpu);  // resources stay registered; each release is idempotent
  BOOST_TEST(order.size() == 6u);
}

BOOST_AUTO_TEST_CASE(two_failures_are_named_and_the_rest_still_released) {
  Host host;
  CountingBackend gpu(*host.gpu);
  std::vector<std::string> order;
  const std::uint64_t live0 = host.gpu->live_alloc_count();

  Buffer weights(gpu, "weights", order);
  Failing kv("kv cache", /*gpuplug_error=*/true, order);
  OpCache& cache = host.gpu->op_cache();
  cache.scratch(gpu, "attn", 4096);
  cache.scratch(gpu, "attn", 8192);  // a retired buffer too
  cache.scratch(gpu, "ffn", 1024);
  cache.kernel(gpu, "gemm", "gemm_f32");
  Failing tokenizer("tokenizer", /*gpuplug_error=*/false, order);
  Buffer logits(gpu, "logits", order);

  Teardown t;
  t.add(weights);
  t.add(kv);
  t.add(cache);
  t.add(tokenizer);
  t.add(logits);
  try {
    t.release_all(gpu);
    BOOST_FAIL("expected an error");
  } catch (const Error& e) {
    BOOST_TEST_INFO(e.what());
    BOOST_TEST(e.status() == Status::internal);
    BOOST_TEST(e.backend() == std::string(host.gpu->name()));
    BOOST_TEST(e.message() ==
               "2 of 5 resources failed to release: tokenizer: file handle already closed; "
               "kv cache: device lost");
    BOOST_TEST(e.operation() == "release_all");
    // Each failure keeps its own status, in the order of release.
    const auto* te = dynamic_cast<const gpuplug::TeardownError*>(&e);
    BOOST_REQUIRE(te != nullptr);
    BOOST_REQUIRE_EQUAL(te->failures().size(), 2u);
    BOOST_TEST(te->failures()[0].label == "tokenizer");
    BOOST_TEST(te->failures()[0].status == Status::internal);
    BOOST_TEST(te->failures()[0].message == "file handle already closed");
    BOOST_TEST(te->failures()[1].label == "kv cache");
    BOOST_TEST(te->failures()[1].status == Status::device_error);
    BOOST_TEST(te->failures()[1].message == "device lost");
  }
  // Reverse order; the "op scratch" cache sat between the failures and was released.
  BOOST_TEST(order == (std::vector<std::string>{"logits", "tokenizer", "kv cache", "weights"}),
             boost::test_tools::per_element());
  BOOST_TEST(weights.released());
  BOOST_TEST(logits.released());
  BOOST_TEST(cache.scratch_count() == 0u);
  BOOST_TEST(cache.kernel_count() == 0u);
  // The backend's ledger holds nothing OpCache (or the buffers) allocated.
  BOOST_TEST(gpu.handed_out_count() == 0u);
  BOOST_TEST(host.gpu->live_alloc_count() == live0);
  BOOST_TEST(!contains(host.gpu->alloc_report(), "op scratch: "));

  // A second call retries the failed ones; the released ones are harmless to release again.
  BOOST_CHECK_THROW(t.release_all(gpu), Error);
  BOOST_TEST(kv.calls == 2);
  BOOST_TEST(tokenizer.calls == 2);
  BOOST_TEST(gpu.free_calls == 5u);  // 3 scratch + 2 buffers, none freed twice
}

BOOST_AUTO_TEST_CASE(an_op_cache_failure_is_named_by_its_label) {
  Host host;
  CountingBackend gpu(*host.gpu);
  OpCache cache;
  const DevicePtr p = cache.scratch(gpu, "attn", 64);
  gpu.fail_free(p);
  Teardown t;
  t.add(cache);
  try {
    t.release_all(gpu);
    BOOST_FAIL("expected an error");
  } catch (const Error& e) {
    BOOST_TEST_INFO(e.what());
    BOOST_TEST(contains(e.message(), "1 of 1 resources failed to release: op scratch: "));
    BOOST_TEST(contains(e.message(), "scratch 'attn'"));
  }
  host.gpu->free(p);
  BOOST_TEST(host.gpu->live_alloc_count() == 0u);
}

BOOST_AUTO_TEST_CASE(one_kind_of_failure_keeps_its_status) {
  Host host;
  std::vector<std::string> order;
  Failing a("a", /*gpuplug_error=*/true, order);
  Failing b("b", /*gpuplug_error=*/true, order);
  Teardown t;
  t.add(a);
  t.add(b);
  try {
    t.release_all(*host.gpu);
    BOOST_FAIL("expected an error");
  } catch (const gpuplug::TeardownError& e) {
    BOOST_TEST(e.status() == Status::device_error);  // every failure said device_error
    BOOST_TEST(e.failures().size() == 2u);
  }
}

BOOST_AUTO_TEST_SUITE_END()
