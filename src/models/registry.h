// Model families by config.json "model_type": the one place that knows them all.
// Adding a family = a folder under models/ with its VlModel and Processor + one entry here.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "models/model.h"
#include "models/processor.h"

namespace ocular {

struct LoadedModel {
  std::unique_ptr<VlModel> model;
  std::unique_ptr<Processor> processor;
};

// Reads `dir`/config.json's model_type and loads that family's model and processor.
// Unimplemented for a model_type no family handles (the message lists the known ones).
StatusOr<LoadedModel> LoadModel(const std::string& dir);

// The model_type values LoadModel accepts.
std::vector<std::string> RegisteredModelTypes();

}  // namespace ocular
