// .npy header parsing follows numpy/lib/format.py (read_magic, _read_array_header: the
// header is a Python literal dict written by `repr`); .npz archives are zips read with libzip.
#include "io/npz.h"

#include <zip.h>

#include <cstring>
#include <memory>

#include "core/file_io.h"

namespace ocular {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;
// numpy refuses headers over 10000 bytes unless told otherwise (max_header_size); ours is
// looser but still bounded.
constexpr size_t kMaxHeaderBytes = 65536;

// A cursor over the header dict literal with the few Python-literal forms numpy writes.
class Literal {
 public:
  explicit Literal(std::string_view s) : s_(s) {}
  void SkipSpaces() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t')) ++pos_;
  }
  bool Consume(char c) {
    SkipSpaces();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool ConsumeWord(std::string_view w) {
    SkipSpaces();
    if (s_.substr(pos_, w.size()) != w) return false;
    pos_ += w.size();
    return true;
  }
  // 'text' or "text" without escapes.
  bool String(std::string* out) {
    SkipSpaces();
    if (pos_ >= s_.size() || (s_[pos_] != '\'' && s_[pos_] != '"')) return false;
    const char quote = s_[pos_];
    const size_t end = s_.find(quote, pos_ + 1);
    if (end == std::string_view::npos) return false;
    const std::string_view body = s_.substr(pos_ + 1, end - pos_ - 1);
    if (body.find('\\') != std::string_view::npos) return false;
    *out = std::string(body);
    pos_ = end + 1;
    return true;
  }
  // A non-negative decimal integer below 2^62.
  bool Int(int64_t* out) {
    SkipSpaces();
    const size_t start = pos_;
    int64_t v = 0;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
      if (v > (int64_t{1} << 58)) return false;
      v = v * 10 + (s_[pos_++] - '0');
    }
    if (pos_ == start) return false;
    *out = v;
    return true;
  }
  size_t pos() const { return pos_; }
  std::string_view rest() const { return s_.substr(pos_); }

 private:
  std::string_view s_;
  size_t pos_ = 0;
};

// numpy's descr → DType. On false, *unsupported tells a numpy type ocular does not read
// (kUnimplemented) from text that is no numpy type at all (kDataLoss).
bool ParseDescr(const std::string& descr, DType* out, bool* unsupported) {
  const char order = descr.empty() ? '\0' : descr[0];
  // A valid byte-order mark: a numpy type, if not one we read (u2, c8, M8, O, ...).
  *unsupported =
      descr.size() >= 2 && (order == '<' || order == '>' || order == '|' || order == '=');
  if (descr.size() < 3) return false;
  const std::string kind = descr.substr(1);
  struct Entry {
    const char* kind;
    DType type;
  };
  constexpr Entry kKinds[] = {{"f2", DType::kF16}, {"f4", DType::kF32}, {"f8", DType::kF64},
                              {"i1", DType::kI8},  {"i2", DType::kI16}, {"i4", DType::kI32},
                              {"i8", DType::kI64}, {"u1", DType::kU8},  {"b1", DType::kBool}};
  for (const Entry& e : kKinds) {
    if (kind != e.kind) continue;
    const bool byte_sized = DTypeSize(e.type) == 1;
    // '<' little-endian; '|' not applicable (byte-sized); '=' native, which is little-endian
    // on every platform ocular builds for.
    if (order == '<' || order == '=' || (order == '|' && byte_sized) ||
        (order == '>' && byte_sized)) {
      *out = e.type;
      return true;
    }
    return false;  // a known kind in an order we do not read (big-endian)
  }
  return false;
}

// The header dict's entries ({'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }).
struct NpyDict {
  std::string descr;
  bool fortran = false;
  Shape shape;
};

// The shape tuple after its '(': "2, 3)", "2,)", ")". "" or what is malformed.
std::string ParseShapeTuple(Literal& lit, Shape* shape) {
  while (!lit.Consume(')')) {
    int64_t d = 0;
    if (!lit.Int(&d)) return "shape entry is not a non-negative integer";
    lit.ConsumeWord("L");  // Python 2 longs
    shape->push_back(d);
    if (shape->size() > static_cast<size_t>(kMaxNpyDims)) return "too many dimensions";
    if (!lit.Consume(',')) {
      if (!lit.Consume(')')) return "shape tuple";
      break;
    }
  }
  return "";
}

