// Lexer and parser. They follow jinja2 3.1's lexer.py (whitespace control) and parser.py
// (grammar and operator precedence).
#include <cctype>
#include <cstdlib>

#include "text/jinja/ast.h"

namespace ocular::jinja {
namespace {

[[noreturn]] void SyntaxError(int line, std::string message) {
  throw Error{StatusCode::kDataLoss, "syntax error: " + std::move(message), line};
}

struct Token {
  enum class Type {
    kText,
    kVarBegin,
    kVarEnd,
    kBlockBegin,
    kBlockEnd,
    kName,
    kString,
    kNumber,
    kOp,
    kEof
  };
  Type type;
  std::string s;  // text, name, string value, operator
  Value number;
  int line;
};

// Byte length of the Python whitespace character at s[i], or 0.
size_t SpaceAt(std::string_view s, size_t i) {
  const unsigned char c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) return IsPySpace(c) ? 1 : 0;
  const size_t n = std::min(s.size() - i, static_cast<size_t>(c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4));
  const std::u32string cp = Decode(s.substr(i, n));
  return (cp.size() == 1 && IsPySpace(cp[0])) ? n : 0;
}

std::string_view RStripSpace(std::string_view s) {
  for (;;) {
    size_t start = s.size();
    if (start == 0) return s;
    --start;
    while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xc0) == 0x80) --start;
    if (SpaceAt(s, start) != s.size() - start) return s;
    s = s.substr(0, start);
  }
}

class Lexer {
 public:
  explicit Lexer(std::string_view source) {
    // jinja2 normalizes newlines to "\n" and drops one trailing newline (keep_trailing_newline
    // is False in transformers' environment).
    for (size_t i = 0; i < source.size(); ++i) {
      if (source[i] == '\r') {
        src_ += '\n';
        if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
      } else {
        src_ += source[i];
      }
    }
    if (!src_.empty() && src_.back() == '\n') src_.pop_back();
  }

  std::vector<Token> Run() {
    bool line_starting = true;
    while (pos_ < src_.size()) {
      size_t at = pos_;
      while ((at = src_.find('{', at)) != std::string::npos && at + 1 < src_.size() &&
             src_[at + 1] != '{' && src_[at + 1] != '%' && src_[at + 1] != '#') {
        ++at;
      }
      if (at != std::string::npos && at + 1 >= src_.size()) at = std::string::npos;
      std::string_view text = std::string_view(src_).substr(
          pos_, at == std::string::npos ? std::string::npos : at - pos_);
      if (at == std::string::npos) {
        Emit(Token::Type::kText, std::string(text));
        break;
      }
      const char kind = src_[at + 1];
      const char sign = at + 2 < src_.size() ? src_[at + 2] : 0;
      text = StripBeforeTag(text, kind, sign, line_starting);
      Emit(Token::Type::kText, std::string(text));
      Advance(at);
      pos_ = at + 2 + (sign == '-' || sign == '+' ? 1 : 0);
      if (kind == '#') {
        Comment();
      } else {
        Tag(kind == '{');
      }
      line_starting = pos_ > 0 && src_[pos_ - 1] == '\n';
    }
    tokens_.push_back({Token::Type::kEof, "", Value(), line_});
    return std::move(tokens_);
  }

 private:
  // lexer.py: "-" strips all whitespace before the tag; lstrip_blocks strips the spaces and
  // tabs between a line start and a block or comment tag unless the tag says "+".
  std::string_view StripBeforeTag(std::string_view text, char kind, char sign, bool line_starting) {
    if (sign == '-') return RStripSpace(text);
    if (sign == '+' || kind == '{') return text;
    const size_t nl = text.rfind('\n');
    const size_t l_pos = nl == std::string_view::npos ? 0 : nl + 1;
    if ((l_pos > 0 || line_starting) &&
        text.find_first_not_of(" \t", l_pos) == std::string_view::npos) {
      return text.substr(0, l_pos);
    }
    return text;
  }

  void Advance(size_t to) {
    for (; scanned_ < to; ++scanned_) line_ += src_[scanned_] == '\n';
  }

  void Emit(Token::Type type, std::string s, Value number = Value()) {
    if (type == Token::Type::kText && s.empty()) return;
    tokens_.push_back({type, std::move(s), std::move(number), line_});
  }

