#include "io/gguf.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <utility>

#include "core/check.h"

namespace ocular {

namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32
constexpr uint64_t kDefaultAlignment = 32;
constexpr int kMaxDims = 4;           // GGML_MAX_DIMS
constexpr size_t kMaxNameBytes = 64;  // GGML_MAX_NAME: names are shorter than this
constexpr uint64_t kMaxAlignment = 1 << 20;

constexpr GgmlType kGgmlTypes[] = {
    {0, "F32", 1, 4},         {1, "F16", 1, 2},         {2, "Q4_0", 32, 18},
    {3, "Q4_1", 32, 20},      {6, "Q5_0", 32, 22},      {7, "Q5_1", 32, 24},
    {8, "Q8_0", 32, 34},      {9, "Q8_1", 32, 40},      {10, "Q2_K", 256, 84},
    {11, "Q3_K", 256, 110},   {12, "Q4_K", 256, 144},   {13, "Q5_K", 256, 176},
    {14, "Q6_K", 256, 210},   {15, "Q8_K", 256, 292},   {16, "IQ2_XXS", 256, 66},
    {17, "IQ2_XS", 256, 74},  {18, "IQ3_XXS", 256, 98}, {19, "IQ1_S", 256, 50},
    {20, "IQ4_NL", 32, 18},   {21, "IQ3_S", 256, 110},  {22, "IQ2_S", 256, 82},
    {23, "IQ4_XS", 256, 136}, {24, "I8", 1, 1},         {25, "I16", 1, 2},
    {26, "I32", 1, 4},        {27, "I64", 1, 8},        {28, "F64", 1, 8},
    {29, "IQ1_M", 256, 56},   {30, "BF16", 1, 2},       {34, "TQ1_0", 256, 54},
    {35, "TQ2_0", 256, 66},
};

// Bytes of one scalar metadata value of type t; 0 for string/array/unknown.
size_t ScalarSize(GgufType t) {
  switch (t) {
    case GgufType::kU8:
    case GgufType::kI8:
    case GgufType::kBool:
      return 1;
    case GgufType::kU16:
    case GgufType::kI16:
      return 2;
    case GgufType::kU32:
    case GgufType::kI32:
    case GgufType::kF32:
      return 4;
    case GgufType::kU64:
    case GgufType::kI64:
    case GgufType::kF64:
      return 8;
    default:
      return 0;
  }
}
bool KnownType(uint32_t t) { return t <= static_cast<uint32_t>(GgufType::kF64); }

// A bounds-checked little-endian reader over the file's bytes. Every read either succeeds
// or records why not; callers check ok() after each logical field.
class Cursor {
 public:
  Cursor(std::span<const uint8_t> bytes) : b_(bytes) {}
  size_t pos() const { return pos_; }
  size_t left() const { return b_.size() - pos_; }
  bool Take(size_t n, const uint8_t** out) {
    if (n > left()) return false;
    *out = b_.data() + pos_;
    pos_ += n;
    return true;
  }
  template <typename T>
  bool Read(T* out) {
    const uint8_t* p;
    if (!Take(sizeof(T), &p)) return false;
    std::memcpy(out, p, sizeof(T));  // x86-64 and the other targets we build are little-endian
    return true;
  }
  bool ReadString(std::string_view* out) {
    uint64_t n;
    const uint8_t* p;
    if (!Read(&n) || n > left() || !Take(static_cast<size_t>(n), &p)) return false;
    *out = std::string_view(reinterpret_cast<const char*>(p), static_cast<size_t>(n));
    return true;
  }

 private:
  std::span<const uint8_t> b_;
  size_t pos_ = 0;
};

std::string Printable(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 80)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (s.size() > 80) out += "...";
  return out;
}

