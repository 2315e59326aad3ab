#include "models/qwen2vl/processor.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <tuple>

#include "core/check.h"
#include "core/file_io.h"
#include "image/resize.h"

namespace ocular::qwen2vl {

namespace {

using Json = nlohmann::json;

constexpr char kImagePad[] = "<|image_pad|>";
constexpr char kVisionStart[] = "<|vision_start|>";
constexpr int64_t kMaxImagePixels = int64_t{1} << 28;

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos;
       at = text.find(what, at + what.size())) {
    ++n;
  }
  return n;
}

Status IntField(const Json& j, const char* key, int64_t lo, int64_t hi, const std::string& origin,
                int64_t* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::Ok();
  if (!it->is_number_integer() || it->get<int64_t>() < lo || it->get<int64_t>() > hi) {
    return Error(StatusCode::kDataLoss, "image", origin, ": ", key, " = ", ShortJson(*it, 40),
                 " must be an integer in [", lo, ", ", hi, "]");
  }
  *out = it->get<int64_t>();
  return Status::Ok();
}

}  // namespace

int64_t ImageConfig::max_patches() const {
  // smart_resize keeps h*w <= max_pixels when it scales down, and scales up to at least
  // min_pixels: the larger of the two bounds (one factor^2 of slack for the rounding up).
  const int64_t f = factor();
  const int64_t pixels = std::max(max_pixels, min_pixels + 2 * f * f) + f * f;
  return pixels / (int64_t{patch_size} * patch_size);
}

StatusOr<ImageConfig> ParseImageConfig(const std::string& json_text, const std::string& origin) {
  OCULAR_ASSIGN_OR_RETURN(Json j, ParseJson(json_text, origin, "image"));
  if (!j.is_object()) return Error(StatusCode::kDataLoss, "image", origin, ": not a JSON object");
  ImageConfig c;
  // Qwen2VLImageProcessor's defaults where they differ from SiglipImageProcessor's.
  c.pp.image_mean = {0.48145466, 0.4578275, 0.40821073};  // OPENAI_CLIP_MEAN
  c.pp.image_std = {0.26862954, 0.26130258, 0.27577711};  // OPENAI_CLIP_STD
  c.pp.do_convert_rgb = true;
  // size is {shortest_edge, longest_edge} here: read below, not by ParsePreprocessConfig.
  Json rest = j;
  rest.erase("size");
  OCULAR_ASSIGN_OR_RETURN(PreprocessConfig pp, ParsePreprocessConfig(rest.dump(), origin));
  if (j.contains("image_mean") && !j["image_mean"].is_null()) c.pp.image_mean = pp.image_mean;
  if (j.contains("image_std") && !j["image_std"].is_null()) c.pp.image_std = pp.image_std;
  c.pp.do_resize = pp.do_resize;
  c.pp.resample = pp.resample;
  c.pp.do_rescale = pp.do_rescale;
  c.pp.rescale_factor = pp.rescale_factor;
  c.pp.do_normalize = pp.do_normalize;
  if (j.contains("do_convert_rgb") && j["do_convert_rgb"].is_boolean()) {
    c.pp.do_convert_rgb = pp.do_convert_rgb;
  }
  if (!c.pp.do_resize) {
    // Without smart_resize the grid need not be whole merge windows; transformers then fails
    // in its reshape on most sizes.
    return Error(StatusCode::kUnimplemented, "image", origin,
                 ": do_resize = false is not "
                 "supported (the patch grid must be whole merge windows)");
  }
  // __init__: size {shortest_edge, longest_edge}, then min_pixels / max_pixels override it.
  if (auto it = j.find("size"); it != j.end() && !it->is_null()) {
    if (!it->is_object() || !it->contains("shortest_edge") || !it->contains("longest_edge")) {
      return Error(StatusCode::kDataLoss, "image", origin, ": size ", ShortJson(*it, 60),
                   " must contain shortest_edge and longest_edge (as Qwen2VLImageProcessor "
                   "requires)");
    }
    OCULAR_RETURN_IF_ERROR(
        IntField(*it, "shortest_edge", 1, kMaxImagePixels, origin, &c.min_pixels));
    OCULAR_RETURN_IF_ERROR(
        IntField(*it, "longest_edge", 1, kMaxImagePixels, origin, &c.max_pixels));
  }
  OCULAR_RETURN_IF_ERROR(IntField(j, "min_pixels", 1, kMaxImagePixels, origin, &c.min_pixels));
  OCULAR_RETURN_IF_ERROR(IntField(j, "max_pixels", 1, kMaxImagePixels, origin, &c.max_pixels));
  int64_t v = c.patch_size;
  OCULAR_RETURN_IF_ERROR(IntField(j, "patch_size", 1, 1024, origin, &v));
  c.patch_size = static_cast<int>(v);
  v = c.temporal_patch_size;
  OCULAR_RETURN_IF_ERROR(IntField(j, "temporal_patch_size", 1, 64, origin, &v));
  c.temporal_patch_size = static_cast<int>(v);
  v = c.merge_size;
  OCULAR_RETURN_IF_ERROR(IntField(j, "merge_size", 1, 64, origin, &v));
  c.merge_size = static_cast<int>(v);
  if (c.min_pixels > c.max_pixels) {
    return Error(StatusCode::kDataLoss, "image", origin, ": min_pixels (", c.min_pixels,
                 ") exceeds max_pixels (", c.max_pixels, ")");
  }
  return c;
}

