#include "text/post_processor.h"

#include <string>

namespace ocular::text {
namespace {

using nlohmann::json;

Status Malformed(std::string_view what, std::string_view detail) {
  return Error(StatusCode::kInvalidArgument, "tokenizer", "post_processor ", what, ": ", detail);
}

// An id in [0, 2^24), as added_tokens ids.
bool IsTokenId(const json& j) {
  return j.is_number_integer() && j.get<int64_t>() >= 0 && j.get<int64_t>() < (1 << 24);
}

// BertProcessing / RobertaProcessing: "sep" and "cls" are [token, id].
StatusOr<int32_t> PairId(const json& j, const char* key, std::string_view what) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_array() || it->size() != 2 || !(*it)[0].is_string() ||
      !IsTokenId((*it)[1])) {
    return Malformed(what, StrCat("'", key, "' must be [token, id]"));
  }
  return static_cast<int32_t>((*it)[1].get<int64_t>());
}

// processors/template.rs: the ids of each special_tokens entry ({"id", "ids", "tokens"}).
StatusOr<std::vector<int32_t>> SpecialIds(const json& specials, const std::string& name) {
  auto it = specials.find(name);
  if (it == specials.end()) {
    return Malformed("TemplateProcessing",
                     StrCat("the template names '", name, "', which special_tokens lacks"));
  }
  auto ids = it->find("ids");
  if (!it->is_object() || ids == it->end() || !ids->is_array()) {
    return Malformed("TemplateProcessing", StrCat("special_tokens '", name, "' has no 'ids' list"));
  }
  std::vector<int32_t> out;
  for (const json& id : *ids) {
    if (!IsTokenId(id)) {
      return Malformed("TemplateProcessing", StrCat("special_tokens '", name, "': bad id"));
    }
    out.push_back(static_cast<int32_t>(id.get<int64_t>()));
  }
  return out;
}

// One piece of a template: sequence 0 (A) or 1 (B), or a special token's ids.
struct Piece {
  int sequence = -1;
  std::vector<int32_t> ids;
};
using Template = std::vector<Piece>;

// A list of {"SpecialToken": {"id", "type_id"}} / {"Sequence": {"id", "type_id"}} items.
StatusOr<Template> ParseTemplate(const json& items, const json& specials, const char* key) {
  if (!items.is_array())
    return Malformed("TemplateProcessing", StrCat("'", key, "' is not a list"));
  Template out;
  for (const json& item : items) {
    if (!item.is_object() || item.size() != 1) {
      return Malformed("TemplateProcessing",
                       StrCat("'", key, "' items must be {\"SpecialToken\"} or {\"Sequence\"}"));
    }
    const std::string kind = item.begin().key();
    const json& body = item.begin().value();
    auto id = body.is_object() ? body.find("id") : body.end();
    if (id == body.end() || !id->is_string()) {
      return Malformed("TemplateProcessing", StrCat("'", key, "' item without a string 'id'"));
    }
    const std::string name = id->get<std::string>();
    Piece piece;
    if (kind == "Sequence" && (name == "A" || name == "B")) {
      piece.sequence = name == "A" ? 0 : 1;
    } else if (kind == "SpecialToken") {
      OCULAR_ASSIGN_OR_RETURN(piece.ids, SpecialIds(specials, name));
    } else {
      return Malformed("TemplateProcessing",
                       StrCat("unknown template item ", kind, " '", name, "'"));
    }
    out.push_back(std::move(piece));
  }
  return out;
}

// One processor of the chain. The chain works on a list of encodings (processors/
// sequence.rs): TemplateProcessing takes one (single) or two (pair) and returns one per template
// piece (template.rs apply_template); Bert/RobertaProcessing wrap each (i == 0: [cls] e [sep];
// later ones: e [sep] / [sep] e [sep]); ByteLevel changes no id. The final list is merged.
struct Step {
  bool is_template = false;
  Template single, pair;
  bool roberta = false;
  int32_t cls = -1, sep = -1;
};

using Parts = std::vector<std::vector<int32_t>>;