// The header's text (without its newline) as the dict numpy's format.py writes. "" or what is
// malformed.
std::string ParseDict(std::string_view text, NpyDict* out) {
  Literal lit(text);
  if (!lit.Consume('{')) return "not a dict";
  bool have_descr = false, have_order = false, have_shape = false;
  while (!lit.Consume('}')) {
    std::string key;
    if (!lit.String(&key) || !lit.Consume(':')) return "expected 'key':";
    if (key == "descr") {
      if (have_descr || !lit.String(&out->descr)) return "descr";
      have_descr = true;
    } else if (key == "fortran_order") {
      if (have_order) return "fortran_order twice";
      if (lit.ConsumeWord("True")) {
        out->fortran = true;
      } else if (!lit.ConsumeWord("False")) {
        return "fortran_order is not True/False";
      }
      have_order = true;
    } else if (key == "shape") {
      if (have_shape || !lit.Consume('(')) return "shape is not a tuple";
      if (std::string why = ParseShapeTuple(lit, &out->shape); !why.empty()) return why;
      have_shape = true;
    } else {
      return "unknown key '" + key + "'";
    }
    if (!lit.Consume(',')) {
      if (!lit.Consume('}')) return "expected ',' or '}'";
      break;
    }
  }
  for (char c : lit.rest()) {
    if (c != ' ') return "text after the dict";
  }
  if (!have_descr || !have_order || !have_shape) return "missing descr, fortran_order or shape";
  return "";
}