StatusOr<ImageConfig> WithResize(const ImageConfig& c, const ImageResize& resize) {
  ImageConfig out = c;
  const int64_t f = c.factor();
  for (auto [name, value, field] : {std::tuple{"min_pixels", resize.min_pixels, &out.min_pixels},
                                    std::tuple{"max_pixels", resize.max_pixels, &out.max_pixels}}) {
    if (value == 0) continue;  // the checkpoint's
    if (value < f * f || value > kMaxImagePixels) {
      return Error(StatusCode::kInvalidArgument, "image", name, " = ", value, " must be in [",
                   f * f, ", ", kMaxImagePixels, "]: smart_resize makes at least ", "one ", f, "x",
                   f, " merge window (factor = patch_size ", c.patch_size, " x merge_size ",
                   c.merge_size, ")");
    }
    *field = value;
  }
  if (out.min_pixels > out.max_pixels) {
    return Error(StatusCode::kInvalidArgument, "image", "min_pixels (", out.min_pixels,
                 ") exceeds max_pixels (", out.max_pixels, ")",
                 resize.min_pixels == 0 || resize.max_pixels == 0
                     ? " (the other bound is the "
                       "checkpoint's preprocessor_config.json or the model's as loaded)"
                     : "");
  }
  return out;
}

StatusOr<ImageConfig> LoadImageConfig(const FileSet& files, const ImageResize& resize) {
  const char* name = "preprocessor_config.json";
  OCULAR_ASSIGN_OR_RETURN(std::string text, files.Read(name, kMaxConfigFileBytes, "image"));
  OCULAR_ASSIGN_OR_RETURN(ImageConfig c, ParseImageConfig(text, files.Where(name)));
  return WithResize(c, resize);
}

StatusOr<std::pair<int, int>> SmartResize(int height, int width, int factor, int64_t min_pixels,
                                          int64_t max_pixels) {
  const double h = height, w = width, f = factor;
  if (std::max(h, w) / std::min(h, w) > 200) {
    return Error(StatusCode::kInvalidArgument, "image", "absolute aspect ratio must be smaller ",
                 "than 200, got ", std::max(h, w) / std::min(h, w), " (", width, "x", height, ")");
  }
  // round() is Python's: half to even, as nearbyint in the default rounding mode.
  int64_t h_bar = static_cast<int64_t>(std::nearbyint(h / f)) * factor;
  int64_t w_bar = static_cast<int64_t>(std::nearbyint(w / f)) * factor;
  if (h_bar * w_bar > max_pixels) {
    const double beta = std::sqrt(h * w / static_cast<double>(max_pixels));
    h_bar = std::max<int64_t>(factor, static_cast<int64_t>(std::floor(h / beta / f)) * factor);
    w_bar = std::max<int64_t>(factor, static_cast<int64_t>(std::floor(w / beta / f)) * factor);
  } else if (h_bar * w_bar < min_pixels) {
    const double beta = std::sqrt(static_cast<double>(min_pixels) / (h * w));
    h_bar = static_cast<int64_t>(std::ceil(h * beta / f)) * factor;
    w_bar = static_cast<int64_t>(std::ceil(w * beta / f)) * factor;
  }
  if (h_bar > (1 << 20) || w_bar > (1 << 20)) {
    return Error(StatusCode::kResourceExhausted, "image", "smart_resize of ", width, "x", height,
                 " gives ", w_bar, "x", h_bar, ", over ocular's limit");
  }
  return std::pair<int, int>{static_cast<int>(h_bar), static_cast<int>(w_bar)};
}

