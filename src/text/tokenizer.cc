#include "text/tokenizer.h"

#include <climits>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <tuple>

#include "core/file_io.h"
#include "core/file_set.h"
#include "text/hf_tokenizer.h"
#include "text/sp_tokenizer.h"

namespace ocular {
namespace {

// A tokenizer file whose content the parser rejects is a corrupt file (kDataLoss, exit 4);
// the string-level API calls the same content an invalid argument. Names the file.
Status FileError(const Status& s, const std::string& path) {
  const StatusCode code =
      s.code() == StatusCode::kInvalidArgument ? StatusCode::kDataLoss : s.code();
  return Status(code, StrCat(s.message(), " (", path, ")"));
}

// The sentencepiece decoder emits U+FFFD for incomplete byte pieces, as does ByteFallback.
bool EndsWithReplacement(std::string_view s) { return s.ends_with("\xEF\xBF\xBD"); }

// tokenizer_config.json's "added_tokens_decoder" {"id": {"content": ...}}: the tokens HF's slow
// (SentencePiece) tokenizers split the text on before the model runs.
StatusOr<std::vector<std::pair<std::string, int32_t>>> AddedTokens(const std::string& text,
                                                                   const std::string& path) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return Error(StatusCode::kDataLoss, "tokenizer", path, ": not a JSON object");
  }
  std::vector<std::pair<std::string, int32_t>> out;
  const auto it = j.find("added_tokens_decoder");
  if (it == j.end() || it->is_null()) return out;
  if (!it->is_object()) {
    return Error(StatusCode::kDataLoss, "tokenizer", path,
                 ": added_tokens_decoder is not an object");
  }
  for (const auto& [key, entry] : it->items()) {
    char* end = nullptr;
    const long id = std::strtol(key.c_str(), &end, 10);
    if (key.empty() || *end != '\0' || id < 0 || id > INT32_MAX || !entry.is_object() ||
        !entry.contains("content") || !entry["content"].is_string()) {
      return Error(StatusCode::kDataLoss, "tokenizer", path, ": added_tokens_decoder entry '",
                   key.substr(0, 20), "' is not {\"content\": string} under a token id");
    }
    out.emplace_back(entry["content"].get<std::string>(), static_cast<int32_t>(id));
  }
  return out;
}

}  // namespace

StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::Load(const std::string& dir) {
  return Load(DirectoryFiles(dir));
}

StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::Load(const FileSet& files) {
  if (files.Has("tokenizer.json")) {
    OCULAR_ASSIGN_OR_RETURN(std::string json,
                            files.Read("tokenizer.json", kMaxTokenizerFileBytes, "tokenizer"));
    std::string config;
    if (files.Has("tokenizer_config.json")) {
      OCULAR_ASSIGN_OR_RETURN(
          config, files.Read("tokenizer_config.json", kMaxTokenizerFileBytes, "tokenizer"));
    }
    auto tok = FromHfJson(json, config);
    if (!tok.ok()) return FileError(tok.status(), files.Where("tokenizer.json"));
    return tok;
  }
  if (files.Has("tokenizer.model")) {
    OCULAR_ASSIGN_OR_RETURN(std::string proto,
                            files.Read("tokenizer.model", kMaxTokenizerFileBytes, "tokenizer"));
    std::vector<std::pair<std::string, int32_t>> atomic;
    std::string config;
    if (files.Has("tokenizer_config.json")) {
      OCULAR_ASSIGN_OR_RETURN(
          config, files.Read("tokenizer_config.json", kMaxTokenizerFileBytes, "tokenizer"));
      OCULAR_ASSIGN_OR_RETURN(atomic, AddedTokens(config, files.Where("tokenizer_config.json")));
    }
    auto tok = text::LoadSentencePieceTokenizer(proto, std::move(atomic));
    if (!tok.ok()) return FileError(tok.status(), files.Where("tokenizer.model"));
    // AddedTokens checked that the config parses as an object.
    const nlohmann::json flags =
        config.empty() ? nlohmann::json() : nlohmann::json::parse(config, nullptr, false);
    if (Status s = (*tok)->SetSpecialTokensFromFlags(flags); !s.ok()) {
      return FileError(s, files.Where("tokenizer_config.json"));
    }
    return tok;
  }
  return Error(StatusCode::kNotFound, "tokenizer", files.origin(),
               ": has neither tokenizer.json nor tokenizer.model");
}

StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromHfJson(std::string_view json,
                                                           std::string_view config_json) {
  return text::LoadHfTokenizer(json, config_json);
}

StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromSentencePiece(std::string_view model_proto) {
  OCULAR_ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> tok,
                          text::LoadSentencePieceTokenizer(model_proto));
  OCULAR_RETURN_IF_ERROR(tok->SetSpecialTokensFromFlags(nlohmann::json()));
  return tok;
}

std::vector<std::string> Tokenizer::Pieces(std::span<const int32_t> ids) const {
  std::vector<std::string> pieces;
  pieces.reserve(ids.size());
  for (int32_t id : ids) pieces.push_back(IdToPiece(id));
  return pieces;
}

std::vector<int32_t> Tokenizer::AddSpecialTokens(std::span<const int32_t> ids) const {
  std::vector<int32_t> out = special_prefix_;
  out.insert(out.end(), ids.begin(), ids.end());
  out.insert(out.end(), special_suffix_.begin(), special_suffix_.end());
  return out;
}

Status Tokenizer::SetSpecialTokensFromFlags(const nlohmann::json& config) {
  special_prefix_.clear();
  special_suffix_.clear();
  for (auto [key, fallback, id, out] :
       {std::tuple{"add_bos_token", true, bos_id_, &special_prefix_},
        std::tuple{"add_eos_token", false, eos_id_, &special_suffix_}}) {
    bool on = fallback;
    if (config.is_object()) {
      auto it = config.find(key);
      if (it != config.end() && !it->is_null()) {
        if (!it->is_boolean()) {
          return Error(StatusCode::kInvalidArgument, "tokenizer", "tokenizer_config.json: '", key,
                       "' must be a bool");
        }
        on = it->get<bool>();
      }
    }
    if (!on) continue;
    // update_post_processor: "add_bos_token = True but bos_token = None" is an error there too.
    if (id < 0) {
      return Error(StatusCode::kInvalidArgument, "tokenizer", "tokenizer_config.json: ", key,
                   " is true but the vocabulary has no such token");
    }
    out->push_back(id);
  }
  return Status::Ok();
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
