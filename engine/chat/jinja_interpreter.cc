#include "engine/chat/jinja_interpreter.h"

#include <cmath>
#include <string>
#include <utility>

#include "engine/chat/jinja_builtins.h"
#include "engine/chat/jinja_text.h"

namespace textgen::jinja {
namespace {

// Limits that keep a hostile template from hanging or exhausting a server thread; real chat
// templates stay far below them.
constexpr int kMaxCallDepth = 100;
constexpr long kMaxSteps = 5'000'000;
constexpr size_t kMaxOutput = 64u << 20;

// Takes the result by pointer: it is read only after the overflow builtin has written it.
int64_t Checked(bool overflow, const int64_t* v) {
  if (overflow) throw RenderError("OverflowError", "integer result too large");
  return *v;
}

// Python `a % b` and `a // b` for ints: the result takes the divisor's sign.
int64_t FloorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

Value Arithmetic(const std::string& op, const Value& a, const Value& b) {
  if (a.is_undefined()) FailUndefined(a);
  if (b.is_undefined()) FailUndefined(b);
  if (a.is_number() && b.is_number()) {
    const bool ints = !a.is_float() && !b.is_float();
    const int64_t x = a.as_int(), y = b.as_int();
    const double fx = a.as_double(), fy = b.as_double();
    int64_t r;
    if (op == "+") {
      if (ints) return Value::Int(Checked(__builtin_add_overflow(x, y, &r), &r));
      return Value::Float(fx + fy);
    }
    if (op == "-") {
      if (ints) return Value::Int(Checked(__builtin_sub_overflow(x, y, &r), &r));
      return Value::Float(fx - fy);
    }
    if (op == "*") {
      if (ints) return Value::Int(Checked(__builtin_mul_overflow(x, y, &r), &r));
      return Value::Float(fx * fy);
    }
    if (op == "**") {
      if (ints && y >= 0) {
        int64_t acc = 1;
        for (int64_t i = 0; i < y; ++i) {
          if (__builtin_mul_overflow(acc, x, &acc)) Checked(true, &acc);
          if (acc == 0 || acc == 1) break;
        }
        return Value::Int(acc);
      }
      return Value::Float(std::pow(fx, fy));
    }
    if ((ints && y == 0) || (!ints && fy == 0)) {
      throw RenderError("ZeroDivisionError", "division by zero");
    }
    if (op == "/") return Value::Float(fx / fy);
    if (op == "//") {
      if (ints) return Value::Int(FloorDiv(x, y));
      return Value::Float(std::floor(fx / fy));
    }
    if (op == "%") {
      if (ints) return Value::Int(x - FloorDiv(x, y) * y);
      double m = std::fmod(fx, fy);
      if (m != 0 && ((m < 0) != (fy < 0))) m += fy;
      return Value::Float(m);
    }
  }
  if (op == "+" && a.is_string() && b.is_string()) {
    if (a.is_safe() == b.is_safe()) return Value::StrLike(a.str() + b.str(), a);
    // Markup + str escapes the str (markupsafe), and the result is Markup.
    return Value::Markup((a.is_safe() ? a.str() : HtmlEscape(a.str())) +
                         (b.is_safe() ? b.str() : HtmlEscape(b.str())));
  }
  if (op == "+" && a.is_plain_list() && b.is_plain_list() && a.is_tuple() == b.is_tuple()) {
    List l = a.list();
    l.insert(l.end(), b.list().begin(), b.list().end());
    return Value::MakeList(std::move(l), a.is_tuple());
  }
  if (op == "*" && (a.is_string() || a.is_plain_list()) && (b.is_int() || b.is_bool())) {
    if (b.as_int() > 0 &&
        (a.is_string() ? a.str().size() : a.list().size()) * b.as_int() > kMaxOutput) {
      throw RenderError("MemoryError", "repetition result too large");
    }
    if (a.is_string()) {
      std::string s;
      for (int64_t i = 0; i < b.as_int(); ++i) s += a.str();
      return Value::Str(std::move(s));
    }
    List l;
    for (int64_t i = 0; i < b.as_int(); ++i) l.insert(l.end(), a.list().begin(), a.list().end());
    return Value::MakeList(std::move(l), a.is_tuple());
  }
  if (op == "*" && (b.is_string() || b.is_plain_list()) && (a.is_int() || a.is_bool())) {
    return Arithmetic(op, b, a);
  }
  if (op == "%" && a.is_string()) return Value::Str(PercentFormat(a.str(), b));
  TypeError("unsupported operand type(s) for " + op + ": '" + a.TypeName() + "' and '" +
            b.TypeName() + "'");
}

bool Contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::kString:
      if (!item.is_string()) {
        TypeError("'in <string>' requires string as left operand, not " + item.TypeName());
      }
      return container.str().find(item.str()) != std::string::npos;
    case Value::Kind::kList:
      for (const Value& v : container.list()) {
        if (Equal(v, item)) return true;
      }
      return false;
    case Value::Kind::kDict:
      return container.dict().Find(item) != nullptr;
    case Value::Kind::kUndefined:
      return false;
    default:
      TypeError("argument of type '" + container.TypeName() + "' is not iterable");
  }
}

