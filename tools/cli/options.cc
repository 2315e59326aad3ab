#include "options.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>

namespace ocular::cli {

namespace {
constexpr size_t kMaxStdinImageBytes = size_t{256} << 20;
}  // namespace

void AddPanAndScanFlags(CLI::App* cmd, GenerateOptions* gen) {
  auto* on = cmd->add_flag_callback(
      "--pan-and-scan", [gen] { gen->pan_and_scan = true; },
      "Gemma 3: also show each elongated image (long side >= 1.2x the short) as 2-4 crops, "
      "as transformers' do_pan_and_scan=True");
  cmd->add_flag_callback(
         "--no-pan-and-scan", [gen] { gen->pan_and_scan = false; },
         "Gemma 3: no pan-and-scan crops, even if preprocessor_config.json "
         "asks for them")
      ->excludes(on);
}

void AddModelArgs(CLI::App* cmd, ModelArgs* a, unsigned groups) {
  cmd->add_option("--model,-m", a->model,
                  "HF model directory, or a GGUF file (ocular quantize, or llama.cpp's text file)")
      ->required();
  cmd->add_option("--mmproj", a->mmproj,
                  "llama.cpp's mmproj file (vision encoder + projector) for a llama.cpp text "
                  "GGUF given as --model (Gemma 3: projector type gemma3)");
  if (groups & kCompute) {
    // Bounds and help text: TightenOptions.
    cmd->add_option("--threads,-t", a->threads);
    cmd->add_option("--precision", a->precision,
                    "auto (bf16 for bf16 checkpoints and for quantized files whose other "
                    "matrices are bf16, else f32), f32, bf16 (as torch's bf16 "
                    "run), bf16-fast (no intermediate rounding)")
        ->check(CLI::IsMember({"auto", "f32", "bf16", "bf16-fast"}));
    cmd->add_option("--kv-cache", a->kv_cache,
                    "KV cache storage (auto: bf16 under bf16 precisions)")
        ->check(CLI::IsMember({"auto", "f32", "bf16"}));
    cmd->add_option("--quant-activations", a->quant_activations,
                    "matmuls on quantized (GGUF) weights: int8 (activations rounded to int8 "
                    "blocks, as llama.cpp; fastest decode) or f32 (no activation rounding: the "
                    "product with the dequantized weights; decode needs more CPU)")
        ->check(CLI::IsMember({"int8", "f32"}));
  }
  if (groups & kImages) {
    cmd->add_option("--max-image-pixels", a->max_image_pixels);
    cmd->add_flag("--exif-rotate", a->exif_rotate);
  }
  if (groups & kResize) {
    // Bounds: TightenOptions.
    cmd->add_option("--min-pixels", a->resize.min_pixels);
    cmd->add_option("--max-pixels", a->resize.max_pixels);
  }
}

StatusOr<std::unique_ptr<Engine>> LoadEngine(const ModelArgs& a, int max_batch,
                                             size_t image_cache_bytes, int prefill_chunk,
                                             size_t prefix_cache_bytes) {
  EngineOptions o;
  o.prefix_cache_bytes = prefix_cache_bytes;
  o.max_batch = max_batch;
  o.prefill_chunk = prefill_chunk;
  o.image_cache_bytes = image_cache_bytes;
  o.threads = a.threads;
  o.max_image_pixels = a.max_image_pixels;
  o.image_resize = a.resize;
  o.exif_rotate = a.exif_rotate;
  o.precision = a.precision;
  o.kv_cache = a.kv_cache;
  o.quant_activations = a.quant_activations;
  o.mmproj = a.mmproj;
  return Engine::Load(a.model, o);
}

bool ReadsStdin(const std::vector<std::string>& paths) {
  return std::find(paths.begin(), paths.end(), "-") != paths.end();
}

void AddChatTemplateOption(CLI::App* cmd, GenerateOptions* gen) {
  cmd->add_option("--chat-template",
                  "a Jinja chat template file to use instead of the checkpoint's")
      ->type_name("FILE")
      ->check(CLI::ExistingFile)
      ->each([gen](const std::string& path) {
        std::ifstream in(path, std::ios::binary);
        std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        if (!in.good() && !in.eof())
          throw CLI::ValidationError("--chat-template", path + ": unreadable");
        if (text.size() > (1u << 20))
          throw CLI::ValidationError("--chat-template", path + ": over 1 MiB");
        if (text.empty()) throw CLI::ValidationError("--chat-template", path + ": empty");
        gen->chat_template = std::move(text);
      });
}

StatusOr<std::vector<ImageInput>> ReadImages(const std::vector<std::string>& paths) {
  std::vector<ImageInput> out;
  bool stdin_used = false;
  for (const std::string& p : paths) {
    if (p != "-") {
      out.emplace_back(p);
      continue;
    }
    if (stdin_used) {
      return Error(StatusCode::kInvalidArgument, "cli", "-i - (stdin) can be given only once");
    }
    stdin_used = true;
    if (::isatty(STDIN_FILENO)) {
      return Error(StatusCode::kInvalidArgument, "cli",
                   "-i -: stdin is a terminal; pipe the image in (ocular run -i - ... < cat.jpg)");
    }
    std::vector<uint8_t> bytes;
    uint8_t buf[1 << 16];
    size_t n = 0;
    while ((n = std::fread(buf, 1, sizeof(buf), stdin)) > 0) {
      if (bytes.size() + n > kMaxStdinImageBytes) {
        return Error(StatusCode::kResourceExhausted, "cli", "-i -: the image on stdin is over ",
                     kMaxStdinImageBytes >> 20, " MiB");
      }
      bytes.insert(bytes.end(), buf, buf + n);
    }
    if (std::ferror(stdin)) return Error(StatusCode::kIoError, "cli", "-i -: reading stdin failed");
    if (bytes.empty()) return Error(StatusCode::kInvalidArgument, "cli", "-i -: stdin is empty");
    out.push_back(ImageInput::FromBytes(std::move(bytes), "<stdin>"));
  }
  return out;
}

void Note(const std::string& message) {
  std::fflush(stdout);
  std::fprintf(stderr, "%s\n", message.c_str());
}

}  // namespace ocular::cli
