#include "text/sp_tokenizer.h"

#include <sentencepiece_processor.h>

#include "text/utf8.h"

namespace ocular::text {
namespace {

class SentencePieceTokenizer final : public Tokenizer {
 public:
  static StatusOr<std::unique_ptr<Tokenizer>> Create(std::string_view proto) {
    auto tok = std::make_unique<SentencePieceTokenizer>();
    const auto status = tok->sp_.LoadFromSerializedProto(proto);
    if (!status.ok()) {
      return Error(StatusCode::kInvalidArgument, "tokenizer",
                   "tokenizer.model is not a valid SentencePiece model: ", status.ToString());
    }
    tok->vocab_size_ = tok->sp_.GetPieceSize();
    if (tok->vocab_size_ <= 0) {
      return Error(StatusCode::kInvalidArgument, "tokenizer", "tokenizer.model has no pieces");
    }
    tok->bos_id_ = tok->sp_.bos_id();
    tok->eos_id_ = tok->sp_.eos_id();
    tok->pad_id_ = tok->sp_.pad_id();
    return std::unique_ptr<Tokenizer>(std::move(tok));
  }

  StatusOr<std::vector<int32_t>> Encode(std::string_view text) const override {
    if (const size_t bad = FindInvalidUtf8(text); bad != std::string_view::npos) {
      return Error(StatusCode::kInvalidArgument, "tokenizer", "input is not valid UTF-8 (byte ",
                   bad, " of ", text.size(), ")");
    }
    std::vector<int> ids;
    const auto status = sp_.Encode(text, &ids);
    if (!status.ok()) {
      return Error(StatusCode::kInternal, "tokenizer", "sentencepiece: ", status.ToString());
    }
    return std::vector<int32_t>(ids.begin(), ids.end());
  }

  std::string Decode(std::span<const int32_t> ids, bool skip_special) const override {
    // DecodeIds drops control pieces itself; keep them as text when !skip_special so both
    // tokenizer kinds share one contract.
    std::vector<int> run;
    std::string out, piece_text;
    auto flush = [&] {
      if (run.empty()) return;
      if (sp_.Decode(run, &piece_text).ok()) out += piece_text;
      run.clear();
    };
    for (int32_t id : ids) {
      if (id < 0 || id >= vocab_size_) continue;
      if (sp_.IsControl(id)) {
        if (skip_special) continue;
        flush();
        out += sp_.IdToPiece(id);
        continue;
      }
      run.push_back(id);
    }
    flush();
    return out;
  }

  int32_t TokenToId(std::string_view piece) const override {
    const int id = sp_.PieceToId(piece);
    // PieceToId answers unk_id for unknown pieces.
    return id == sp_.unk_id() && piece != sp_.IdToPiece(id) ? -1 : id;
  }
  std::string IdToPiece(int32_t id) const override {
    return id < 0 || id >= vocab_size_ ? std::string() : sp_.IdToPiece(id);
  }
  bool IsSpecial(int32_t id) const override {
    return id >= 0 && id < vocab_size_ && sp_.IsControl(id);
  }

 private:
  sentencepiece::SentencePieceProcessor sp_;
};

}  // namespace

StatusOr<std::unique_ptr<Tokenizer>> LoadSentencePieceTokenizer(std::string_view model_proto) {
  return SentencePieceTokenizer::Create(model_proto);
}

}  // namespace ocular::text
