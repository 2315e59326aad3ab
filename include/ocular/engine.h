// ocular's public C++ API: load a model directory, run a prompt with images, trace it.
//
//   auto engine = ocular::Engine::Load("paligemma2-3b-mix-224", {}).value();
//   auto result = engine->Generate({"cat.jpg"}, "caption en", {});
//   if (result.ok()) std::cout << result->text;
//
// Thread-safety: an Engine is safe to use from many threads at once without external
// synchronization. Every method may be called concurrently. Generate calls from several
// threads are batched (continuous batching): up to EngineOptions::max_batch sequences decode
// together, one step for all, each joining and leaving on its own; more wait in arrival
// order. Each request keeps its own state (nothing of one request — pixels, KV cache,
// sampler — is visible to another), so its answer is the one it gets alone. Trace and Bench
// take turns with the batch. The read-only methods (Info, Stats, Tokenize, TokenPiece,
// Detokenize) never wait for model work. A callback runs on the calling thread of its
// request.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ocular/chat.h"
#include "ocular/image_resize.h"
#include "ocular/status.h"

namespace ocular {

struct EngineOptions {
  int threads = 0;                        // 0: number of physical cores
  int64_t max_image_pixels = 50'000'000;  // decoded images larger than this are rejected
  // The image processor's resize bounds in place of the checkpoint's preprocessor_config.json:
  // Qwen2VLImageProcessor's min_pixels / max_pixels (Qwen2-VL, Qwen2.5-VL, Qwen3-VL; `ocular
  // run --min-pixels / --max-pixels`). The workspace is planned for images of max_pixels; a
  // request may lower them (GenerateOptions::image_resize). Another family refuses them
  // (kInvalidArgument). Errors: a bound under one merge window (28x28 or 32x32 pixels) or over
  // 2^28, min_pixels > max_pixels.
  ImageResize image_resize = {};
  bool exif_rotate = false;  // transformers ignores EXIF orientation; so do we by default
  // How activations are computed: "auto" (bf16 for a bf16 checkpoint, else f32), "f32",
  // "bf16" (reproduces torch's bf16 run; needs a bf16 checkpoint), "bf16-fast" (f32
  // activations and attention over bf16 weights, no intermediate rounding; opt-in).
  std::string precision = "auto";
  // KV cache storage: "auto" (bf16 under bf16 / bf16-fast, else f32), "f32", "bf16".
  std::string kv_cache = "auto";
  // Matmuls on quantized weights (GGUF q8_0 / q4_0 / q5_0 / q4_k / q6_k; no effect on float
  // weights): "int8" (activations quantized to int8 blocks as llama.cpp does: the fastest
  // decode), "f32" (f32 activations times the weights dequantized in registers: the product
  // with the dequantized weights, no activation rounding; prefill as fast, decode needs about
  // a quarter more CPU on Gemma 3 270M's Q4_K_M file).
  std::string quant_activations = "int8";
  // Sequences decoded together in one step: concurrent Generate calls (continuous batching);
  // the planned workspace.
  int max_batch = 8;
  // Bytes of vision features kept for reuse (LRU): an image seen before (same decoded pixels
  // and dimensions, same preprocessing, same model) skips the vision encoder. 0: off.
  size_t image_cache_bytes = 0;
  // Bytes of prompt K/V kept for reuse (LRU): a prompt that begins with the tokens, images and
  // positions of one run before (a chat's next turn) prefills only its new rows, with the same
  // answer. Gemma 3, Llama 3.2 Vision and the Qwen family (not PaliGemma: its prompt is one
  // bidirectional block). 0: off.
  size_t prefix_cache_bytes = 0;
  // Chunked prefill: prompt rows a scheduler step prefills (through every layer) while other
  // sequences are decoding, so a long image prompt is spread over several decode steps
  // instead of stalling them (the answer is the same). Larger: a new request's first token
  // sooner, the running streams slower meanwhile.
  int prefill_chunk = 64;
  // Tokens per sequence the activation workspace is planned for at load (0: one image and a
  // short prompt). A longer prompt grows the workspace once, before its prefill runs.
  int max_context = 0;
  // llama.cpp's mmproj file (the vision encoder and projector) to pair with a llama.cpp text
  // GGUF given as the model (`llama-mtmd-cli -m text.gguf --mmproj mmproj.gguf`); "": none.
  std::string mmproj = {};
};

// An image given as a file path or as encoded bytes (JPEG, PNG, WebP, GIF, BMP).
struct ImageInput {
  ImageInput(std::string file_path) : path(std::move(file_path)) {}  // NOLINT: implicit
  ImageInput(const char* file_path) : path(file_path) {}             // NOLINT: implicit
  static ImageInput FromBytes(std::vector<uint8_t> data, std::string name = "<bytes>") {
    ImageInput in(std::move(name));
    in.bytes = std::move(data);
    in.from_bytes = true;
    return in;
  }
  std::string path;            // the file, or a name for error messages when from_bytes
  std::vector<uint8_t> bytes;  // the encoded image when from_bytes
  bool from_bytes = false;
};

// The stages of a request, in order, as a ProgressCallback sees them.
enum class Stage : uint8_t {
  kImages,   // decode + preprocess the input images; units: images
  kEncode,   // vision encoder + projector over all images (one pass); units: images
  kPrefill,  // the decoder over the image + prompt block (one pass); units: prompt tokens
  kDecode,   // generation; units: tokens generated so far, out of max_tokens
};
const char* StageName(Stage stage);  // "images", "encode", "prefill", "decode"

struct Progress {
  Stage stage = Stage::kImages;
  int64_t done = 0;       // units of this stage finished
  int64_t total = 0;      // units of the whole stage (decode may finish early: eos, stop)
  double elapsed_ms = 0;  // since the stage began
};

// Called on the request's thread when a stage begins (done == 0) and after each unit of it
// finishes (an image decoded, a generated token; the encode and the prefill are one pass each,
// so they report their begin and end only). Stages with no work (no images) are skipped.
// It runs inside the decode loop: it must be cheap, must not allocate if the caller counts on
// an allocation-free decode step, must not throw and must not call back into the Engine.
using ProgressCallback = std::function<void(const Progress& progress)>;

struct GenerateOptions {
  int max_tokens = 64;
  float temperature = 0.0f;  // 0: greedy
  int top_k = 0;
  float top_p = 1.0f;
  uint64_t seed = 0;
  bool stop_at_eos = true;
  // big_vision / gemma.cpp tokenize the "\n" after the prompt separately; HF (default) encodes
  // "<image>"*N + "<bos>" + prompt + "\n" in one call (docs/models.md §1.6).
  bool separate_newline = false;
  // The prompt is one user turn of a chat (ocular::UserTurn with ModelInfo::image_marker),
  // formatted as GenerateChat formats a conversation. Refused (kUnimplemented) where
  // ModelInfo::chat_format is "" (PaliGemma; a checkpoint without a known template).
  bool chat = false;
  // Chat: the date a template writes (Llama 3.2 Vision's system block: "26 Jul 2024", as
  // strftime("%d %b %Y")); "" = today, local time, as transformers' strftime_now.
  std::string date;
  // Chat: a Jinja chat template that replaces the checkpoint's ("" = the checkpoint's).
  std::string chat_template;
  // Chat: extra template variables, a JSON object ("" = none): apply_chat_template's **kwargs,
  // the server's chat_template_kwargs (e.g. {"enable_thinking": false}).
  std::string chat_template_kwargs;
  // Gemma 3's pan-and-scan (transformers' do_pan_and_scan): an image whose long side is at
  // least 1.2x its short one is also shown as 2-4 crops (docs/models.md §9). Unset: the
  // checkpoint's preprocessor_config.json (do_pan_and_scan, usually off). true on another
  // family: kInvalidArgument.
  std::optional<bool> pan_and_scan;
  // This request's image resize bounds (vLLM's mm_processor_kwargs {"min_pixels",
  // "max_pixels"}); a zero field keeps the engine's (EngineOptions::image_resize, else the
  // checkpoint's). Qwen-VL only, another family refuses them (kInvalidArgument), as it does
  // bounds that would make more patches per image than the engine was loaded for.
  ImageResize image_resize = {};
  // Never emit ids >= image_token_index (PaliGemma's untrained padding rows). Off = HF parity.
  bool suppress_padding_tokens = false;
  // Generation also ends when the answer text contains one of these strings (finish_reason
  // "stop"); the answer is cut before it. Empty strings are ignored.
  std::vector<std::string> stop;
  // Structured output (docs/structured-output.md), at most one of the three: the answer is
  // constrained, token by token, to JSON that `json_schema` (a JSON Schema's text) accepts,
  // to any JSON object (`json_object`), or to text that `regex` matches as a whole. EOS is
  // allowed exactly when the answer is complete. A schema or regex outside the supported
  // subset is refused (kInvalidArgument naming the keyword), never ignored.
  std::string json_schema;
  bool json_object = false;
  std::string regex;
  ProgressCallback on_progress;  // optional; see ProgressCallback
};

struct Timings {
  double image_ms = 0;    // decode + preprocess + vision encoder + projector
  double prefill_ms = 0;  // decoder over the prefix block
  double decode_ms = 0;   // all decode steps
  int prefill_tokens = 0;
  int decode_tokens = 0;
  // Structured output (json_schema / json_object / regex): of decode_ms, the time spent on the
  // grammar's token masks and steps (0 without one).
  double constraint_ms = 0;
};

struct GenerateResult {
  std::string text;  // decoded answer, special tokens skipped
  // "eos", "length" (max_tokens reached), "stop" (a GenerateOptions::stop string) or
  // "cancelled" (the token callback returned false).
  std::string finish_reason;
  std::string raw_text;             // decoded with special tokens (loc/seg visible)
  std::vector<int32_t> prompt_ids;  // the full prefix, image tokens included
  std::vector<int32_t> output_ids;  // generated ids (EOS included if produced)
  struct ImageSize {
    int width = 0, height = 0;
  };
  std::vector<ImageSize> image_sizes;  // decoded size of each input image (box coordinates)
  Timings timings;
};

// Called with each newly decoded piece of text (never half a UTF-8 character; with
// GenerateOptions::stop, never any part of a stop string: the pieces add up to the answer).
// Returning false stops generation after this piece (finish_reason "cancelled").
using TokenCallback = std::function<bool(const std::string& piece)>;

struct ModelInfo {
  std::string architecture;  // "PaliGemma 1 (gemma)" / "PaliGemma 2 (gemma2)"
  int image_size = 0;
  int image_tokens = 0;
  int vocab_size = 0;
  int context_length = 0;      // positions a sequence may use, prompt and new tokens together
  std::string weight_dtype;    // "BF16", "F32", ... (F32 if mixed; "quantized" for a GGUF
                               // with quantized matrices: weight_formats lists them)
  std::string weight_formats;  // every weight matrix format: "bf16", "q4_k+q6_k+bf16", ...
  size_t weight_bytes = 0;
  int threads = 0;
  std::string isa;
  std::string precision;          // "f32", "bf16", "bf16-fast"
  std::string kv_cache;           // "f32", "bf16"
  std::string quant_activations;  // "int8", "f32" (EngineOptions::quant_activations)
  // "jinja": GenerateChat renders the checkpoint's chat template (as transformers'
  // apply_chat_template);
  // "" when the family (PaliGemma) or the checkpoint has none.
  std::string chat_format;
  std::string image_marker;  // "<start_of_image>", "<|image|>"; "" for PaliGemma
};

// Counters of an Engine's model work since it was loaded (Engine::Stats).
struct EngineStats {
  // [b]: decode steps that ran b sequences together (index 0 unused; size max_batch + 1).
  std::vector<uint64_t> decode_steps_by_batch;
  int running = 0;               // sequences in the decode batch now
  int waiting = 0;               // Generate calls waiting for a place in the batch
  uint64_t prefills = 0;         // prompts run (one per Generate that reached the model)
  uint64_t prefill_chunks = 0;   // pieces the prefills ran in (chunked prefill)
  uint64_t merged_prefills = 0;  // prefill pieces run in one pass with other prompts', per prompt
  uint64_t images_encoded = 0;   // images that went through the vision encoder
  uint64_t scheduler_steps = 0;  // scheduler iterations that ran the model
  // Seconds the model spent in the vision encoder, prefills and decode steps.
  double encode_seconds = 0, prefill_seconds = 0, decode_seconds = 0;
  // The image-feature cache (EngineOptions::image_cache_bytes).
  uint64_t image_cache_hits = 0, image_cache_misses = 0, image_cache_evictions = 0;
  size_t image_cache_bytes = 0, image_cache_entries = 0, image_cache_max_bytes = 0;
  // The prompt K/V cache (EngineOptions::prefix_cache_bytes): prefills that reused cached rows,
  // those that found none, the prompt rows not prefilled thanks to it.
  uint64_t prefix_cache_hits = 0, prefix_cache_misses = 0, prefix_cache_tokens_reused = 0;
  uint64_t prefix_cache_evictions = 0;
  size_t prefix_cache_bytes = 0, prefix_cache_entries = 0, prefix_cache_max_bytes = 0;
  size_t kv_bytes_in_use = 0;  // KV caches of running sequences
  size_t kv_bytes_pooled = 0;  // released KV memory kept for reuse
};

struct BenchOptions {
  int prompt_tokens = 16;  // text tokens after the image block
  int decode_tokens = 32;
  int batch = 1;  // sequences decoded together (each with its own image and prompt)
  // One untimed encode before the timed one (faults in the mapped vision weights). Off for
  // encoders whose one run takes minutes (Llama 3.2 Vision's four 560-px tiles), where the
  // first touch of the weights is a negligible part of the time.
  bool vision_warmup = true;
};

struct BenchResult {
  double vision_ms = 0;     // vision tower + projector for one image (synthetic pixels)
  int vision_tiles = 1;     // crops that encode ran (mllama: every tile, padding included)
  double vision_gflop = 0;  // matmul + attention FLOPs of that encode (2 per MAC)
  int prefill_tokens = 0;   // image block + prompt (of one sequence)
  double prefill_tok_s = 0;
  int batch = 1;
  int decode_tokens = 0;          // decode steps (each produces `batch` tokens)
  double decode_tok_s = 0;        // aggregate: tokens of all sequences per second
  double decode_weight_gb_s = 0;  // decoder weight bytes streamed per second while decoding
  size_t text_weight_bytes = 0;   // decoder + output projection, as stored
  size_t kv_cache_bytes = 0;      // the batch's KV caches
  size_t workspace_bytes = 0;     // the planned activation arena
  size_t peak_rss_bytes = 0;
};

// Compiles GenerateOptions' structured-output fields (json_schema / json_object / regex)
// without a model: the error Generate would return for them (kInvalidArgument), found before
// anything loads.
Status CheckStructuredOutput(const GenerateOptions& options);

class Engine {
 public:
  // Loads an HF model directory (config.json, *.safetensors, tokenizer.json or
  // tokenizer.model, preprocessor_config.json) or a GGUF file written by `ocular quantize`,
  // of a supported family (config.json model_type: "paligemma", "gemma3", "gemma3_text").
  // Errors name the file and the problem.
  static StatusOr<std::unique_ptr<Engine>> Load(const std::string& model_dir,
                                                const EngineOptions& options);
  virtual ~Engine() = default;