StatusOr<ImagePatches> Patchify(const Image& image, const ImageConfig& c) {
  OCULAR_ASSIGN_OR_RETURN(const auto size, SmartResize(image.height, image.width, c.factor(),
                                                       c.min_pixels, c.max_pixels));
  const auto [rh, rw] = size;
  // resize (PIL on the uint8 image), rescale, normalize, channels first.
  PreprocessConfig pp = c.pp;
  pp.do_resize = false;
  const Tensor px = Preprocess(Resize(image, rw, rh, c.pp.resample), pp);  // [3, rh, rw]
  const int p = c.patch_size, m = c.merge_size, tp = c.temporal_patch_size;
  const int gh = rh / p, gw = rw / p;
  ImagePatches out;
  out.grid = {1, gh, gw};  // one frame, repeated to temporal_patch_size: grid_t = 1
  const int64_t row_floats = int64_t{3} * tp * p * p;
  out.values.resize(static_cast<size_t>(int64_t{gh} * gw * row_floats));
  float* dst = out.values.data();
  // reshape(t, tp, C, gh/m, m, p, gw/m, m, p).transpose(0, 3, 6, 4, 7, 2, 1, 5, 8): rows in
  // (block row, block column, row in block, column in block) order, each (C, tp, py, px).
  for (int bh = 0; bh < gh / m; ++bh) {
    for (int bw = 0; bw < gw / m; ++bw) {
      for (int ih = 0; ih < m; ++ih) {
        for (int iw = 0; iw < m; ++iw) {
          const int y0 = (bh * m + ih) * p, x0 = (bw * m + iw) * p;
          for (int ch = 0; ch < 3; ++ch) {
            for (int t = 0; t < tp; ++t) {  // the frame, temporal_patch_size times
              for (int y = 0; y < p; ++y) {
                const float* src = px.data.data() + (int64_t{ch} * rh + y0 + y) * rw + x0;
                dst = std::copy_n(src, p, dst);
              }
            }
          }
        }
      }
    }
  }
  OCULAR_CHECK(dst == out.values.data() + out.values.size());
  return out;
}

std::pair<std::vector<int32_t>, int64_t> RopeIndex(std::span<const int32_t> ids,
                                                   std::span<const std::array<int32_t, 3>> grids,
                                                   int merge_size, int32_t image_token,
                                                   int32_t vision_start_token) {
  const int64_t T = static_cast<int64_t>(ids.size());
  std::vector<int32_t> pos(static_cast<size_t>(3 * T));
  int64_t st = 0, next = 0;  // st: the first row not placed; next: max position so far + 1
  auto text = [&](int64_t from, int64_t to) {
    for (int64_t t = from; t < to; ++t) {
      for (int a = 0; a < 3; ++a) pos[a * T + t] = static_cast<int32_t>(next + (t - from));
    }
    if (to > from) next += to - from;
  };
  for (const std::array<int32_t, 3>& g : grids) {
    int64_t ed = st;
    while (ed < T && ids[ed] != image_token) ++ed;  // input_tokens.index(image_token_id, st)
    OCULAR_CHECK(ed < T && ed > 0 && ids[ed - 1] == vision_start_token);
    text(st, ed);
    // llm_grid_t, h, w = t, h // merge, w // merge; positions [t_i, h_i, w_i] + text_len + st_idx
    const int64_t lt = g[0], lh = g[1] / merge_size, lw = g[2] / merge_size;
    int64_t r = ed, largest = next - 1;
    for (int64_t ti = 0; ti < lt; ++ti) {
      for (int64_t hi = 0; hi < lh; ++hi) {
        for (int64_t wi = 0; wi < lw; ++wi, ++r) {
          OCULAR_CHECK(r < T && ids[r] == image_token);
          pos[0 * T + r] = static_cast<int32_t>(next + ti);
          pos[1 * T + r] = static_cast<int32_t>(next + hi);
          pos[2 * T + r] = static_cast<int32_t>(next + wi);
          largest = std::max({largest, next + ti, next + hi, next + wi});
        }
      }
    }
    next = largest + 1;  // st_idx = llm_pos_ids_list[-1].max() + 1
    st = r;
  }
  text(st, T);
  // mrope_position_deltas = llm_positions.max() + 1 - len(input_ids)
  return {std::move(pos), next - T};
}

