// What a user sees on stderr while ocular works: a progress line (loading, image decode and
// encode, prefill, decode) and a one-line summary after each run.
//
// On a terminal the line redraws itself in place (a ticker thread keeps the elapsed time
// moving through one-pass stages such as loading and the prefill) and appears only for work
// that has run ~1 s; elsewhere nothing is shown unless asked (--progress: one plain line per
// finished stage; --stats: the summary). --quiet shows neither.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>

#include "ocular/engine.h"

namespace ocular::cli {

struct ReportOptions {
  bool progress = false;        // show progress (on a terminal: a live line; else plain lines)
  bool stats = false;           // a summary line after each run
  bool live = false;            // `out` is a terminal: redraw the progress line in place
  bool text_on_tty = false;     // the answer streams to a terminal: it is the decode progress
  std::FILE* out = stderr;      // where progress and the summary go (stdout is flushed first)
  double show_after_ms = 1000;  // a live line appears once an activity has run this long
};

// Chooses from the flags and from whether stderr / stdout are terminals.
ReportOptions ChooseReports(bool quiet, bool progress_flag, bool stats_flag, bool streams_text);

class Reporter {
 public:
  explicit Reporter(const ReportOptions& options);
  ~Reporter();
  Reporter(const Reporter&) = delete;
  Reporter& operator=(const Reporter&) = delete;

  // Around Engine::Load.
  void BeginLoad();
  void EndLoad();

  // The callback to pass as GenerateOptions::on_progress (null when progress is off). It
  // refers to this Reporter. Allocation-free: it formats into a fixed buffer.
  ProgressCallback Callback();

  // After a run: erases the live line and prints the summary if stats are on.
  void Finish(const GenerateResult& r);
  // Ends the current activity and erases the live line (before other output on stderr).
  void Clear();

  double load_ms() const { return load_ms_; }

 private:
  using Clock = std::chrono::steady_clock;
  void OnProgress(const Progress& p);
  void Begin(const char* text);  // REQUIRES: mu_ held
  void Set(const char* text);    // REQUIRES: mu_ held
  void DrawLocked();             // REQUIRES: mu_ held
  void ClearLocked();            // REQUIRES: mu_ held
  void Tick();

  const ReportOptions o_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::thread ticker_;
  bool stop_ = false;
  bool active_ = false;        // an activity (load or run) is under way and may be shown
  bool drawn_ = false;         // a live line is on screen
  Clock::time_point start_{};  // of the activity shown
  Clock::time_point load_start_{};
  char text_[160] = {};
  double load_ms_ = 0;
};

// "stats: prompt 270 tok | prefill 1234.5 tok/s | decode 12 tok, 57.3 tok/s | image 40 ms |
//  peak RSS 350 MiB | eos"
std::string SummaryLine(const GenerateResult& r, size_t peak_rss_bytes);

// The process's peak resident set so far.
size_t PeakRssBytes();

}  // namespace ocular::cli