  virtual ModelInfo Info() const = 0;
  virtual EngineStats Stats() const { return {}; }

  // Runs image(s) + prompt and generates. Images are files or encoded bytes (JPEG, PNG, WebP,
  // GIF, BMP). An empty image list runs a text-only prompt.
  virtual StatusOr<GenerateResult> Generate(const std::vector<ImageInput>& images,
                                            const std::string& prompt,
                                            const GenerateOptions& options,
                                            const TokenCallback& on_text = nullptr) = 0;

  // Generates the assistant's next turn of a conversation formatted as the checkpoint's chat
  // template formats it in transformers' apply_chat_template(add_generation_prompt=True)
  // (docs/models.md: Gemma 3, Llama 3.2 Vision). The image parts of `messages` stand for
  // `images`, in order. Roles: "system", "user", "assistant". Errors: no chat format
  // (kUnimplemented: PaliGemma, an unknown or absent chat_template); a conversation the
  // template refuses, image parts that do not match `images`, a bad role (kInvalidArgument).
  virtual StatusOr<GenerateResult> GenerateChat(const std::vector<ImageInput>& images,
                                                const std::vector<ChatMessage>& messages,
                                                const GenerateOptions& options,
                                                const TokenCallback& on_text = nullptr) {
    (void)images, (void)messages, (void)options, (void)on_text;
    return Error(StatusCode::kUnimplemented, "engine", "this engine has no chat format");
  }

