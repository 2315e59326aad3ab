// ocular quantize: an HF model directory -> one GGUF file with quantized weights.
#include "ocular/quantize.h"

#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <map>
#include <memory>

#include "commands.h"

namespace ocular::cli {

void AddQuantize(CLI::App& app, int* rc) {
  auto* cmd = app.add_subcommand("quantize", "write a GGUF file with quantized weights");
  auto o = std::make_shared<QuantizeOptions>();
  auto quiet = std::make_shared<bool>(false);
  cmd->add_option("--model,-m", o->input,
                  "HF model directory, or llama.cpp's text GGUF (gemma3, qwen2vl) to re-quantize")
      ->required();
  cmd->add_option("--output,-o", o->output, "GGUF file to write")->required();
  cmd->add_option("--mmproj-out", o->mmproj_output,
                  "write llama.cpp's layout (Gemma 3): --output as its text GGUF, this file as "
                  "its mmproj (f16; f32 with --type f32 or --vision f32)");
  cmd->add_option("--mmproj", o->mmproj,
                  "with a llama.cpp text GGUF: its mmproj (checks the pair loads; not rewritten)");
  cmd->add_option("--type", o->type,
                  "text decoder weights: q8_0, q4_0, q4_k_m (llama.cpp's recipe), f32, bf16, f16")
      ->check(CLI::IsMember({"q8_0", "q4_0", "q4_k_m", "f32", "bf16", "f16"}));
  cmd->add_option("--vision", o->vision,
                  "vision tower, projector (and mllama's cross-attention K/V): keep (as stored), "
                  "f32, bf16, f16, q8_0")
      ->check(CLI::IsMember({"keep", "f32", "bf16", "f16", "q8_0"}));
  cmd->add_option("--threads,-t", o->threads);  // range and help: TightenOptions
  cmd->add_flag("--quiet,-q", *quiet, "no progress and no per-format summary");
  cmd->callback([=] {
    Status checked = CheckOutputIsNotAnInput("--output", o->output, o->input, {o->mmproj});
    if (checked.ok() && !o->mmproj_output.empty()) {
      checked = CheckOutputIsNotAnInput("--mmproj-out", o->mmproj_output, o->input, {o->mmproj});
    }
    if (!checked.ok()) {
      *rc = Fail(checked);
      return;
    }
    QuantizeOptions opts = *o;
    const bool tty = !*quiet && ::isatty(STDERR_FILENO);
    if (tty) {
      opts.progress = [](int done, int total) {
        std::fprintf(stderr, "\rquantize: %d/%d tensors", done, total);
        if (done == total) std::fprintf(stderr, "\n");
      };
    }
    auto r = QuantizeModel(opts);
    if (!r.ok()) {
      *rc = Fail(r.status());
      return;
    }
    if (!*quiet) {
      std::map<std::string, std::pair<int, uint64_t>> by_format;
      for (const QuantizedTensor& t : r->tensors) {
        auto& [n, bytes] = by_format[t.format];
        ++n;
        bytes += t.bytes;
        if (!t.wanted.empty()) {
          std::cout << "fallback: " << t.name << " -> " << t.format << " (rows of "
                    << t.shape.back() << " values do not fit " << t.wanted << "'s blocks)\n";
        }
      }
      for (const auto& [format, nb] : by_format) {
        std::cout << format << ": " << nb.first << " tensors, " << nb.second / 1e6 << " MB\n";
      }
      std::cout << o->output << (o->mmproj_output.empty() ? "" : " + " + o->mmproj_output) << ": "
                << r->output_bytes / 1e6 << " MB of weights (from " << r->input_bytes / 1e6
                << " MB), " << r->fallbacks << " fallbacks\n";
    }
    *rc = 0;
  });
}

}  // namespace ocular::cli
