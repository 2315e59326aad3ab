// What the Engine makes of a request before it runs: the typed prompt of its images and text
// (the family's Processor: AddImage per image, then MakePrompt), and the feature-cache keys of
// its images.
#pragma once

#include <string>
#include <vector>

#include "models/processor.h"
#include "ocular/engine.h"
#include "runtime/feature_cache.h"

namespace ocular {

// Decodes `images` (files or bytes; EngineOptions' pixel limit and EXIF rotation) into the
// prompt's vision inputs and builds its ids around them from `text` (messages == null) or the
// conversation `messages`. sizes: each image's decoded size. Errors: an image that does not
// decode, the processor's (markers, templates, too many images), n_images < 0.
StatusOr<Prompt> BuildRequestPrompt(const Processor& processor, const EngineOptions& eo,
                                    const std::vector<ImageInput>& images, const std::string& text,
                                    const std::vector<ChatMessage>* messages,
                                    const GenerateOptions& o,
                                    std::vector<GenerateResult::ImageSize>* sizes);

// The prompt's ids for `n_images` images not yet given (Engine::BuildPrompt).
StatusOr<Prompt> BuildTextPrompt(const Processor& processor, int n_images, const std::string& text,
                                 const std::vector<ChatMessage>* messages,
                                 const GenerateOptions& o);

// One key per vision input (a crop shares its image's decoded size).
std::vector<FeatureKey> ImageKeys(const Prompt& prompt, const std::string& fingerprint,
                                  const std::vector<GenerateResult::ImageSize>& sizes);

}  // namespace ocular