// Python slicing of a list or of a string's code points.
Value Slice(const Value& obj, const Value& start, const Value& stop, const Value& step) {
  auto as_opt = [](const Value& v, int64_t def) {
    if (v.is_undefined() || v.is_none()) return def;
    if (!v.is_int() && !v.is_bool()) TypeError("slice indices must be integers or None");
    return v.as_int();
  };
  const int64_t st = as_opt(step, 1);
  if (st == 0) throw RenderError("ValueError", "slice step cannot be zero");
  std::u32string cps;
  int64_t n;
  if (obj.is_string()) {
    cps = Utf8ToCodepoints(obj.str());
    n = static_cast<int64_t>(cps.size());
  } else if (obj.is_plain_list() || obj.str() == "range") {
    n = static_cast<int64_t>(obj.list().size());
  } else if (obj.is_undefined()) {
    FailUndefined(obj);
  } else {
    return Value::Undefined("'" + obj.TypeName() + " object' is not subscriptable");
  }
  auto clamp = [&](int64_t i, bool is_start) {
    if (i < 0) i += n;
    if (st > 0) return std::clamp<int64_t>(i, 0, n);
    return std::clamp<int64_t>(i, -1, n - 1);
  };
  const int64_t b = start.is_undefined() || start.is_none() ? (st > 0 ? 0 : n - 1)
                                                            : clamp(as_opt(start, 0), true);
  const int64_t e =
      stop.is_undefined() || stop.is_none() ? (st > 0 ? n : -1) : clamp(as_opt(stop, 0), false);
  std::u32string s_out;
  List l_out;
  for (int64_t i = b; st > 0 ? i < e : i > e; i += st) {
    if (obj.is_string()) {
      s_out.push_back(cps[i]);
    } else {
      l_out.push_back(obj.list()[i]);
    }
  }
  if (obj.is_string()) return Value::Str(CodepointsToUtf8(s_out));
  if (obj.str() == "range") return Value::MakeIterable(std::move(l_out), "range");
  return Value::MakeList(std::move(l_out), obj.is_tuple());
}

}  // namespace

void FailUndefined(const Value& v) {
  throw RenderError("UndefinedError", v.str().empty() ? "undefined value" : v.str());
}

const Value* Scope::Find(const std::string& name) const {
  for (const Scope* s = this; s; s = s->parent.get()) {
    auto it = s->vars.find(name);
    if (it != s->vars.end()) return &it->second;
  }
  return nullptr;
}

Interpreter::~Interpreter() {
  // A namespace can hold itself (`set ns.me = ns`): empty them all to break such cycles.
  for (const Value& ns : namespaces_) ns.namespace_dict().items.clear();
}

void Interpreter::TrackNamespace(const Value& ns) { namespaces_.push_back(ns); }

std::string Interpreter::Render(const Body& body, std::shared_ptr<Scope> root) {
  AddGlobals(*root);
  std::string out;
  Exec(body, root, out);
  return out;
}

void Interpreter::Step() {
  if (++steps_ > kMaxSteps) {
    throw RenderError("TemplateRuntimeError",
                      "template runs too long (over " + std::to_string(kMaxSteps) + " steps)");
  }
}