StatusOr<std::unique_ptr<Qwen2VLProcessor>> Qwen2VLProcessor::Load(const FileSet& files,
                                                                   const Qwen2VLConfig& config,
                                                                   const ImageResize& resize) {
  auto p = std::unique_ptr<Qwen2VLProcessor>(new Qwen2VLProcessor());
  OCULAR_ASSIGN_OR_RETURN(p->tok_, Tokenizer::Load(files));
  OCULAR_ASSIGN_OR_RETURN(p->image_, LoadImageConfig(files, resize));
  p->image_token_ = config.image_token_id;
  p->vision_start_ = config.vision_start_token_id;
  OCULAR_ASSIGN_OR_RETURN(p->chat_, ChatTemplate::Load(files));
  for (auto [piece, id] : {std::pair{kImagePad, config.image_token_id},
                           std::pair{kVisionStart, config.vision_start_token_id},
                           std::pair{"<|vision_end|>", config.vision_end_token_id}}) {
    if (p->tok_->TokenToId(piece) != id) {
      return Error(StatusCode::kDataLoss, "qwen2_vl", files.origin(), ": config.json says ", piece,
                   " is ", id, " but the tokenizer's is ", p->tok_->TokenToId(piece));
    }
  }
  const ImageConfig& c = p->image_;
  const VisionConfig& v = config.vision;
  if (c.patch_size != v.patch_size || c.temporal_patch_size != v.temporal_patch_size ||
      c.merge_size != v.spatial_merge_size) {
    return Error(StatusCode::kDataLoss, "image", files.Where("preprocessor_config.json"),
                 ": patches of ", c.patch_size, " px, temporal ", c.temporal_patch_size, ", merge ",
                 c.merge_size, ", but config.json's vision model takes ", v.patch_size, ", ",
                 v.temporal_patch_size, ", ", v.spatial_merge_size);
  }
  return p;
}

StatusOr<Tensor> Qwen2VLProcessor::Pixels(const Image& image) const {
  OCULAR_ASSIGN_OR_RETURN(ImagePatches patches, Patchify(image, image_));
  const int64_t rows = int64_t{patches.grid[0]} * patches.grid[1] * patches.grid[2];
  Tensor t({rows, static_cast<int64_t>(patches.values.size()) / rows});
  t.data = std::move(patches.values);
  return t;
}

StatusOr<ImageConfig> Qwen2VLProcessor::RequestConfig(const ImageResize& resize) const {
  if (resize.empty()) return image_;
  OCULAR_ASSIGN_OR_RETURN(ImageConfig c, WithResize(image_, resize));
  if (c.max_patches() > image_.max_patches()) {
    return Error(StatusCode::kInvalidArgument, "image", "min_pixels ", c.min_pixels,
                 " / max_pixels ", c.max_pixels, " make images of up to ", c.max_patches(),
                 " patches, more than the ", image_.max_patches(), " the model was loaded for ",
                 "(max_pixels ", image_.max_pixels, "); HINT: load it with a larger max_pixels ",
                 "(--max-pixels, EngineOptions::image_resize)");
  }
  return c;
}

Status Qwen2VLProcessor::CheckResize(const ImageResize& resize) const {
  return RequestConfig(resize).status();
}

Status Qwen2VLProcessor::AddImage(const Image& image, const ImageOptions& options, int32_t source,
                                  Prompt* prompt) const {
  if (options.pan_and_scan) {
    return Error(StatusCode::kInvalidArgument, "image",
                 "pan-and-scan crops are a Gemma 3 option; Qwen2-VL takes each image whole");
  }
  OCULAR_ASSIGN_OR_RETURN(const ImageConfig c, RequestConfig(options.resize));
  OCULAR_ASSIGN_OR_RETURN(ImagePatches patches, Patchify(image, c));
  VisionInput in;
  in.grid = patches.grid;
  const int64_t m = image_.merge_size;
  in.feature_rows = in.tokens =
      int64_t{patches.grid[0]} * patches.grid[1] * patches.grid[2] / (m * m);
  in.source = source;
  prompt->AddImage(patches.values.data(), static_cast<int64_t>(patches.values.size()), in);
  return Status::Ok();
}