uint32_t ReadLe(const unsigned char* p, int n) {
  uint32_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

StatusOr<NpyHeader> ParseNpyHeader(std::string_view npy, std::string_view where) {
  if (npy.size() < kMagicLen + 4 || std::memcmp(npy.data(), kMagic, kMagicLen) != 0) {
    return Error(StatusCode::kDataLoss, "npz", where, ": not an .npy array (no \\x93NUMPY magic)");
  }
  const auto* u = reinterpret_cast<const unsigned char*>(npy.data());
  const int major = u[6], minor = u[7];
  if (major < 1 || major > 3 || minor != 0) {
    return Error(StatusCode::kUnimplemented, "npz", where, ": .npy format version ", major, ".",
                 minor, " (known: 1.0, 2.0, 3.0)");
  }
  const size_t len_bytes = major == 1 ? 2 : 4;
  if (npy.size() < kMagicLen + 2 + len_bytes) {
    return Error(StatusCode::kDataLoss, "npz", where, ": .npy header truncated");
  }
  const size_t header_len = ReadLe(u + 8, static_cast<int>(len_bytes));
  const size_t data_offset = kMagicLen + 2 + len_bytes + header_len;
  if (header_len > kMaxHeaderBytes) {
    return Error(StatusCode::kDataLoss, "npz", where, ": .npy header length ", header_len,
                 " exceeds ", kMaxHeaderBytes, " bytes");
  }
  if (data_offset > npy.size()) {
    return Error(StatusCode::kDataLoss, "npz", where, ": .npy header length ", header_len,
                 " runs past the end of the array (", npy.size(), " bytes)");
  }
  std::string_view text = npy.substr(kMagicLen + 2 + len_bytes, header_len);
  auto bad = [&](std::string_view what) {
    return Error(StatusCode::kDataLoss, "npz", where, ": malformed .npy header (", what,
                 "): ", std::string(text.substr(0, 120)));
  };
  // format.py always ends the padded header with '\n'.
  if (text.empty() || text.back() != '\n') return bad("no terminating newline");
  text.remove_suffix(1);
  NpyDict dict;
  if (std::string why = ParseDict(text, &dict); !why.empty()) return bad(why);
  NpyHeader h;
  bool unsupported = false;
  if (!ParseDescr(dict.descr, &h.dtype, &unsupported)) {
    return Error(unsupported ? StatusCode::kUnimplemented : StatusCode::kDataLoss, "npz", where,
                 ": dtype '", dict.descr, "'",
                 unsupported ? " is not supported (little-endian f2/f4/f8, i1..i8, u1, b1 are)"
                             : " is not a numpy dtype");
  }
  if (dict.fortran) {
    return Error(StatusCode::kUnimplemented, "npz", where,
                 ": Fortran-order arrays are not supported (save with np.ascontiguousarray)");
  }
  // The product must fit: each dim < 2^58 was checked; stop as soon as it exceeds the cap.
  int64_t numel = 1;
  for (int64_t d : dict.shape) {
    if (d != 0 && numel > kMaxNpzUncompressedBytes / d) {
      return Error(StatusCode::kResourceExhausted, "npz", where, ": shape ",
                   ShapeString(dict.shape), " has more elements than the ",
                   kMaxNpzUncompressedBytes, "-byte limit");
    }
    numel *= d;
  }
  h.shape = std::move(dict.shape);
  h.data_offset = data_offset;
  return h;
}

StatusOr<NpyArray> ParseNpy(std::string_view npy, std::string_view where) {
  OCULAR_ASSIGN_OR_RETURN(NpyHeader h, ParseNpyHeader(npy, where));
  const uint64_t need = static_cast<uint64_t>(NumElements(h.shape)) * DTypeSize(h.dtype);
  const uint64_t have = npy.size() - h.data_offset;
  if (need != have) {
    return Error(StatusCode::kDataLoss, "npz", where, ": shape ", ShapeString(h.shape), " ",
                 DTypeName(h.dtype), " needs ", need, " data bytes, the array has ", have);
  }
  NpyArray a;
  a.dtype = h.dtype;
  a.shape = std::move(h.shape);
  a.bytes.assign(npy.substr(h.data_offset));
  return a;
}

namespace {

struct ZipDiscard {
  void operator()(zip_t* z) const { zip_discard(z); }
};
struct ZipFileClose {
  void operator()(zip_file_t* f) const { zip_fclose(f); }
};

// Member i's `size` bytes, read to the end so that libzip checks the CRC (and finds any
// bytes past the stated size).
StatusOr<std::string> ReadMember(zip_t* za, zip_int64_t i, size_t size, const std::string& where) {
  std::unique_ptr<zip_file_t, ZipFileClose> f(zip_fopen_index(za, static_cast<zip_uint64_t>(i), 0));
  if (f == nullptr) {
    return Error(StatusCode::kDataLoss, "npz", where, ": cannot open member: ", zip_strerror(za));
  }
  std::string data(size, '\0');
  size_t got = 0;
  while (got < data.size()) {
    const zip_int64_t r = zip_fread(f.get(), data.data() + got, data.size() - got);
    if (r <= 0) {
      return Error(StatusCode::kDataLoss, "npz", where, ": member truncated or corrupt after ", got,
                   " of ", data.size(), " bytes: ", zip_file_strerror(f.get()));
    }
    got += static_cast<size_t>(r);
  }
  char extra;
  if (zip_fread(f.get(), &extra, 1) != 0) {
    return Error(StatusCode::kDataLoss, "npz", where,
                 ": member fails its CRC check or is longer than its stated size: ",
                 zip_file_strerror(f.get()));
  }
  return data;
}

}  // namespace

StatusOr<NpzFile> NpzFile::FromBytes(std::string_view bytes, const std::string& name) {
  if (bytes.empty()) {  // libzip would read it as an empty archive
    return Error(StatusCode::kDataLoss, "npz", name, ": empty file, not an .npz archive");
  }
  zip_error_t err;
  zip_error_init(&err);
  // The buffer is not copied: it must outlive the archive, which it does (closed below).
  zip_source_t* src = zip_source_buffer_create(bytes.data(), bytes.size(), 0, &err);
  if (src == nullptr) {
    Status s = Error(StatusCode::kInternal, "npz", name, ": ", zip_error_strerror(&err));
    zip_error_fini(&err);
    return s;
  }
  std::unique_ptr<zip_t, ZipDiscard> za(
      zip_open_from_source(src, ZIP_RDONLY | ZIP_CHECKCONS, &err));
  if (za == nullptr) {
    zip_source_free(src);
    Status s = Error(StatusCode::kDataLoss, "npz", name,
                     ": not a readable .npz (zip) archive: ", zip_error_strerror(&err));
    zip_error_fini(&err);
    return s;
  }
  zip_error_fini(&err);
  const zip_int64_t n = zip_get_num_entries(za.get(), 0);
  if (n < 0 || n > kMaxNpzMembers) {
    return Error(StatusCode::kResourceExhausted, "npz", name, ": ", n, " members (limit ",
                 kMaxNpzMembers, ")");
  }
  NpzFile out;
  out.name_ = name;
  int64_t total = 0;
  for (zip_int64_t i = 0; i < n; ++i) {
    zip_stat_t st;
    zip_stat_init(&st);
    if (zip_stat_index(za.get(), static_cast<zip_uint64_t>(i), 0, &st) != 0 ||
        !(st.valid & ZIP_STAT_NAME) || !(st.valid & ZIP_STAT_SIZE)) {
      return Error(StatusCode::kDataLoss, "npz", name, ": member ", i,
                   " has no readable name or size: ", zip_strerror(za.get()));
    }
    const std::string member = st.name;
    if (!member.empty() && member.back() == '/') continue;  // a directory entry
    const std::string where = name + ":" + member;
    if (member.size() < 5 || member.compare(member.size() - 4, 4, ".npy") != 0) {
      return Error(StatusCode::kDataLoss, "npz", where, ": member is not an .npy array");
    }
    if (st.size > static_cast<zip_uint64_t>(kMaxNpzUncompressedBytes - total)) {
      return Error(StatusCode::kResourceExhausted, "npz", where, ": members expand to more than ",
                   kMaxNpzUncompressedBytes, " bytes");
    }
    total += static_cast<int64_t>(st.size);
    OCULAR_ASSIGN_OR_RETURN(const std::string data,
                            ReadMember(za.get(), i, static_cast<size_t>(st.size), where));
    OCULAR_ASSIGN_OR_RETURN(NpyArray array, ParseNpy(data, where));
    const std::string array_name = member.substr(0, member.size() - 4);
    if (!out.arrays_.emplace(array_name, std::move(array)).second) {
      return Error(StatusCode::kDataLoss, "npz", where, ": array '", array_name, "' appears twice");
    }
  }
  return out;
}

StatusOr<NpzFile> NpzFile::Open(const std::string& path) {
  OCULAR_ASSIGN_OR_RETURN(const std::string bytes, ReadFileBounded(path, kMaxNpzFileBytes, "npz"));
  return FromBytes(bytes, path);
}

const NpyArray* NpzFile::Find(const std::string& array_name) const {
  auto it = arrays_.find(array_name);
  return it == arrays_.end() ? nullptr : &it->second;
}

}  // namespace ocular
