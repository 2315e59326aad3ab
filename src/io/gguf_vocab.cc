#include "io/gguf_vocab.h"

#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>

#include "io/gguf_meta.h"

namespace ocular {

namespace {

// llama.cpp's token types (llama.h llama_token_type), the same numbers as SentencePiece's
// ModelProto.SentencePiece.Type.
enum TokenType : int32_t {
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6
};

// The tokenizer.* keys read here (SentencePiece's besides VocabKeys'); any other is refused.
const GgufKeys& KnownKeys() {
  static const GgufKeys keys =
      VocabKeys({"scores", "add_space_prefix", "remove_extra_whitespaces"});
  return keys;
}

// Protocol-buffer wire format, the few pieces a ModelProto needs (proto2 encoding:
// varint tags (field << 3 | wire type), length-delimited strings and messages, fixed32 floats).
void Varint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}
void Tag(std::string* out, int field, int wire) {
  Varint(out, (static_cast<uint64_t>(field) << 3) | wire);
}
void Bytes(std::string* out, int field, std::string_view bytes) {
  Tag(out, field, 2);
  Varint(out, bytes.size());
  out->append(bytes);
}
void Int(std::string* out, int field, int64_t v) {
  Tag(out, field, 0);
  Varint(out, static_cast<uint64_t>(v));
}
void Float(std::string* out, int field, float v) {
  Tag(out, field, 5);
  char b[4];
  std::memcpy(b, &v, 4);
  out->append(b, 4);
}

Status Refuse(const GgufFile& g, const auto&... what) { return GgufMeta(g).Refuse(what...); }
Status Corrupt(const GgufFile& g, const auto&... what) { return GgufMeta(g).Corrupt(what...); }

// A numeric array of `n` 4-byte elements of type `t`.
StatusOr<const uint8_t*> Array4(const GgufFile& g, std::string_view key, GgufType t, int64_t n) {
  const GgufValue* v = g.Find(key);
  if (v == nullptr) return Corrupt(g, "no metadata '", key, "'");
  if (v->type != GgufType::kArray || v->elem_type != t || v->count != static_cast<uint64_t>(n)) {
    return Corrupt(g, "metadata '", key, "' must be an array of ", n, " ",
                   t == GgufType::kF32 ? "f32" : "i32", " (one per token)");
  }
  return v->elems;
}

// Refuses tokenizer.* keys, models and pre-tokenizers ocular does not read.
Status CheckSupported(const GgufFile& g) {
  for (const auto& [key, value] : g.metadata()) {
    if (key.starts_with("tokenizer.") && !KnownKeys().contains(key)) {
      return Refuse(g, "metadata '", key, "' is not implemented (ocular reads ",
                    "tokenizer.ggml.{model,pre,tokens,scores,token_type,*_token_id,add_*} and ",
                    "tokenizer.chat_template)");
    }
  }
  OCULAR_ASSIGN_OR_RETURN(std::string_view model, g.GetString("tokenizer.ggml.model"));
  if (model != "llama") {
    return Refuse(g, "tokenizer.ggml.model '", model,
                  "' is not implemented (only 'llama', a SentencePiece vocabulary)");
  }
  if (const GgufValue* pre = g.Find("tokenizer.ggml.pre");
      pre != nullptr && (pre->type != GgufType::kString || pre->str != "default")) {
    return Refuse(g, "tokenizer.ggml.pre other than 'default' is not implemented");
  }
  return Status::Ok();
}

// sentencepiece's TrainerSpec (ModelProto field 2): model_type 3 = BPE (2), vocab_size 4,
// byte_fallback 35, unk/bos/eos/pad ids 40..43 and pieces 45..48 (`name`: an id's piece).
std::string TrainerSpec(int64_t n, bool byte_fallback, int32_t unk, int32_t bos, int32_t eos,
                        int32_t pad, const std::function<std::string(int32_t)>& name) {
  std::string trainer;
  Int(&trainer, 3, 2);
  Int(&trainer, 4, n);
  Int(&trainer, 35, byte_fallback ? 1 : 0);
  Int(&trainer, 40, unk);
  Int(&trainer, 41, bos);
  Int(&trainer, 42, eos);
  Int(&trainer, 43, pad);
  Bytes(&trainer, 45, name(unk));
  if (bos >= 0) Bytes(&trainer, 46, name(bos));
  if (eos >= 0) Bytes(&trainer, 47, name(eos));
  if (pad >= 0) Bytes(&trainer, 48, name(pad));
  return trainer;
}

// NormalizerSpec (3): name 1 "identity" (no character map), add_dummy_prefix 3,
// remove_extra_whitespaces 4, escape_whitespaces 5 (spaces become U+2581 as in the pieces).
std::string NormalizerSpec(bool space_prefix, bool squash_spaces) {
  std::string norm;
  Bytes(&norm, 1, "identity");
  Int(&norm, 3, space_prefix ? 1 : 0);
  Int(&norm, 4, squash_spaces ? 1 : 0);
  Int(&norm, 5, 1);
  return norm;
}

// The vocabulary's pieces as SentencePiece ModelProto fields, and its added tokens.
struct Pieces {
  std::string proto;   // the repeated pieces field (1)
  bool bytes = false;  // some piece is a byte piece (byte fallback)
  nlohmann::ordered_json added = nlohmann::ordered_json::object();  // id -> {content, special}
};

// Every token {piece 1, score 2, type 3}. SentencePiece needs exactly one piece of type
// UNKNOWN: the unknown id's (llama.cpp files may mark it CONTROL). End-of-generation pieces
// other than eos go to vocab->extra_eog_ids.
Status AddPieces(const GgufFile& g, const GgufValue& tokens, const uint8_t* scores,
                 const uint8_t* types, int32_t unk, int32_t eot, GgufVocab* vocab, Pieces* out) {
  const int64_t n = static_cast<int64_t>(tokens.strings.size());
  for (int64_t i = 0; i < n; ++i) {
    int32_t type;
    float score;
    std::memcpy(&type, types + 4 * i, 4);
    std::memcpy(&score, scores + 4 * i, 4);
    const std::string_view piece = tokens.strings[static_cast<size_t>(i)];
    if (type < kNormal || type > kByte) {
      return Corrupt(g, "token ", i, " has token_type ", type, " (llama.cpp's are 1..6)");
    }
    if (piece.empty()) return Corrupt(g, "token ", i, " is an empty string");
    if (i == unk) {
      type = kUnknown;
    } else if (type == kUnknown) {
      type = kControl;
    }
    out->bytes |= type == kByte;
    if (type == kControl || type == kUserDefined) {
      out->added[std::to_string(i)] = {{"content", std::string(piece)},
                                       {"special", type == kControl}};
    }
    std::string sp;
    Bytes(&sp, 1, piece);
    Float(&sp, 2, score);
    Int(&sp, 3, type);
    Bytes(&out->proto, 1, sp);
    if (piece == "<end_of_turn>" || piece == "<|eot_id|>" || piece == "<|im_end|>" ||
        piece == "<|end|>" || i == eot) {
      if (i != vocab->eos_id) vocab->extra_eog_ids.push_back(static_cast<int32_t>(i));
    }
  }
  return Status::Ok();
}

}  // namespace