  // After "-%}", "-}}" or "-#}": all whitespace; after "%}" or "#}": one newline (trim_blocks).
  void AfterTag(bool minus, bool block, bool plus) {
    if (minus) {
      while (pos_ < src_.size()) {
        const size_t n = SpaceAt(src_, pos_);
        if (n == 0) break;
        pos_ += n;
      }
    } else if (block && !plus && pos_ < src_.size() && src_[pos_] == '\n') {
      ++pos_;
    }
  }

  void Comment() {
    const size_t end = src_.find("#}", pos_);
    if (end == std::string::npos) SyntaxError(line_, "missing end of comment tag");
    const bool minus = end > pos_ && src_[end - 1] == '-';
    pos_ = end + 2;
    Advance(pos_);
    AfterTag(minus, true, false);
    Advance(pos_);
  }

  void Tag(bool variable) {
    const size_t first = tokens_.size();
    Emit(variable ? Token::Type::kVarBegin : Token::Type::kBlockBegin, "");
    int depth = 0;
    for (;;) {
      while (pos_ < src_.size() && std::isspace(static_cast<unsigned char>(src_[pos_]))) ++pos_;
      Advance(pos_);
      if (pos_ >= src_.size()) {
        SyntaxError(line_, variable ? "unexpected end of template, expected '}}'"
                                    : "unexpected end of template, expected '%}'");
      }
      if (depth == 0 && EndsTag(variable)) break;
      LexToken(&depth);
    }
    const bool minus = src_[pos_] == '-';
    const bool plus = src_[pos_] == '+';
    pos_ += 2 + (minus || plus ? 1 : 0);
    Emit(variable ? Token::Type::kVarEnd : Token::Type::kBlockEnd, "");
    AfterTag(minus, !variable, plus);
    Advance(pos_);
    if (!variable && tokens_.size() == first + 3 && tokens_[first + 1].type == Token::Type::kName &&
        tokens_[first + 1].s == "raw") {
      tokens_.resize(first);
      Raw();
    }
  }

  bool EndsTag(bool variable) const {
    std::string_view rest = std::string_view(src_).substr(pos_);
    const std::string_view end = variable ? "}}" : "%}";
    if (rest.starts_with(end)) return true;
    if ((rest[0] == '-' || (!variable && rest[0] == '+')) && rest.substr(1).starts_with(end)) {
      return true;
    }
    return false;
  }

  // {% raw %}...{% endraw %}: the text between, whitespace control applied to endraw.
  void Raw() {
    for (size_t at = pos_; (at = src_.find("{%", at)) != std::string::npos; at += 2) {
      size_t p = at + 2;
      const char sign = p < src_.size() ? src_[p] : 0;
      if (sign == '-' || sign == '+') ++p;
      while (p < src_.size() && std::isspace(static_cast<unsigned char>(src_[p]))) ++p;
      if (std::string_view(src_).substr(p, 6) != "endraw") continue;
      p += 6;
      while (p < src_.size() && std::isspace(static_cast<unsigned char>(src_[p]))) ++p;
      const bool minus = p < src_.size() && src_[p] == '-';
      const bool plus = p < src_.size() && src_[p] == '+';
      if (minus || plus) ++p;
      if (std::string_view(src_).substr(p, 2) != "%}") continue;
      std::string_view text = std::string_view(src_).substr(pos_, at - pos_);
      text = StripBeforeTag(text, '%', sign, pos_ > 0 && src_[pos_ - 1] == '\n');
      Emit(Token::Type::kText, std::string(text));
      pos_ = p + 2;
      Advance(pos_);
      AfterTag(minus, true, plus);
      Advance(pos_);
      return;
    }
    SyntaxError(line_, "missing end of raw directive");
  }

