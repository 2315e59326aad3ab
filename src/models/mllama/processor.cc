#include "models/mllama/processor.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/check.h"
#include "core/file_io.h"
#include "image/resize.h"
#include "models/mllama/vision.h"

namespace ocular::mllama {

namespace {
constexpr char kImageToken[] = "<|image|>";
constexpr char kBosToken[] = "<|begin_of_text|>";
}  // namespace

std::pair<int, int> OptimalCanvas(int height, int width, int max_tiles, int tile) {
  // scales = min(canvas_h / h, canvas_w / w) per arrangement (float64, as numpy); the smallest
  // scale >= 1 (upscaling) if any, else the largest < 1; ties: the smallest area, first wins.
  const auto ratios = SupportedAspectRatios(max_tiles);
  std::vector<double> scales;
  for (auto [a, b] : ratios) {
    const double scale_h = static_cast<double>(a * tile) / height;
    const double scale_w = static_cast<double>(b * tile) / width;
    scales.push_back(scale_w > scale_h ? scale_h : scale_w);
  }
  bool up = false;
  double selected = 0;
  for (double s : scales) {
    if (s >= 1 && (!up || s < selected)) selected = s, up = true;
  }
  if (!up) {
    selected = -1;
    for (double s : scales) selected = s < 1 ? std::max(selected, s) : selected;
  }
  int best = -1;
  int64_t best_area = 0;
  for (size_t i = 0; i < ratios.size(); ++i) {
    if (scales[i] != selected) continue;
    const int64_t area = int64_t{ratios[i].first} * tile * ratios[i].second * tile;
    if (best < 0 || area < best_area) best = static_cast<int>(i), best_area = area;
  }
  OCULAR_CHECK(best >= 0);
  return {ratios[best].first * tile, ratios[best].second * tile};
}

std::pair<int, int> FitToCanvas(int height, int width, int canvas_height, int canvas_width,
                                int tile) {
  const int target_width = std::clamp(width, tile, canvas_width);
  const int target_height = std::clamp(height, tile, canvas_height);
  const double scale_h = static_cast<double>(target_height) / height;
  const double scale_w = static_cast<double>(target_width) / width;
  // min(math.floor(x * scale) or 1, target)
  auto fit = [](int x, double scale, int target) {
    const int64_t v = static_cast<int64_t>(std::floor(x * scale));
    return static_cast<int>(std::min<int64_t>(v == 0 ? 1 : v, target));
  };
  if (scale_w < scale_h) return {fit(height, scale_w, target_height), target_width};
  return {target_height, fit(width, scale_h, target_width)};
}

TiledImage TileImage(const Image& source, const TileConfig& config) {
  // convert_to_rgb (image_processing_mllama.py): a source with transparency is composited onto
  // white; the others are RGB already.
  const Image composited = source.alpha.empty() ? Image() : CompositeOnWhite(source);
  const Image& image = source.alpha.empty() ? source : composited;
  const int tile = config.pp.height;
  const auto [canvas_h, canvas_w] =
      OptimalCanvas(image.height, image.width, config.max_image_tiles, tile);
  const auto [new_h, new_w] = FitToCanvas(image.height, image.width, canvas_h, canvas_w, tile);
  // resize (PIL, uint8), then pad with zeros at the bottom and right (np.pad, uint8).
  const Image resized = Resize(image, new_w, new_h, config.pp.resample);
  Image canvas(canvas_w, canvas_h);
  for (int y = 0; y < new_h; ++y) {
    std::copy_n(resized.pixel(0, y), size_t{3} * new_w, canvas.pixel(0, y));
  }
  // rescale + normalize, channels first: SiglipImageProcessor's arithmetic (image/preprocess.h).
  PreprocessConfig pp = config.pp;
  pp.do_resize = false;
  const Tensor px = Preprocess(canvas, pp);  // [3, canvas_h, canvas_w]
  // split_to_tiles: reshape(C, nh, t, nw, t).transpose(1, 3, 0, 2, 4): tile i * nw + j.
  const int nh = canvas_h / tile, nw = canvas_w / tile;
  TiledImage out;
  out.tiles = nh * nw;
  out.pixels = Tensor({out.tiles, 3, tile, tile});
  float* dst = out.pixels.data.data();
  for (int i = 0; i < nh; ++i) {
    for (int j = 0; j < nw; ++j) {
      for (int c = 0; c < 3; ++c) {
        for (int y = 0; y < tile; ++y) {
          const float* src =
              px.data.data() + (int64_t{c} * canvas_h + i * tile + y) * canvas_w + j * tile;
          dst = std::copy_n(src, tile, dst);
        }
      }
    }
  }
  const auto ratios = SupportedAspectRatios(config.max_image_tiles);
  const auto it = std::find(ratios.begin(), ratios.end(), std::pair<int, int>{nh, nw});
  out.aspect_ratio_id = static_cast<int>(it - ratios.begin()) + 1;
  return out;
}

int64_t PixelFloats(const VisionConfig& v) {
  return int64_t{v.max_num_tiles} * 3 * v.image_size * v.image_size;
}

StatusOr<std::unique_ptr<MllamaProcessor>> MllamaProcessor::Load(const FileSet& files,
                                                                 const MllamaConfig& config) {
  auto p = std::unique_ptr<MllamaProcessor>(new MllamaProcessor());
  OCULAR_ASSIGN_OR_RETURN(p->tok_, Tokenizer::Load(files));
  p->vision_ = config.vision;
  p->image_token_id_ = config.image_token_index;
  const int32_t tok_image = p->tok_->TokenToId(kImageToken);
  if (tok_image != p->image_token_id_) {
    return Error(StatusCode::kDataLoss, "mllama", files.origin(),
                 ": config.json image_token_index is ", p->image_token_id_, " but the tokenizer's ",
                 kImageToken, " is ", tok_image);
  }
  if (p->tok_->TokenToId(kBosToken) < 0) {
    return Error(StatusCode::kDataLoss, "mllama", files.origin(), ": the tokenizer has no ",
                 kBosToken);
  }
  OCULAR_ASSIGN_OR_RETURN(p->chat_, ChatTemplate::Load(files));
  const char* name = "preprocessor_config.json";
  const std::string where = files.Where(name);
  OCULAR_ASSIGN_OR_RETURN(std::string text, files.Read(name, kMaxConfigFileBytes, "image"));
  OCULAR_ASSIGN_OR_RETURN(p->tiles_.pp, ParsePreprocessConfig(text, where));
  OCULAR_ASSIGN_OR_RETURN(nlohmann::json j, ParseJson(text, where, "image"));
  // MllamaImageProcessor's defaults where they differ from SiglipImageProcessor's.
  if (!j.contains("resample")) p->tiles_.pp.resample = ResampleFilter::kBilinear;
  if (auto it = j.find("max_image_tiles"); it != j.end() && !it->is_null()) {
    if (!it->is_number_integer() || it->get<int64_t>() < 1 || it->get<int64_t>() > 64) {
      return Error(StatusCode::kDataLoss, "image", where, ": max_image_tiles must be 1..64");
    }
    p->tiles_.max_image_tiles = it->get<int>();
  }
  for (const char* flag : {"do_resize", "do_pad"}) {
    if (auto it = j.find(flag); it != j.end() && it->is_boolean() && !it->get<bool>()) {
      return Error(StatusCode::kUnimplemented, "image", where, ": ", flag,
                   " = false is not supported (MllamaImageProcessor refuses it too)");
    }
  }
  const TileConfig& t = p->tiles_;
  if (t.pp.height != t.pp.width || t.pp.height != config.vision.image_size ||
      t.max_image_tiles != config.vision.max_num_tiles) {
    return Error(StatusCode::kDataLoss, "image", where, ": tiles of ", t.pp.width, "x", t.pp.height,
                 ", at most ", t.max_image_tiles, ", but config.json's vision model takes ",
                 config.vision.image_size, "x", config.vision.image_size, ", at most ",
                 config.vision.max_num_tiles);
  }
  return p;
}

StatusOr<Prompt> MllamaProcessor::BuildPrompt(int n_images, const std::string& text,
                                              const PromptOptions& options) const {
  if (options.chat) {
    return BuildChatPrompt(n_images, {UserTurn(text, n_images, kImageToken)}, options);
  }
  OCULAR_RETURN_IF_ERROR(CheckMarkers(n_images, text));
  // Meta's format (llama-models llama3_2/vision_prompt_format.md:
  // "<|begin_of_text|><|image|>If I had to write a haiku..."): BOS first, then the text as
  // written, whatever the tokenizer's post_processor would add. transformers' MllamaProcessor
  // differs: BOS after the leading <|image|> tokens, and the hub tokenizer's post_processor
  // adds another in front (docs/models.md, mllama).
  Prompt p;
  OCULAR_ASSIGN_OR_RETURN(p.ids, tok_->Encode(text));
  if (text.find(kBosToken) == std::string::npos) p.ids.insert(p.ids.begin(), tok_->bos_id());
  OCULAR_RETURN_IF_ERROR(CheckImageIds(n_images, p.ids));
  return p;  // causal (the cross layers' image mask is the decoder's, from the ids)
}

Status MllamaProcessor::CheckMarkers(int n_images, const std::string& text) const {
  const int64_t markers = CountMarkers(text, kImageToken);
  if (markers != n_images) {
    return Error(StatusCode::kInvalidArgument, "prompt", "the prompt has ", markers, " ",
                 kImageToken, " markers but ", n_images,
                 " images were given (mark where each image goes with ", kImageToken, ")");
  }
  if (n_images > kMaxImages) {
    return Error(StatusCode::kInvalidArgument, "prompt", n_images,
                 " images in one prompt; ocular's mllama takes at most ", kMaxImages);
  }
  return Status::Ok();
}

Status MllamaProcessor::CheckImageIds(int n_images, const std::vector<int32_t>& ids) const {
  const auto found = std::count(ids.begin(), ids.end(), image_token_id_);
  if (found != n_images) {  // e.g. "<|image|>" glued into a longer added token
    return Error(StatusCode::kInvalidArgument, "prompt", "the prompt tokenizes to ", found,
                 " image tokens for ", n_images, " images");
  }
  return Status::Ok();
}

StatusOr<Prompt> MllamaProcessor::BuildChatPrompt(int n_images,
                                                  const std::vector<ChatMessage>& messages,
                                                  const PromptOptions& options) const {
  OCULAR_ASSIGN_OR_RETURN(std::string text, RenderChat(messages, options));
  OCULAR_RETURN_IF_ERROR(CheckMarkers(n_images, text));
  // The template's text exactly as transformers tokenizes it: MllamaProcessor's
  // build_string_from_input (BOS after the leading image tokens unless the text has one), with
  // the tokenizer's special tokens unless the text starts with bos_token (processing_utils.py
  // apply_chat_template).
  std::string body = text;
  if (body.find(kBosToken) == std::string::npos) {
    const std::string image = kImageToken;
    size_t lead = 0;
    while (body.compare(lead, image.size(), image) == 0) lead += image.size();
    body.insert(lead, kBosToken);
  }
  Prompt p;
  OCULAR_ASSIGN_OR_RETURN(p.ids, tok_->Encode(body));
  if (AddSpecialTokensTo(text)) p.ids = tok_->AddSpecialTokens(p.ids);
  OCULAR_RETURN_IF_ERROR(CheckImageIds(n_images, p.ids));
  return p;
}

StatusOr<Tensor> MllamaProcessor::Pixels(const Image& image) const {
  const TiledImage t = TileImage(image, tiles_);
  Tensor out({PixelFloats(vision_)});  // zero-filled: the padding tiles
  std::copy(t.pixels.data.begin(), t.pixels.data.end(), out.data.begin());
  return out;
}

Status MllamaProcessor::AddImage(const Image& image, const ImageOptions& options, int32_t source,
                                 Prompt* prompt) const {
  OCULAR_RETURN_IF_ERROR(CheckResize(options.resize));
  OCULAR_RETURN_IF_ERROR(RefusePanAndScan(options.pan_and_scan));
  const TiledImage t = TileImage(image, tiles_);
  const auto [high, wide] = vision_.supported_aspect_ratios[t.aspect_ratio_id - 1];
  VisionInput in;
  in.grid = {1, high, wide};
  in.feature_rows = ImageFeatureRows(vision_);
  in.tokens = 1;  // one <|image|>; the features feed the cross layers
  in.source = source;
  const int64_t floats = PixelFloats(vision_);
  prompt->AddImage(t.pixels.data.data(), t.pixels.numel(), in);
  prompt->pixels.resize(prompt->pixels.size() + (floats - t.pixels.numel()), 0.0f);  // padding
  prompt->images.back().pixel_count = floats;
  return Status::Ok();
}

}  // namespace ocular::mllama
