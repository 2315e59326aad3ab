#include "progress.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace ocular::cli {

namespace {

constexpr auto kRedraw = std::chrono::milliseconds(150);

double PerSecond(int64_t n, double ms) { return ms > 0 ? n / (ms / 1000.0) : 0.0; }

}  // namespace

ReportOptions ChooseReports(bool quiet, bool progress_flag, bool stats_flag, bool streams_text) {
  ReportOptions o;
  const bool tty = ::isatty(STDERR_FILENO) != 0;
  o.live = tty;
  o.progress = !quiet && (tty || progress_flag);
  o.stats = !quiet && (tty || stats_flag);
  o.text_on_tty = streams_text && ::isatty(STDOUT_FILENO) != 0;
  return o;
}

size_t PeakRssBytes() {
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<size_t>(ru.ru_maxrss) * 1024;  // Linux reports KiB
}

Reporter::Reporter(const ReportOptions& options) : o_(options) {
  if (o_.progress && o_.live) ticker_ = std::thread([this] { Tick(); });
}

Reporter::~Reporter() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    ClearLocked();
  }
  wake_.notify_all();
  if (ticker_.joinable()) ticker_.join();
}

void Reporter::Tick() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    wake_.wait_for(lock, kRedraw);
    if (!stop_) DrawLocked();
  }
}

void Reporter::Begin(const char* text) {
  start_ = Clock::now();
  active_ = true;
  Set(text);
}

void Reporter::Set(const char* text) { std::snprintf(text_, sizeof(text_), "%s", text); }

void Reporter::DrawLocked() {
  if (!active_) return;
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start_).count();
  if (ms < o_.show_after_ms) return;
  std::fflush(stdout);
  std::fprintf(o_.out, "\r\033[K%s  %.1f s", text_, ms / 1000.0);
  std::fflush(o_.out);
  drawn_ = true;
}

void Reporter::ClearLocked() {
  active_ = false;
  if (!drawn_) return;
  std::fflush(stdout);
  std::fputs("\r\033[K", o_.out);
  std::fflush(o_.out);
  drawn_ = false;
}

void Reporter::Clear() {
  std::lock_guard<std::mutex> lock(mu_);
  ClearLocked();
}

void Reporter::BeginLoad() {
  std::lock_guard<std::mutex> lock(mu_);
  load_start_ = Clock::now();
  if (o_.progress) Begin("loading model");
}

void Reporter::EndLoad() {
  std::lock_guard<std::mutex> lock(mu_);
  load_ms_ = std::chrono::duration<double, std::milli>(Clock::now() - load_start_).count();
  ClearLocked();
  if (o_.progress && !o_.live) {
    std::fflush(stdout);
    std::fprintf(o_.out, "ocular: loaded the model in %.0f ms\n", load_ms_);
  }
}

ProgressCallback Reporter::Callback() {
  if (!o_.progress) return nullptr;
  return [this](const Progress& p) { OnProgress(p); };
}

void Reporter::OnProgress(const Progress& p) {
  const char* stage = StageName(p.stage);
  const long long done = p.done, total = p.total;
  if (!o_.live) {
    // Plain lines: one per finished stage (decode's end is in the summary).
    if (p.stage == Stage::kDecode || p.done != p.total) return;
    std::fflush(stdout);
    std::fprintf(o_.out, "ocular: %s %lld/%lld in %.0f ms\n", stage, done, total, p.elapsed_ms);
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (!active_ && p.stage != Stage::kDecode) Begin("");  // a run's first report starts its clock
  if (p.stage == Stage::kDecode && o_.text_on_tty) {
    ClearLocked();  // the streamed answer is the progress now
    return;
  }
  char line[sizeof(text_)];
  if (p.stage == Stage::kImages || p.stage == Stage::kDecode) {
    constexpr int kWidth = 20;
    const int filled = total > 0 ? static_cast<int>(kWidth * done / total) : kWidth;
    char bar[kWidth + 1];
    for (int i = 0; i < kWidth; ++i) bar[i] = i < filled ? '#' : '.';
    bar[kWidth] = '\0';
    std::snprintf(line, sizeof(line), "%s [%s] %lld/%lld %s", stage, bar, done, total,
                  p.stage == Stage::kDecode ? "tokens" : "images");
  } else {
    // The encode and the prefill are one pass each: the ticker shows the time running.
    std::snprintf(line, sizeof(line), "%s: %lld %s%s", stage, total,
                  p.stage == Stage::kPrefill ? "tokens" : "images", done == total ? ", done" : "");
  }
  Set(line);
  if (p.done == 0) DrawLocked();  // a new stage shows at once; the ticker does the rest
}

void Reporter::Finish(const GenerateResult& r) {
  Clear();
  if (o_.stats) {
    std::fflush(stdout);
    std::fprintf(o_.out, "%s\n", SummaryLine(r, PeakRssBytes()).c_str());
    std::fflush(o_.out);
  }
}

std::string SummaryLine(const GenerateResult& r, size_t peak_rss_bytes) {
  const Timings& t = r.timings;
  char line[320];
  std::snprintf(line, sizeof(line),
                "stats: prompt %d tok | prefill %.1f tok/s | decode %d tok, %.1f tok/s | "
                "image %.0f ms | peak RSS %.0f MiB | %s",
                t.prefill_tokens, PerSecond(t.prefill_tokens, t.prefill_ms), t.decode_tokens,
                PerSecond(t.decode_tokens, t.decode_ms), t.image_ms,
                static_cast<double>(peak_rss_bytes) / (1024.0 * 1024.0), r.finish_reason.c_str());
  std::string out = line;
  if (t.constraint_ms > 0) {  // structured output: the masks' share of the decode
    std::snprintf(line, sizeof(line), " | grammar %.2f ms/token",
                  t.constraint_ms / std::max(t.decode_tokens, 1));
    out += line;
  }
  return out;
}

}  // namespace ocular::cli
