// The encode/decode pipeline of huggingface/tokenizers · tokenizers/src/tokenizer/mod.rs and
// added_vocabulary.rs: added tokens are cut out of the raw text (normalized=false) or of the
// normalized text (normalized=true), the rest is normalized, pre-tokenized and run through
// the model.
#include "text/hf_tokenizer.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <unordered_map>
#include <unordered_set>

#include "core/file_io.h"
#include "text/bpe_model.h"
#include "text/hf_components.h"
#include "text/post_processor.h"
#include "text/regex.h"
#include "text/utf8.h"

namespace ocular::text {
namespace {

using nlohmann::json;

struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = true;
  bool special = false;
};

// Leftmost-longest matching of a set of strings (the AhoCorasick MatchKind::LeftmostLongest
// semantics `tokenizers` uses), as a byte trie.
class TokenTrie {
 public:
  void Add(std::string_view s, int index) {
    if (s.empty()) return;
    int node = 0;
    for (unsigned char b : s) {
      const uint64_t key = (static_cast<uint64_t>(node) << 8) | b;
      auto it = edges_.find(key);
      if (it == edges_.end()) {
        terminal_.push_back(-1);
        it = edges_.emplace(key, static_cast<int>(terminal_.size()) - 1).first;
      }
      node = it->second;
    }
    if (terminal_[node] < 0) terminal_[node] = index;  // first added wins on duplicates
  }
  // Longest entry starting at s[pos]: sets *end and returns its index, or -1.
  int LongestAt(std::string_view s, size_t pos, size_t* end) const {
    int node = 0, best = -1;
    for (size_t i = pos; i < s.size(); ++i) {
      auto it = edges_.find((static_cast<uint64_t>(node) << 8) | static_cast<unsigned char>(s[i]));
      if (it == edges_.end()) break;
      node = it->second;
      if (terminal_[node] >= 0) {
        best = terminal_[node];
        *end = i + 1;
      }
    }
    return best;
  }
  bool empty() const { return edges_.empty(); }

 private:
  std::unordered_map<uint64_t, int> edges_;
  std::vector<int> terminal_ = {-1};  // per node: index of the entry ending here
};

// A piece of input: either text still to be processed or an added token's id.
struct Segment {
  std::string text;
  int32_t id = -1;
};

class HfTokenizer final : public Tokenizer {
 public:
  static StatusOr<std::unique_ptr<Tokenizer>> Create(const json& root, const json& config);

  StatusOr<std::vector<int32_t>> Encode(std::string_view text) const override;
  std::string Decode(std::span<const int32_t> ids, bool skip_special) const override;
  int32_t TokenToId(std::string_view piece) const override;
  std::string IdToPiece(int32_t id) const override;
  std::optional<std::string> TokenBytes(int32_t id) const override;
  bool IsSpecial(int32_t id) const override {
    auto it = added_by_id_.find(id);
    return it != added_by_id_.end() && added_[it->second].special;
  }

 private:
  void SplitAdded(std::string_view s, const TokenTrie& trie, std::vector<Segment>* out) const;
  Status SetPostProcessor(const json& post_processor, const json& config);

