#include "core/thread_pool.h"

#include <sched.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <string>
#include <system_error>
#include <utility>

#include "core/check.h"

namespace ocular {
namespace {

// The pool whose chunk the current thread is running, if any (nested calls run inline).
thread_local const ThreadPool* tls_running_pool = nullptr;

// Polls (each a sched_yield) before blocking: tens of microseconds.
constexpr int kSpinIterations = 200;

// Spins until pred() holds or the budget runs out; returns pred().
template <typename Pred>
bool SpinUntil(const Pred& pred) {
  for (int i = 0; i < kSpinIterations; ++i) {
    if (pred()) return true;
    // yield, not a pause loop: on an oversubscribed machine (or under a hypervisor that
    // traps pause loops) a busy spin starves the very thread being waited for.
    std::this_thread::yield();
  }
  return pred();
}

std::string ReadFirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

}  // namespace

int ThreadPool::DefaultThreadCount() {
  if (const char* env = std::getenv("OCULAR_THREADS")) {
    char* end = nullptr;
    const long n = std::strtol(env, &end, 10);
    if (end != env && *end == '\0' && n > 0 && n <= 4096) return static_cast<int>(n);
  }
  // Count distinct (package, core) pairs among the CPUs this process may run on, so
  // hyperthread siblings count once: the FMA units are per core.
  cpu_set_t mask;
  CPU_ZERO(&mask);
  int allowed = 0;
  std::set<std::pair<std::string, std::string>> cores;
  if (sched_getaffinity(0, sizeof(mask), &mask) == 0) {
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
      if (!CPU_ISSET(cpu, &mask)) continue;
      ++allowed;
      const std::string dir = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
      const std::string core = ReadFirstLine(dir + "core_id");
      if (core.empty()) continue;
      cores.emplace(ReadFirstLine(dir + "physical_package_id"), core);
    }
  }
  if (!cores.empty()) return static_cast<int>(cores.size());
  if (allowed > 0) return allowed;
  const unsigned hw = std::thread::hardware_concurrency();
  return hw > 0 ? static_cast<int>(hw) : 1;
}

ThreadPool::ThreadPool(int num_threads) : num_threads_(num_threads) {
  OCULAR_CHECK(num_threads >= 1, "HINT: a pool needs at least the calling thread");
  workers_.reserve(num_threads - 1);
  for (int i = 0; i + 1 < num_threads; ++i) {
    try {
      workers_.emplace_back([this, i] { WorkerLoop(i); });
    } catch (const std::system_error& e) {
      // The OS refused a thread (RLIMIT_NPROC, memory, cgroup pids.max). Run with the workers
      // that did start rather than abort: ParallelFor hands chunks to whichever workers exist
      // (pending_ counts workers_, not num_threads_), so results are unchanged, only slower.
      std::fprintf(stderr,
                   "warning: [thread_pool] could only start %d of %d threads (%s); "
                   "HINT: lower --threads or OCULAR_THREADS\n",
                   i + 1, num_threads, e.what());
      break;
    }
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::RunChunks() {
  const ThreadPool* outer = tls_running_pool;
  tls_running_pool = this;
  for (;;) {
    const int c = next_chunk_.fetch_add(1, std::memory_order_relaxed);
    if (c >= num_chunks_) break;
    const int64_t begin = n_ * c / num_chunks_;
    const int64_t end = n_ * (c + 1) / num_chunks_;
    (*fn_)(begin, end);
  }
  tls_running_pool = outer;
}

void ThreadPool::WorkerLoop(int /*worker_index*/) {
  uint64_t seen = 0;
  for (;;) {
    auto has_work = [&] { return stop_.load() || generation_.load() != seen; };
    if (!SpinUntil(has_work)) {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, has_work);
    }
    if (stop_.load()) return;
    seen = generation_.load();
    RunChunks();
    if (pending_.fetch_sub(1) == 1) {
      { std::lock_guard<std::mutex> lock(mu_); }  // the caller is either waiting or will see 0
      done_cv_.notify_one();
    }
  }
}

void ThreadPool::ParallelFor(int64_t n, FunctionRef<void(int64_t begin, int64_t end)> fn) {
  if (n <= 0) return;
  if (num_threads_ == 1 || n == 1 || tls_running_pool != nullptr) {
    fn(0, n);
    return;
  }
  std::lock_guard<std::mutex> call_lock(call_mu_);
  fn_ = &fn;
  n_ = n;
  num_chunks_ = static_cast<int>(n < num_threads_ ? n : num_threads_);
  next_chunk_.store(0, std::memory_order_relaxed);
  pending_.store(static_cast<int>(workers_.size()));
  {
    std::lock_guard<std::mutex> lock(mu_);
    generation_.fetch_add(1);  // publishes the job fields above
  }
  work_cv_.notify_all();
  RunChunks();
  auto done = [&] { return pending_.load() == 0; };
  if (!SpinUntil(done)) {
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, done);
  }
  fn_ = nullptr;
}

}  // namespace ocular
