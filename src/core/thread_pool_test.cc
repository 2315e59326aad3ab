#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <utility>
#include <vector>

namespace ocular {
namespace {

// Every index in [0, n) is visited exactly once, by contiguous non-empty chunks.
void ExpectCoversOnce(ThreadPool& pool, int64_t n) {
  std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
  std::atomic<int> chunks{0};
  std::atomic<bool> bad_range{false};
  pool.ParallelFor(n, [&](int64_t begin, int64_t end) {
    if (begin >= end || begin < 0 || end > n) bad_range = true;
    chunks.fetch_add(1);
    for (int64_t i = begin; i < end; ++i) hits[i].fetch_add(1);
  });
  EXPECT_FALSE(bad_range.load());
  EXPECT_LE(chunks.load(), pool.size());
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "n=" << n << " i=" << i;
}

TEST(ThreadPoolTest, CoversEveryIndexOnce) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.size(), threads);
    for (int64_t n : {1, 2, 3, 7, 8, 9, 100, 1001}) ExpectCoversOnce(pool, n);
  }
}

TEST(ThreadPoolTest, OneThreadRunsInlineAsOneChunk) {
  ThreadPool pool(1);
  std::vector<std::pair<int64_t, int64_t>> chunks;
  std::thread::id runner;
  pool.ParallelFor(10, [&](int64_t begin, int64_t end) {
    chunks.emplace_back(begin, end);
    runner = std::this_thread::get_id();
  });
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_EQ(chunks[0], std::make_pair(int64_t{0}, int64_t{10}));
  EXPECT_EQ(runner, std::this_thread::get_id());
}

TEST(ThreadPoolTest, ZeroAndNegativeAreNoOps) {
  ThreadPool pool(3);
  int calls = 0;
  pool.ParallelFor(0, [&](int64_t, int64_t) { ++calls; });
  pool.ParallelFor(-5, [&](int64_t, int64_t) { ++calls; });
  EXPECT_EQ(calls, 0);
}

TEST(ThreadPoolTest, SumOverRangesMatchesSerial) {
  ThreadPool pool(4);
  const int64_t n = 100000;
  for (int rep = 0; rep < 200; ++rep) {  // many generations: exercises the wake/wait protocol
    std::atomic<int64_t> sum{0};
    pool.ParallelFor(n, [&](int64_t begin, int64_t end) {
      int64_t local = 0;
      for (int64_t i = begin; i < end; ++i) local += i;
      sum.fetch_add(local);
    });
    ASSERT_EQ(sum.load(), n * (n - 1) / 2);
  }
}

TEST(ThreadPoolTest, UsesSeveralThreadsWhenWorkIsSplit) {
  ThreadPool pool(4);
  std::vector<std::thread::id> ids(4);
  pool.ParallelFor(4, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) ids[i] = std::this_thread::get_id();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // let the others pick chunks
  });
  int distinct = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    bool seen = false;
    for (size_t j = 0; j < i; ++j) seen |= ids[j] == ids[i];
    distinct += !seen;
  }
  EXPECT_GE(distinct, 2);
}

TEST(ThreadPoolTest, NestedCallRunsInline) {
  ThreadPool pool(3);
  std::atomic<int64_t> total{0};
  pool.ParallelFor(6, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      pool.ParallelFor(10, [&](int64_t b, int64_t e) { total.fetch_add(e - b); });
    }
  });
  EXPECT_EQ(total.load(), 60);
}

TEST(ThreadPoolTest, ConcurrentCallersAreSerialized) {
  ThreadPool pool(3);
  std::atomic<int64_t> total{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 3; ++t) {
    callers.emplace_back([&] {
      for (int rep = 0; rep < 50; ++rep) {
        pool.ParallelFor(100, [&](int64_t b, int64_t e) { total.fetch_add(e - b); });
      }
    });
  }
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(total.load(), 3 * 50 * 100);
}

TEST(ThreadPoolTest, DefaultThreadCountIsPositive) {
  EXPECT_GE(ThreadPool::DefaultThreadCount(), 1);
}

}  // namespace
}  // namespace ocular
