// Tokenizers that give the same ids as Hugging Face `tokenizers` (tokenizer.json) and
// SentencePiece (tokenizer.model).
//
//   OCULAR_ASSIGN_OR_RETURN(auto tok, Tokenizer::Load("model_dir"));
//   OCULAR_ASSIGN_OR_RETURN(std::vector<int32_t> ids, tok->Encode("caption en\n"));
//   std::string text = tok->Decode(ids, /*skip_special=*/true);
//
// tokenizer.json support (what Gemma / PaliGemma and Llama 3 use; anything else is rejected
// with kUnimplemented at load, never guessed):
//   normalizer     Replace (string or regex), Prepend, Strip, NFC / NFD / NFKC / NFKD
//                  (as tokenizers: Unicode 9.0 data), Sequence, null
//   pre_tokenizer  Split (string or regex; Removed / Isolated / MergedWithPrevious /
//                  MergedWithNext / Contiguous; invert), ByteLevel, Sequence, null
//   model          BPE (merges with ranks, byte_fallback, fuse_unk, ignore_merges,
//                  continuing_subword_prefix, end_of_word_suffix)
//   decoder        Replace, ByteFallback, Fuse, Strip, ByteLevel, Sequence, null
//   added_tokens   matched atomically before the model, leftmost-longest, honouring
//                  single_word / lstrip / rstrip / normalized like `tokenizers` does.
//   post_processor TemplateProcessing, BertProcessing, RobertaProcessing, ByteLevel,
//                  Sequence, null: applied by AddSpecialTokens only (Encode adds nothing).
//
// Thread-safety: a loaded Tokenizer is immutable; all const methods may be called
// concurrently. A StreamingDecoder is single-threaded.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ocular/status.h"

namespace ocular {

class FileSet;

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Loads `dir`/tokenizer.json if present (plus bos/eos/pad names from
  // tokenizer_config.json when that exists), else `dir`/tokenizer.model.
  // Errors: kNotFound (neither file), kInvalidArgument / kDataLoss (malformed),
  // kUnimplemented (a component we do not implement). Messages start with "[tokenizer]".
  static StatusOr<std::unique_ptr<Tokenizer>> Load(const std::string& dir);
  // The same from a directory or the files a GGUF model carries.
  static StatusOr<std::unique_ptr<Tokenizer>> Load(const FileSet& files);

  // From the text of a tokenizer.json. `config_json` (may be empty) is the text of a
  // tokenizer_config.json, used only for the bos/eos/pad token names.
  static StatusOr<std::unique_ptr<Tokenizer>> FromHfJson(std::string_view json,
                                                         std::string_view config_json = {});
  // From the bytes of a SentencePiece ModelProto (tokenizer.model).
  static StatusOr<std::unique_ptr<Tokenizer>> FromSentencePiece(std::string_view model_proto);

  // Text → ids, no BOS/EOS added. Special/added tokens in the text are matched atomically
  // (SentencePiece: user-defined pieces only, as sentencepiece does).
  // Errors: kInvalidArgument if `text` is not valid UTF-8.
  virtual StatusOr<std::vector<int32_t>> Encode(std::string_view text) const = 0;

  // Ids → text exactly as the reference decodes them (HF: decoder chain; SentencePiece:
  // DecodeIds). Ids outside [0, vocab_size()) are skipped. With skip_special, special
  // tokens (HF: added tokens marked special; SentencePiece: control pieces) are dropped.
  // Always returns valid UTF-8 (invalid byte sequences become U+FFFD like the reference).
  virtual std::string Decode(std::span<const int32_t> ids, bool skip_special) const = 0;

  // The id of a vocabulary entry or added token spelled exactly `piece`; -1 if absent.
  virtual int32_t TokenToId(std::string_view piece) const = 0;
  // The vocabulary spelling of `id` ("▁the", "<0x0A>", "<image>"); "" if out of range.
  virtual std::string IdToPiece(int32_t id) const = 0;

  // Special ids; -1 when the vocabulary has no such token.
  int32_t bos_id() const { return bos_id_; }
  int32_t eos_id() const { return eos_id_; }
  int32_t pad_id() const { return pad_id_; }
  // One more than the largest id (model vocabulary and added tokens).
  int32_t vocab_size() const { return vocab_size_; }
  virtual bool IsSpecial(int32_t id) const = 0;
  // The bytes token `id` adds to decoded text, for constrained decoding (text/grammar): a
  // byte-fallback piece "<0x0A>" is that one byte, a byte-level piece its raw bytes (possibly
  // half a UTF-8 character), "▁" a space. nullopt for special / control tokens, the unknown
  // piece and ids out of range (they are never allowed by a grammar).
  virtual std::optional<std::string> TokenBytes(int32_t id) const = 0;

  // `ids` (one text's Encode) with the special tokens the tokenizer adds when transformers
  // calls it with add_special_tokens=True: tokenizer.json's post_processor; but for the Gemma
  // and Llama tokenizer classes (tokenizer_config.json's tokenizer_class), which rebuild it
  // from add_bos_token / add_eos_token (default true / false; GemmaTokenizerFast and
  // LlamaTokenizerFast update_post_processor), BOS and EOS by those flags. A SentencePiece
  // tokenizer (no tokenizer.json): those flags too, as the slow tokenizers do.
  std::vector<int32_t> AddSpecialTokens(std::span<const int32_t> ids) const;

  // For `ocular tokenize`: the pieces of `ids` (IdToPiece of each).
  std::vector<std::string> Pieces(std::span<const int32_t> ids) const;

 protected:
  // Sets bos/eos/pad from the first name in each list that TokenToId knows.
  void ResolveSpecialIds(std::span<const std::string> bos, std::span<const std::string> eos,
                         std::span<const std::string> pad);

  // BOS / EOS around the text per add_bos_token / add_eos_token of `config` (tokenizer_config
  // .json, may be null); kInvalidArgument when one is asked for but the vocabulary lacks it.
  Status SetSpecialTokensFromFlags(const nlohmann::json& config);

  std::vector<int32_t> special_prefix_;  // AddSpecialTokens: before the text's ids
  std::vector<int32_t> special_suffix_;  // and after them
  int32_t bos_id_ = -1;
  int32_t eos_id_ = -1;
  int32_t pad_id_ = -1;
  int32_t vocab_size_ = 0;
};

// Turns ids arriving one at a time into text chunks. Every chunk is valid UTF-8 and never
// ends in the middle of a character (byte-fallback / byte-level pieces are held back until
// their character is complete), and Put(...)... + Finish() equals
// tokenizer.Decode(all ids, skip_special).
// REQUIRES: `tokenizer` outlives the decoder.
class StreamingDecoder {
 public:
  StreamingDecoder(const Tokenizer& tokenizer, bool skip_special)
      : tokenizer_(tokenizer), skip_special_(skip_special) {}

  // Adds one id; returns the text that became final (possibly empty).
  std::string Put(int32_t id);
  // Returns whatever is still held back (e.g. U+FFFD for an unfinished byte sequence).
  std::string Finish();

 private:
  std::string DecodeRange(size_t begin, size_t end) const;

  const Tokenizer& tokenizer_;
  bool skip_special_;
  std::vector<int32_t> ids_;
  size_t prefix_offset_ = 0;  // ids_[prefix_offset_, read_offset_) decode to emitted text
  size_t read_offset_ = 0;    // ids_ before this are fully emitted
};

}  // namespace ocular