StatusOr<Parts> ApplyStep(const Step& step, Parts parts) {
  Parts out;
  if (step.is_template) {
    if (parts.size() > 2) {  // template.rs: `_ => todo!()`, a panic in tokenizers
      return Error(StatusCode::kUnimplemented, "tokenizer",
                   "post_processor: a "
                   "TemplateProcessing after processors that leave ",
                   parts.size(), " encodings (tokenizers panics on it)");
    }
    const Template& t = parts.size() == 1 ? step.single : step.pair;
    for (const Piece& piece : t) {
      if (piece.sequence >= static_cast<int>(parts.size())) {
        return Malformed("TemplateProcessing", "the single template names sequence B");
      }
      out.push_back(piece.sequence >= 0 ? parts[piece.sequence] : piece.ids);
    }
    return out;
  }
  for (size_t i = 0; i < parts.size(); ++i) {
    std::vector<int32_t> e;
    if (i == 0) e.push_back(step.cls);
    if (i > 0 && step.roberta) e.push_back(step.sep);
    e.insert(e.end(), parts[i].begin(), parts[i].end());
    e.push_back(step.sep);
    out.push_back(std::move(e));
  }
  return out;
}

StatusOr<std::vector<Step>> ParseSteps(const json& j) {
  auto type_it = j.is_object() ? j.find("type") : j.end();
  if (type_it == j.end() || !type_it->is_string()) {
    return Malformed("", "must be an object with a string 'type', or null");
  }
  const std::string type = type_it->get<std::string>();
  std::vector<Step> steps;
  if (type == "ByteLevel") return steps;  // processors/byte_level.rs: offsets only
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    Step s;  // trim_offsets / add_prefix_space (Roberta) move offsets only
    s.roberta = type == "RobertaProcessing";
    OCULAR_ASSIGN_OR_RETURN(s.cls, PairId(j, "cls", type));
    OCULAR_ASSIGN_OR_RETURN(s.sep, PairId(j, "sep", type));
    steps.push_back(std::move(s));
    return steps;
  }
  if (type == "TemplateProcessing") {
    const json kEmpty = json::object();
    auto specials = j.find("special_tokens");
    const json& sp = specials == j.end() || specials->is_null() ? kEmpty : *specials;
    if (!sp.is_object()) return Malformed(type, "'special_tokens' must be an object");
    auto single = j.find("single"), pair = j.find("pair");
    if (single == j.end() || pair == j.end()) {
      return Malformed(type, "'single' and 'pair' are required");
    }
    Step s;
    s.is_template = true;
    OCULAR_ASSIGN_OR_RETURN(s.single, ParseTemplate(*single, sp, "single"));
    OCULAR_ASSIGN_OR_RETURN(s.pair, ParseTemplate(*pair, sp, "pair"));
    steps.push_back(std::move(s));
    return steps;
  }
  if (type == "Sequence") {
    auto list = j.find("processors");
    if (list == j.end() || !list->is_array()) return Malformed(type, "'processors' must be a list");
    for (const json& p : *list) {
      OCULAR_ASSIGN_OR_RETURN(std::vector<Step> inner, ParseSteps(p));
      for (Step& s : inner) steps.push_back(std::move(s));
    }
    return steps;
  }
  return Error(StatusCode::kUnimplemented, "tokenizer", "post_processor type '", type,
               "' is not supported (TemplateProcessing, BertProcessing, RobertaProcessing, "
               "ByteLevel, Sequence are)");
}

}  // namespace

StatusOr<SpecialTokensAround> ParsePostProcessor(const json& j) {
  if (j.is_null()) return SpecialTokensAround{};
  OCULAR_ASSIGN_OR_RETURN(std::vector<Step> steps, ParseSteps(j));
  // The chain on a one-id text whose id (-1) no token has: what lands around it.
  Parts parts = {{-1}};
  for (const Step& step : steps) {
    OCULAR_ASSIGN_OR_RETURN(parts, ApplyStep(step, std::move(parts)));
  }
  SpecialTokensAround out;
  int seen = 0;
  for (const auto& part : parts) {
    for (int32_t id : part) {
      if (id < 0) {
        ++seen;
      } else {
        (seen == 0 ? out.prefix : out.suffix).push_back(id);
      }
    }
  }
  if (seen != 1) {
    return Error(StatusCode::kUnimplemented, "tokenizer",
                 "post_processor: the text's tokens would appear ", seen,
                 " times with special tokens added; only once is supported");
  }
  return out;
}

}  // namespace ocular::text
