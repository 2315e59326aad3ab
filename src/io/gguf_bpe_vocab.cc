#include "io/gguf_bpe_vocab.h"

#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "io/gguf_meta.h"

namespace ocular {

namespace {

using json = nlohmann::ordered_json;

// llama.cpp's token types (llama.h llama_token_type).
enum TokenType : int32_t { kNormal = 1, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

// The tokenizer.* keys read here (BPE's merges besides VocabKeys'); any other is refused.
const GgufKeys& KnownKeys() {
  static const GgufKeys keys = VocabKeys({"merges"});
  return keys;
}

// llama-vocab.cpp LLAMA_VOCAB_PRE_TYPE_QWEN2's regex, as Qwen2's tokenizer.json writes it
// (llama.cpp spells the case-insensitive group out; the two match the same text).
constexpr const char* kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

Status Refuse(const GgufFile& g, const auto&... what) { return GgufMeta(g).Refuse(what...); }
Status Corrupt(const GgufFile& g, const auto&... what) { return GgufMeta(g).Corrupt(what...); }

const GgufValue* StringArray(const GgufFile& g, std::string_view key) {
  const GgufValue* v = g.Find(key);
  if (v == nullptr || v->type != GgufType::kArray || v->elem_type != GgufType::kString) {
    return nullptr;
  }
  return v;
}

Status CheckSupported(const GgufFile& g) {
  const GgufMeta meta(g);
  for (const auto& [key, value] : g.metadata()) {
    if (key.starts_with("tokenizer.") && !KnownKeys().contains(key)) {
      return Refuse(g, "metadata '", key, "' is not implemented for a gpt2 (BPE) vocabulary");
    }
  }
  OCULAR_ASSIGN_OR_RETURN(std::string_view model, g.GetString("tokenizer.ggml.model"));
  if (model != "gpt2") {
    return Refuse(g, "tokenizer.ggml.model '", model, "' is not implemented here (only 'gpt2')");
  }
  OCULAR_ASSIGN_OR_RETURN(std::string_view pre, g.GetString("tokenizer.ggml.pre"));
  if (pre != "qwen2") {
    return Refuse(g, "tokenizer.ggml.pre '", pre, "' is not implemented (only 'qwen2')");
  }
  for (const char* key : {"tokenizer.ggml.add_eos_token", "tokenizer.ggml.add_sep_token"}) {
    OCULAR_ASSIGN_OR_RETURN(const bool on, meta.OptionalBool(key, false));
    if (on) return Refuse(g, key, " = true is not implemented");
  }
  return Status::Ok();
}

json PreTokenizer() {
  return {{"type", "Sequence"},
          {"pretokenizers",
           {{{"type", "Split"},
             {"pattern", {{"Regex", kQwen2Pattern}}},
             {"behavior", "Isolated"},
             {"invert", false}},
            {{"type", "ByteLevel"},
             {"add_prefix_space", false},
             {"trim_offsets", false},
             {"use_regex", false}}}}};
}

// vocab (normal and byte tokens), added_tokens (control, user-defined) and
// added_tokens_decoder; unused ids (the converter's [PAD<i>] fillers up to the embedding's
// rows) are left out, as HF's tokenizer has no such ids.
Status Tokens(const GgufFile& g, const GgufValue& tokens, json* vocab, json* added, json* decoder) {
  const int64_t n = static_cast<int64_t>(tokens.strings.size());
  const GgufValue* types = g.Find("tokenizer.ggml.token_type");
  if (types == nullptr || types->type != GgufType::kArray || types->elem_type != GgufType::kI32 ||
      types->count != static_cast<uint64_t>(n)) {
    return Corrupt(g, "metadata 'tokenizer.ggml.token_type' must be an array of ", n,
                   " i32 (one per token)");
  }
  for (int64_t i = 0; i < n; ++i) {
    int32_t type;
    std::memcpy(&type, types->elems + 4 * i, 4);
    const std::string piece(tokens.strings[static_cast<size_t>(i)]);
    if (type < kNormal || type > kByte) {
      return Corrupt(g, "token ", i, " has token_type ", type, " (llama.cpp's are 1..6)");
    }
    if (type == kUnused) continue;
    if (piece.empty()) return Corrupt(g, "token ", i, " is an empty string");
    if (type == kControl || type == kUserDefined) {
      const bool special = type == kControl;
      added->push_back({{"id", i},
                        {"content", piece},
                        {"single_word", false},
                        {"lstrip", false},
                        {"rstrip", false},
                        {"normalized", !special},
                        {"special", special}});
      (*decoder)[std::to_string(i)] = {{"content", piece}, {"special", special}};
      continue;
    }
    (*vocab)[piece] = i;
  }
  return Status::Ok();
}

}  // namespace

StatusOr<GgufVocab> ReadGgufBpeVocab(const GgufFile& g) {
  const GgufMeta meta(g);
  OCULAR_RETURN_IF_ERROR(CheckSupported(g));
  const GgufValue* tokens = StringArray(g, "tokenizer.ggml.tokens");
  if (tokens == nullptr || tokens->strings.empty()) {
    return Corrupt(g, "metadata 'tokenizer.ggml.tokens' must be a non-empty array of strings");
  }
  const GgufValue* merges = StringArray(g, "tokenizer.ggml.merges");
  if (merges == nullptr) {
    return Corrupt(g, "metadata 'tokenizer.ggml.merges' must be an array of strings");
  }
  const int64_t n = static_cast<int64_t>(tokens->strings.size());
  GgufVocab out;
  out.vocab_size = n;
  OCULAR_ASSIGN_OR_RETURN(out.bos_id, meta.OptionalId("tokenizer.ggml.bos_token_id", n));
  OCULAR_ASSIGN_OR_RETURN(out.eos_id, meta.OptionalId("tokenizer.ggml.eos_token_id", n));
  OCULAR_ASSIGN_OR_RETURN(out.pad_id, meta.OptionalId("tokenizer.ggml.padding_token_id", n));
  OCULAR_ASSIGN_OR_RETURN(const int32_t eot, meta.OptionalId("tokenizer.ggml.eot_token_id", n));
  OCULAR_ASSIGN_OR_RETURN(const int32_t unk, meta.OptionalId("tokenizer.ggml.unknown_token_id", n));
  if (unk >= 0) return Refuse(g, "an unknown token (byte-level BPE has none) is not implemented");
  // llama-vocab.cpp: gpt2 vocabularies add no BOS unless the file says so.
  OCULAR_ASSIGN_OR_RETURN(const bool add_bos,
                          meta.OptionalBool("tokenizer.ggml.add_bos_token", false));

  json vocab = json::object(), added = json::array(), decoder = json::object();
  OCULAR_RETURN_IF_ERROR(Tokens(g, *tokens, &vocab, &added, &decoder));
  for (int64_t i = 0; i < n; ++i) {
    const std::string_view piece = tokens->strings[static_cast<size_t>(i)];
    if (piece == "<|im_end|>" || piece == "<|endoftext|>" || i == eot) {
      if (i != out.eos_id) out.extra_eog_ids.push_back(static_cast<int32_t>(i));
    }
  }
  json merge_list = json::array();
  for (std::string_view m : merges->strings) merge_list.push_back(std::string(m));
  json tok = {{"version", "1.0"},
              {"truncation", nullptr},
              {"padding", nullptr},
              {"added_tokens", std::move(added)},
              {"normalizer", nullptr},
              {"pre_tokenizer", PreTokenizer()},
              {"post_processor", nullptr},
              {"decoder",
               {{"type", "ByteLevel"},
                {"add_prefix_space", false},
                {"trim_offsets", false},
                {"use_regex", false}}},
              {"model",
               {{"type", "BPE"},
                {"dropout", nullptr},
                {"unk_token", nullptr},
                {"continuing_subword_prefix", nullptr},
                {"end_of_word_suffix", nullptr},
                {"fuse_unk", false},
                {"byte_fallback", false},
                {"ignore_merges", false},
                {"vocab", std::move(vocab)},
                {"merges", std::move(merge_list)}}}};
  // Pieces are untrusted bytes: invalid UTF-8 is written as U+FFFD rather than thrown on.
  constexpr auto kReplace = nlohmann::json::error_handler_t::replace;
  out.tokenizer_json = tok.dump(-1, ' ', false, kReplace);

  auto name = [&](int32_t id) { return std::string(tokens->strings[static_cast<size_t>(id)]); };
  json cfg = {{"add_bos_token", add_bos}, {"add_eos_token", false}};
  cfg["bos_token"] = out.bos_id >= 0 ? json(name(out.bos_id)) : json(nullptr);
  if (out.eos_id >= 0) cfg["eos_token"] = name(out.eos_id);
  if (out.pad_id >= 0) cfg["pad_token"] = name(out.pad_id);
  cfg["added_tokens_decoder"] = std::move(decoder);
  if (g.Find("tokenizer.chat_template") != nullptr) {
    OCULAR_ASSIGN_OR_RETURN(std::string_view tmpl, g.GetString("tokenizer.chat_template"));
    cfg["chat_template"] = std::string(tmpl);
  }
  out.tokenizer_config_json = cfg.dump(-1, ' ', false, kReplace);
  return out;
}

}  // namespace ocular