// Reads a scalar of type t into v.
bool ReadScalar(Cursor& c, GgufType t, GgufValue* v) {
  const uint8_t* p;
  const size_t n = ScalarSize(t);
  if (!c.Take(n, &p)) return false;
  uint64_t raw = 0;
  std::memcpy(&raw, p, n);
  switch (t) {
    case GgufType::kU8:
    case GgufType::kU16:
    case GgufType::kU32:
    case GgufType::kU64:
    case GgufType::kBool:
      v->u = raw;
      v->i = raw <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())
                 ? static_cast<int64_t>(raw)
                 : -1;
      break;
    case GgufType::kI8:
      v->i = static_cast<int8_t>(raw);
      break;
    case GgufType::kI16:
      v->i = static_cast<int16_t>(raw);
      break;
    case GgufType::kI32:
      v->i = static_cast<int32_t>(raw);
      break;
    case GgufType::kI64:
      v->i = static_cast<int64_t>(raw);
      break;
    case GgufType::kF32: {
      float f;
      std::memcpy(&f, p, 4);
      v->f = f;
      break;
    }
    case GgufType::kF64:
      std::memcpy(&v->f, p, 8);
      break;
    default:
      return false;
  }
  if (t != GgufType::kF32 && t != GgufType::kF64) {
    v->f = static_cast<double>(v->i);
    if (v->i >= 0) v->u = static_cast<uint64_t>(v->i);
  }
  return true;
}

bool IsInteger(GgufType t) {
  return t != GgufType::kF32 && t != GgufType::kF64 && t != GgufType::kBool && ScalarSize(t) != 0;
}

}  // namespace

const GgmlType* FindGgmlType(uint32_t id) {
  for (const GgmlType& t : kGgmlTypes) {
    if (t.id == id) return &t;
  }
  return nullptr;
}

namespace {

// The ggml type id of each weight format (ggml.h's enum ggml_type).
constexpr std::pair<WFormat, uint32_t> kGgmlIds[] = {
    {WFormat::kF32, 0},  {WFormat::kF16, 1},   {WFormat::kBF16, 30}, {WFormat::kQ8_0, 8},
    {WFormat::kQ4_0, 2}, {WFormat::kQ4_K, 12}, {WFormat::kQ6_K, 14}, {WFormat::kQ5_0, 6}};
static_assert(std::size(kGgmlIds) == kNumWFormats, "every WFormat has a ggml type");

}  // namespace

uint32_t GgmlTypeOf(WFormat f) {
  for (const auto& [format, id] : kGgmlIds) {
    if (format == f) return id;
  }
  OCULAR_CHECK(false, "HINT: a WFormat without a ggml type");
  return 0;
}

bool WFormatFromGgml(uint32_t id, WFormat* out) {
  for (const auto& [format, ggml_id] : kGgmlIds) {
    if (ggml_id == id) {
      *out = format;
      return true;
    }
  }
  return false;
}

bool GgufFile::HasMagic(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  return in.read(magic, 4) && std::memcmp(magic, "GGUF", 4) == 0;
}

StatusOr<std::unique_ptr<GgufFile>> GgufFile::Open(const std::string& path) {
  OCULAR_ASSIGN_OR_RETURN(MappedFile file, MappedFile::Open(path));
  std::unique_ptr<GgufFile> g(new GgufFile());
  g->origin_ = path;
  g->file_ = std::move(file);
  OCULAR_RETURN_IF_ERROR(g->ParseAll({g->file_.data(), g->file_.size()}));
  return g;
}

StatusOr<std::unique_ptr<GgufFile>> GgufFile::Parse(std::span<const uint8_t> bytes,
                                                    const std::string& origin) {
  std::unique_ptr<GgufFile> g(new GgufFile());
  g->origin_ = origin;
  OCULAR_RETURN_IF_ERROR(g->ParseAll(bytes));
  return g;
}

