// The evaluator: walks the tree of ast.h with jinja2's scoping (a for loop and a macro call
// open a scope; if and set do not) and Python's semantics (builtins.cc).
#include "text/jinja/template.h"

#include <unordered_map>

#include "text/jinja/ast.h"
#include "text/jinja/builtins.h"

namespace ocular::jinja {
namespace {

constexpr int kMaxCallDepth = 100;

struct Scope {
  std::shared_ptr<Scope> parent;
  std::unordered_map<std::string, Value> vars;

  const Value* Find(const std::string& name) const {
    for (const Scope* s = this; s != nullptr; s = s->parent.get()) {
      auto it = s->vars.find(name);
      if (it != s->vars.end()) return &it->second;
    }
    return nullptr;
  }
};

class Renderer {
 public:
  Renderer(std::shared_ptr<Scope> globals, std::time_t now, int64_t max_steps)
      : scope_(std::move(globals)), now_(now), max_steps_(max_steps) {}
  // A macro holds the scope it was defined in, which holds the macro (or reaches it through
  // its parents, a namespace, a list): every such cycle passes through a closure, so emptying
  // the closures frees them all.
  ~Renderer() {
    for (const auto& c : closures_) {
      c->vars.clear();
      c->parent.reset();
    }
  }
  Renderer(const Renderer&) = delete;
  Renderer& operator=(const Renderer&) = delete;

  enum class Flow { kNormal, kBreak, kContinue };

  Flow Exec(const Body& body, std::string* out) {
    for (const auto& node : body) {
      Flow f;
      try {
        f = ExecNode(*node, out);
      } catch (Error& e) {
        if (e.line == 0) e.line = node->line;
        throw;
      }
      if (f != Flow::kNormal) return f;
    }
    return Flow::kNormal;
  }

  Value Eval(const Expr& e) {
    try {
      return EvalInner(e);
    } catch (Error& err) {
      if (err.line == 0) err.line = e.line;
      throw;
    }
  }

 private:
  void Step() {
    if (++steps_ > max_steps_) {
      Fail(StatusCode::kResourceExhausted, StrCat("more than ", max_steps_, " steps"));
    }
  }
  static void Append(std::string* out, std::string_view s) {
    if (out->size() + s.size() > kMaxStringBytes) {
      Fail(StatusCode::kResourceExhausted, StrCat("output past ", kMaxStringBytes, " bytes"));
    }
    out->append(s);
  }

  Flow ExecNode(const Node& n, std::string* out) {
    Step();
    switch (n.kind) {
      case Node::Kind::kText:
        Append(out, n.text);
        return Flow::kNormal;
      case Node::Kind::kOutput:
        Append(out, Eval(*n.expr).Str());
        return Flow::kNormal;
      case Node::Kind::kIf:
        for (const auto& [cond, body] : n.branches) {
          if (Eval(*cond).Truthy()) return Exec(body, out);
        }
        return Exec(n.else_body, out);
      case Node::Kind::kFor:
        For(n, out);
        return Flow::kNormal;
      case Node::Kind::kSet:
        Assign(n, Eval(*n.expr));
        return Flow::kNormal;
      case Node::Kind::kSetBlock: {
        std::string text;
        Exec(n.body, &text);
        Value v(std::move(text));
        if (n.filter) v = Filter(*n.filter, v);
        Assign(n, std::move(v));
        return Flow::kNormal;
      }
      case Node::Kind::kMacro:
        scope_->vars[n.text] = MakeMacro(n);
        return Flow::kNormal;
      case Node::Kind::kFilterBlock: {
        std::string text;
        Exec(n.body, &text);
        Append(out, Filter(*n.filter, Value(std::move(text))).Str());
        return Flow::kNormal;
      }
      case Node::Kind::kBreak:
        return Flow::kBreak;
      case Node::Kind::kContinue:
        return Flow::kContinue;
      case Node::Kind::kScope:
        return Exec(n.body, out);
    }
    return Flow::kNormal;
  }

