#include "runtime/grammar_constraint.h"

#include <chrono>

#include "text/json_schema.h"

namespace ocular {
namespace {

double MsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

class GrammarConstraint final : public TokenConstraint {
 public:
  GrammarConstraint(std::shared_ptr<const grammar::Grammar> g,
                    std::shared_ptr<const grammar::TokenVocabulary> vocab, std::vector<int32_t> eos)
      : m_(std::move(g), std::move(vocab), std::move(eos)) {}
  const uint32_t* Mask(int tokens_left) override {
    const auto t0 = std::chrono::steady_clock::now();
    const uint32_t* mask = m_.NextMask(tokens_left).data();
    busy_ms_ += MsSince(t0);
    return mask;
  }
  void Accept(int32_t id) override {
    const auto t0 = std::chrono::steady_clock::now();
    m_.Accept(id);
    busy_ms_ += MsSince(t0);
  }
  bool complete() const override { return m_.complete() || m_.finished(); }
  Status status() const override { return m_.error(); }

 private:
  grammar::GrammarMatcher m_;
};

}  // namespace

std::shared_ptr<const grammar::TokenVocabulary> GrammarVocabulary(const Tokenizer& tok,
                                                                  int32_t vocab) {
  std::vector<std::optional<std::string>> bytes(
      static_cast<size_t>(std::max(vocab, tok.vocab_size())));
  for (int32_t id = 0; id < tok.vocab_size(); ++id) bytes[id] = tok.TokenBytes(id);
  return std::make_shared<grammar::TokenVocabulary>(bytes);
}

namespace {
StatusOr<std::optional<grammar::Grammar>> CompileGrammar(const GenerateOptions& o) {
  const int asked = !o.json_schema.empty() + o.json_object + !o.regex.empty();
  if (asked == 0) return std::optional<grammar::Grammar>();
  if (asked > 1) {
    return Error(StatusCode::kInvalidArgument, "generate",
                 "json_schema, json_object and regex exclude each other (", asked, " given)");
  }
  if (o.json_object) return std::optional<grammar::Grammar>(grammar::JsonObjectGrammar());
  OCULAR_ASSIGN_OR_RETURN(grammar::Grammar g, o.regex.empty()
                                                  ? grammar::JsonSchemaGrammar(o.json_schema)
                                                  : grammar::RegexGrammar(o.regex));
  return std::optional<grammar::Grammar>(std::move(g));
}
}  // namespace

Status CheckStructuredOutput(const GenerateOptions& o) { return CompileGrammar(o).status(); }

StatusOr<std::shared_ptr<TokenConstraint>> MakeGrammarConstraint(
    const GenerateOptions& o, std::shared_ptr<const grammar::TokenVocabulary> vocab,
    const std::vector<int32_t>& eos_ids) {
  OCULAR_ASSIGN_OR_RETURN(std::optional<grammar::Grammar> g, CompileGrammar(o));
  if (!g) return std::shared_ptr<TokenConstraint>();
  return std::shared_ptr<TokenConstraint>(std::make_shared<GrammarConstraint>(
      std::make_shared<const grammar::Grammar>(std::move(*g)), std::move(vocab), eos_ids));
}

}  // namespace ocular
