// A fixed-size pool of worker threads for data-parallel loops.
//
// ParallelFor(n, fn) splits [0, n) into contiguous chunks and runs fn(begin, end) on the
// workers and on the calling thread, returning when every chunk is done. Kernels use it to
// split MatMul over output columns and attention over (query, head) pairs.
//
// Thread-safety: ParallelFor may be called from several threads; calls are serialized.
// A ParallelFor issued from inside a running chunk (nesting) runs inline on that thread.
// fn must not throw (the library does not use exceptions). ParallelFor never allocates.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "core/function_ref.h"

namespace ocular {

class ThreadPool {
 public:
  // REQUIRES: num_threads >= 1. The pool starts num_threads - 1 workers; the caller of
  // ParallelFor is the last thread. num_threads == 1 runs everything inline.
  explicit ThreadPool(int num_threads = DefaultThreadCount());
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Total threads that run chunks, including the caller.
  int size() const { return num_threads_; }

  // Runs fn(begin, end) over contiguous chunks covering [0, n) exactly once each.
  // At most size() chunks; n <= 0 does nothing.
  void ParallelFor(int64_t n, FunctionRef<void(int64_t begin, int64_t end)> fn);

  // Physical cores (hyperthread siblings counted once), at least 1. Overridden by the
  // environment variable OCULAR_THREADS when it holds a positive integer.
  static int DefaultThreadCount();

 private:
  void WorkerLoop(int worker_index);
  void RunChunks();

  const int num_threads_;
  std::vector<std::thread> workers_;

  std::mutex call_mu_;  // serializes ParallelFor callers

  // Workers and the caller spin briefly on these atomics before sleeping on the condition
  // variables (decode issues hundreds of short ParallelFor calls per token). Writes that a
  // sleeper waits for happen under mu_, so no wakeup is lost.
  std::mutex mu_;
  std::condition_variable work_cv_;  // workers wait for a new generation
  std::condition_variable done_cv_;  // caller waits for pending_ == 0
  std::atomic<uint64_t> generation_{0};
  std::atomic<bool> stop_{false};
  std::atomic<int> pending_{0};  // workers that have not finished this generation

  // The current job; written by the caller before the generation is published.
  const FunctionRef<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0;
  int num_chunks_ = 0;
  std::atomic<int> next_chunk_{0};
};

}  // namespace ocular
