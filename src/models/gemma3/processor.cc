#include "models/gemma3/processor.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "core/file_io.h"

namespace ocular::gemma3 {

namespace {

constexpr const char* kBoi = "<start_of_image>";
constexpr const char* kEoi = "<end_of_image>";
constexpr const char* kImage = "<image_soft_token>";

}  // namespace

// do_pan_and_scan and pan_and_scan_{min_crop_size, max_num_crops, min_ratio_to_activate}:
// absent or null keep the defaults (PanAndScanParams).
Status Gemma3Processor::ReadPanAndScan(const nlohmann::json& j, const std::string& where,
                                       Gemma3Processor* p) {
  auto bad = [&](const char* key, const char* want) {
    return Error(StatusCode::kDataLoss, "image", where, ": ", key, " must be ", want);
  };
  if (auto it = j.find("do_pan_and_scan"); it != j.end() && !it->is_null()) {
    if (!it->is_boolean()) return bad("do_pan_and_scan", "true, false or null");
    p->pan_and_scan_default_ = it->get<bool>();
  }
  for (auto [key, field] :
       {std::pair{"pan_and_scan_min_crop_size", &p->pan_and_scan_.min_crop_size},
        std::pair{"pan_and_scan_max_num_crops", &p->pan_and_scan_.max_num_crops}}) {
    if (auto it = j.find(key); it != j.end() && !it->is_null()) {
      if (!it->is_number_integer() || it->get<int64_t>() < 1 || it->get<int64_t>() > 65536) {
        return bad(key, "an integer in 1..65536 or null");
      }
      *field = it->get<int>();
    }
  }
  if (auto it = j.find("pan_and_scan_min_ratio_to_activate"); it != j.end() && !it->is_null()) {
    if (!it->is_number() || !(it->get<double>() > 0) || !std::isfinite(it->get<double>())) {
      return bad("pan_and_scan_min_ratio_to_activate", "a positive number or null");
    }
    p->pan_and_scan_.min_ratio_to_activate = it->get<double>();
  }
  return Status::Ok();
}

StatusOr<std::unique_ptr<Gemma3Processor>> Gemma3Processor::Load(const FileSet& files,
                                                                 const Gemma3Config& config) {
  auto p = std::unique_ptr<Gemma3Processor>(new Gemma3Processor());
  OCULAR_ASSIGN_OR_RETURN(p->tok_, Tokenizer::Load(files));
  if (p->tok_->bos_id() < 0) {
    return Error(StatusCode::kDataLoss, "gemma3", files.origin(),
                 ": the tokenizer has no BOS token");
  }
  p->has_vision_ = config.has_vision;
  OCULAR_ASSIGN_OR_RETURN(p->chat_, ChatTemplate::Load(files));
  if (!config.has_vision) return p;
  for (auto [piece, id] :
       {std::pair{kBoi, config.boi_token_index}, std::pair{kEoi, config.eoi_token_index},
        std::pair{kImage, config.image_token_index}}) {
    const int32_t tok = p->tok_->TokenToId(piece);
    if (tok != id) {
      return Error(StatusCode::kDataLoss, "gemma3", files.origin(), ": config.json says ", piece,
                   " is token ", id, " but the tokenizer has it as ", tok);
    }
  }
  const char* name = "preprocessor_config.json";
  OCULAR_ASSIGN_OR_RETURN(std::string text, files.Read(name, kMaxConfigFileBytes, "image"));
  OCULAR_ASSIGN_OR_RETURN(p->pp_, ParsePreprocessConfig(text, files.Where(name)));
  OCULAR_ASSIGN_OR_RETURN(nlohmann::json j, ParseJson(text, files.Where(name), "image"));
  // Gemma3ImageProcessor's own defaults where they differ from SiglipImageProcessor's.
  if (!j.contains("resample")) p->pp_.resample = ResampleFilter::kBilinear;
  OCULAR_RETURN_IF_ERROR(ReadPanAndScan(j, files.Where(name), p.get()));
  p->image_size_ = config.vision.image_size;
  p->image_tokens_ = config.mm_tokens_per_image;
  p->image_token_id_ = config.image_token_index;
  return p;
}

StatusOr<Prompt> Gemma3Processor::BuildPrompt(int n_images, const std::string& text,
                                              const PromptOptions& options) const {
  if (options.chat) return BuildChatPrompt(n_images, {UserTurn(text, n_images, kBoi)}, options);
  std::string body = text;
  if (n_images > 0 && body.empty()) {
    // processing_gemma3.py: no text -> " ".join([boi_token] * len(images)).
    for (int i = 0; i < n_images; ++i) body += (i ? " " : "") + std::string(kBoi);
  }
  // processing_gemma3.py: self.tokenizer(text=text, ...), add_special_tokens left at True.
  return Tokenize(body, n_images, /*add_special_tokens=*/true, options.image_crops);
}

StatusOr<Prompt> Gemma3Processor::Tokenize(const std::string& text, int n_images,
                                           bool add_special_tokens,
                                           const std::vector<int>& crops) const {
  if (n_images > 0 && !has_vision_) {
    return Error(StatusCode::kInvalidArgument, "prompt",
                 "this is a text-only Gemma 3 model (gemma3_text): it takes no images");
  }
  if (!crops.empty() && crops.size() != static_cast<size_t>(n_images)) {
    return Error(StatusCode::kInvalidArgument, "prompt", "pan-and-scan crop counts for ",
                 crops.size(), " images but ", n_images, " images were given");
  }
  std::string body = text;
  int images = n_images;  // with the crops
  if (n_images > 0) {
    const std::string boi = kBoi;
    const int64_t found = CountMarkers(body, boi);
    if (found != n_images) {
      return Error(StatusCode::kInvalidArgument, "prompt", "the prompt has ", found, " ", boi,
                   " markers but ", n_images, " images were given");
    }
    if (text.find(kImage) != std::string::npos) {
      return Error(StatusCode::kInvalidArgument, "prompt", "the prompt text contains ", kImage,
                   "; pass images and mark them with ", boi);
    }
    if (!crops.empty()) {
      body = InsertCropMarkers(body, crops);
      for (int c : crops) images += c;
    }
    // prompt.replace(boi_token, full_image_sequence)
    std::string sequence = "\n\n" + boi;
    for (int i = 0; i < image_tokens_; ++i) sequence += kImage;
    sequence += std::string(kEoi) + "\n\n";
    std::string expanded;
    size_t from = 0;
    for (size_t at; (at = body.find(boi, from)) != std::string::npos; from = at + boi.size()) {
      expanded += body.substr(from, at - from) + sequence;
    }
    body = expanded + body.substr(from);
  }
  Prompt p;
  OCULAR_ASSIGN_OR_RETURN(std::vector<int32_t> ids, tok_->Encode(body));
  int64_t image_ids = 0;
  for (int32_t id : ids) image_ids += id == image_token_id_;
  if (has_vision_ && image_ids != int64_t{images} * image_tokens_) {
    return Error(StatusCode::kInvalidArgument, "prompt", "the prompt text contains ", kImage,
                 "; pass images and mark them with ", kBoi);
  }
  p.ids = add_special_tokens ? tok_->AddSpecialTokens(ids) : std::move(ids);
  // Each run of image tokens attends bidirectionally within itself (token_type_ids == 1).
  for (int64_t t = 0; t < p.size(); ++t) {
    if (p.ids[t] != image_token_id_ || !has_vision_) continue;
    int64_t end = t;
    while (end < p.size() && p.ids[end] == image_token_id_) ++end;
    p.bidirectional.push_back({t, end});
    t = end;
  }
  return p;
}

std::string Gemma3Processor::image_marker() const { return has_vision_ ? kBoi : ""; }

StatusOr<Prompt> Gemma3Processor::BuildChatPrompt(int n_images,
                                                  const std::vector<ChatMessage>& messages,
                                                  const PromptOptions& options) const {
  OCULAR_ASSIGN_OR_RETURN(std::string text, RenderChat(messages, options));
  return Tokenize(text, n_images, AddSpecialTokensTo(text), options.image_crops);
}

StatusOr<Tensor> Gemma3Processor::Pixels(const Image& image) const {
  if (!has_vision_) {
    return Error(StatusCode::kInvalidArgument, "gemma3", "a text-only model takes no images");
  }
  return PreprocessSquare(image, pp_, image_size_, "gemma3");
}

StatusOr<std::vector<Tensor>> Gemma3Processor::ImageViews(const Image& image,
                                                          bool pan_and_scan) const {
  std::vector<Tensor> out;
  OCULAR_ASSIGN_OR_RETURN(Tensor whole, Pixels(image));
  out.push_back(std::move(whole));
  if (!pan_and_scan) return out;
  OCULAR_ASSIGN_OR_RETURN(std::vector<CropRect> crops,
                          PanAndScanCrops(image.width, image.height, pan_and_scan_));
  for (const CropRect& r : crops) {
    OCULAR_ASSIGN_OR_RETURN(Tensor px, Pixels(CropImage(image, r)));
    out.push_back(std::move(px));
  }
  return out;
}

}  // namespace ocular::gemma3
