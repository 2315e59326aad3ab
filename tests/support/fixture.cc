#include "support/fixture.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <tuple>

#include "core/check.h"
#include "runtime/parity.h"

namespace ocular::fixture {
namespace {

using Json = nlohmann::json;

constexpr char kTag[] = "fixture";

// Typed field access that never throws: the manifest is a file, i.e. untrusted.
Status GetString(const Json& obj, const char* key, const std::string& where, std::string* out) {
  if (!obj.is_object() || !obj.contains(key) || !obj[key].is_string()) {
    return Error(StatusCode::kDataLoss, kTag, where, ": missing string field '", key, "'");
  }
  *out = obj[key].get<std::string>();
  return Status::Ok();
}

Status GetInt(const Json& obj, const char* key, const std::string& where, int64_t* out) {
  if (!obj.is_object() || !obj.contains(key) || !obj[key].is_number_integer()) {
    return Error(StatusCode::kDataLoss, kTag, where, ": missing integer field '", key, "'");
  }
  *out = obj[key].get<int64_t>();
  return Status::Ok();
}

Status GetObject(const Json& obj, const char* key, const std::string& where, const Json** out) {
  if (!obj.is_object() || !obj.contains(key) || !obj[key].is_object()) {
    return Error(StatusCode::kDataLoss, kTag, where, ": missing object field '", key, "'");
  }
  *out = &obj[key];
  return Status::Ok();
}

Status ParseShape(const Json& value, const std::string& where, Shape* out) {
  if (!value.is_array()) return Error(StatusCode::kDataLoss, kTag, where, ": shape not a list");
  out->clear();
  for (const Json& d : value) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0) {
      return Error(StatusCode::kDataLoss, kTag, where, ": bad dimension ", d.dump());
    }
    out->push_back(d.get<int64_t>());
  }
  return Status::Ok();
}

Status ParseCase(const std::string& golden_dir, const std::string& checkpoint,
                 const std::string& name, const Json& entry, const Json& images, GoldenCase* out) {
  const std::string where = StrCat("manifest.json: ", checkpoint, "/", name);
  out->checkpoint = checkpoint;
  out->name = name;
  std::string file;
  OCULAR_RETURN_IF_ERROR(GetString(entry, "file", where, &file));
  out->path = golden_dir + "/" + file;
  OCULAR_RETURN_IF_ERROR(GetString(entry, "image", where, &out->image));
  OCULAR_RETURN_IF_ERROR(GetString(entry, "prompt", where, &out->prompt));
  const Json* image = nullptr;
  OCULAR_RETURN_IF_ERROR(GetObject(images, out->image.c_str(), where + " image", &image));
  std::string image_file;
  OCULAR_RETURN_IF_ERROR(GetString(*image, "file", where + " image", &image_file));
  out->image_path = golden_dir + "/" + image_file;
  const Json* taps = nullptr;
  OCULAR_RETURN_IF_ERROR(GetObject(entry, "taps", where, &taps));
  for (const auto& [tap, shape] : taps->items()) {
    OCULAR_RETURN_IF_ERROR(ParseShape(shape, where + " tap " + tap, &out->tap_shapes[tap]));
  }
  return Status::Ok();
}

Status ParseCheckpoint(const std::string& golden_dir, const std::string& name, const Json& entry,
                       const Json& images, GoldenCheckpoint* out) {
  const std::string where = "manifest.json: checkpoint " + name;
  out->name = name;
  OCULAR_RETURN_IF_ERROR(GetString(entry, "dir", where, &out->model_dir));
  OCULAR_RETURN_IF_ERROR(GetString(entry, "dtype", where, &out->dtype));
  const Json *config = nullptr, *text = nullptr, *cases = nullptr;
  OCULAR_RETURN_IF_ERROR(GetObject(entry, "config", where, &config));
  OCULAR_RETURN_IF_ERROR(GetObject(*config, "text", where, &text));
  OCULAR_RETURN_IF_ERROR(GetInt(*text, "hidden_size", where, &out->hidden_size));
  OCULAR_RETURN_IF_ERROR(GetInt(*text, "vocab_size", where, &out->vocab_size));
  OCULAR_RETURN_IF_ERROR(GetInt(*config, "num_image_tokens", where, &out->num_image_tokens));
  OCULAR_RETURN_IF_ERROR(GetInt(*config, "image_token_index", where, &out->image_token_index));
  OCULAR_RETURN_IF_ERROR(GetObject(entry, "cases", where, &cases));
  for (const auto& [case_name, case_entry] : cases->items()) {  // json objects iterate sorted
    GoldenCase c;
    OCULAR_RETURN_IF_ERROR(ParseCase(golden_dir, name, case_name, case_entry, images, &c));
    out->cases.push_back(std::move(c));
  }
  return Status::Ok();
}

}  // namespace