Interpreter::Flow Interpreter::Exec(const Body& body, const std::shared_ptr<Scope>& scope,
                                    std::string& out) {
  for (const auto& s : body) {
    Step();
    line_ = s->line;
    const Flow f = ExecOne(*s, scope, out);
    if (out.size() > kMaxOutput) {
      throw RenderError("TemplateRuntimeError", "rendered text too long");
    }
    if (f != Flow::kNormal) return f;
  }
  return Flow::kNormal;
}

Interpreter::Flow Interpreter::ExecOne(const Stmt& s, const std::shared_ptr<Scope>& scope,
                                       std::string& out) {
  switch (s.kind) {
    case Stmt::Kind::kText:
      out += s.text;
      break;
    case Stmt::Kind::kOutput:
      out += Eval(*s.expr, scope).ToString();
      break;
    case Stmt::Kind::kIf:
      for (const auto& [cond, body] : s.branches) {
        if (Eval(*cond, scope).Truthy()) return Exec(body, scope, out);
      }
      return Exec(s.else_body, scope, out);
    case Stmt::Kind::kFor:
      ExecFor(s, scope, out);
      break;
    case Stmt::Kind::kSet: {
      Value v = Eval(*s.expr, scope);
      if (s.name.empty()) {
        Assign(s.targets, v, *scope);
        break;
      }
      const Value* ns = scope->Find(s.targets[0]);
      if (!ns || !ns->is_namespace()) {
        throw RenderError("TemplateRuntimeError",
                          "cannot assign attribute on non-namespace object");
      }
      ns->namespace_dict().Set(Value::Str(s.name), std::move(v));
      break;
    }
    case Stmt::Kind::kSetBlock: {
      std::string captured;
      Exec(s.body, scope, captured);
      scope->vars[s.targets[0]] = Value::Str(std::move(captured));
      break;
    }
    case Stmt::Kind::kMacro:
      scope->vars[s.name] = MakeMacro(s, scope);
      break;
    case Stmt::Kind::kCallBlock: {
      // The body becomes the macro `caller` the called macro can invoke.
      Value caller = MakeMacro(s, scope);
      const Expr& call = *s.expr;
      Value fn = Eval(*call.children[0], scope);
      Args args = EvalArgs(call, 1, scope);
      args.keyword.emplace_back("caller", caller);
      out += Call(fn, args).ToString();
      break;
    }
    case Stmt::Kind::kFilterBlock: {
      auto inner = std::make_shared<Scope>();
      inner->parent = scope;
      std::string captured;
      Exec(s.body, scope, captured);
      inner->vars[kFilterBodyName] = Value::Str(std::move(captured));
      out += Eval(*s.expr, inner).ToString();
      break;
    }
    case Stmt::Kind::kScope:
      return Exec(s.body, scope, out);
    case Stmt::Kind::kBreak:
      return Flow::kBreak;
    case Stmt::Kind::kContinue:
      return Flow::kContinue;
  }
  return Flow::kNormal;
}

void Interpreter::Assign(const std::vector<std::string>& targets, const Value& v, Scope& scope) {
  if (targets.size() == 1) {
    scope.vars[targets[0]] = v;
    return;
  }
  List items;
  if (v.is_list()) {
    items = v.list();
  } else if (v.is_string()) {
    for (char32_t c : Utf8ToCodepoints(v.str()))
      items.push_back(Value::Str(CodepointsToUtf8(std::u32string(1, c))));
  } else if (v.is_dict()) {
    for (const auto& [k, val] : v.dict().items) items.push_back(k);
  } else {
    TypeError("cannot unpack non-iterable " + v.TypeName() + " object");
  }
  if (items.size() != targets.size()) {
    throw RenderError(
        "ValueError",
        items.size() > targets.size()
            ? "too many values to unpack (expected " + std::to_string(targets.size()) + ")"
            : "not enough values to unpack (expected " + std::to_string(targets.size()) + ", got " +
                  std::to_string(items.size()) + ")");
  }
  for (size_t i = 0; i < targets.size(); ++i) scope.vars[targets[i]] = items[i];
}

