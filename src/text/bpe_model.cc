#include "text/bpe_model.h"

#include <cstdio>
#include <queue>

#include "text/utf8.h"

namespace ocular::text {
namespace {

constexpr int32_t kMaxVocab = 1 << 24;

StatusOr<std::string> OptionalString(const nlohmann::json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::string();
  if (!it->is_string()) {
    return Error(StatusCode::kInvalidArgument, "tokenizer", "model.", key, " must be a string");
  }
  return it->get<std::string>();
}

StatusOr<bool> OptionalBool(const nlohmann::json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return false;
  if (!it->is_boolean()) {
    return Error(StatusCode::kInvalidArgument, "tokenizer", "model.", key, " must be a bool");
  }
  return it->get<bool>();
}

// A merge as tokenizer.json writes it: legacy "a b", or ["a", "b"].
Status MergePair(const nlohmann::json& m, int32_t rank, std::string_view* a, std::string_view* b) {
  if (m.is_string()) {  // legacy "a b"
    const std::string_view s = m.get_ref<const std::string&>();
    const size_t space = s.find(' ');
    if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos) {
      return Error(StatusCode::kInvalidArgument, "tokenizer", "merge ", rank, " '", s,
                   "' is not two space-separated tokens");
    }
    *a = s.substr(0, space);
    *b = s.substr(space + 1);
  } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
    *a = m[0].get_ref<const std::string&>();
    *b = m[1].get_ref<const std::string&>();
  } else {
    return Error(StatusCode::kInvalidArgument, "tokenizer", "merge ", rank,
                 " must be \"a b\" or [\"a\", \"b\"]");
  }
  return Status::Ok();
}

}  // namespace

StatusOr<BpeModel> BpeModel::FromJson(const nlohmann::json& model) {
  BpeModel bpe;
  auto dropout = model.find("dropout");
  if (dropout != model.end() && !dropout->is_null() &&
      !(dropout->is_number() && dropout->get<double>() == 0.0)) {
    return Error(StatusCode::kUnimplemented, "tokenizer", "BPE dropout is not supported");
  }
  OCULAR_ASSIGN_OR_RETURN(bpe.byte_fallback_, OptionalBool(model, "byte_fallback"));
  OCULAR_ASSIGN_OR_RETURN(bpe.fuse_unk_, OptionalBool(model, "fuse_unk"));
  OCULAR_ASSIGN_OR_RETURN(bpe.ignore_merges_, OptionalBool(model, "ignore_merges"));
  OCULAR_ASSIGN_OR_RETURN(bpe.prefix_, OptionalString(model, "continuing_subword_prefix"));
  OCULAR_ASSIGN_OR_RETURN(bpe.suffix_, OptionalString(model, "end_of_word_suffix"));
  OCULAR_ASSIGN_OR_RETURN(std::string unk, OptionalString(model, "unk_token"));

  auto vocab = model.find("vocab");
  if (vocab == model.end() || !vocab->is_object()) {
    return Error(StatusCode::kInvalidArgument, "tokenizer", "model.vocab must be an object");
  }
  bpe.vocab_.reserve(vocab->size());
  for (auto it = vocab->begin(); it != vocab->end(); ++it) {
    if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() >= kMaxVocab) {
      return Error(StatusCode::kInvalidArgument, "tokenizer", "model.vocab['", it.key(),
                   "'] must be an id in [0, ", kMaxVocab, ")");
    }
    const auto id = static_cast<int32_t>(it->get<int64_t>());
    if (static_cast<size_t>(id) >= bpe.id_to_token_.size()) {
      bpe.id_to_token_.resize(id + 1);
      bpe.has_id_.resize(id + 1, false);
    }
    bpe.id_to_token_[id] = it.key();
    bpe.has_id_[id] = true;
    bpe.vocab_.emplace(it.key(), id);
  }
  if (!unk.empty()) {
    bpe.unk_id_ = bpe.TokenToId(unk);
    if (bpe.unk_id_ < 0) {
      return Error(StatusCode::kInvalidArgument, "tokenizer", "model.unk_token '", unk,
                   "' is not in the vocabulary");
    }
  }
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    bpe.byte_ids_[b] = bpe.TokenToId(name);
  }

  auto merges = model.find("merges");
  if (merges == model.end() || !merges->is_array()) {
    return Error(StatusCode::kInvalidArgument, "tokenizer", "model.merges must be an array");
  }
  bpe.merges_.reserve(merges->size());
  int32_t rank = 0;
  std::string merged;
  for (const auto& m : *merges) {
    std::string_view a, b;
    OCULAR_RETURN_IF_ERROR(MergePair(m, rank, &a, &b));
    const int32_t id_a = bpe.TokenToId(a), id_b = bpe.TokenToId(b);
    if (id_a < 0 || id_b < 0) {
      return Error(StatusCode::kInvalidArgument, "tokenizer", "merge ", rank, " ('", a, "', '", b,
                   "') uses a token missing from the vocabulary");
    }
    // tokenizers: the merged token drops b's continuing_subword_prefix.
    merged.assign(a);
    merged.append(!bpe.prefix_.empty() && b.starts_with(bpe.prefix_) ? b.substr(bpe.prefix_.size())
                                                                     : b);
    const int32_t new_id = bpe.TokenToId(merged);
    if (new_id < 0) {
      return Error(StatusCode::kInvalidArgument, "tokenizer", "merge ", rank, " result '", merged,
                   "' is not in the vocabulary");
    }
    // tokenizers collects merges into a HashMap, so a repeated pair keeps its last rank.
    bpe.merges_[PairKey(id_a, id_b)] = Merge{rank, new_id};
    ++rank;
  }
  return bpe;
}

