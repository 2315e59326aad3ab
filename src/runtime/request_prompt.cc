#include "runtime/request_prompt.h"

#include <chrono>

#include "image/image.h"
#include "models/chat.h"

namespace ocular {

namespace {

double MsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

PromptOptions ToPromptOptions(const GenerateOptions& o) {
  PromptOptions po;
  po.separate_newline = o.separate_newline;
  po.chat = o.chat;
  po.date = o.date;
  po.chat_template = o.chat_template;
  po.chat_template_kwargs = o.chat_template_kwargs;
  return po;
}

// The processor's prompt around `vision` (n_images request images).
StatusOr<Prompt> Make(const Processor& processor, Prompt vision, int n_images,
                      const std::string& text, const std::vector<ChatMessage>* messages,
                      const PromptOptions& po) {
  if (n_images < 0) {
    return Error(StatusCode::kInvalidArgument, "engine", "n_images must be >= 0, got ", n_images);
  }
  if ((messages || po.chat) && processor.chat_format().empty() && po.chat_template.empty()) {
    // The processor's error says why: no template in the family or the checkpoint.
    OCULAR_RETURN_IF_ERROR(processor.RenderChat({ChatMessage::Text("user", "")}, po).status());
    return Error(StatusCode::kUnimplemented, "chat", "this model has no chat format");
  }
  if (messages != nullptr) OCULAR_RETURN_IF_ERROR(CheckChatMessages(*messages, n_images));
  return processor.MakePrompt(std::move(vision), n_images, text, messages, po);
}

}  // namespace

StatusOr<Prompt> BuildRequestPrompt(const Processor& processor, const EngineOptions& eo,
                                    const std::vector<ImageInput>& images, const std::string& text,
                                    const std::vector<ChatMessage>* messages,
                                    const GenerateOptions& o,
                                    std::vector<GenerateResult::ImageSize>* sizes) {
  sizes->clear();
  Prompt vision;
  PromptOptions po = ToPromptOptions(o);
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t n = static_cast<int64_t>(images.size());
  const ProgressCallback& progress = o.on_progress;
  if (n > 0 && progress) progress({Stage::kImages, 0, n, 0.0});
  const int max_images = processor.max_images();
  if (max_images > 0 && n > max_images) {
    return Error(StatusCode::kInvalidArgument, "engine", n,
                 " images given; the model takes at most ", max_images, " per prompt");
  }
  ImageOptions image_options;
  image_options.pan_and_scan = o.pan_and_scan.value_or(processor.pan_and_scan_default());
  image_options.resize = o.image_resize;
  // The processor's refusal holds for a request without images too: never ignored.
  OCULAR_RETURN_IF_ERROR(processor.CheckResize(o.image_resize));
  const bool pan_and_scan = image_options.pan_and_scan;
  DecodeOptions d;
  d.max_pixels = eo.max_image_pixels;
  d.exif_rotate = eo.exif_rotate;
  for (int64_t i = 0; i < n; ++i) {
    const ImageInput& in = images[i];
    StatusOr<Image> img = in.from_bytes ? DecodeImage(in.bytes, d) : LoadImage(in.path, d);
    if (!img.ok()) {
      if (!in.from_bytes) return img.status();
      return Status(img.status().code(), in.path + ": " + img.status().message());
    }
    sizes->push_back({img->width, img->height});
    const size_t before = vision.images.size();
    OCULAR_RETURN_IF_ERROR(
        processor.AddImage(*img, image_options, static_cast<int32_t>(i), &vision));
    // Gemma 3's pan-and-scan: the crops that follow the image.
    if (pan_and_scan) po.image_crops.push_back(static_cast<int>(vision.images.size() - before) - 1);
    if (progress) progress({Stage::kImages, i + 1, n, MsSince(t0)});
  }
  const int64_t total = static_cast<int64_t>(vision.images.size());
  if (max_images > 0 && total > max_images) {
    return Error(StatusCode::kInvalidArgument, "engine", n, " images with their pan-and-scan ",
                 "crops make ", total, "; the model takes at most ", max_images, " per prompt");
  }
  return Make(processor, std::move(vision), static_cast<int>(n), text, messages, po);
}

StatusOr<Prompt> BuildTextPrompt(const Processor& processor, int n_images, const std::string& text,
                                 const std::vector<ChatMessage>* messages,
                                 const GenerateOptions& o) {
  return Make(processor, Prompt(), n_images, text, messages, ToPromptOptions(o));
}

std::vector<FeatureKey> ImageKeys(const Prompt& prompt, const std::string& fingerprint,
                                  const std::vector<GenerateResult::ImageSize>& sizes) {
  std::vector<FeatureKey> keys;
  for (size_t i = 0; i < prompt.images.size(); ++i) {
    const VisionInput& in = prompt.images[i];
    const GenerateResult::ImageSize& size = sizes.at(static_cast<size_t>(in.source));
    keys.push_back(MakeFeatureKey(fingerprint, size.width, size.height, prompt.image_pixels(i),
                                  static_cast<size_t>(in.pixel_count)));
  }
  return keys;
}

}  // namespace ocular