  void Assign(const Node& n, Value v) {
    if (!n.attr.empty()) {
      const Value* ns = scope_->Find(n.targets[0]);
      if (ns == nullptr || !ns->is_namespace()) {
        TypeError("cannot assign attribute on non-namespace object");
      }
      Dict& d = ns->mutable_dict();
      for (auto& [k, old] : d) {
        if (k == n.attr) {
          old = std::move(v);
          return;
        }
      }
      d.emplace_back(n.attr, std::move(v));
      return;
    }
    Unpack(n.targets, std::move(v), scope_.get());
  }

  static void Unpack(const std::vector<std::string>& names, Value v, Scope* into) {
    if (names.size() == 1) {
      into->vars[names[0]] = std::move(v);
      return;
    }
    List items = Iterate(v);
    if (items.size() != names.size()) {
      TypeError(StrCat("cannot unpack ", items.size(), " values into ", names.size(), " names"));
    }
    for (size_t i = 0; i < names.size(); ++i) into->vars[names[i]] = std::move(items[i]);
  }

  void For(const Node& n, std::string* out) {
    const Value seq = Eval(*n.expr);
    if (!seq.is_undefined() && seq.kind() != Value::Kind::kList && !seq.is_dict() &&
        !seq.is_string()) {
      TypeError(StrCat("'", seq.TypeName(), "' object is not iterable"));
    }
    List items = Iterate(seq);
    auto loop_scope = std::make_shared<Scope>();
    loop_scope->parent = scope_;
    std::swap(scope_, loop_scope);
    if (n.cond) {  // `for x in xs if cond`: the loop sees only the items that pass
      List kept;
      for (Value& item : items) {
        Step();
        Unpack(n.targets, item, scope_.get());
        if (Eval(*n.cond).Truthy()) kept.push_back(std::move(item));
      }
      items = std::move(kept);
    }
    for (size_t i = 0; i < items.size(); ++i) {
      Step();
      Unpack(n.targets, items[i], scope_.get());
      scope_->vars["loop"] = LoopObject(items, i);
      if (Exec(n.body, out) == Flow::kBreak) break;
    }
    std::swap(scope_, loop_scope);
    if (items.empty()) Exec(n.else_body, out);
  }

  static Value LoopObject(const List& items, size_t i) {
    const int64_t len = static_cast<int64_t>(items.size());
    const int64_t k = static_cast<int64_t>(i);
    Dict d = {{"index", Value(k + 1)},
              {"index0", Value(k)},
              {"revindex", Value(len - k)},
              {"revindex0", Value(len - k - 1)},
              {"first", Value(k == 0)},
              {"last", Value(k == len - 1)},
              {"length", Value(len)},
              {"depth", Value(1)},
              {"depth0", Value(0)},
              {"previtem", i > 0 ? items[i - 1] : Value::Undefined("previtem")},
              {"nextitem", k + 1 < len ? items[i + 1] : Value::Undefined("nextitem")}};
    d.emplace_back("cycle", Value::Func("loop.cycle", [k](Args& a) {
                     if (a.positional.empty()) TypeError("no items for cycling given");
                     return a.positional[k % a.positional.size()];
                   }));
    return Value(std::move(d));
  }