void Interpreter::ExecFor(const Stmt& s, const std::shared_ptr<Scope>& scope, std::string& out) {
  List items = IterateValue(Eval(*s.expr, scope));
  if (s.cond) {
    // jinja2 filters before counting: loop.index/length/last see only the kept items.
    List kept;
    for (const Value& item : items) {
      auto probe = std::make_shared<Scope>();
      probe->parent = scope;
      Assign(s.targets, item, *probe);
      if (Eval(*s.cond, probe).Truthy()) kept.push_back(item);
    }
    items = std::move(kept);
  }
  const int64_t n = static_cast<int64_t>(items.size());
  for (int64_t i = 0; i < n; ++i) {
    Step();
    auto iter = std::make_shared<Scope>();
    iter->parent = scope;
    Assign(s.targets, items[i], *iter);
    Dict loop;
    auto set = [&](const char* k, Value v) {
      loop.items.emplace_back(Value::Str(k), std::move(v));
    };
    set("index", Value::Int(i + 1));
    set("index0", Value::Int(i));
    set("revindex", Value::Int(n - i));
    set("revindex0", Value::Int(n - i - 1));
    set("first", Value::Bool(i == 0));
    set("last", Value::Bool(i == n - 1));
    set("length", Value::Int(n));
    set("depth", Value::Int(1));
    set("depth0", Value::Int(0));
    set("previtem", i > 0 ? items[i - 1] : Value::Undefined("there is no previous item"));
    set("nextitem", i + 1 < n ? items[i + 1] : Value::Undefined("there is no next item"));
    set("cycle", Value::MakeCallable("cycle", [i](Interpreter&, Args& a) {
          if (a.positional.empty()) TypeError("no items for cycling given");
          return a.positional[i % a.positional.size()];
        }));
    iter->vars["loop"] = Value::MakeDict(std::move(loop));
    if (Exec(s.body, iter, out) == Flow::kBreak) break;
  }
  if (n == 0) Exec(s.else_body, scope, out);
}

Value Interpreter::MakeMacro(const Stmt& s, const std::shared_ptr<Scope>& scope) {
  const Stmt* def = &s;
  // The macro is usually stored in the scope it closes over: holding that scope strongly would
  // make a cycle that leaks. The interpreter keeps the scope alive for the render instead.
  pinned_scopes_.push_back(scope);
  std::weak_ptr<Scope> weak_closure = scope;
  return Value::MakeCallable(s.name, [this, def, weak_closure](Interpreter&, Args& args) {
    std::shared_ptr<Scope> closure = weak_closure.lock();
    if (++call_depth_ > kMaxCallDepth) {
      throw RenderError("RecursionError", "maximum macro recursion depth exceeded");
    }
    auto frame = std::make_shared<Scope>();
    frame->parent = closure;
    if (args.positional.size() > def->params.size()) {
      TypeError("macro '" + def->name + "' takes not more than " +
                std::to_string(def->params.size()) + " argument(s)");
    }
    for (const auto& [k, v] : args.keyword) {
      bool known = k == "caller";
      for (const auto& p : def->params) known = known || p.first == k;
      if (!known) TypeError("macro '" + def->name + "' takes no keyword argument '" + k + "'");
      frame->vars[k] = v;
    }
    for (size_t i = 0; i < def->params.size(); ++i) {
      const auto& [name, dflt] = def->params[i];
      if (i < args.positional.size()) {
        frame->vars[name] = args.positional[i];
      } else if (!frame->vars.count(name)) {
        frame->vars[name] = dflt ? Eval(*dflt, frame)
                                 : Value::Undefined("parameter '" + name + "' was not provided");
      }
    }
    std::string out;
    const int saved_line = line_;
    Exec(def->body, frame, out);
    line_ = saved_line;
    --call_depth_;
    return Value::Str(std::move(out));
  });
}

Value Interpreter::GetAttr(const Value& obj, const std::string& name) {
  switch (obj.kind()) {
    case Value::Kind::kUndefined:
      FailUndefined(obj);
    case Value::Kind::kDict: {
      Value m = BoundMethod(obj, name);
      if (!m.is_undefined()) return m;
      if (const Value* v = obj.dict().Find(name)) return *v;
      return Value::Undefined("'dict object' has no attribute '" + name + "'");
    }
    case Value::Kind::kNamespace:
      if (const Value* v = obj.dict().Find(name)) return *v;
      return Value::Undefined("'Namespace object' has no attribute '" + name + "'");
    default: {
      Value m = BoundMethod(obj, name);
      if (!m.is_undefined()) return m;
      return Value::Undefined("'" + obj.TypeName() + " object' has no attribute '" + name + "'");
    }
  }
}