  std::unique_ptr<Normalizer> normalizer_;
  std::unique_ptr<PreTokenizer> pre_tokenizer_;
  std::unique_ptr<Decoder> decoder_;
  std::optional<BpeModel> model_;
  std::vector<AddedToken> added_;
  std::unordered_map<int32_t, size_t> added_by_id_;
  std::unordered_map<std::string, int32_t> added_by_content_;
  TokenTrie raw_trie_;         // normalized == false, matched on the input
  TokenTrie normalized_trie_;  // normalized == true, matched on normalized text
  std::optional<Regex> word_char_;
  bool byte_level_ = false;  // the decoder has a ByteLevel step (GPT-2 byte characters)
};

// Whether a decoder (or a step of a Sequence) is ByteLevel.
bool HasByteLevelDecoder(const json& j) {
  if (!j.is_object()) return false;
  if (j.value("type", "") == "ByteLevel") return true;
  auto parts = j.find("decoders");
  if (parts == j.end() || !parts->is_array()) return false;
  return std::any_of(parts->begin(), parts->end(), HasByteLevelDecoder);
}

// "<0x0A>" -> 0x0A (the byte-fallback spelling); -1 for anything else.
int ByteFallbackValue(std::string_view piece) {
  if (piece.size() != 6 || piece.substr(0, 3) != "<0x" || piece[5] != '>') return -1;
  int v = 0;
  for (char c : piece.substr(3, 2)) {
    const int d = std::isdigit(static_cast<unsigned char>(c)) ? c - '0'
                  : (c >= 'A' && c <= 'F')                    ? c - 'A' + 10
                                                              : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

// The byte each GPT-2 byte-level character stands for (the inverse of ByteLevelChar).
const std::unordered_map<std::string, uint8_t>& ByteLevelBytes() {
  static const auto* table = [] {
    auto* t = new std::unordered_map<std::string, uint8_t>();
    for (int b = 0; b < 256; ++b) (*t)[ByteLevelChar(static_cast<unsigned char>(b))] = b;
    return t;
  }();
  return *table;
}

StatusOr<AddedToken> ParseAddedToken(const json& j, size_t index) {
  auto bad = [&](std::string_view detail) {
    return Error(StatusCode::kInvalidArgument, "tokenizer", "added_tokens[", index, "]: ", detail);
  };
  if (!j.is_object()) return bad("must be an object");
  AddedToken t;
  auto id = j.find("id");
  auto content = j.find("content");
  if (id == j.end() || !id->is_number_integer() || id->get<int64_t>() < 0 ||
      id->get<int64_t>() >= (1 << 24)) {
    return bad("'id' must be an integer in [0, 2^24)");
  }
  if (content == j.end() || !content->is_string()) return bad("'content' must be a string");
  t.id = static_cast<int32_t>(id->get<int64_t>());
  t.content = content->get<std::string>();
  if (FindInvalidUtf8(t.content) != std::string_view::npos) return bad("content is not UTF-8");
  const std::pair<const char*, bool*> flags[] = {{"single_word", &t.single_word},
                                                 {"lstrip", &t.lstrip},
                                                 {"rstrip", &t.rstrip},
                                                 {"normalized", &t.normalized},
                                                 {"special", &t.special}};
  for (auto [key, out] : flags) {
    auto it = j.find(key);
    if (it == j.end()) continue;
    if (!it->is_boolean()) return bad(StrCat("'", key, "' must be a bool"));
    *out = it->get<bool>();
  }
  return t;
}

// "bos_token": "<bos>" or {"content": "<bos>", ...} in tokenizer_config.json.
std::string ConfigToken(const json& config, const char* key) {
  if (!config.is_object()) return "";
  auto it = config.find(key);
  if (it == config.end()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object()) {
    auto c = it->find("content");
    if (c != it->end() && c->is_string()) return c->get<std::string>();
  }
  return "";
}

StatusOr<std::unique_ptr<Tokenizer>> HfTokenizer::Create(const json& root, const json& config) {
  if (!root.is_object()) {
    return Error(StatusCode::kInvalidArgument, "tokenizer", "tokenizer.json must be an object");
  }
  auto tok = std::make_unique<HfTokenizer>();
  auto member = [&](const char* key) -> const json& {
    static const json kNull;
    auto it = root.find(key);
    return it == root.end() ? kNull : *it;
  };
  const json& model = member("model");
  if (!model.is_object()) {
    return Error(StatusCode::kInvalidArgument, "tokenizer", "'model' must be an object");
  }
  auto type = model.find("type");
  if (type == model.end() || !type->is_string()) {
    // Old files omit the type; BPE is the only one with "merges".
    if (!model.contains("merges")) {
      return Error(StatusCode::kInvalidArgument, "tokenizer", "model.type is missing");
    }
  } else if (type->get<std::string>() != "BPE") {
    return Error(StatusCode::kUnimplemented, "tokenizer", "model type '", type->get<std::string>(),
                 "' is not supported (only BPE)");
  }
  OCULAR_ASSIGN_OR_RETURN(BpeModel bpe, BpeModel::FromJson(model));
  tok->model_ = std::move(bpe);
  OCULAR_ASSIGN_OR_RETURN(tok->normalizer_, ParseNormalizer(member("normalizer")));
  OCULAR_ASSIGN_OR_RETURN(tok->pre_tokenizer_, ParsePreTokenizer(member("pre_tokenizer")));
  OCULAR_ASSIGN_OR_RETURN(tok->decoder_, ParseDecoder(member("decoder")));
  tok->byte_level_ = HasByteLevelDecoder(member("decoder"));

  const json& added = member("added_tokens");
  if (!added.is_null() && !added.is_array()) {
    return Error(StatusCode::kInvalidArgument, "tokenizer", "'added_tokens' must be a list");
  }
  int32_t max_id = tok->model_->max_id();
  if (added.is_array()) {
    for (size_t i = 0; i < added.size(); ++i) {
      OCULAR_ASSIGN_OR_RETURN(AddedToken t, ParseAddedToken(added[i], i));
      if (t.content.empty()) continue;  // tokenizers ignores empty added tokens
      const size_t index = tok->added_.size();
      tok->added_by_id_[t.id] = index;
      tok->added_by_content_[t.content] = t.id;
      max_id = std::max(max_id, t.id);
      tok->added_.push_back(std::move(t));
    }
  }
  // refresh_added_tokens: special tokens first, then the others, each in file order; a
  // normalized token is matched by its normalized form.
  for (bool special : {true, false}) {
    for (size_t i = 0; i < tok->added_.size(); ++i) {
      const AddedToken& t = tok->added_[i];
      if (t.special != special) continue;
      if (t.normalized) {
        std::string pattern = tok->normalizer_ ? tok->normalizer_->Normalize(t.content) : t.content;
        tok->normalized_trie_.Add(pattern, static_cast<int>(i));
      } else {
        tok->raw_trie_.Add(t.content, static_cast<int>(i));
      }
    }
  }
  // Rust regex \w (Alphabetic, marks, decimal numbers, connector punctuation, joiners).
  OCULAR_ASSIGN_OR_RETURN(Regex word,
                          Regex::Compile(R"([\p{L}\p{Nl}\p{M}\p{Nd}\p{Pc}\x{200C}\x{200D}])"));
  tok->word_char_ = std::move(word);
  tok->vocab_size_ = max_id + 1;

  std::vector<std::string> bos = {ConfigToken(config, "bos_token"), "<bos>", "<|begin_of_text|>",
                                  "<s>"};
  std::vector<std::string> eos = {ConfigToken(config, "eos_token"), "<eos>", "<|end_of_text|>",
                                  "</s>"};
  std::vector<std::string> pad = {ConfigToken(config, "pad_token"), "<pad>",
                                  "<|finetune_right_pad_id|>"};
  tok->ResolveSpecialIds(bos, eos, pad);
  OCULAR_RETURN_IF_ERROR(tok->SetPostProcessor(member("post_processor"), config));
  return std::unique_ptr<Tokenizer>(std::move(tok));
}

// GemmaTokenizerFast / LlamaTokenizerFast (and CodeLlama's) replace tokenizer.json's
// post_processor at load with a TemplateProcessing of add_bos_token / add_eos_token
// (update_post_processor); PreTrainedTokenizerFast, Qwen2TokenizerFast, ... keep the file's.
Status HfTokenizer::SetPostProcessor(const json& post_processor, const json& config) {
  static constexpr std::string_view kRebuilding[] = {
      "GemmaTokenizer",     "GemmaTokenizerFast", "LlamaTokenizer",
      "LlamaTokenizerFast", "CodeLlamaTokenizer", "CodeLlamaTokenizerFast"};
  const std::string cls = config.is_object() && config.contains("tokenizer_class") &&
                                  config["tokenizer_class"].is_string()
                              ? config["tokenizer_class"].get<std::string>()
                              : "";
  if (std::find(std::begin(kRebuilding), std::end(kRebuilding), cls) != std::end(kRebuilding)) {
    return SetSpecialTokensFromFlags(config);
  }
  OCULAR_ASSIGN_OR_RETURN(SpecialTokensAround around, ParsePostProcessor(post_processor));
  for (const auto* ids : {&around.prefix, &around.suffix}) {
    for (int32_t id : *ids) {
      if (id >= vocab_size_) {
        return Error(StatusCode::kInvalidArgument, "tokenizer", "post_processor adds id ", id,
                     ", past the vocabulary (", vocab_size_, " ids)");
      }
    }
  }
  special_prefix_ = std::move(around.prefix);
  special_suffix_ = std::move(around.suffix);
  return Status::Ok();
}

// AddedVocabulary::find_matches + split_with_indices.
void HfTokenizer::SplitAdded(std::string_view s, const TokenTrie& trie,
                             std::vector<Segment>* out) const {
  if (trie.empty()) {
    out->push_back({std::string(s), -1});
    return;
  }
  auto is_word_char = [&](std::string_view ch) { return !word_char_->FindAll(ch).empty(); };
  auto last_char = [](std::string_view t) {
    size_t b = t.size();
    while (b > 0 && (static_cast<unsigned char>(t[b - 1]) & 0xC0) == 0x80) --b;
    return t.substr(b > 0 ? b - 1 : 0);
  };
  auto first_char = [](std::string_view t) {
    return t.substr(0, t.empty() ? 0 : Utf8SequenceLength(static_cast<unsigned char>(t[0])));
  };
  size_t start_offset = 0, pos = 0;
  while (pos < s.size()) {
    size_t end = 0;
    const int index = trie.LongestAt(s, pos, &end);
    if (index < 0) {
      pos += Utf8SequenceLength(static_cast<unsigned char>(s[pos]));
      continue;
    }
    const AddedToken& t = added_[index];
    size_t start = pos, stop = end;
    pos = end;  // the automaton resumes after this match, kept or not
    if (t.single_word) {
      const bool start_space = start == 0 || !is_word_char(last_char(s.substr(0, start)));
      const bool stop_space = stop == s.size() || !is_word_char(first_char(s.substr(stop)));
      if (!start_space || !stop_space) continue;
    }
    if (t.lstrip) {
      // Leftmost start of the whitespace run ending at `start`, but not before start_offset.
      size_t p = 0, new_start = 0;
      char32_t cp;
      while (p < start) {
        NextCodepoint(s, &p, &cp);
        if (!IsWhiteSpace(cp)) new_start = p;
      }
      start = std::max(new_start, start_offset);
    }
    if (t.rstrip) {
      char32_t cp;
      size_t p = stop;
      while (p < s.size()) {
        size_t q = p;
        NextCodepoint(s, &q, &cp);
        if (!IsWhiteSpace(cp)) break;
        p = q;
      }
      stop = p;
    }
    if (start_offset < start)
      out->push_back({std::string(s.substr(start_offset, start - start_offset)), -1});
    out->push_back({"", t.id});
    start_offset = stop;
  }
  if (start_offset < s.size()) out->push_back({std::string(s.substr(start_offset)), -1});
}

StatusOr<std::vector<int32_t>> HfTokenizer::Encode(std::string_view text) const {
  if (const size_t bad = FindInvalidUtf8(text); bad != std::string_view::npos) {
    return Error(StatusCode::kInvalidArgument, "tokenizer", "input is not valid UTF-8 (byte ", bad,
                 " of ", text.size(), ")");
  }
  std::vector<Segment> raw;
  SplitAdded(text, raw_trie_, &raw);
  std::vector<Segment> segments;
  for (auto& seg : raw) {
    if (seg.id >= 0) {
      segments.push_back(std::move(seg));
      continue;
    }
    std::string normalized = normalizer_ ? normalizer_->Normalize(std::move(seg.text)) : seg.text;
    SplitAdded(normalized, normalized_trie_, &segments);
  }
  std::vector<int32_t> ids;
  std::vector<std::string> pieces;
  for (auto& seg : segments) {
    if (seg.id >= 0) {
      ids.push_back(seg.id);
      continue;
    }
    if (seg.text.empty()) continue;
    pieces.clear();
    pieces.push_back(std::move(seg.text));
    if (pre_tokenizer_) pre_tokenizer_->PreTokenize(&pieces);
    for (const auto& piece : pieces) model_->Tokenize(piece, &ids);
  }
  return ids;
}

std::string HfTokenizer::Decode(std::span<const int32_t> ids, bool skip_special) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    auto it = added_by_id_.find(id);
    if (it != added_by_id_.end()) {
      if (skip_special && added_[it->second].special) continue;
      tokens.push_back(added_[it->second].content);
      continue;
    }
    const std::string* token = model_->IdToToken(id);
    if (token == nullptr) continue;
    // is_special_token is by content: a vocab entry spelled like a special token is special.
    if (skip_special) {
      auto c = added_by_content_.find(*token);
      if (c != added_by_content_.end() && IsSpecial(c->second)) continue;
    }
    tokens.push_back(*token);
  }
  std::string out;
  if (decoder_) {
    decoder_->DecodeChain(&tokens);
    for (const auto& t : tokens) out += t;
  } else {
    for (size_t i = 0; i < tokens.size(); ++i) out += (i ? " " : "") + tokens[i];
  }
  return out;
}

int32_t HfTokenizer::TokenToId(std::string_view piece) const {
  auto it = added_by_content_.find(std::string(piece));
  if (it != added_by_content_.end()) return it->second;
  return model_->TokenToId(piece);
}

std::string HfTokenizer::IdToPiece(int32_t id) const {
  auto it = added_by_id_.find(id);
  if (it != added_by_id_.end()) return added_[it->second].content;
  const std::string* token = model_->IdToToken(id);
  return token ? *token : std::string();
}

std::optional<std::string> HfTokenizer::TokenBytes(int32_t id) const {
  auto it = added_by_id_.find(id);
  if (it != added_by_id_.end() && added_[it->second].special) return std::nullopt;
  const std::string* token =
      it != added_by_id_.end() ? &added_[it->second].content : model_->IdToToken(id);
  if (token == nullptr || token->empty()) return std::nullopt;
  if (const int b = ByteFallbackValue(*token); b >= 0) return std::string(1, static_cast<char>(b));
  if (byte_level_) {
    std::string out;
    const auto& table = ByteLevelBytes();
    for (size_t pos = 0; pos < token->size();) {
      const size_t len =
          std::max<size_t>(1, Utf8SequenceLength(static_cast<uint8_t>((*token)[pos])));
      auto b = table.find(token->substr(pos, len));
      if (b == table.end()) return std::nullopt;
      out += static_cast<char>(b->second);
      pos += len;
    }
    return out;
  }
  // Replace / ByteFallback / Fuse decoders over one token (a Strip step would strip every
  // token; no supported family has one).
  std::vector<std::string> one{*token};
  if (decoder_) decoder_->DecodeChain(&one);
  std::string out;
  for (const auto& t : one) out += t;
  return out;
}

// Syntax errors carry line and column; deep nesting is refused before parsing.
StatusOr<json> ParseJson(std::string_view text, std::string_view what) {
  return ocular::ParseJson(text, std::string(what), "tokenizer", /*max_depth=*/64);
}

}  // namespace

StatusOr<std::unique_ptr<Tokenizer>> LoadHfTokenizer(std::string_view json_text,
                                                     std::string_view config_text) {
  OCULAR_ASSIGN_OR_RETURN(json root, ParseJson(json_text, "tokenizer.json"));
  json config;
  if (!config_text.empty()) {
    OCULAR_ASSIGN_OR_RETURN(config, ParseJson(config_text, "tokenizer_config.json"));
  }
  return HfTokenizer::Create(root, config);
}

}  // namespace ocular::text