  Value MakeMacro(const Node& n) {
    std::shared_ptr<Scope> closure = scope_;
    closures_.push_back(closure);
    const Node* node = &n;
    return Value::Func(n.text, [this, node, closure](Args& args) {
      if (++depth_ > kMaxCallDepth) {
        Fail(StatusCode::kResourceExhausted, StrCat("macros nested past ", kMaxCallDepth));
      }
      auto frame = std::make_shared<Scope>();
      frame->parent = closure;
      if (args.positional.size() > node->params.size()) {
        TypeError(StrCat("macro '", node->text, "' takes not more than ", node->params.size(),
                         " argument(s)"));
      }
      for (size_t i = 0; i < node->params.size(); ++i) {
        const auto& [name, def] = node->params[i];
        Value v = Arg(args, i, name, Value::Undefined(name));
        if (v.is_undefined() && def) {
          std::swap(scope_, frame);
          v = Eval(*def);
          std::swap(scope_, frame);
        }
        frame->vars[name] = std::move(v);
      }
      for (const auto& [key, v] : args.keywords) {
        bool known = false;
        for (const auto& p : node->params) known = known || p.first == key;
        if (!known)
          TypeError(StrCat("macro '", node->text, "' takes no keyword argument '", key, "'"));
      }
      std::string text;
      std::swap(scope_, frame);
      Exec(node->body, &text);
      std::swap(scope_, frame);
      --depth_;
      return Value(std::move(text));
    });
  }

  Args EvalArgs(const Expr& e, size_t first) {
    Args args;
    for (size_t i = first; i < e.args.size(); ++i) args.positional.push_back(Eval(*e.args[i]));
    for (const auto& [k, v] : e.keywords) args.keywords.emplace_back(k, Eval(*v));
    return args;
  }

  Value Filter(const Expr& f, const Value& operand) {
    Args args = EvalArgs(f, 1);
    return ApplyFilter(f.name, operand, args);
  }

  Value Lookup(const std::string& name) {
    if (const Value* v = scope_->Find(name)) return *v;
    Value g = Global(name, now_);
    return g.is_undefined() ? Value::Undefined(name) : g;
  }

  Value EvalInner(const Expr& e) {
    switch (e.kind) {
      case Expr::Kind::kLiteral:
        return e.literal;
      case Expr::Kind::kName:
        return Lookup(e.name);
      case Expr::Kind::kAttr:
        return GetAttr(Eval(*e.args[0]), e.name);
      case Expr::Kind::kItem:
        return GetItem(Eval(*e.args[0]), Eval(*e.args[1]));
      case Expr::Kind::kSlice: {
        auto part = [&](size_t i) { return e.args[i] ? Eval(*e.args[i]) : Value(); };
        return Slice(Eval(*e.args[0]), part(1), part(2), part(3));
      }
      case Expr::Kind::kCall: {
        const Value callee = Eval(*e.args[0]);
        if (!callee.is_function()) {
          if (callee.is_undefined())
            TypeError(StrCat("'", callee.undefined_name(), "' is undefined"));
          TypeError(StrCat("'", callee.TypeName(), "' object is not callable"));
        }
        Args args = EvalArgs(e, 1);
        return callee.Call(args);
      }
      case Expr::Kind::kFilter:
        return Filter(e, Eval(*e.args[0]));
      case Expr::Kind::kTest: {
        const Value operand = Eval(*e.args[0]);
        Args args = EvalArgs(e, 1);
        return Value(ApplyTest(e.name, operand, args) != e.negated);
      }
      case Expr::Kind::kUnary:
        return Unary(e);
      case Expr::Kind::kBinary:
        return Binary(e);
      case Expr::Kind::kCompare:
        return CompareChain(e);
      case Expr::Kind::kCond:
        if (Eval(*e.args[1]).Truthy()) return Eval(*e.args[0]);
        return e.args[2] ? Eval(*e.args[2]) : Value::Undefined();
      case Expr::Kind::kList:
      case Expr::Kind::kTuple: {
        List items;
        for (const auto& a : e.args) items.push_back(Eval(*a));
        return Value(std::move(items), e.kind == Expr::Kind::kTuple);
      }
      case Expr::Kind::kDict: {
        Dict d;
        for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
          Value k = Eval(*e.args[i]);
          if (!k.is_string()) Unsupported("dict literals with non-string keys");
          Value v = Eval(*e.args[i + 1]);
          bool replaced = false;
          for (auto& [key, old] : d) {
            if (key == k.str()) {
              old = v;
              replaced = true;
            }
          }
          if (!replaced) d.emplace_back(k.str(), std::move(v));
        }
        return Value(std::move(d));
      }
    }
    return Value();
  }