Value Interpreter::GetItem(const Value& obj, const Value& key) {
  switch (obj.kind()) {
    case Value::Kind::kUndefined:
      FailUndefined(obj);
    case Value::Kind::kDict:
    case Value::Kind::kNamespace:
      if (obj.is_dict()) {
        if (const Value* v = obj.dict().Find(key)) return *v;
      }
      if (key.is_string()) return GetAttr(obj, key.str());
      return Value::Undefined("'dict object' has no attribute " + key.Repr());
    case Value::Kind::kList:
    case Value::Kind::kString: {
      if (key.is_string()) return GetAttr(obj, key.str());
      if (obj.is_list() && !obj.is_plain_list() && obj.str() != "range") {
        return Value::Undefined("'" + obj.TypeName() + "' object is not subscriptable");
      }
      if (!key.is_int() && !key.is_bool()) {
        return Value::Undefined("'" + obj.TypeName() + " object' has no attribute " + key.Repr());
      }
      int64_t i = key.as_int();
      if (obj.is_list()) {
        const int64_t n = static_cast<int64_t>(obj.list().size());
        if (i < 0) i += n;
        if (i < 0 || i >= n) return Value::Undefined(obj.TypeName() + " index out of range");
        return obj.list()[i];
      }
      const std::u32string cps = Utf8ToCodepoints(obj.str());
      const int64_t n = static_cast<int64_t>(cps.size());
      if (i < 0) i += n;
      if (i < 0 || i >= n) return Value::Undefined("string index out of range");
      return Value::Str(CodepointsToUtf8(std::u32string(1, cps[i])));
    }
    default:
      return Value::Undefined("'" + obj.TypeName() + " object' is not subscriptable");
  }
}

Value Interpreter::GetPath(const Value& obj, const Value& path) {
  if (!path.is_string()) return GetItem(obj, path);
  Value cur = obj;
  size_t start = 0;
  const std::string& p = path.str();
  while (true) {
    const size_t dot = p.find('.', start);
    const std::string part =
        p.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    const bool digits = !part.empty() && part.find_first_not_of("0123456789") == std::string::npos;
    cur = GetItem(cur, digits ? Value::Int(std::stoll(part)) : Value::Str(part));
    if (dot == std::string::npos) return cur;
    start = dot + 1;
  }
}

Value Interpreter::Call(const Value& fn, Args& args) {
  if (fn.is_undefined()) FailUndefined(fn);
  if (!fn.is_callable()) TypeError("'" + fn.TypeName() + "' object is not callable");
  return fn.callable().fn(*this, args);
}

Value Interpreter::Filter(const std::string& name, const Value& input, Args& args) {
  return ApplyFilter(*this, name, input, args);
}

bool Interpreter::Test(const std::string& name, const Value& input, Args& args) {
  return ApplyTest(*this, name, input, args);
}

Args Interpreter::EvalArgs(const Expr& e, size_t first, const std::shared_ptr<Scope>& scope) {
  Args args;
  for (size_t i = first; i < e.children.size(); ++i) {
    args.positional.push_back(Eval(*e.children[i], scope));
  }
  for (const auto& [k, v] : e.kwargs) args.keyword.emplace_back(k, Eval(*v, scope));
  return args;
}

Value Interpreter::Compare(const Expr& e, const std::shared_ptr<Scope>& scope) {
  Value left = Eval(*e.children[0], scope);
  for (size_t i = 0; i < e.ops.size(); ++i) {
    Value right = Eval(*e.children[i + 1], scope);
    const std::string& op = e.ops[i];
    bool r;
    if (op == "==") {
      r = Equal(left, right);
    } else if (op == "!=") {
      r = !Equal(left, right);
    } else if (op == "in" || op == "notin") {
      r = Contains(right, left) == (op == "in");
    } else {
      if (left.is_undefined()) FailUndefined(left);
      if (right.is_undefined()) FailUndefined(right);
      r = op == "<"    ? Less(left, right)
          : op == ">"  ? Less(right, left)
          : op == "<=" ? !Less(right, left)
                       : !Less(left, right);
    }
    if (!r) return Value::Bool(false);
    left = std::move(right);
  }
  return Value::Bool(true);
}

