// The syntax tree of a chat template (jinja2's nodes, reduced to what chat templates use), and
// the parser that builds it with the lexer settings transformers uses (trim_blocks,
// lstrip_blocks, no trailing newline kept). Internal to src/text/jinja.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "text/jinja/value.h"

namespace ocular::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;
using Keywords = std::vector<std::pair<std::string, ExprPtr>>;

struct Expr {
  enum class Kind {
    kLiteral,  // literal
    kName,     // name
    kAttr,     // args[0].name
    kItem,     // args[0][args[1]]
    kSlice,    // args[0][args[1]:args[2]:args[3]] (null parts are absent)
    kCall,     // args[0](args[1:], keywords)
    kFilter,   // args[0] | name(args[1:], keywords)
    kTest,     // args[0] is [not] name(args[1:])
    kUnary,    // name ("-", "+", "not") args[0]
    kBinary,   // args[0] name args[1]: + - * / // % ** ~ and or
    kCompare,  // args[0] ops[0] args[1] ops[1] args[2] ... (Python's chained comparison)
    kCond,     // args[0] if args[1] else args[2] (args[2] may be null)
    kList,     // [args...]
    kTuple,    // (args...)
    kDict,     // {args[0]: args[1], ...}
  };
  Kind kind;
  int line = 0;
  Value literal;
  std::string name;
  std::vector<ExprPtr> args;
  Keywords keywords;
  std::vector<std::string> ops;
  bool negated = false;  // kTest: "is not"
};

struct Node;
using Body = std::vector<std::unique_ptr<Node>>;

struct Node {
  enum class Kind {
    kText,         // text
    kOutput,       // {{ expr }}
    kIf,           // branches (cond, body); else_body
    kFor,          // for targets in expr [if cond]: body else else_body
    kSet,          // set targets = expr, or set name.attr = expr
    kSetBlock,     // set targets[0] [| filter] %} body {% endset
    kMacro,        // macro name(params) body
    kFilterBlock,  // filter <filter> body endfilter
    kBreak,
    kContinue,
    kScope,  // a body rendered as is ({% generation %})
  };
  Kind kind;
  int line = 0;
  std::string text;  // kText; macro name
  std::string attr;  // kSet on a namespace attribute
  std::vector<std::string> targets;
  ExprPtr expr;
  ExprPtr cond;
  ExprPtr filter;  // a kFilter whose args[0] is null
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body body, else_body;
  Keywords params;  // macro parameters and their defaults (null when none)
};

// Parses `source`. Throws Error (kDataLoss for a syntax error jinja2 reports too, kUnimplemented
// for a jinja2 construct this renderer does not implement), its line set.
Body Parse(std::string_view source);

}  // namespace ocular::jinja