  Value Unary(const Expr& e) {
    const Value v = Eval(*e.args[0]);
    if (e.name == "not") return Value(!v.Truthy());
    if (v.is_undefined()) TypeError(StrCat("'", v.undefined_name(), "' is undefined"));
    if (!v.is_number())
      TypeError(StrCat("bad operand type for unary ", e.name, ": '", v.TypeName(), "'"));
    if (e.name == "+") return v.kind() == Value::Kind::kFloat ? v : Value(v.integer());
    return v.kind() == Value::Kind::kFloat ? Value(-v.number()) : Arithmetic("-", Value(0), v);
  }

  Value Binary(const Expr& e) {
    if (e.name == "and") {
      Value a = Eval(*e.args[0]);
      return a.Truthy() ? Eval(*e.args[1]) : a;
    }
    if (e.name == "or") {
      Value a = Eval(*e.args[0]);
      return a.Truthy() ? a : Eval(*e.args[1]);
    }
    const Value a = Eval(*e.args[0]);
    const Value b = Eval(*e.args[1]);
    if (e.name == "~") {
      std::string s = a.Str();
      Append(&s, b.Str());
      return Value(std::move(s));
    }
    return Arithmetic(e.name, a, b);
  }

  Value CompareChain(const Expr& e) {
    Value left = Eval(*e.args[0]);
    for (size_t i = 0; i < e.ops.size(); ++i) {
      Value right = Eval(*e.args[i + 1]);
      const std::string& op = e.ops[i];
      bool r;
      if (op == "==") {
        r = Equal(left, right);
      } else if (op == "!=") {
        r = !Equal(left, right);
      } else if (op == "in") {
        r = Contains(right, left);
      } else if (op == "not in") {
        r = !Contains(right, left);
      } else {
        if (left.is_undefined() || right.is_undefined()) {
          TypeError(
              StrCat("'", (left.is_undefined() ? left : right).undefined_name(), "' is undefined"));
        }
        const int c = Compare(left, right);
        r = op == "<" ? c < 0 : op == ">" ? c > 0 : op == "<=" ? c <= 0 : c >= 0;
      }
      if (!r) return Value(false);
      left = std::move(right);
    }
    return Value(true);
  }

  std::shared_ptr<Scope> scope_;
  std::vector<std::shared_ptr<Scope>> closures_;  // the scopes macros were defined in
  std::time_t now_;
  int64_t steps_ = 0, max_steps_;
  int depth_ = 0;
};

Status ToStatus(const Error& e, const std::string& where) {
  return ocular::Error(e.code, "jinja", where, e.line ? StrCat(":", e.line) : "", ": ", e.message);
}

}  // namespace

StatusOr<Template> Template::Parse(std::string_view source, std::string where) {
  Template t;
  t.where_ = std::move(where);
  try {
    t.body_ = std::make_shared<const Body>(jinja::Parse(source));
  } catch (const Error& e) {
    return ToStatus(e, t.where_);
  }
  return t;
}

StatusOr<std::string> Template::Render(const nlohmann::ordered_json& context, std::time_t now,
                                       int64_t max_steps) const {
  if (!context.is_object()) {
    return ocular::Error(StatusCode::kInvalidArgument, "jinja", where_,
                         ": context must be an object");
  }
  try {
    auto globals = std::make_shared<Scope>();
    for (const auto& [k, v] : context.items()) globals->vars[k] = FromJson(v);
    Renderer r(globals, now, max_steps);
    std::string out;
    if (r.Exec(*body_, &out) != Renderer::Flow::kNormal) {
      Fail(StatusCode::kInternal, "break or continue outside a loop");
    }
    return out;
  } catch (const Error& e) {
    return ToStatus(e, where_);
  }
}

}  // namespace ocular::jinja
