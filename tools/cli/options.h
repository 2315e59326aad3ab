// Options and input handling the subcommands share: the model options, images given as files
// or on stdin ("-i -"), and loading an Engine.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <vector>

#include "ocular/engine.h"
#include "ocular/status.h"

namespace ocular::cli {

struct ModelArgs {
  std::string model;
  std::string mmproj;  // --mmproj: llama.cpp's vision file for a llama.cpp text GGUF
  int threads = 0;
  int64_t max_image_pixels = 50'000'000;  // --max-image-pixels: the image decoder's budget
  ImageResize resize;                     // --min-pixels / --max-pixels: the processor's
  bool exif_rotate = false;
  std::string precision = "auto";
  std::string kv_cache = "auto";
  std::string quant_activations = "int8";
};

// Which groups of model options a subcommand offers (--help lists only what applies).
enum ModelOptionGroups : unsigned {
  kModelOnly = 0,
  kCompute = 1,  // --threads, --precision, --kv-cache, --quant-activations: runs the model
  kImages = 2,   // --max-image-pixels, --exif-rotate: the command decodes images
  kResize = 4,   // --min-pixels, --max-pixels: Qwen2VLImageProcessor's bounds (load time)
};

void AddModelArgs(CLI::App* cmd, ModelArgs* a, unsigned groups);

// --pan-and-scan / --no-pan-and-scan: GenerateOptions::pan_and_scan (unset: the checkpoint's).
void AddPanAndScanFlags(CLI::App* cmd, GenerateOptions* gen);

// --chat-template FILE: a Jinja chat template (at most 1 MiB) that replaces the checkpoint's;
// read into gen->chat_template when the option is parsed.
void AddChatTemplateOption(CLI::App* cmd, GenerateOptions* gen);

// Loads the model directory with the options given. max_batch: sequences decoded together;
// prefill_chunk: EngineOptions::prefill_chunk; the caches' budgets: EngineOptions'.
StatusOr<std::unique_ptr<Engine>> LoadEngine(const ModelArgs& a, int max_batch = 8,
                                             size_t image_cache_bytes = 0,
                                             int prefill_chunk = EngineOptions{}.prefill_chunk,
                                             size_t prefix_cache_bytes = 0);

// The images of a request: each path is a file, except "-", which reads the encoded image
// from stdin (at most once; refused when stdin is a terminal). Errors: kInvalidArgument,
// kIoError, kResourceExhausted (over 256 MiB on stdin).
StatusOr<std::vector<ImageInput>> ReadImages(const std::vector<std::string>& paths);

// True if `paths` names stdin ("-").
bool ReadsStdin(const std::vector<std::string>& paths);

// Writes a message to stderr after flushing stdout, so that what a command printed so far
// comes first when both go to the same place.
void Note(const std::string& message);

}  // namespace ocular::cli