  void LexToken(int* depth) {
    const char c = src_[pos_];
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t e = pos_;
      while (e < src_.size() &&
             (std::isalnum(static_cast<unsigned char>(src_[e])) || src_[e] == '_')) {
        ++e;
      }
      Emit(Token::Type::kName, src_.substr(pos_, e - pos_));
      pos_ = e;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      Number();
    } else if (c == '\'' || c == '"') {
      String(c);
    } else {
      static const char* const kOps[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*",
                                         "/",  "%",  "~",  "<",  ">",  "=",  "(", ")", "[",
                                         "]",  "{",  "}",  ",",  ".",  ":",  "|", ";"};
      for (const char* op : kOps) {
        if (std::string_view(src_).substr(pos_).starts_with(op)) {
          if (op[0] == '(' || op[0] == '[' || op[0] == '{') ++*depth;
          if (op[0] == ')' || op[0] == ']' || op[0] == '}') {
            if (*depth == 0) SyntaxError(line_, StrCat("unexpected '", op, "'"));
            --*depth;
          }
          Emit(Token::Type::kOp, op);
          pos_ += std::string_view(op).size();
          return;
        }
      }
      SyntaxError(line_, StrCat("unexpected char '", c, "'"));
    }
  }

  void Number() {
    size_t e = pos_;
    std::string digits;
    auto take_digits = [&] {
      while (e < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[e])) ||
                                 (src_[e] == '_' && e + 1 < src_.size() &&
                                  std::isdigit(static_cast<unsigned char>(src_[e + 1]))))) {
        if (src_[e] != '_') digits += src_[e];
        ++e;
      }
    };
    take_digits();
    bool is_float = false;
    const bool after_dot = pos_ > 0 && src_[pos_ - 1] == '.';  // foo.0.1 is two lookups
    if (!after_dot && e + 1 < src_.size() && src_[e] == '.' &&
        std::isdigit(static_cast<unsigned char>(src_[e + 1]))) {
      is_float = true;
      digits += src_[e++];
      take_digits();
    }
    if (!after_dot && e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {
      size_t x = e + 1;
      if (x < src_.size() && (src_[x] == '+' || src_[x] == '-')) ++x;
      if (x < src_.size() && std::isdigit(static_cast<unsigned char>(src_[x]))) {
        is_float = true;
        digits += 'e';
        digits += src_.substr(e + 1, x - e - 1);
        e = x;
        take_digits();
      }
    }
    if (is_float) {
      Emit(Token::Type::kNumber, src_.substr(pos_, e - pos_),
           Value(std::strtod(digits.c_str(), nullptr)));
    } else {
      if (digits.size() > 18) Unsupported("integer literals past 10^18");
      Emit(Token::Type::kNumber, digits, Value(static_cast<int64_t>(std::stoll(digits))));
    }
    pos_ = e;
  }

  // A string literal, unescaped as Python's "unicode-escape" codec does.
  void String(char quote) {
    std::string out;
    size_t p = pos_ + 1;
    for (;;) {
      if (p >= src_.size()) SyntaxError(line_, "unexpected end of string");
      const char c = src_[p];
      if (c == quote) break;
      if (c != '\\') {
        out += c;
        ++p;
        continue;
      }
      if (p + 1 >= src_.size()) SyntaxError(line_, "unexpected end of string");
      p = Escape(p + 1, &out);
    }
    Emit(Token::Type::kString, std::move(out));
    pos_ = p + 1;
  }

  size_t Escape(size_t p, std::string* out) {
    const char e = src_[p];
    auto hex = [&](size_t n) -> size_t {
      if (p + n >= src_.size()) SyntaxError(line_, "truncated \\x, \\u or \\U escape");
      char32_t v = 0;
      for (size_t k = 1; k <= n; ++k) {
        const char h = src_[p + k];
        if (!std::isxdigit(static_cast<unsigned char>(h))) {
          SyntaxError(line_, "truncated \\x, \\u or \\U escape");
        }
        v = v * 16 +
            (std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : (h | 0x20) - 'a' + 10);
      }
      if (v > 0x10ffff) SyntaxError(line_, "illegal Unicode character");
      *out += Encode(std::u32string(1, v));
      return p + n + 1;
    };
    switch (e) {
      case '\n':
        return p + 1;
      case '\\':
        *out += '\\';
        return p + 1;
      case '\'':
        *out += '\'';
        return p + 1;
      case '"':
        *out += '"';
        return p + 1;
      case 'a':
        *out += '\a';
        return p + 1;
      case 'b':
        *out += '\b';
        return p + 1;
      case 'f':
        *out += '\f';
        return p + 1;
      case 'n':
        *out += '\n';
        return p + 1;
      case 'r':
        *out += '\r';
        return p + 1;
      case 't':
        *out += '\t';
        return p + 1;
      case 'v':
        *out += '\v';
        return p + 1;
      case 'x':
        return hex(2);
      case 'u':
        return hex(4);
      case 'U':
        return hex(8);
      case 'N':
        Unsupported("\\N{...} escapes in string literals");
      default:
        break;
    }
    if (e >= '0' && e <= '7') {
      char32_t v = 0;
      size_t k = p;
      for (; k < p + 3 && k < src_.size() && src_[k] >= '0' && src_[k] <= '7'; ++k) {
        v = v * 8 + (src_[k] - '0');
      }
      *out += Encode(std::u32string(1, v));
      return k;
    }
    *out += '\\';  // an unknown escape stays as written
    return p;
  }

  std::string src_;
  size_t pos_ = 0;
  size_t scanned_ = 0;
  int line_ = 1;
  std::vector<Token> tokens_;
};

