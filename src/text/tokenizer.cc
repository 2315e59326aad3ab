#include "text/tokenizer.h"

#include <filesystem>

#include "core/file_io.h"
#include "text/hf_tokenizer.h"
#include "text/sp_tokenizer.h"

namespace ocular {
namespace {

// Bounded and regular-file-checked: a FIFO or a link to /dev/zero is an error, not a hang.
StatusOr<std::string> ReadFile(const std::filesystem::path& path) {
  return ReadFileBounded(path.string(), kMaxTokenizerFileBytes, "tokenizer");
}

// True if `path` names anything (a file, a FIFO, a dangling link): such a name is read, and
// ReadFile reports what is wrong with it, rather than silently falling back to another file.
bool Present(const std::filesystem::path& path) {
  std::error_code ec;
  return std::filesystem::symlink_status(path, ec).type() != std::filesystem::file_type::not_found &&
         !ec;
}

// A tokenizer file whose content the parser rejects is a corrupt file (kDataLoss, exit 4);
// the string-level API calls the same content an invalid argument. Names the file.
Status FileError(const Status& s, const std::filesystem::path& path) {
  const StatusCode code =
      s.code() == StatusCode::kInvalidArgument ? StatusCode::kDataLoss : s.code();
  return Status(code, StrCat(s.message(), " (", path.string(), ")"));
}

// The sentencepiece decoder emits U+FFFD for incomplete byte pieces, as does ByteFallback.
bool EndsWithReplacement(std::string_view s) { return s.ends_with("\xEF\xBF\xBD"); }

}  // namespace

StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::Load(const std::string& dir) {
  namespace fs = std::filesystem;
  const fs::path json_path = fs::path(dir) / "tokenizer.json";
  const fs::path model_path = fs::path(dir) / "tokenizer.model";
  if (Present(json_path)) {
    OCULAR_ASSIGN_OR_RETURN(std::string json, ReadFile(json_path));
    std::string config;
    const fs::path config_path = fs::path(dir) / "tokenizer_config.json";
    if (Present(config_path)) {
      OCULAR_ASSIGN_OR_RETURN(config, ReadFile(config_path));
    }
    auto tok = FromHfJson(json, config);
    if (!tok.ok()) return FileError(tok.status(), json_path);
    return tok;
  }
  if (Present(model_path)) {
    OCULAR_ASSIGN_OR_RETURN(std::string proto, ReadFile(model_path));
    auto tok = FromSentencePiece(proto);
    if (!tok.ok()) return FileError(tok.status(), model_path);
    return tok;
  }
  return Error(StatusCode::kNotFound, "tokenizer", dir,
               ": has neither tokenizer.json nor tokenizer.model");
}

StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromHfJson(std::string_view json,
                                                           std::string_view config_json) {
  return text::LoadHfTokenizer(json, config_json);
}

StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromSentencePiece(std::string_view model_proto) {
  return text::LoadSentencePieceTokenizer(model_proto);
}

std::vector<std::string> Tokenizer::Pieces(std::span<const int32_t> ids) const {
  std::vector<std::string> pieces;
  pieces.reserve(ids.size());
  for (int32_t id : ids) pieces.push_back(IdToPiece(id));
  return pieces;
}

void Tokenizer::ResolveSpecialIds(std::span<const std::string> bos,
                                  std::span<const std::string> eos,
                                  std::span<const std::string> pad) {
  auto first = [&](std::span<const std::string> names) {
    for (const auto& n : names) {
      if (n.empty()) continue;
      const int32_t id = TokenToId(n);
      if (id >= 0) return id;
    }
    return -1;
  };
  bos_id_ = first(bos);
  eos_id_ = first(eos);
  pad_id_ = first(pad);
}

// The incremental scheme of tokenizers' DecodeStream: decode a small window of ids twice
// (without and with the new ids) and emit the difference once it no longer ends in U+FFFD.
std::string StreamingDecoder::DecodeRange(size_t begin, size_t end) const {
  return tokenizer_.Decode(std::span<const int32_t>(ids_).subspan(begin, end - begin),
                           skip_special_);
}

std::string StreamingDecoder::Put(int32_t id) {
  ids_.push_back(id);
  const std::string prefix = DecodeRange(prefix_offset_, read_offset_);
  const std::string full = DecodeRange(prefix_offset_, ids_.size());
  if (full.size() <= prefix.size() || EndsWithReplacement(full) || !full.starts_with(prefix)) {
    return "";
  }
  prefix_offset_ = read_offset_;
  read_offset_ = ids_.size();
  return full.substr(prefix.size());
}

std::string StreamingDecoder::Finish() {
  const std::string prefix = DecodeRange(prefix_offset_, read_offset_);
  const std::string full = DecodeRange(prefix_offset_, ids_.size());
  prefix_offset_ = read_offset_ = ids_.size();
  return full.starts_with(prefix) ? full.substr(prefix.size()) : std::string();
}

}  // namespace ocular