namespace {

template <typename... Parts>
Status Corrupt(const std::string& origin, const Parts&... parts) {
  return Error(StatusCode::kDataLoss, "gguf", origin, ": ", parts...);
}

// The value of metadata `key` (its type already read into v->type).
Status ReadValue(Cursor& c, const std::string& origin, std::string_view key, GgufValue* v) {
  bool ok = true;
  if (v->type == GgufType::kString) {
    ok = c.ReadString(&v->str);
  } else if (v->type == GgufType::kArray) {
    uint32_t et = 0;
    if (!c.Read(&et) || !c.Read(&v->count)) {
      return Corrupt(origin, "metadata '", Printable(key), "': truncated");
    }
    if (!KnownType(et)) {
      return Corrupt(origin, "metadata '", Printable(key), "': unknown array element type ", et);
    }
    v->elem_type = static_cast<GgufType>(et);
    if (v->elem_type == GgufType::kArray) {
      return Error(StatusCode::kUnimplemented, "gguf", origin, ": metadata '", Printable(key),
                   "': nested arrays are not supported");
    }
    const size_t es = v->elem_type == GgufType::kString ? 8 : ScalarSize(v->elem_type);
    if (v->count > c.left() / es) {
      return Corrupt(origin, "metadata '", Printable(key), "': array count ", v->count,
                     " exceeds what the file holds");
    }
    if (v->elem_type == GgufType::kString) {
      v->strings.resize(static_cast<size_t>(v->count));
      for (auto& s : v->strings) ok = ok && c.ReadString(&s);
    } else {
      ok = c.Take(static_cast<size_t>(v->count) * es, &v->elems);
    }
  } else {
    ok = ReadScalar(c, v->type, v);
  }
  if (!ok) return Corrupt(origin, "metadata '", Printable(key), "': truncated value");
  return Status::Ok();
}

// Tensor info `t`: name, dimensions, ggml type and offset (checked against `alignment`).
Status ReadTensorInfo(Cursor& c, const std::string& origin, uint64_t t, uint64_t alignment,
                      GgufTensor* ti) {
  std::string_view name;
  uint32_t n_dims = 0;
  if (!c.ReadString(&name) || !c.Read(&n_dims)) {
    return Corrupt(origin, "tensor info ", t, ": truncated");
  }
  ti->name = std::string(name);
  const std::string shown = Printable(name);
  if (name.empty() || name.size() > 4096) {
    return Corrupt(origin, "tensor info ", t, ": name of ", name.size(), " bytes");
  }
  if (n_dims < 1 || n_dims > kMaxDims) {
    return Corrupt(origin, "tensor '", shown, "': n_dims ", n_dims, " (1..4)");
  }
  ti->ne.resize(n_dims);
  uint64_t numel = 1;
  for (uint32_t d = 0; d < n_dims; ++d) {
    uint64_t ne = 0;
    if (!c.Read(&ne)) return Corrupt(origin, "tensor '", shown, "': truncated");
    if (ne == 0 || ne > (uint64_t{1} << 40) || numel > (uint64_t{1} << 50) / ne) {
      return Corrupt(origin, "tensor '", shown, "': dimension ", d, " is ", ne);
    }
    ti->ne[d] = static_cast<int64_t>(ne);
    numel *= ne;
  }
  if (!c.Read(&ti->type) || !c.Read(&ti->offset)) {
    return Corrupt(origin, "tensor '", shown, "': truncated");
  }
  const GgmlType* gt = FindGgmlType(ti->type);
  if (gt == nullptr) return Corrupt(origin, "tensor '", shown, "': unknown ggml type ", ti->type);
  if (ti->ne[0] % gt->block_values != 0) {
    return Corrupt(origin, "tensor '", shown, "': ne[0] = ", ti->ne[0], " is not a multiple of ",
                   gt->name, "'s block of ", gt->block_values);
  }
  ti->nbytes = static_cast<size_t>(numel / gt->block_values * gt->block_bytes);
  if (ti->offset % alignment != 0) {
    return Corrupt(origin, "tensor '", shown, "': offset ", ti->offset, " is not aligned to ",
                   alignment);
  }
  return Status::Ok();
}

// Points each tensor at its data (the data section starts at `data_start` of `bytes`): every
// tensor inside the file, none overlapping another.
Status PlaceTensors(std::span<const uint8_t> bytes, uint64_t data_start, const std::string& origin,
                    std::vector<GgufTensor>* tensors) {
  const uint64_t data_size = data_start <= bytes.size() ? bytes.size() - data_start : 0;
  std::vector<size_t> order(tensors->size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return (*tensors)[a].offset < (*tensors)[b].offset; });
  uint64_t end_of_previous = 0;
  for (size_t k = 0; k < order.size(); ++k) {
    GgufTensor& ti = (*tensors)[order[k]];
    if (ti.offset > data_size || ti.nbytes > data_size - ti.offset) {
      return Corrupt(origin, "tensor '", Printable(ti.name), "': data [", ti.offset, ", +",
                     ti.nbytes, ") runs past the end of the file (data section of ", data_size,
                     " bytes)");
    }
    if (k > 0 && ti.offset < end_of_previous) {
      return Corrupt(origin, "tensor '", Printable(ti.name), "' overlaps tensor '",
                     Printable((*tensors)[order[k - 1]].name), "'");
    }
    end_of_previous = ti.offset + ti.nbytes;
    ti.data = reinterpret_cast<const std::byte*>(bytes.data() + data_start + ti.offset);
  }
  return Status::Ok();
}

}  // namespace