int32_t BpeModel::TokenToId(std::string_view token) const {
  auto it = vocab_.find(token);
  return it == vocab_.end() ? -1 : it->second;
}

const std::string* BpeModel::IdToToken(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= id_to_token_.size() || !has_id_[id]) return nullptr;
  return &id_to_token_[id];
}

void BpeModel::Tokenize(std::string_view word, std::vector<int32_t>* ids) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    const int32_t id = TokenToId(word);
    if (id >= 0) {
      ids->push_back(id);
      return;
    }
  }
  // merge_word: one symbol per character (with prefix/suffix), byte fallback, unk fusing.
  std::vector<int32_t> symbols;
  int32_t pending_unk = -1;  // a fused unk not yet emitted
  size_t pos = 0;
  bool first = true;
  std::string piece;
  while (pos < word.size()) {
    const size_t start = pos;
    pos += Utf8SequenceLength(static_cast<unsigned char>(word[pos]));
    if (pos > word.size()) pos = word.size();
    piece.assign(first ? "" : prefix_);
    piece.append(word.substr(start, pos - start));
    if (pos == word.size()) piece.append(suffix_);
    first = false;
    const int32_t id = TokenToId(piece);
    if (id >= 0) {
      if (pending_unk >= 0) symbols.push_back(pending_unk);
      pending_unk = -1;
      symbols.push_back(id);
      continue;
    }
    if (byte_fallback_) {
      bool all = true;
      for (unsigned char b : piece) all = all && byte_ids_[b] >= 0;
      if (all) {
        // tokenizers does not flush a pending unk here; it stays pending (model.rs).
        for (unsigned char b : piece) symbols.push_back(byte_ids_[b]);
        continue;
      }
    }
    if (unk_id_ >= 0) {
      if (pending_unk >= 0 && !fuse_unk_) symbols.push_back(pending_unk);
      pending_unk = unk_id_;
    }
  }
  if (pending_unk >= 0) symbols.push_back(pending_unk);
  MergeAll(&symbols);
  ids->insert(ids->end(), symbols.begin(), symbols.end());
}

// Word::merge_all: repeatedly merge the pair with the lowest rank, leftmost first.
void BpeModel::MergeAll(std::vector<int32_t>* symbols_io) const {
  std::vector<int32_t>& c = *symbols_io;
  const int n = static_cast<int>(c.size());
  if (n < 2) return;
  std::vector<int> prev(n), next(n);
  std::vector<bool> alive(n, true);
  for (int i = 0; i < n; ++i) {
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  struct Entry {
    int32_t rank;
    int pos;
    int32_t new_id;
    bool operator<(const Entry& o) const {  // priority_queue pops the largest
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::priority_queue<Entry> queue;
  auto push = [&](int pos) {
    if (pos < 0 || next[pos] < 0) return;
    auto it = merges_.find(PairKey(c[pos], c[next[pos]]));
    if (it != merges_.end()) queue.push({it->second.rank, pos, it->second.new_id});
  };
  for (int i = 0; i + 1 < n; ++i) push(i);
  while (!queue.empty()) {
    const Entry top = queue.top();
    queue.pop();
    if (!alive[top.pos] || next[top.pos] < 0) continue;
    const int right = next[top.pos];
    auto it = merges_.find(PairKey(c[top.pos], c[right]));
    if (it == merges_.end() || it->second.new_id != top.new_id) continue;  // stale entry
    c[top.pos] = top.new_id;
    alive[right] = false;
    next[top.pos] = next[right];
    if (next[right] >= 0) prev[next[right]] = top.pos;
    push(prev[top.pos]);
    push(top.pos);
  }
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) {
    if (alive[i]) out.push_back(c[i]);
  }
  c.swap(out);
}

}  // namespace ocular::text