StatusOr<GoldenManifest> GoldenManifest::Load(const std::string& golden_dir) {
  const std::string path = golden_dir + "/manifest.json";
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return Error(StatusCode::kNotFound, kTag, path,
                 ": cannot open (HINT: run tests from the repo root; `make fixtures`)");
  }
  std::stringstream text;
  text << in.rdbuf();
  const Json root = Json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object()) {
    return Error(StatusCode::kDataLoss, kTag, path, ": not a JSON object");
  }
  GoldenManifest manifest;
  const Json *versions = nullptr, *checkpoints = nullptr, *images = nullptr;
  OCULAR_RETURN_IF_ERROR(GetObject(root, "versions", path, &versions));
  OCULAR_RETURN_IF_ERROR(
      GetString(*versions, "transformers", path, &manifest.transformers_version_));
  OCULAR_RETURN_IF_ERROR(GetObject(root, "images", path, &images));
  OCULAR_RETURN_IF_ERROR(GetObject(root, "checkpoints", path, &checkpoints));
  for (const auto& [name, entry] : checkpoints->items()) {
    GoldenCheckpoint ck;
    OCULAR_RETURN_IF_ERROR(ParseCheckpoint(golden_dir, name, entry, *images, &ck));
    manifest.checkpoints_.emplace(name, std::move(ck));
  }
  return manifest;
}

std::vector<std::string> GoldenManifest::CheckpointNames() const {
  std::vector<std::string> names;
  for (const auto& [name, ck] : checkpoints_) names.push_back(name);
  return names;
}

const GoldenCheckpoint* GoldenManifest::Find(const std::string& checkpoint) const {
  auto it = checkpoints_.find(checkpoint);
  return it == checkpoints_.end() ? nullptr : &it->second;
}

StatusOr<GoldenTaps> GoldenTaps::Open(const std::string& path) {
  OCULAR_ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::Open(path));
  return GoldenTaps(std::move(file));
}

StatusOr<TensorView> GoldenTaps::Tap(const std::string& name) const {
  const TensorView* view = file_.Find(name);
  if (view == nullptr) {
    return Error(StatusCode::kNotFound, kTag, file_.path(), ": no tap '", name, "'");
  }
  if (view->dtype != DType::kF32) {
    return Error(StatusCode::kInvalidArgument, kTag, file_.path(), ": tap '", name, "' is ",
                 DTypeName(view->dtype), ", expected F32");
  }
  return *view;
}

StatusOr<std::vector<int32_t>> GoldenTaps::Ids(const std::string& name) const {
  const TensorView* view = file_.Find(name);
  if (view == nullptr) {
    return Error(StatusCode::kNotFound, kTag, file_.path(), ": no tap '", name, "'");
  }
  if (view->dtype != DType::kI64 || view->shape.size() != 1) {
    return Error(StatusCode::kInvalidArgument, kTag, file_.path(), ": tap '", name, "' is ",
                 DTypeName(view->dtype), ShapeString(view->shape), ", expected I64 [n]");
  }
  std::vector<int32_t> ids(static_cast<size_t>(view->numel()));
  for (int64_t i = 0; i < view->numel(); ++i) {
    const int64_t id = view->as<int64_t>()[i];
    if (id < 0 || id > std::numeric_limits<int32_t>::max()) {
      return Error(StatusCode::kDataLoss, kTag, file_.path(), ": ", name, "[", i, "] = ", id,
                   " is not a token id");
    }
    ids[static_cast<size_t>(i)] = static_cast<int32_t>(id);
  }
  return ids;
}

std::vector<std::string> GoldenTaps::TapNames() const {
  std::vector<std::string> names;
  for (const auto& [name, view] : file_.tensors()) names.push_back(name);
  std::sort(names.begin(), names.end(), ocular::TapBefore);
  return names;
}

std::string ScratchPath(const std::string& name) {
  namespace fs = std::filesystem;
  // Never destroyed: the exit handler may run after static destructors. Only the process that
  // made the folder removes it (a forked child, e.g. a death test, inherits the handler).
  static const pid_t owner = ::getpid();
  static const std::string* const root = [] {
    auto* dir = new std::string(
        (fs::temp_directory_path() / ("ocular_test_" + std::to_string(owner))).string());
    std::atexit([] {
      std::error_code ec;
      if (::getpid() == owner) fs::remove_all(*root, ec);
    });
    return dir;
  }();
  fs::create_directories(*root);
  const std::string path = *root + "/" + name;
  fs::remove_all(path);
  return path;
}

}  // namespace ocular::fixture