StatusOr<GgufVocab> ReadGgufVocab(const GgufFile& g) {
  const GgufMeta meta(g);
  OCULAR_RETURN_IF_ERROR(CheckSupported(g));
  OCULAR_ASSIGN_OR_RETURN(const bool add_bos,
                          meta.OptionalBool("tokenizer.ggml.add_bos_token", true));
  OCULAR_ASSIGN_OR_RETURN(const bool add_eos,
                          meta.OptionalBool("tokenizer.ggml.add_eos_token", false));
  OCULAR_ASSIGN_OR_RETURN(const bool add_sep,
                          meta.OptionalBool("tokenizer.ggml.add_sep_token", false));
  // llama.cpp's SPM default: a space prefix unless the file says otherwise.
  OCULAR_ASSIGN_OR_RETURN(const bool space_prefix,
                          meta.OptionalBool("tokenizer.ggml.add_space_prefix", true));
  OCULAR_ASSIGN_OR_RETURN(const bool squash_spaces,
                          meta.OptionalBool("tokenizer.ggml.remove_extra_whitespaces", false));
  if (add_eos || add_sep) {
    return Refuse(g, "tokenizer.ggml.add_eos_token / add_sep_token true is not implemented");
  }

  const GgufValue* tokens = g.Find("tokenizer.ggml.tokens");
  if (tokens == nullptr || tokens->type != GgufType::kArray ||
      tokens->elem_type != GgufType::kString || tokens->strings.empty()) {
    return Corrupt(g, "metadata 'tokenizer.ggml.tokens' must be a non-empty array of strings");
  }
  const int64_t n = static_cast<int64_t>(tokens->strings.size());
  OCULAR_ASSIGN_OR_RETURN(const uint8_t* scores,
                          Array4(g, "tokenizer.ggml.scores", GgufType::kF32, n));
  OCULAR_ASSIGN_OR_RETURN(const uint8_t* types,
                          Array4(g, "tokenizer.ggml.token_type", GgufType::kI32, n));
  GgufVocab out;
  out.vocab_size = n;
  OCULAR_ASSIGN_OR_RETURN(out.bos_id, meta.OptionalId("tokenizer.ggml.bos_token_id", n));
  OCULAR_ASSIGN_OR_RETURN(out.eos_id, meta.OptionalId("tokenizer.ggml.eos_token_id", n));
  OCULAR_ASSIGN_OR_RETURN(int32_t unk, meta.OptionalId("tokenizer.ggml.unknown_token_id", n));
  OCULAR_ASSIGN_OR_RETURN(out.pad_id, meta.OptionalId("tokenizer.ggml.padding_token_id", n));
  const int32_t pad = out.pad_id;
  OCULAR_ASSIGN_OR_RETURN(int32_t eot, meta.OptionalId("tokenizer.ggml.eot_token_id", n));
  if (unk < 0) return Refuse(g, "a vocabulary without tokenizer.ggml.unknown_token_id");

  // ModelProto: pieces (1) {piece 1, score 2, type 3}.
  Pieces pieces;
  OCULAR_RETURN_IF_ERROR(AddPieces(g, *tokens, scores, types, unk, eot, &out, &pieces));
  auto name = [&](int32_t id) {
    return id < 0 ? std::string() : std::string(tokens->strings[static_cast<size_t>(id)]);
  };
  Bytes(&pieces.proto, 2, TrainerSpec(n, pieces.bytes, unk, out.bos_id, out.eos_id, pad, name));
  Bytes(&pieces.proto, 3, NormalizerSpec(space_prefix, squash_spaces));
  out.tokenizer_model = std::move(pieces.proto);

  nlohmann::ordered_json cfg = {{"add_bos_token", add_bos}, {"add_eos_token", false}};
  if (out.bos_id >= 0) cfg["bos_token"] = name(out.bos_id);
  if (out.eos_id >= 0) cfg["eos_token"] = name(out.eos_id);
  if (pad >= 0) cfg["pad_token"] = name(pad);
  cfg["unk_token"] = name(unk);
  cfg["added_tokens_decoder"] = std::move(pieces.added);
  if (g.Find("tokenizer.chat_template") != nullptr) {
    OCULAR_ASSIGN_OR_RETURN(std::string_view tmpl, g.GetString("tokenizer.chat_template"));
    cfg["chat_template"] = std::string(tmpl);
  }
  // Pieces are untrusted bytes: invalid UTF-8 is written as U+FFFD rather than thrown on.
  out.tokenizer_config_json = cfg.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return out;
}

}  // namespace ocular