StatusOr<Prompt> Qwen2VLProcessor::Tokenize(const std::string& text, std::span<const int64_t> pads,
                                            std::span<const std::array<int32_t, 3>> grids) const {
  const std::string tag = kImageTag;
  std::string body = text;
  if (Count(body, kImagePad) == 0 && !pads.empty()) {
    // No tag in the text: the images go first, as the chat template places a turn's images.
    std::string lead;
    for (size_t i = 0; i < pads.size(); ++i) lead += tag;
    body = lead + body;
  }
  const size_t tags = Count(body, std::string(kVisionStart) + kImagePad);
  const size_t bare = Count(body, kImagePad);
  if (bare != tags) {
    return Error(StatusCode::kInvalidArgument, "prompt", "the prompt has ", bare - tags, " ",
                 kImagePad, " outside a ", tag, " tag (get_rope_index finds images by ",
                 kVisionStart, ")");
  }
  if (tags != pads.size()) {
    return Error(StatusCode::kInvalidArgument, "prompt", "the prompt has ", tags, " ", tag,
                 " tags but ", pads.size(),
                 " images were given (mark where each image goes "
                 "with ",
                 tag, ", or give none to put the images first)");
  }
  // Qwen2VLProcessor.__call__: the i-th <|image_pad|> becomes grid.prod() // merge^2 of them.
  std::string expanded;
  size_t at = 0;
  for (int64_t n : pads) {
    const size_t found = body.find(kImagePad, at);
    expanded.append(body, at, found - at);
    for (int64_t k = 0; k < n; ++k) expanded += kImagePad;
    at = found + std::string(kImagePad).size();
  }
  expanded.append(body, at, std::string::npos);
  Prompt p;
  // self.tokenizer(text, ...): add_special_tokens left at True (Qwen2's ByteLevel
  // post_processor adds nothing; another tokenizer.json's may).
  OCULAR_ASSIGN_OR_RETURN(std::vector<int32_t> ids, tok_->Encode(expanded));
  p.ids = tok_->AddSpecialTokens(ids);
  int64_t want = 0, found = 0;
  for (int64_t n : pads) want += n;
  for (int32_t id : p.ids) found += id == image_token_;
  if (found != want) {  // e.g. a pad glued into a longer added token
    return Error(StatusCode::kInvalidArgument, "prompt", "the prompt tokenizes to ", found,
                 " image pads for ", want, " feature rows");
  }
  if (!grids.empty()) {
    auto [pos, delta] = RopeIndex(p.ids, grids, image_.merge_size, image_token_, vision_start_);
    p.positions.axes = 3;
    p.positions.ids = std::move(pos);
    p.positions.decode_offset = delta;
  }
  return p;
}

StatusOr<Prompt> Qwen2VLProcessor::BuildPrompt(int n_images, const std::string& text,
                                               const PromptOptions& options) const {
  if (options.chat) {
    return BuildChatPrompt(n_images, {UserTurn(text, n_images, kImageTag)}, options);
  }
  const std::vector<int64_t> pads(static_cast<size_t>(std::max(n_images, 0)), 1);
  return Tokenize(text, pads, {});
}

std::string Qwen2VLProcessor::chat_format() const { return chat_.has_template() ? "jinja" : ""; }

StatusOr<std::string> Qwen2VLProcessor::RenderChat(const std::vector<ChatMessage>& messages,
                                                   const PromptOptions& options) const {
  return chat_.Render(messages, options);
}

StatusOr<Prompt> Qwen2VLProcessor::BuildChatPrompt(int n_images,
                                                   const std::vector<ChatMessage>& messages,
                                                   const PromptOptions& options) const {
  OCULAR_ASSIGN_OR_RETURN(std::string text, RenderChat(messages, options));
  const std::vector<int64_t> pads(static_cast<size_t>(std::max(n_images, 0)), 1);
  return Tokenize(text, pads, {});
}

StatusOr<Prompt> Qwen2VLProcessor::MakePrompt(Prompt images, int n_images, const std::string& text,
                                              const std::vector<ChatMessage>* messages,
                                              const PromptOptions& options) const {
  if (images.images.empty() && n_images > 0) {
    // The images are not given yet (Engine::BuildPrompt, the server's token counts): one pad
    // per image, as BuildPrompt.
    return messages != nullptr ? BuildChatPrompt(n_images, *messages, options)
                               : BuildPrompt(n_images, text, options);
  }
  if (static_cast<size_t>(n_images) != images.images.size()) {
    return Error(StatusCode::kInvalidArgument, "prompt", n_images, " images but ",
                 images.images.size(), " encoded (AddImage once per image)");
  }
  std::string body = text;
  if (messages != nullptr || options.chat) {
    // processing_utils.py ProcessorMixin.apply_chat_template: the rendered text (each image
    // part as the template's <|vision_start|><|image_pad|><|vision_end|>), then __call__ on it
    // with the images. Qwen's tokenizers have no bos_token: nothing to strip.
    const std::vector<ChatMessage> turn = {UserTurn(text, n_images, kImageTag)};
    OCULAR_ASSIGN_OR_RETURN(body, RenderChat(messages != nullptr ? *messages : turn, options));
  }
  std::vector<int64_t> pads;
  std::vector<std::array<int32_t, 3>> grids;
  for (const VisionInput& in : images.images) {
    pads.push_back(in.tokens);
    grids.push_back(in.grid);
  }
  OCULAR_ASSIGN_OR_RETURN(Prompt p, Tokenize(body, pads, grids));
  p.images = std::move(images.images);
  p.pixels = std::move(images.pixels);
  return p;
}

}  // namespace ocular::qwen2vl
