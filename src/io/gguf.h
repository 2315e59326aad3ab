// GGUF reader (memory-mapped, fully validated) and writer: llama.cpp's model file format,
// versions 2 and 3 (the spec: ggml's docs/gguf.md).
//
// Layout, little-endian:
//   "GGUF", u32 version, u64 tensor_count, u64 metadata_kv_count,
//   metadata: key (u64 length + bytes), u32 value type, value
//             (a string is u64 length + bytes; an array is u32 element type, u64 count, elements),
//   tensor infos: name, u32 n_dims, u64 ne[n_dims], u32 ggml type, u64 offset,
//   padding to general.alignment (default 32), the data section (offsets are relative to it).
// ne[0] is the contiguous dimension: an HF [rows, cols] matrix is ne = {cols, rows}.
// Model files are untrusted input: every count, length, type, offset and size is checked
// against the file before use; errors are tagged [gguf], name the file and the field.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/mapped_file.h"
#include "core/matrix.h"
#include "ocular/status.h"

namespace ocular {

enum class GgufType : uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};

// A metadata value. Strings and array elements point into the file's bytes.
struct GgufValue {
  GgufType type = GgufType::kU8;
  // Scalars: integers in `i` (unsigned ones too, when they fit) and `u`, floats in `f`.
  int64_t i = 0;
  uint64_t u = 0;
  double f = 0;
  std::string_view str;  // kString
  // kArray: element type and count; numeric elements are `elems` (count * element size
  // bytes, little-endian), string elements are `strings`.
  GgufType elem_type = GgufType::kU8;
  uint64_t count = 0;
  const uint8_t* elems = nullptr;
  std::vector<std::string_view> strings;
};

// ggml tensor types: the ones GGUF files use. Sizes from ggml's type traits.
struct GgmlType {
  uint32_t id;
  const char* name;
  int64_t block_values, block_bytes;
};
// nullptr for an id ggml does not define.
const GgmlType* FindGgmlType(uint32_t id);
// The ggml type id of a weight format (all of WFormat have one).
uint32_t GgmlTypeOf(WFormat f);
// The weight format of a ggml type id; false where ocular has no such format.
bool WFormatFromGgml(uint32_t id, WFormat* out);

struct GgufTensor {
  std::string name;
  std::vector<int64_t> ne;  // ggml order, ne[0] contiguous
  uint32_t type = 0;        // ggml type id (FindGgmlType(type) is never null)
  uint64_t offset = 0;      // within the data section
  size_t nbytes = 0;
  const std::byte* data = nullptr;

  // The shape in HF (row-major, outermost first) order: ne reversed.
  std::vector<int64_t> shape() const { return {ne.rbegin(), ne.rend()}; }
};

class GgufFile {
 public:
  // Maps and validates `path`.
  static StatusOr<std::unique_ptr<GgufFile>> Open(const std::string& path);
  // Validates bytes held by the caller (they must outlive the result); `origin` names them.
  static StatusOr<std::unique_ptr<GgufFile>> Parse(std::span<const uint8_t> bytes,
                                                   const std::string& origin);
  // True if `path` starts with the GGUF magic (false if unreadable).
  static bool HasMagic(const std::string& path);

  const std::string& origin() const { return origin_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  const std::map<std::string, GgufValue, std::less<>>& metadata() const { return kv_; }
  const std::vector<GgufTensor>& tensors() const { return tensors_; }

  // The file mapping (empty for bytes the caller holds: Parse).
  const MappedFile& mapping() const { return file_; }

  const GgufValue* Find(std::string_view key) const;
  const GgufTensor* FindTensor(std::string_view name) const;
  // Typed getters: kNotFound if absent, kDataLoss (naming the key) if of another type.
  StatusOr<std::string_view> GetString(std::string_view key) const;
  // Any integer type holding a value >= 0.
  StatusOr<uint64_t> GetUint(std::string_view key) const;
  // f32 or f64.
  StatusOr<double> GetFloat(std::string_view key) const;
  // An array of u8/i8 as bytes.
  StatusOr<std::string_view> GetBytes(std::string_view key) const;

 private:
  Status ParseAll(std::span<const uint8_t> bytes);

  std::string origin_;
  MappedFile file_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  std::map<std::string, GgufValue, std::less<>> kv_;
  std::vector<GgufTensor> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

// Writes a GGUF v3 file: metadata in insertion order, then tensors, data aligned to 32.
// Tensor bytes are produced one tensor at a time by a callback, so a model is converted
// without holding it in memory. The file is written as `path`.partial and renamed when
// complete: an error or an interrupted run never leaves a half-written file under `path`.
class GgufWriter {
 public:
  void SetString(const std::string& key, std::string_view value);
  void SetU32(const std::string& key, uint32_t value);
  void SetF32(const std::string& key, float value);
  void SetBool(const std::string& key, bool value);
  void SetStringArray(const std::string& key, const std::vector<std::string>& values);
  // An array of u8 (binary files such as a SentencePiece model).
  void SetBytes(const std::string& key, std::string_view bytes);
  void SetF32Array(const std::string& key, const std::vector<float>& values);
  void SetI32Array(const std::string& key, const std::vector<int32_t>& values);
  // A value as another file holds it (any type, arrays too): copying metadata across files.
  void SetValue(const std::string& key, const GgufValue& value);

  // Declares a tensor of HF `shape` (outermost first) in format `f`. REQUIRES: the name is
  // unique and < 64 bytes (llama.cpp's limit); the last dimension is a multiple of the
  // format's block. Returns its index for the fill callback.
  size_t AddTensor(const std::string& name, const std::vector<int64_t>& shape, WFormat f);
  size_t tensor_count() const { return tensors_.size(); }

  // Fills tensor `index`'s bytes (exactly its size) into `out`.
  using FillFn = std::function<Status(size_t index, std::byte* out, size_t nbytes)>;
  // Writes the file, calling `fill` once per tensor in order.
  Status Write(const std::string& path, const FillFn& fill) const;

 private:
  struct Tensor {
    std::string name;
    std::vector<int64_t> ne;
    WFormat format;
    size_t nbytes;
  };
  std::string header_;  // the serialized metadata key/value pairs
  uint64_t kv_count_ = 0;
  std::vector<Tensor> tensors_;
};

}  // namespace ocular
