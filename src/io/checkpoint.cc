#include "io/checkpoint.h"

#include <sys/stat.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/file_io.h"

namespace ocular {

namespace {
bool Exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}
}  // namespace

StatusOr<Checkpoint> Checkpoint::Open(const std::string& dir) {
  Checkpoint ck;
  ck.dir_ = dir;
  std::vector<std::string> files;
  const std::string index_path = dir + "/model.safetensors.index.json";
  std::map<std::string, std::string> index_map;
  if (Exists(index_path)) {
    OCULAR_ASSIGN_OR_RETURN(std::string text,
                            ReadFileBounded(index_path, kMaxConfigFileBytes, "checkpoint"));
    OCULAR_ASSIGN_OR_RETURN(nlohmann::json j, ParseJson(text, index_path, "checkpoint"));
    auto wm = j.is_object() ? j.find("weight_map") : j.end();
    if (!j.is_object() || wm == j.end() || !wm->is_object()) {
      return Error(StatusCode::kDataLoss, "checkpoint", index_path, ": no weight_map object");
    }
    for (auto& [name, file] : wm->items()) {
      if (!file.is_string() || file.get<std::string>().find('/') != std::string::npos) {
        return Error(StatusCode::kDataLoss, "checkpoint", index_path, ": bad shard for '", name,
                     "'");
      }
      index_map[name] = file.get<std::string>();
      if (std::find(files.begin(), files.end(), file.get<std::string>()) == files.end()) {
        files.push_back(file.get<std::string>());
      }
    }
  } else if (Exists(dir + "/model.safetensors")) {
    files.push_back("model.safetensors");
  } else {
    return Error(StatusCode::kNotFound, "checkpoint", dir,
                 ": no model.safetensors or model.safetensors.index.json");
  }
  for (const auto& f : files) {
    OCULAR_ASSIGN_OR_RETURN(SafetensorsFile st, SafetensorsFile::Open(dir + "/" + f));
    ck.shards_.push_back(std::make_unique<SafetensorsFile>(std::move(st)));
    const size_t idx = ck.shards_.size() - 1;
    for (const auto& [name, view] : ck.shards_.back()->tensors()) {
      if (!index_map.empty()) {
        auto it = index_map.find(name);
        if (it == index_map.end() || it->second != f) continue;  // not this shard's by the index
      }
      if (!ck.where_.emplace(name, idx).second) {
        return Error(StatusCode::kDataLoss, "checkpoint", dir, ": tensor '", name,
                     "' appears in more than one shard");
      }
    }
  }
  for (const auto& [name, file] : index_map) {
    if (!ck.where_.count(name)) {
      return Error(StatusCode::kDataLoss, "checkpoint", dir, "/", file, ": tensor '", name,
                   "' is listed in the index but missing from the shard");
    }
  }
  return ck;
}

const TensorView* Checkpoint::Find(const std::string& name) const {
  auto it = where_.find(name);
  return it == where_.end() ? nullptr : shards_[it->second]->Find(name);
}

StatusOr<TensorView> Checkpoint::Get(const std::string& name, const Shape& shape) const {
  auto it = where_.find(name);
  if (it == where_.end()) {
    // A checkpoint without a tensor its config needs is a corrupt file (exit 4), not a missing one.
    return Error(StatusCode::kDataLoss, "checkpoint", dir_, ": missing tensor '", name, "'");
  }
  const SafetensorsFile& f = *shards_[it->second];
  const TensorView& t = *f.Find(name);
  if (t.dtype != DType::kF32 && t.dtype != DType::kBF16 && t.dtype != DType::kF16) {
    return Error(StatusCode::kUnimplemented, "checkpoint", f.path(), ": tensor '", name,
                 "' has dtype ", DTypeName(t.dtype), " (supported: F32, BF16, F16)");
  }
  if (t.shape != shape) {
    return Error(StatusCode::kDataLoss, "checkpoint", f.path(), ": tensor '", name, "' has shape ",
                 ShapeString(t.shape), ", config expects ", ShapeString(shape));
  }
  return t;
}

std::vector<std::string> Checkpoint::Names() const {
  std::vector<std::string> out;
  for (const auto& [name, idx] : where_) out.push_back(name);
  return out;
}

const MappedFile* Checkpoint::MappingOf(const std::byte* p, size_t n) const {
  for (const auto& shard : shards_) {
    if (shard->mapping().Contains(p, n)) return &shard->mapping();
  }
  return nullptr;
}

size_t Checkpoint::TotalBytes() const {
  size_t n = 0;
  for (const auto& [name, idx] : where_) n += shards_[idx]->Find(name)->nbytes();
  return n;
}

}  // namespace ocular
