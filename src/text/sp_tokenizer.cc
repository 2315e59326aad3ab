#include "text/sp_tokenizer.h"

#include <sentencepiece_processor.h>

#include <algorithm>
#include <exception>
#include <string>
#include <unordered_map>

#include "text/utf8.h"

namespace ocular::text {
namespace {

// LoadFromSerializedProto, whose trie builder (darts-clone) throws on some malformed models (a
// zero-length piece: "failed to insert key") instead of returning a status.
Status LoadProto(std::string_view proto, sentencepiece::SentencePieceProcessor* sp) {
  std::string why;
  try {
    const auto status = sp->LoadFromSerializedProto(proto);
    if (status.ok()) return Status::Ok();
    why = status.ToString();
  } catch (const std::exception& e) {
    why = e.what();
  }
  return Error(StatusCode::kInvalidArgument, "tokenizer",
               "tokenizer.model is not a valid SentencePiece model: ", why);
}

class SentencePieceTokenizer final : public Tokenizer {
 public:
  static StatusOr<std::unique_ptr<Tokenizer>> Create(
      std::string_view proto, std::vector<std::pair<std::string, int32_t>> atomic) {
    auto tok = std::make_unique<SentencePieceTokenizer>();
    OCULAR_RETURN_IF_ERROR(LoadProto(proto, &tok->sp_));
    tok->vocab_size_ = tok->sp_.GetPieceSize();
    if (tok->vocab_size_ <= 0) {
      return Error(StatusCode::kInvalidArgument, "tokenizer", "tokenizer.model has no pieces");
    }
    tok->bos_id_ = tok->sp_.bos_id();
    tok->eos_id_ = tok->sp_.eos_id();
    tok->pad_id_ = tok->sp_.pad_id();
    // Longest first within each first byte, so the first match found is the longest.
    std::sort(atomic.begin(), atomic.end(),
              [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
    for (auto& [content, id] : atomic) {
      if (content.empty() || id < 0 || id >= tok->vocab_size_) continue;
      tok->atomic_[static_cast<unsigned char>(content[0])].emplace_back(std::move(content), id);
    }
    return std::unique_ptr<Tokenizer>(std::move(tok));
  }

  StatusOr<std::vector<int32_t>> Encode(std::string_view text) const override {
    if (const size_t bad = FindInvalidUtf8(text); bad != std::string_view::npos) {
      return Error(StatusCode::kInvalidArgument, "tokenizer", "input is not valid UTF-8 (byte ",
                   bad, " of ", text.size(), ")");
    }
    std::vector<int32_t> out;
    size_t begin = 0;  // of the text not yet encoded
    for (size_t i = 0; i < text.size() && !atomic_.empty(); ++i) {
      const auto it = atomic_.find(static_cast<unsigned char>(text[i]));
      if (it == atomic_.end()) continue;
      for (const auto& [content, id] : it->second) {
        if (text.compare(i, content.size(), content) != 0) continue;
        OCULAR_RETURN_IF_ERROR(EncodePlain(text.substr(begin, i - begin), &out));
        out.push_back(id);
        begin = i + content.size();
        i = begin - 1;
        break;
      }
    }
    OCULAR_RETURN_IF_ERROR(EncodePlain(text.substr(begin), &out));
    return out;
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
  std::optional<std::string> TokenBytes(int32_t id) const override {
    if (id < 0 || id >= vocab_size_ || sp_.IsControl(id) || sp_.IsUnknown(id)) return std::nullopt;
    std::string piece = sp_.IdToPiece(id);
    if (sp_.IsByte(id) && piece.size() == 6) {  // "<0x0A>"
      return std::string(1, static_cast<char>(std::stoi(piece.substr(3, 2), nullptr, 16)));
    }
    std::string bytes;  // the piece with each U+2581 (3 bytes) turned back into a space
    bytes.reserve(piece.size());
    for (size_t i = 0; i < piece.size(); ++i) {
      if (piece.compare(i, 3, "\xe2\x96\x81") == 0) {
        bytes += ' ';
        i += 2;
      } else {
        bytes += piece[i];
      }
    }
    return bytes.empty() ? std::nullopt : std::optional<std::string>(bytes);
  }
  bool IsSpecial(int32_t id) const override {
    return id >= 0 && id < vocab_size_ && sp_.IsControl(id);
  }

 private:
  Status EncodePlain(std::string_view text, std::vector<int32_t>* out) const {
    if (text.empty()) return Status::Ok();
    std::vector<int> ids;
    const auto status = sp_.Encode(text, &ids);
    if (!status.ok()) {
      return Error(StatusCode::kInternal, "tokenizer", "sentencepiece: ", status.ToString());
    }
    out->insert(out->end(), ids.begin(), ids.end());
    return Status::Ok();
  }

  sentencepiece::SentencePieceProcessor sp_;
  // Atomic tokens by first byte, longest first.
  std::unordered_map<unsigned char, std::vector<std::pair<std::string, int32_t>>> atomic_;
};

}  // namespace

StatusOr<std::unique_ptr<Tokenizer>> LoadSentencePieceTokenizer(
    std::string_view model_proto, std::vector<std::pair<std::string, int32_t>> atomic) {
  return SentencePieceTokenizer::Create(model_proto, std::move(atomic));
}

StatusOr<std::vector<SentencePiece>> SentencePieces(std::string_view model_proto) {
  sentencepiece::SentencePieceProcessor sp;
  OCULAR_RETURN_IF_ERROR(LoadProto(model_proto, &sp));
  std::vector<SentencePiece> out(static_cast<size_t>(sp.GetPieceSize()));
  for (int id = 0; id < sp.GetPieceSize(); ++id) {
    SentencePiece& p = out[static_cast<size_t>(id)];
    p.piece = sp.IdToPiece(id);
    p.score = sp.GetScore(id);
    // The converter's order of tests: unknown, control, unused, byte, else normal.
    p.type = sp.IsUnknown(id)   ? 2
             : sp.IsControl(id) ? 3
             : sp.IsUnused(id)  ? 5
             : sp.IsByte(id)    ? 6
                                : 1;
  }
  return out;
}

}  // namespace ocular::text