  // Like Generate (greedy, options.max_tokens steps, EOS not stopping), and writes every named
  // activation (docs/testing.md) plus input_ids, pixel_values, logits, generated_ids and
  // decode_logits to a safetensors file at `out_path`.
  virtual StatusOr<GenerateResult> Trace(const std::vector<ImageInput>& images,
                                         const std::string& prompt, const GenerateOptions& options,
                                         const std::string& out_path) = 0;

  // Times the vision encoder, prefill and decode on synthetic inputs (no files needed): one
  // image per sequence, `batch` sequences prefilled one by one, then decoded together.
  virtual StatusOr<BenchResult> Bench(const BenchOptions& options) = 0;

  // The prompt Generate builds for `n_images` images and `prompt` under `options`
  // (separate_newline): image tokens, BOS, the prompt's tokens and the separator, and the
  // length of its bidirectional prefix. Error: text is not valid UTF-8.
  struct PromptTokens {
    std::vector<int32_t> ids;
    int64_t prefix_len = 0;
  };
  virtual StatusOr<PromptTokens> BuildPrompt(int n_images, const std::string& prompt,
                                             const GenerateOptions& options) const = 0;
  // The prompt GenerateChat builds for `messages` with `n_images` images.
  virtual StatusOr<PromptTokens> BuildChatPrompt(int n_images,
                                                 const std::vector<ChatMessage>& messages,
                                                 const GenerateOptions& options) const {
    (void)n_images, (void)messages, (void)options;
    return Error(StatusCode::kUnimplemented, "engine", "this engine has no chat format");
  }

  // Tokenizer access for debugging prompt formats.
  // Error: text is not valid UTF-8.
  virtual StatusOr<std::vector<int32_t>> Tokenize(const std::string& text) const = 0;
  virtual std::string TokenPiece(int32_t id) const = 0;
  virtual std::string Detokenize(const std::vector<int32_t>& ids, bool skip_special) const = 0;
};

}  // namespace ocular