Value Interpreter::Eval(const Expr& e, const std::shared_ptr<Scope>& scope) {
  switch (e.kind) {
    case Expr::Kind::kLiteral:
      return e.literal;
    case Expr::Kind::kName: {
      const Value* v = scope->Find(e.name);
      return v ? *v : Value::Undefined("'" + e.name + "' is undefined");
    }
    case Expr::Kind::kList:
    case Expr::Kind::kTuple: {
      List items;
      for (const auto& c : e.children) items.push_back(Eval(*c, scope));
      return Value::MakeList(std::move(items), e.kind == Expr::Kind::kTuple);
    }
    case Expr::Kind::kDict: {
      Dict d;
      for (size_t i = 0; i + 1 < e.children.size(); i += 2) {
        d.Set(Eval(*e.children[i], scope), Eval(*e.children[i + 1], scope));
      }
      return Value::MakeDict(std::move(d));
    }
    case Expr::Kind::kGetAttr:
      return GetAttr(Eval(*e.children[0], scope), e.name);
    case Expr::Kind::kGetItem:
      return GetItem(Eval(*e.children[0], scope), Eval(*e.children[1], scope));
    case Expr::Kind::kSlice: {
      Value parts[3];
      for (int i = 0; i < 3; ++i) {
        if (e.children[i + 1]) parts[i] = Eval(*e.children[i + 1], scope);
      }
      return Slice(Eval(*e.children[0], scope), parts[0], parts[1], parts[2]);
    }
    case Expr::Kind::kCall:
      return EvalCall(e, scope);
    case Expr::Kind::kFilter: {
      Value input = Eval(*e.children[0], scope);
      Args args = EvalArgs(e, 1, scope);
      return ApplyFilter(*this, e.name, input, args);
    }
    case Expr::Kind::kTest: {
      Value input = Eval(*e.children[0], scope);
      Args args = EvalArgs(e, 1, scope);
      return Value::Bool(ApplyTest(*this, e.name, input, args) != e.negated);
    }
    case Expr::Kind::kNeg:
    case Expr::Kind::kPos: {
      Value v = Eval(*e.children[0], scope);
      if (v.is_undefined()) FailUndefined(v);
      if (!v.is_number())
        TypeError("bad operand type for unary " +
                  std::string(e.kind == Expr::Kind::kNeg ? "-" : "+") + ": '" + v.TypeName() + "'");
      if (e.kind == Expr::Kind::kPos) return v.is_bool() ? Value::Int(v.as_int()) : v;
      return v.is_float() ? Value::Float(-v.as_double()) : Value::Int(-v.as_int());
    }
    case Expr::Kind::kNot:
      return Value::Bool(!Eval(*e.children[0], scope).Truthy());
    case Expr::Kind::kBinary:
      return Arithmetic(e.name, Eval(*e.children[0], scope), Eval(*e.children[1], scope));
    case Expr::Kind::kAnd: {
      Value a = Eval(*e.children[0], scope);
      return a.Truthy() ? Eval(*e.children[1], scope) : a;
    }
    case Expr::Kind::kOr: {
      Value a = Eval(*e.children[0], scope);
      return a.Truthy() ? a : Eval(*e.children[1], scope);
    }
    case Expr::Kind::kCompare:
      return Compare(e, scope);
    case Expr::Kind::kConcat: {
      std::string s;
      for (const auto& c : e.children) s += Eval(*c, scope).ToString();
      return Value::Str(std::move(s));
    }
    case Expr::Kind::kCond:
      if (Eval(*e.children[0], scope).Truthy()) return Eval(*e.children[1], scope);
      return e.children[2] ? Eval(*e.children[2], scope) : Value::Undefined();
  }
  return Value::Undefined();
}

Value Interpreter::EvalCall(const Expr& e, const std::shared_ptr<Scope>& scope) {
  Value fn = Eval(*e.children[0], scope);
  Args args = EvalArgs(e, 1, scope);
  return Call(fn, args);
}

}  // namespace textgen::jinja