Status GgufFile::ParseAll(std::span<const uint8_t> bytes) {
  auto corrupt = [&](const auto&... parts) { return Corrupt(origin_, parts...); };
  Cursor c(bytes);
  uint32_t magic = 0;
  uint64_t n_tensors = 0, n_kv = 0;
  if (!c.Read(&magic)) return corrupt("truncated: ", bytes.size(), " bytes, no GGUF header");
  if (magic != kMagic) return corrupt("bad magic (not a GGUF file)");
  if (!c.Read(&version_) || !c.Read(&n_tensors) || !c.Read(&n_kv)) {
    return corrupt("truncated header (", bytes.size(), " bytes)");
  }
  if (version_ == 1) {
    return Error(StatusCode::kUnimplemented, "gguf", origin_,
                 ": GGUF version 1 is not supported (convert it with a current llama.cpp)");
  }
  if (version_ >= 0x01000000) {
    return Error(StatusCode::kUnimplemented, "gguf", origin_,
                 ": big-endian GGUF files are not supported");
  }
  if (version_ != 2 && version_ != 3) return corrupt("unknown version ", version_);
  // Each key/value takes at least 13 bytes, each tensor info at least 32: counts beyond what
  // the file can hold are corrupt (and must not size any allocation).
  if (n_kv > c.left() / 13) {
    return corrupt("metadata_kv_count ", n_kv, " exceeds what the file holds");
  }
  if (n_tensors > c.left() / 32) {
    return corrupt("tensor_count ", n_tensors, " exceeds what the file holds");
  }

  for (uint64_t k = 0; k < n_kv; ++k) {
    std::string_view key;
    uint32_t type = 0;
    if (!c.ReadString(&key)) return corrupt("metadata key ", k, ": truncated");
    if (key.empty()) return corrupt("metadata key ", k, ": empty");
    if (!c.Read(&type)) return corrupt("metadata '", Printable(key), "': truncated");
    if (!KnownType(type)) {
      return corrupt("metadata '", Printable(key), "': unknown value type ", type);
    }
    GgufValue v;
    v.type = static_cast<GgufType>(type);
    OCULAR_RETURN_IF_ERROR(ReadValue(c, origin_, key, &v));
    if (!kv_.emplace(std::string(key), std::move(v)).second) {
      return corrupt("metadata key '", Printable(key), "' appears twice");
    }
  }
  alignment_ = kDefaultAlignment;
  if (const GgufValue* a = Find("general.alignment")) {
    if (a->type != GgufType::kU32 || a->u == 0 || (a->u & (a->u - 1)) != 0 ||
        a->u > kMaxAlignment) {
      return corrupt("general.alignment must be a u32 power of two <= ", kMaxAlignment);
    }
    alignment_ = a->u;
  }

  tensors_.resize(static_cast<size_t>(n_tensors));
  for (uint64_t t = 0; t < n_tensors; ++t) {
    OCULAR_RETURN_IF_ERROR(ReadTensorInfo(c, origin_, t, alignment_, &tensors_[t]));
    if (!tensor_index_.emplace(tensors_[t].name, t).second) {
      return corrupt("tensor '", Printable(tensors_[t].name), "' appears twice");
    }
  }
  const uint64_t data_start = (c.pos() + alignment_ - 1) / alignment_ * alignment_;
  return PlaceTensors(bytes, data_start, origin_, &tensors_);
}

const GgufValue* GgufFile::Find(std::string_view key) const {
  auto it = kv_.find(key);
  return it == kv_.end() ? nullptr : &it->second;
}

const GgufTensor* GgufFile::FindTensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

StatusOr<std::string_view> GgufFile::GetString(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr)
    return Error(StatusCode::kNotFound, "gguf", origin_, ": no metadata '", key, "'");
  if (v->type != GgufType::kString) {
    return Error(StatusCode::kDataLoss, "gguf", origin_, ": metadata '", key, "' is not a string");
  }
  return v->str;
}

StatusOr<uint64_t> GgufFile::GetUint(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr)
    return Error(StatusCode::kNotFound, "gguf", origin_, ": no metadata '", key, "'");
  if (!IsInteger(v->type) || v->i < 0) {
    return Error(StatusCode::kDataLoss, "gguf", origin_, ": metadata '", key,
                 "' is not a non-negative integer");
  }
  return v->u;
}

