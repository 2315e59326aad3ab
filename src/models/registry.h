// Model families by config.json "model_type": the one place that knows them all.
// Adding a family = a folder under models/ with its VlModel and Processor + one entry here.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "models/model.h"
#include "models/processor.h"
#include "ocular/image_resize.h"

namespace ocular {

struct LoadedModel {
  std::unique_ptr<VlModel> model;
  std::unique_ptr<Processor> processor;
};

// Reads the config.json of `path` (an HF directory, a GGUF file written by `ocular
// quantize`, or llama.cpp's text GGUF, with its mmproj file as `mmproj` for the vision
// model), and loads the model and processor of the family its model_type names.
// Unimplemented for a model_type no family handles (the message lists the known ones).
// `resize`: the image processor's bounds in place of the checkpoint's (Qwen-VL only; another
// family refuses a non-empty one: Processor::CheckResize).
StatusOr<LoadedModel> LoadModel(const std::string& path, const std::string& mmproj = "",
                                const ImageResize& resize = {});

// The model_type values LoadModel accepts.
std::vector<std::string> RegisteredModelTypes();

}  // namespace ocular
