#include "io/safetensors.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/file_io.h"

namespace ocular {

namespace {

constexpr uint64_t kMaxHeaderBytes = 100ull << 20;  // same cap as the reference library

Status Bad(const std::string& path, const std::string& what) {
  return Error(StatusCode::kDataLoss, "safetensors", path, ": ", what);
}

// A file whose first 8 bytes are no plausible header length: most often not a safetensors
// file at all, so say what it looks like instead of quoting the first 8 bytes of a PNG as a
// header length.
Status NotSafetensors(const std::string& path, const uint8_t* base, uint64_t header_len,
                      size_t size) {
  const std::string_view head(reinterpret_cast<const char*>(base), 8);
  std::string kind;
  if (head.substr(0, 4) == "\x89PNG") kind = "a PNG image";
  if (head.substr(0, 3) == "\xff\xd8\xff") kind = "a JPEG image";
  if (head.substr(0, 4) == "GGUF") kind = "a GGUF file";
  if (head.substr(0, 2) == "PK") kind = "a zip archive (.npz?)";
  if (head.substr(0, 1) == "{") kind = "JSON text";
  if (!kind.empty()) return Bad(path, StrCat("not a safetensors file: it is ", kind));
  return Bad(path, StrCat("truncated or not a safetensors file: the header length in its first "
                          "8 bytes, ",
                          header_len, ", exceeds file size ", size));
}

// A tensor's bytes in the data section.
struct Range {
  uint64_t begin, end;
  std::string name;
};

// One tensor's header entry {"dtype", "shape", "data_offsets"}, checked against the data
// section's `data_size` bytes: its view (data unset) and its byte range.
StatusOr<TensorView> ParseEntry(const std::string& path, const std::string& name,
                                const nlohmann::json& entry, uint64_t data_size, Range* range) {
  const std::string where = StrCat("tensor '", name, "'");
  if (!entry.is_object()) return Bad(path, where + " entry is not an object");
  auto dt = entry.find("dtype");
  auto sh = entry.find("shape");
  auto off = entry.find("data_offsets");
  if (dt == entry.end() || !dt->is_string()) return Bad(path, where + " has no string dtype");
  if (sh == entry.end() || !sh->is_array()) return Bad(path, where + " has no shape array");
  if (off == entry.end() || !off->is_array() || off->size() != 2 ||
      !(*off)[0].is_number_unsigned() || !(*off)[1].is_number_unsigned()) {
    return Bad(path, where + " has no [begin, end] data_offsets");
  }
  TensorView view;
  if (!ParseDType(dt->get<std::string>(), &view.dtype)) {
    return Error(StatusCode::kUnimplemented, "safetensors", path, ": ", where,
                 " has unknown dtype '", dt->get<std::string>(), "'");
  }
  uint64_t numel = 1;
  for (auto& d : *sh) {
    if (!d.is_number_unsigned()) return Bad(path, where + " has a non-integer/negative dim");
    uint64_t v = d.get<uint64_t>();
    if (v != 0 && numel > data_size / v) {  // also guards the multiplication
      return Bad(path, where + " shape needs more bytes than the file holds");
    }
    numel *= v;
    view.shape.push_back(static_cast<int64_t>(v));
  }
  uint64_t begin = (*off)[0].get<uint64_t>(), end = (*off)[1].get<uint64_t>();
  if (begin > end || end > data_size) {
    return Bad(path, StrCat(where, " data_offsets [", begin, ",", end,
                            "] lie outside the data section (", data_size, " bytes)"));
  }
  if (end - begin != numel * DTypeSize(view.dtype)) {
    return Bad(path, StrCat(where, " holds ", end - begin, " bytes but ", DTypeName(view.dtype),
                            ShapeString(view.shape), " needs ", numel * DTypeSize(view.dtype)));
  }
  range->begin = begin;
  range->end = end;
  return view;
}

// Tensors may not share bytes.
Status CheckNoOverlap(const std::string& path, std::vector<Range>* ranges) {
  std::sort(ranges->begin(), ranges->end(),
            [](const Range& a, const Range& b) { return a.begin < b.begin; });
  for (size_t i = 1; i < ranges->size(); ++i) {
    if ((*ranges)[i].begin < (*ranges)[i - 1].end) {
      return Bad(path, StrCat("tensors '", (*ranges)[i - 1].name, "' and '", (*ranges)[i].name,
                              "' overlap"));
    }
  }
  return Status::Ok();
}

}  // namespace

const TensorView* SafetensorsFile::Find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

StatusOr<SafetensorsFile> SafetensorsFile::Open(const std::string& path) {
  SafetensorsFile st;
  OCULAR_ASSIGN_OR_RETURN(st.file_, MappedFile::Open(path));
  const uint8_t* base = st.file_.data();
  const size_t size = st.file_.size();
  if (size < 8) return Bad(path, StrCat("file is ", size, " bytes, too short for a header"));
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | base[i];
  if (header_len > kMaxHeaderBytes || header_len > size - 8) {
    return NotSafetensors(path, base, header_len, size);
  }
  const size_t data_begin = 8 + header_len;
  const size_t data_size = size - data_begin;

  // Safetensors headers nest three levels ({name: {"shape": [...]}}); 16 is plenty.
  StatusOr<nlohmann::json> parsed = ParseJson(
      std::string_view(reinterpret_cast<const char*>(base) + 8, header_len), path, "safetensors",
      /*max_depth=*/16);
  if (!parsed.ok()) {
    // "[safetensors] <path>: invalid JSON at line L, column C: ..." (position in the header).
    const std::string& m = parsed.status().message();
    const size_t at = m.find(": ", std::string("[safetensors] ").size() + path.size());
    return Bad(path, "header is not a well-formed JSON object: " +
                         (at == std::string::npos ? m : m.substr(at + 2)));
  }
  nlohmann::json header = std::move(parsed).value();
  if (!header.is_object()) return Bad(path, "header is not a well-formed JSON object");

  std::vector<Range> ranges;
  for (auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) return Bad(path, "__metadata__ is not an object");
      for (auto& [k, v] : entry.items()) {
        if (!v.is_string()) return Bad(path, StrCat("__metadata__['", k, "'] is not a string"));
        st.metadata_[k] = v.get<std::string>();
      }
      continue;
    }
    Range range{0, 0, name};
    OCULAR_ASSIGN_OR_RETURN(TensorView view, ParseEntry(path, name, entry, data_size, &range));
    view.data = base + data_begin + range.begin;
    ranges.push_back(std::move(range));
    st.tensors_[name] = std::move(view);
  }
  OCULAR_RETURN_IF_ERROR(CheckNoOverlap(path, &ranges));
  return st;
}

Status WriteSafetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                        const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    header[t.name] = {{"dtype", DTypeName(t.view.dtype)},
                      {"shape", t.view.shape},
                      {"data_offsets", {offset, offset + t.view.nbytes()}}};
    offset += t.view.nbytes();
  }
  std::string h = header.dump();
  while ((8 + h.size()) % 8) h.push_back(' ');  // align the data section
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return Error(StatusCode::kIoError, "safetensors", path, ": cannot open for writing");
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(h.size() >> (8 * i));
  out.write(reinterpret_cast<const char*>(len), 8);
  out.write(h.data(), static_cast<std::streamsize>(h.size()));
  for (const auto& t : tensors) {
    out.write(static_cast<const char*>(t.view.data), static_cast<std::streamsize>(t.view.nbytes()));
  }
  if (!out) return Error(StatusCode::kIoError, "safetensors", path, ": write failed");
  return Status::Ok();
}

}  // namespace ocular