StatusOr<double> GgufFile::GetFloat(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr)
    return Error(StatusCode::kNotFound, "gguf", origin_, ": no metadata '", key, "'");
  if (v->type != GgufType::kF32 && v->type != GgufType::kF64) {
    return Error(StatusCode::kDataLoss, "gguf", origin_, ": metadata '", key, "' is not a float");
  }
  return v->f;
}

StatusOr<std::string_view> GgufFile::GetBytes(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr)
    return Error(StatusCode::kNotFound, "gguf", origin_, ": no metadata '", key, "'");
  if (v->type != GgufType::kArray ||
      (v->elem_type != GgufType::kU8 && v->elem_type != GgufType::kI8)) {
    return Error(StatusCode::kDataLoss, "gguf", origin_, ": metadata '", key,
                 "' is not an array of bytes");
  }
  return std::string_view(reinterpret_cast<const char*>(v->elems), static_cast<size_t>(v->count));
}

// ---- writer ----

namespace {
template <typename T>
void Put(std::string* s, T v) {
  s->append(reinterpret_cast<const char*>(&v), sizeof(T));
}
void PutString(std::string* s, std::string_view v) {
  Put<uint64_t>(s, v.size());
  s->append(v);
}
void PutKey(std::string* s, const std::string& key, GgufType t) {
  PutString(s, key);
  Put<uint32_t>(s, static_cast<uint32_t>(t));
}
}  // namespace

void GgufWriter::SetString(const std::string& key, std::string_view value) {
  PutKey(&header_, key, GgufType::kString);
  PutString(&header_, value);
  ++kv_count_;
}
void GgufWriter::SetU32(const std::string& key, uint32_t value) {
  PutKey(&header_, key, GgufType::kU32);
  Put(&header_, value);
  ++kv_count_;
}
void GgufWriter::SetF32(const std::string& key, float value) {
  PutKey(&header_, key, GgufType::kF32);
  Put(&header_, value);
  ++kv_count_;
}
void GgufWriter::SetBool(const std::string& key, bool value) {
  PutKey(&header_, key, GgufType::kBool);
  Put<uint8_t>(&header_, value ? 1 : 0);
  ++kv_count_;
}
void GgufWriter::SetStringArray(const std::string& key, const std::vector<std::string>& values) {
  PutKey(&header_, key, GgufType::kArray);
  Put<uint32_t>(&header_, static_cast<uint32_t>(GgufType::kString));
  Put<uint64_t>(&header_, values.size());
  for (const std::string& v : values) PutString(&header_, v);
  ++kv_count_;
}
void GgufWriter::SetBytes(const std::string& key, std::string_view bytes) {
  PutKey(&header_, key, GgufType::kArray);
  Put<uint32_t>(&header_, static_cast<uint32_t>(GgufType::kU8));
  Put<uint64_t>(&header_, bytes.size());
  header_.append(bytes);
  ++kv_count_;
}

void GgufWriter::SetF32Array(const std::string& key, const std::vector<float>& values) {
  PutKey(&header_, key, GgufType::kArray);
  Put<uint32_t>(&header_, static_cast<uint32_t>(GgufType::kF32));
  Put<uint64_t>(&header_, values.size());
  for (float v : values) Put(&header_, v);
  ++kv_count_;
}
void GgufWriter::SetI32Array(const std::string& key, const std::vector<int32_t>& values) {
  PutKey(&header_, key, GgufType::kArray);
  Put<uint32_t>(&header_, static_cast<uint32_t>(GgufType::kI32));
  Put<uint64_t>(&header_, values.size());
  for (int32_t v : values) Put(&header_, v);
  ++kv_count_;
}