using T = Token::Type;

ExprPtr MakeExpr(Expr::Kind kind, int line) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = line;
  return e;
}

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : t_(std::move(tokens)) {}

  Body Template() {
    Body body = Statements({});
    if (Cur().type != T::kEof) SyntaxError(Cur().line, "unexpected '" + Peek(1).s + "'");
    return body;
  }

 private:
  const Token& Cur() const { return t_[i_]; }
  const Token& Peek(size_t k) const { return t_[std::min(i_ + k, t_.size() - 1)]; }
  bool IsOp(std::string_view op) const { return Cur().type == T::kOp && Cur().s == op; }
  bool IsName(std::string_view n) const { return Cur().type == T::kName && Cur().s == n; }
  bool SkipOp(std::string_view op) {
    if (!IsOp(op)) return false;
    ++i_;
    return true;
  }
  bool SkipName(std::string_view n) {
    if (!IsName(n)) return false;
    ++i_;
    return true;
  }
  std::string Describe(const Token& t) const {
    switch (t.type) {
      case T::kEof:
        return "end of template";
      case T::kBlockEnd:
        return "end of statement block";
      case T::kVarEnd:
        return "end of print statement";
      default:
        return "'" + t.s + "'";
    }
  }
  void ExpectOp(std::string_view op) {
    if (!SkipOp(op)) {
      SyntaxError(Cur().line, StrCat("expected '", op, "', got ", Describe(Cur())));
    }
  }
  std::string ExpectName() {
    if (Cur().type != T::kName) SyntaxError(Cur().line, "expected a name, got " + Describe(Cur()));
    return t_[i_++].s;
  }
  void ExpectBlockEnd() {
    if (Cur().type != T::kBlockEnd) {
      SyntaxError(Cur().line, "expected end of statement block, got " + Describe(Cur()));
    }
    ++i_;
  }

  // Nodes until a block whose first name is in `ends` (left unconsumed, after its "{%").
  Body Statements(const std::vector<std::string_view>& ends) {
    if (++depth_ > 64) Unsupported("templates nested more than 64 blocks deep");
    Body body;
    for (;;) {
      const Token& tok = Cur();
      if (tok.type == T::kEof) {
        if (!ends.empty()) {
          SyntaxError(tok.line, StrCat("unexpected end of template, expected '", ends[0], "'"));
        }
        break;
      }
      if (tok.type == T::kText) {
        auto n = std::make_unique<Node>();
        n->kind = Node::Kind::kText;
        n->line = tok.line;
        n->text = tok.s;
        body.push_back(std::move(n));
        ++i_;
      } else if (tok.type == T::kVarBegin) {
        auto n = std::make_unique<Node>();
        n->kind = Node::Kind::kOutput;
        n->line = tok.line;
        ++i_;
        n->expr = Tuple(true);
        if (Cur().type != T::kVarEnd) {
          SyntaxError(Cur().line, "expected end of print statement, got " + Describe(Cur()));
        }
        ++i_;
        body.push_back(std::move(n));
      } else if (tok.type == T::kBlockBegin) {
        const Token& name = Peek(1);
        if (name.type == T::kName) {
          for (std::string_view e : ends) {
            if (name.s == e) {
              ++i_;
              --depth_;
              return body;
            }
          }
        }
        ++i_;
        body.push_back(Statement());
      } else {
        SyntaxError(tok.line, "unexpected " + Describe(tok));
      }
    }
    --depth_;
    return body;
  }

  std::unique_ptr<Node> Statement() {
    auto n = std::make_unique<Node>();
    n->line = Cur().line;
    if (Cur().type != T::kName) SyntaxError(n->line, "tag name expected");
    const std::string tag = t_[i_++].s;
    if (tag == "if") {
      If(n.get());
    } else if (tag == "for") {
      For(n.get());
    } else if (tag == "set") {
      Set(n.get());
    } else if (tag == "macro") {
      Macro(n.get());
    } else if (tag == "filter") {
      n->kind = Node::Kind::kFilterBlock;
      n->filter = Filter(nullptr);
      ExpectBlockEnd();
      n->body = Statements({"endfilter"});
      End();
    } else if (tag == "break" || tag == "continue") {
      if (loops_ == 0) SyntaxError(n->line, "'" + tag + "' outside of a loop");
      n->kind = tag == "break" ? Node::Kind::kBreak : Node::Kind::kContinue;
      ExpectBlockEnd();
    } else if (tag == "generation") {  // transformers' AssistantTracker: renders its body
      n->kind = Node::Kind::kScope;
      ExpectBlockEnd();
      n->body = Statements({"endgeneration"});
      End();
    } else if (tag == "include" || tag == "import" || tag == "from" || tag == "extends" ||
               tag == "block" || tag == "call" || tag == "with" || tag == "autoescape") {
      throw Error{StatusCode::kUnimplemented, "unsupported construct: {% " + tag + " %}", n->line};
    } else {
      SyntaxError(n->line, "encountered unknown tag '" + tag + "'");
    }
    return n;
  }

  void End() {  // after the end tag's name
    ++i_;
    ExpectBlockEnd();
  }

  void If(Node* n) {
    n->kind = Node::Kind::kIf;
    for (;;) {
      ExprPtr cond = Tuple(false);
      ExpectBlockEnd();
      Body body = Statements({"elif", "else", "endif"});
      n->branches.emplace_back(std::move(cond), std::move(body));
      const std::string which = Cur().s;
      ++i_;
      if (which == "elif") continue;
      if (which == "else") {
        ExpectBlockEnd();
        n->else_body = Statements({"endif"});
        End();
      } else {
        ExpectBlockEnd();
      }
      return;
    }
  }

  std::vector<std::string> Targets() {
    std::vector<std::string> names;
    const bool paren = SkipOp("(");
    do {
      if (names.size() && (IsName("in") || IsOp("=") || IsOp(")"))) break;
      names.push_back(ExpectName());
    } while (SkipOp(","));
    if (paren) ExpectOp(")");
    return names;
  }

  void For(Node* n) {
    n->kind = Node::Kind::kFor;
    n->targets = Targets();
    if (!SkipName("in")) SyntaxError(Cur().line, "expected 'in', got " + Describe(Cur()));
    n->expr = Tuple(false);
    if (SkipName("if")) n->cond = Expression(true);
    if (IsName("recursive")) Unsupported("recursive for loops");
    ExpectBlockEnd();
    ++loops_;
    n->body = Statements({"endfor", "else"});
    --loops_;
    if (Cur().s == "else") {
      ++i_;
      ExpectBlockEnd();
      n->else_body = Statements({"endfor"});
    }
    End();
  }

  void Set(Node* n) {
    if (Cur().type == T::kName && Peek(1).type == T::kOp && Peek(1).s == ".") {
      n->targets.push_back(t_[i_].s);
      i_ += 2;
      n->attr = ExpectName();
    } else {
      n->targets = Targets();
    }
    if (SkipOp("=")) {
      n->kind = Node::Kind::kSet;
      n->expr = Tuple(true);
      ExpectBlockEnd();
      return;
    }
    if (n->targets.size() != 1 || !n->attr.empty()) {
      SyntaxError(n->line, "a block set assigns one name");
    }
    n->kind = Node::Kind::kSetBlock;
    if (IsOp("|")) n->filter = Filter(nullptr);
    ExpectBlockEnd();
    n->body = Statements({"endset"});
    End();
  }

  void Macro(Node* n) {
    n->kind = Node::Kind::kMacro;
    n->text = ExpectName();
    ExpectOp("(");
    while (!SkipOp(")")) {
      if (!n->params.empty()) ExpectOp(",");
      if (SkipOp(")")) break;
      std::string name = ExpectName();
      ExprPtr def = SkipOp("=") ? Expression(true) : nullptr;
      n->params.emplace_back(std::move(name), std::move(def));
    }
    ExpectBlockEnd();
    const int loops = loops_;
    loops_ = 0;
    n->body = Statements({"endmacro"});
    loops_ = loops;
    End();
  }

  // parse_tuple: an expression, or a tuple when commas follow.
  ExprPtr Tuple(bool with_cond) {
    const int line = Cur().line;
    ExprPtr first = Expression(with_cond);
    if (!IsOp(",")) return first;
    auto t = MakeExpr(Expr::Kind::kTuple, line);
    t->args.push_back(std::move(first));
    while (SkipOp(",")) {
      if (Cur().type == T::kBlockEnd || Cur().type == T::kVarEnd || IsOp(")") || IsOp("=")) break;
      t->args.push_back(Expression(with_cond));
    }
    return t;
  }

  ExprPtr Expression(bool with_cond) {
    if (++depth_ > 200) Unsupported("expressions nested more than 200 deep");
    ExprPtr e = with_cond ? CondExpr() : Or();
    --depth_;
    return e;
  }

  ExprPtr CondExpr() {
    ExprPtr e = Or();
    while (IsName("if")) {
      auto c = MakeExpr(Expr::Kind::kCond, Cur().line);
      ++i_;
      ExprPtr test = Or();
      ExprPtr other = SkipName("else") ? CondExpr() : nullptr;
      c->args.push_back(std::move(e));
      c->args.push_back(std::move(test));
      c->args.push_back(std::move(other));
      e = std::move(c);
    }
    return e;
  }

  ExprPtr BinaryChain(ExprPtr (Parser::*next)(), const std::vector<std::string_view>& ops,
                      bool names) {
    ExprPtr e = (this->*next)();
    for (;;) {
      std::string op;
      for (std::string_view o : ops) {
        if (names ? IsName(o) : IsOp(o)) op = o;
      }
      if (op.empty()) return e;
      auto b = MakeExpr(Expr::Kind::kBinary, Cur().line);
      ++i_;
      b->name = op;
      b->args.push_back(std::move(e));
      b->args.push_back((this->*next)());
      e = std::move(b);
    }
  }
  ExprPtr Or() { return BinaryChain(&Parser::And, {"or"}, true); }
  ExprPtr And() { return BinaryChain(&Parser::Not, {"and"}, true); }
  ExprPtr Not() {
    if (!IsName("not")) return Compare();
    auto u = MakeExpr(Expr::Kind::kUnary, Cur().line);
    ++i_;
    u->name = "not";
    u->args.push_back(Not());
    return u;
  }
  ExprPtr Compare() {
    const int line = Cur().line;
    ExprPtr first = Math1();
    auto c = MakeExpr(Expr::Kind::kCompare, line);
    c->args.push_back(std::move(first));
    for (;;) {
      if (Cur().type == T::kOp &&
          (IsOp("==") || IsOp("!=") || IsOp("<") || IsOp(">") || IsOp("<=") || IsOp(">="))) {
        c->ops.push_back(t_[i_++].s);
      } else if (IsName("in")) {
        ++i_;
        c->ops.push_back("in");
      } else if (IsName("not") && Peek(1).type == T::kName && Peek(1).s == "in") {
        i_ += 2;
        c->ops.push_back("not in");
      } else {
        break;
      }
      c->args.push_back(Math1());
    }
    if (c->ops.empty()) return std::move(c->args[0]);
    return c;
  }
  ExprPtr Math1() { return BinaryChain(&Parser::Concat, {"+", "-"}, false); }
  ExprPtr Concat() { return BinaryChain(&Parser::Math2, {"~"}, false); }
  ExprPtr Math2() { return BinaryChain(&Parser::Pow, {"*", "/", "//", "%"}, false); }
  ExprPtr Pow() { return BinaryChain(&Parser::UnaryFiltered, {"**"}, false); }
  ExprPtr UnaryFiltered() { return Unary(true); }

  ExprPtr Unary(bool with_filter) {
    ExprPtr e;
    if (IsOp("-") || IsOp("+")) {
      e = MakeExpr(Expr::Kind::kUnary, Cur().line);
      e->name = t_[i_++].s;
      if (++depth_ > 200) Unsupported("expressions nested more than 200 deep");
      e->args.push_back(Unary(false));
      --depth_;
    } else {
      e = Primary();
    }
    e = Postfix(std::move(e));
    if (with_filter) e = FilterExpr(std::move(e));
    return e;
  }

  ExprPtr Primary() {
    const Token& tok = Cur();
    auto lit = [&](Value v) {
      auto e = MakeExpr(Expr::Kind::kLiteral, tok.line);
      e->literal = std::move(v);
      ++i_;
      return e;
    };
    switch (tok.type) {
      case T::kName:
        if (tok.s == "true" || tok.s == "True") return lit(Value(true));
        if (tok.s == "false" || tok.s == "False") return lit(Value(false));
        if (tok.s == "none" || tok.s == "None") return lit(Value::None());
        {
          auto e = MakeExpr(Expr::Kind::kName, tok.line);
          e->name = tok.s;
          ++i_;
          return e;
        }
      case T::kString: {
        std::string s = tok.s;
        ExprPtr e = lit(Value());
        while (Cur().type == T::kString) s += t_[i_++].s;  // "a" "b" is "ab"
        e->literal = Value(std::move(s));
        return e;
      }
      case T::kNumber:
        return lit(tok.number);
      case T::kOp:
        if (tok.s == "(") return Parenthesized();
        if (tok.s == "[") return ListLiteral();
        if (tok.s == "{") return DictLiteral();
        break;
      default:
        break;
    }
    SyntaxError(tok.line, "unexpected " + Describe(tok));
  }

  ExprPtr Parenthesized() {
    const int line = Cur().line;
    ++i_;
    if (SkipOp(")")) return MakeExpr(Expr::Kind::kTuple, line);
    ExprPtr first = Expression(true);
    if (SkipOp(")")) return first;
    auto t = MakeExpr(Expr::Kind::kTuple, line);
    t->args.push_back(std::move(first));
    while (SkipOp(",")) {
      if (IsOp(")")) break;
      t->args.push_back(Expression(true));
    }
    ExpectOp(")");
    return t;
  }

  // The items after an opening bracket up to `close`, comma-separated (a trailing comma
  // allowed), each read by `item`.
  template <typename ReadItem>
  void CommaSeparated(std::string_view close, ReadItem item) {
    ++i_;
    for (bool first = true; !SkipOp(close); first = false) {
      if (!first) {
        ExpectOp(",");
        if (SkipOp(close)) break;
      }
      item();
    }
  }

  ExprPtr ListLiteral() {
    auto l = MakeExpr(Expr::Kind::kList, Cur().line);
    CommaSeparated("]", [&] { l->args.push_back(Expression(true)); });
    return l;
  }

  ExprPtr DictLiteral() {
    auto d = MakeExpr(Expr::Kind::kDict, Cur().line);
    CommaSeparated("}", [&] {
      d->args.push_back(Expression(true));
      ExpectOp(":");
      d->args.push_back(Expression(true));
    });
    return d;
  }

  ExprPtr Postfix(ExprPtr e) {
    for (;;) {
      if (IsOp(".")) {
        const int line = Cur().line;
        ++i_;
        if (Cur().type == T::kNumber && Cur().number.kind() == Value::Kind::kInt) {
          auto item = MakeExpr(Expr::Kind::kItem, line);
          item->args.push_back(std::move(e));
          item->args.push_back(Primary());
          e = std::move(item);
          continue;
        }
        auto a = MakeExpr(Expr::Kind::kAttr, line);
        a->name = ExpectName();
        a->args.push_back(std::move(e));
        e = std::move(a);
      } else if (IsOp("[")) {
        e = Subscript(std::move(e));
      } else if (IsOp("(")) {
        e = CallArgs(MakeExpr(Expr::Kind::kCall, Cur().line), std::move(e));
      } else {
        return e;
      }
    }
  }

  ExprPtr Subscript(ExprPtr obj) {
    const int line = Cur().line;
    ++i_;
    ExprPtr parts[3];
    int colons = 0;
    while (!IsOp("]")) {
      if (SkipOp(":")) {
        if (++colons > 2) SyntaxError(line, "invalid slice");
        continue;
      }
      if (parts[colons]) SyntaxError(line, "expected ']', got " + Describe(Cur()));
      parts[colons] = Expression(true);
      if (colons == 0 && IsOp(",")) Unsupported("tuple subscripts");
    }
    ++i_;
    if (colons == 0 && !parts[0]) SyntaxError(line, "expected an index");
    auto e = MakeExpr(colons == 0 ? Expr::Kind::kItem : Expr::Kind::kSlice, line);
    e->args.push_back(std::move(obj));
    e->args.push_back(std::move(parts[0]));
    if (colons > 0) {
      e->args.push_back(std::move(parts[1]));
      e->args.push_back(std::move(parts[2]));
    }
    return e;
  }

  // "(" args ")" into `call`, whose args[0] is `callee` (null for filters and tests).
  ExprPtr CallArgs(ExprPtr call, ExprPtr callee) {
    call->args.insert(call->args.begin(), std::move(callee));
    ExpectOp("(");
    bool first = true;
    while (!SkipOp(")")) {
      if (!first) {
        ExpectOp(",");
        if (SkipOp(")")) break;
      }
      first = false;
      if (IsOp("*") || IsOp("**")) Unsupported("*args and **kwargs in calls");
      if (Cur().type == T::kName && Peek(1).type == T::kOp && Peek(1).s == "=") {
        std::string key = t_[i_].s;
        i_ += 2;
        call->keywords.emplace_back(std::move(key), Expression(true));
      } else {
        if (!call->keywords.empty()) SyntaxError(Cur().line, "positional argument after keyword");
        call->args.push_back(Expression(true));
      }
    }
    return call;
  }

  ExprPtr FilterExpr(ExprPtr e) {
    for (;;) {
      if (IsOp("|")) {
        e = Filter(std::move(e));
      } else if (IsName("is")) {
        e = Test(std::move(e));
      } else if (IsOp("(")) {
        e = CallArgs(MakeExpr(Expr::Kind::kCall, Cur().line), std::move(e));
      } else {
        return e;
      }
    }
  }

  std::string DottedName() {
    std::string name = ExpectName();
    while (IsOp(".") && Peek(1).type == T::kName) {
      i_ += 1;
      name += '.';
      name += ExpectName();
    }
    return name;
  }

  // "|" name [args]; `operand` is null in {% filter %} and {% set x | f %}.
  ExprPtr Filter(ExprPtr operand) {
    auto f = MakeExpr(Expr::Kind::kFilter, Cur().line);
    if (operand) ExpectOp("|");
    SkipOp("|");
    f->name = DottedName();
    if (IsOp("(")) return CallArgs(std::move(f), std::move(operand));
    f->args.push_back(std::move(operand));
    return f;
  }

  ExprPtr Test(ExprPtr operand) {
    auto t = MakeExpr(Expr::Kind::kTest, Cur().line);
    ++i_;  // "is"
    t->negated = SkipName("not");
    t->name = DottedName();
    if (IsOp("(")) return CallArgs(std::move(t), std::move(operand));
    t->args.push_back(std::move(operand));
    const Token& c = Cur();
    const bool arg =
        (c.type == T::kName || c.type == T::kString || c.type == T::kNumber ||
         (c.type == T::kOp && (c.s == "(" || c.s == "[" || c.s == "{"))) &&
        !(c.type == T::kName && (c.s == "else" || c.s == "or" || c.s == "and" || c.s == "if" ||
                                 c.s == "in" || c.s == "not" || c.s == "is"));
    if (arg) t->args.push_back(Postfix(Primary()));
    return t;
  }

  std::vector<Token> t_;
  size_t i_ = 0;
  int depth_ = 0;
  int loops_ = 0;
};

}  // namespace

Body Parse(std::string_view source) {
  std::vector<Token> tokens = Lexer(source).Run();
  return Parser(std::move(tokens)).Template();
}

}  // namespace ocular::jinja
