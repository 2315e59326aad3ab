// What `ocular run` writes for programs: the result object of schema "ocular.run/1" (--json)
// and the NDJSON events of --json-stream. docs/cli.md documents both; bump the schema's
// version when a field changes meaning or goes away (adding a field keeps it).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ocular/detection.h"
#include "ocular/engine.h"
#include "ocular/status.h"

namespace ocular::cli {

inline constexpr char kRunSchema[] = "ocular.run/1";

// What a run's output reports besides the GenerateResult.
struct RunContext {
  std::string model_path;
  ModelInfo info;
  double load_ms = 0;
  std::vector<std::string> image_sources;  // as given ("-": stdin)
};

// The result object. `boxes`: parsed from the answer, in pixels of the first image.
nlohmann::ordered_json RunJson(const RunContext& c, const std::string& prompt,
                               const GenerateResult& r, const std::vector<Detection>& boxes,
                               size_t peak_rss_bytes);

// One top-level member per line, each value on one line (the ids stay greppable and short).
std::string FormatRunJson(const nlohmann::ordered_json& j);

// NDJSON events, one line each (no trailing newline).
std::string StartEvent(const std::string& prompt);
std::string TokenEvent(int index, const std::string& text);
std::string DoneEvent(nlohmann::ordered_json result);
std::string ErrorEvent(const Status& s, int exit_code);

}  // namespace ocular::cli