void GgufWriter::SetValue(const std::string& key, const GgufValue& v) {
  PutKey(&header_, key, v.type);
  switch (v.type) {
    case GgufType::kString:
      PutString(&header_, v.str);
      break;
    case GgufType::kArray:
      Put<uint32_t>(&header_, static_cast<uint32_t>(v.elem_type));
      Put<uint64_t>(&header_, v.count);
      if (v.elem_type == GgufType::kString) {
        for (std::string_view e : v.strings) PutString(&header_, e);
      } else {
        header_.append(reinterpret_cast<const char*>(v.elems),
                       static_cast<size_t>(v.count) * ScalarSize(v.elem_type));
      }
      break;
    case GgufType::kF32:
      Put(&header_, static_cast<float>(v.f));
      break;
    case GgufType::kF64:
      Put(&header_, v.f);
      break;
    default: {  // integers and bool: their low bytes, little-endian
      const uint64_t raw = v.u != 0 ? v.u : static_cast<uint64_t>(v.i);
      header_.append(reinterpret_cast<const char*>(&raw), ScalarSize(v.type));
    }
  }
  ++kv_count_;
}

size_t GgufWriter::AddTensor(const std::string& name, const std::vector<int64_t>& shape,
                             WFormat f) {
  OCULAR_CHECK(!name.empty() && name.size() < kMaxNameBytes,
               "HINT: GGUF tensor names are < 64 bytes");
  OCULAR_CHECK(!shape.empty() && shape.size() <= kMaxDims);
  for (const Tensor& t : tensors_) OCULAR_CHECK(t.name != name, "HINT: tensor names are unique");
  Tensor t{name, {shape.rbegin(), shape.rend()}, f, 0};
  const int64_t row = WFormatRowBytes(f, t.ne[0]);
  OCULAR_CHECK(row >= 0, "HINT: the last dimension is a multiple of the format's block");
  size_t rows = 1;
  for (size_t d = 1; d < t.ne.size(); ++d) rows *= static_cast<size_t>(t.ne[d]);
  t.nbytes = rows * static_cast<size_t>(row);
  tensors_.push_back(std::move(t));
  return tensors_.size() - 1;
}

Status GgufWriter::Write(const std::string& path, const FillFn& fill) const {
  std::string head;
  Put<uint32_t>(&head, kMagic);
  Put<uint32_t>(&head, 3);
  Put<uint64_t>(&head, tensors_.size());
  Put<uint64_t>(&head, kv_count_);
  head += header_;
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    PutString(&head, t.name);
    Put<uint32_t>(&head, static_cast<uint32_t>(t.ne.size()));
    for (int64_t ne : t.ne) Put<uint64_t>(&head, static_cast<uint64_t>(ne));
    Put<uint32_t>(&head, GgmlTypeOf(t.format));
    Put<uint64_t>(&head, offset);
    offset += (t.nbytes + kDefaultAlignment - 1) / kDefaultAlignment * kDefaultAlignment;
  }
  head.resize((head.size() + kDefaultAlignment - 1) / kDefaultAlignment * kDefaultAlignment, '\0');

  const std::string partial = path + ".partial";
  FILE* f = std::fopen(partial.c_str(), "wb");
  if (f == nullptr) {
    return Error(StatusCode::kNotFound, "gguf", partial, ": cannot create (", std::strerror(errno),
                 ")");
  }
  auto fail = [&](Status s) {
    std::fclose(f);
    std::remove(partial.c_str());
    return s;
  };
  auto write = [&](const void* p, size_t n) { return std::fwrite(p, 1, n, f) == n; };
  auto io_error = [&] {
    return Error(StatusCode::kInternal, "gguf", partial, ": write failed (", std::strerror(errno),
                 ")");
  };
  if (!write(head.data(), head.size())) return fail(io_error());
  std::vector<std::byte> buffer;
  const char zeros[kDefaultAlignment] = {};
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const Tensor& t = tensors_[i];
    buffer.resize(t.nbytes);
    Status s = fill(i, buffer.data(), t.nbytes);
    if (!s.ok()) return fail(s);
    const size_t pad = (kDefaultAlignment - t.nbytes % kDefaultAlignment) % kDefaultAlignment;
    if (!write(buffer.data(), t.nbytes) || !write(zeros, pad)) return fail(io_error());
  }
  if (std::fflush(f) != 0 || ::fsync(fileno(f)) != 0) return fail(io_error());
  if (std::fclose(f) != 0) {
    std::remove(partial.c_str());
    return io_error();
  }
  if (std::rename(partial.c_str(), path.c_str()) != 0) {
    std::remove(partial.c_str());
    return Error(StatusCode::kInternal, "gguf", path, ": cannot rename from ", partial, " (",
                 std::strerror(errno), ")");
  }
  return Status::Ok();
}

}  // namespace ocular
