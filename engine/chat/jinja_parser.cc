// The parser: jinja2's parser.py grammar (operator precedence included) by recursive descent.
#include "engine/chat/jinja_parser.h"

#include <set>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace textgen::jinja {
namespace {

// Deeper nesting than this is refused: it keeps a hostile template from overflowing the stack.
constexpr int kMaxNesting = 200;

struct ParseError {
  std::string message;
};

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : t_(std::move(tokens)) {}

  Body Template() {
    Body body = Statements({});
    if (Cur().type != Token::Type::kEof) Fail("unexpected '" + Cur().text + "'");
    return body;
  }

 private:
  const Token& Cur() const { return t_[i_]; }
  const Token& Peek(size_t k = 1) const { return t_[std::min(i_ + k, t_.size() - 1)]; }
  void Next() {
    if (i_ + 1 < t_.size()) ++i_;
  }
  [[noreturn]] void Fail(const std::string& msg) const {
    throw ParseError{absl::StrCat("line ", Cur().line, ": ", msg)};
  }
  bool IsOp(const char* op) const { return Cur().type == Token::Type::kOp && Cur().text == op; }
  bool IsName(const char* name) const {
    return Cur().type == Token::Type::kName && Cur().text == name;
  }
  void ExpectOp(const char* op) {
    if (!IsOp(op)) Fail(absl::StrCat("expected '", op, "', got '", Describe(), "'"));
    Next();
  }
  void ExpectBlockEnd() {
    if (Cur().type != Token::Type::kBlockEnd)
      Fail("expected end of statement, got '" + Describe() + "'");
    Next();
  }
  std::string ExpectName() {
    if (Cur().type != Token::Type::kName) Fail("expected a name, got '" + Describe() + "'");
    std::string n = Cur().text;
    Next();
    return n;
  }
  std::string Describe() const {
    switch (Cur().type) {
      case Token::Type::kEof:
        return "end of template";
      case Token::Type::kBlockEnd:
        return "%}";
      case Token::Type::kVarEnd:
        return "}}";
      default:
        return Cur().text;
    }
  }
  struct DepthGuard {
    explicit DepthGuard(Parser* p) : p(p) {
      if (++p->depth_ > kMaxNesting) p->Fail("template nested too deeply");
    }
    ~DepthGuard() { --p->depth_; }
    Parser* p;
  };

  ExprPtr Make(Expr::Kind kind) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = Cur().line;
    return e;
  }

  // ---- statements ----

  // Parses until a block whose keyword is in `ends` (left unconsumed: the current token is that
  // keyword) or the end of the template.
  Body Statements(const std::set<std::string>& ends) {
    DepthGuard guard(this);
    Body body;
    while (true) {
      const Token& tok = Cur();
      if (tok.type == Token::Type::kEof) {
        if (!ends.empty()) {
          Fail("unexpected end of template, expected " + absl::StrJoin(ends, " or "));
        }
        return body;
      }
      if (tok.type == Token::Type::kData) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::kText;
        s->line = tok.line;
        s->text = tok.text;
        body.push_back(std::move(s));
        Next();
      } else if (tok.type == Token::Type::kVarBegin) {
        Next();
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::kOutput;
        s->line = tok.line;
        s->expr = Expression();
        if (Cur().type != Token::Type::kVarEnd) Fail("expected '}}', got '" + Describe() + "'");
        Next();
        body.push_back(std::move(s));
      } else if (tok.type == Token::Type::kBlockBegin) {
        Next();
        if (Cur().type == Token::Type::kName && ends.count(Cur().text)) return body;
        body.push_back(Statement());
      } else {
        Fail("unexpected '" + Describe() + "'");
      }
    }
  }

  std::unique_ptr<Stmt> Statement() {
    const int line = Cur().line;
    const std::string kw = ExpectName();
    std::unique_ptr<Stmt> s;
    if (kw == "if") {
      s = If();
    } else if (kw == "for") {
      s = For();
    } else if (kw == "set") {
      s = Set();
    } else if (kw == "macro") {
      s = Macro();
    } else if (kw == "call") {
      s = CallBlock();
    } else if (kw == "filter") {
      s = FilterBlock();
    } else if (kw == "generation") {
      // transformers' AssistantTracker tag: renders its body unchanged.
      s = std::make_unique<Stmt>();
      s->kind = Stmt::Kind::kScope;
      ExpectBlockEnd();
      s->body = Statements({"endgeneration"});
      Next();
      ExpectBlockEnd();
    } else if (kw == "break" || kw == "continue") {
      if (loop_depth_ == 0) Fail("'" + kw + "' outside of a loop");
      s = std::make_unique<Stmt>();
      s->kind = kw == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue;
      ExpectBlockEnd();
    } else {
      Fail("unsupported statement '" + kw + "'");
    }
    s->line = line;
    return s;
  }

  std::unique_ptr<Stmt> If() {
    auto s = std::make_unique<Stmt>();
    s->kind = Stmt::Kind::kIf;
    while (true) {
      ExprPtr cond = Expression();
      ExpectBlockEnd();
      Body body = Statements({"elif", "else", "endif"});
      s->branches.emplace_back(std::move(cond), std::move(body));
      const std::string kw = Cur().text;
      Next();
      if (kw == "elif") continue;
      if (kw == "else") {
        ExpectBlockEnd();
        s->else_body = Statements({"endif"});
        Next();
      }
      ExpectBlockEnd();
      return s;
    }
  }

  std::vector<std::string> Targets() {
    std::vector<std::string> names;
    const bool paren = IsOp("(");
    if (paren) Next();
    names.push_back(ExpectName());
    while (IsOp(",")) {
      Next();
      if (Cur().type != Token::Type::kName) break;
      names.push_back(ExpectName());
    }
    if (paren) ExpectOp(")");
    return names;
  }

  std::unique_ptr<Stmt> For() {
    auto s = std::make_unique<Stmt>();
    s->kind = Stmt::Kind::kFor;
    s->targets = Targets();
    if (!IsName("in")) Fail("expected 'in' in a for loop");
    Next();
    s->expr = Tuple(/*with_condexpr=*/false);
    if (IsName("if")) {
      Next();
      s->cond = Expression();
    }
    if (IsName("recursive")) Fail("unsupported 'recursive' for loop");
    ExpectBlockEnd();
    ++loop_depth_;
    s->body = Statements({"else", "endfor"});
    --loop_depth_;
    if (Cur().text == "else") {
      Next();
      ExpectBlockEnd();
      s->else_body = Statements({"endfor"});
    }
    Next();
    ExpectBlockEnd();
    return s;
  }

  std::unique_ptr<Stmt> Set() {
    auto s = std::make_unique<Stmt>();
    if (Cur().type == Token::Type::kName && Peek().type == Token::Type::kOp && Peek().text == "." &&
        Peek(2).type == Token::Type::kName) {
      s->targets.push_back(ExpectName());
      Next();
      s->name = ExpectName();
    } else {
      s->targets = Targets();
    }
    if (Cur().type == Token::Type::kBlockEnd) {
      if (s->targets.size() != 1 || !s->name.empty()) Fail("a block set takes one name");
      s->kind = Stmt::Kind::kSetBlock;
      Next();
      s->body = Statements({"endset"});
      Next();
      ExpectBlockEnd();
      return s;
    }
    if (IsOp("|")) Fail("unsupported filtered block set");
    ExpectOp("=");
    s->kind = Stmt::Kind::kSet;
    s->expr = Tuple(/*with_condexpr=*/true);
    ExpectBlockEnd();
    return s;
  }

  void Params(std::vector<std::pair<std::string, ExprPtr>>& params) {
    ExpectOp("(");
    while (!IsOp(")")) {
      if (!params.empty()) ExpectOp(",");
      if (IsOp(")")) break;
      std::string name = ExpectName();
      ExprPtr def;
      if (IsOp("=")) {
        Next();
        def = Expression();
      } else if (!params.empty() && params.back().second) {
        Fail("non-default argument '" + name + "' follows default argument");
      }
      params.emplace_back(std::move(name), std::move(def));
    }
    Next();
  }

  std::unique_ptr<Stmt> Macro() {
    auto s = std::make_unique<Stmt>();
    s->kind = Stmt::Kind::kMacro;
    s->name = ExpectName();
    Params(s->params);
    ExpectBlockEnd();
    const int saved = loop_depth_;
    loop_depth_ = 0;
    s->body = Statements({"endmacro"});
    loop_depth_ = saved;
    Next();
    ExpectBlockEnd();
    return s;
  }

  std::unique_ptr<Stmt> CallBlock() {
    auto s = std::make_unique<Stmt>();
    s->kind = Stmt::Kind::kCallBlock;
    if (IsOp("(")) Params(s->params);
    s->expr = Expression();
    if (s->expr->kind != Expr::Kind::kCall) Fail("expected a call in a call block");
    ExpectBlockEnd();
    s->body = Statements({"endcall"});
    Next();
    ExpectBlockEnd();
    return s;
  }

  std::unique_ptr<Stmt> FilterBlock() {
    auto s = std::make_unique<Stmt>();
    s->kind = Stmt::Kind::kFilterBlock;
    ExprPtr input = Make(Expr::Kind::kName);
    input->name = kFilterBodyName;
    s->expr = FilterChain(std::move(input), /*first_without_pipe=*/true);
    ExpectBlockEnd();
    s->body = Statements({"endfilter"});
    Next();
    ExpectBlockEnd();
    return s;
  }

  // ---- expressions ----

  // A bare tuple (`a, b`) or one expression.
  ExprPtr Tuple(bool with_condexpr) {
    ExprPtr first = with_condexpr ? Expression() : Or();
    if (!IsOp(",")) return first;
    auto t = Make(Expr::Kind::kTuple);
    t->children.push_back(std::move(first));
    while (IsOp(",")) {
      Next();
      if (Cur().type == Token::Type::kBlockEnd || Cur().type == Token::Type::kVarEnd) break;
      t->children.push_back(with_condexpr ? Expression() : Or());
    }
    return t;
  }

  ExprPtr Expression() {
    DepthGuard guard(this);
    ExprPtr e = Or();
    while (IsName("if")) {
      Next();
      auto c = Make(Expr::Kind::kCond);
      c->children.push_back(Or());
      c->children.push_back(std::move(e));
      if (IsName("else")) {
        Next();
        c->children.push_back(Expression());
      } else {
        c->children.push_back(nullptr);
      }
      e = std::move(c);
    }
    return e;
  }

  ExprPtr Binary(Expr::Kind kind, ExprPtr a, ExprPtr b, const std::string& op = "") {
    auto e = Make(kind);
    e->name = op;
    e->children.push_back(std::move(a));
    e->children.push_back(std::move(b));
    return e;
  }

  ExprPtr Or() {
    ExprPtr e = And();
    while (IsName("or")) {
      Next();
      e = Binary(Expr::Kind::kOr, std::move(e), And());
    }
    return e;
  }

  ExprPtr And() {
    ExprPtr e = Not();
    while (IsName("and")) {
      Next();
      e = Binary(Expr::Kind::kAnd, std::move(e), Not());
    }
    return e;
  }

  ExprPtr Not() {
    if (IsName("not")) {
      DepthGuard guard(this);
      auto e = Make(Expr::Kind::kNot);
      Next();
      e->children.push_back(Not());
      return e;
    }
    return Compare();
  }

  ExprPtr Compare() {
    ExprPtr first = Math1();
    auto e = Make(Expr::Kind::kCompare);
    while (true) {
      std::string op;
      if (Cur().type == Token::Type::kOp &&
          (Cur().text == "==" || Cur().text == "!=" || Cur().text == "<" || Cur().text == ">" ||
           Cur().text == "<=" || Cur().text == ">=")) {
        op = Cur().text;
        Next();
      } else if (IsName("in")) {
        op = "in";
        Next();
      } else if (IsName("not") && Peek().type == Token::Type::kName && Peek().text == "in") {
        op = "notin";
        Next();
        Next();
      } else {
        break;
      }
      e->ops.push_back(op);
      e->children.push_back(Math1());
    }
    if (e->ops.empty()) return first;
    e->children.insert(e->children.begin(), std::move(first));
    return e;
  }

  ExprPtr Math1() {
    ExprPtr e = Concat();
    while (IsOp("+") || IsOp("-")) {
      const std::string op = Cur().text;
      Next();
      e = Binary(Expr::Kind::kBinary, std::move(e), Concat(), op);
    }
    return e;
  }

  ExprPtr Concat() {
    ExprPtr first = Math2();
    if (!IsOp("~")) return first;
    auto e = Make(Expr::Kind::kConcat);
    e->children.push_back(std::move(first));
    while (IsOp("~")) {
      Next();
      e->children.push_back(Math2());
    }
    return e;
  }

  ExprPtr Math2() {
    ExprPtr e = Pow();
    while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%")) {
      const std::string op = Cur().text;
      Next();
      e = Binary(Expr::Kind::kBinary, std::move(e), Pow(), op);
    }
    return e;
  }

  ExprPtr Pow() {
    ExprPtr e = Unary(true);
    while (IsOp("**")) {
      Next();
      e = Binary(Expr::Kind::kBinary, std::move(e), Unary(true), "**");
    }
    return e;
  }

  ExprPtr Unary(bool with_filter) {
    DepthGuard guard(this);
    ExprPtr e;
    if (IsOp("-") || IsOp("+")) {
      e = Make(IsOp("-") ? Expr::Kind::kNeg : Expr::Kind::kPos);
      Next();
      e->children.push_back(Unary(false));
    } else {
      e = Primary();
    }
    e = Postfix(std::move(e));
    if (with_filter) e = FilterChain(std::move(e), false);
    return e;
  }

  ExprPtr Primary() {
    const Token& tok = Cur();
    if (tok.type == Token::Type::kName) {
      const std::string& n = tok.text;
      auto e = Make(Expr::Kind::kLiteral);
      if (n == "true" || n == "True") {
        e->literal = Value::Bool(true);
      } else if (n == "false" || n == "False") {
        e->literal = Value::Bool(false);
      } else if (n == "none" || n == "None") {
        e->literal = Value::None();
      } else {
        e->kind = Expr::Kind::kName;
        e->name = n;
      }
      Next();
      return e;
    }
    if (tok.type == Token::Type::kString) {
      auto e = Make(Expr::Kind::kLiteral);
      std::string s;
      while (Cur().type == Token::Type::kString) {
        s += Cur().text;
        Next();
      }
      e->literal = Value::Str(std::move(s));
      return e;
    }
    if (tok.type == Token::Type::kInt || tok.type == Token::Type::kFloat) {
      auto e = Make(Expr::Kind::kLiteral);
      e->literal =
          tok.type == Token::Type::kInt ? Value::Int(tok.int_value) : Value::Float(tok.float_value);
      Next();
      return e;
    }
    if (IsOp("(")) {
      Next();
      if (IsOp(")")) {
        Next();
        return Make(Expr::Kind::kTuple);
      }
      ExprPtr first = Expression();
      if (IsOp(")")) {
        Next();
        return first;
      }
      auto t = Make(Expr::Kind::kTuple);
      t->children.push_back(std::move(first));
      while (IsOp(",")) {
        Next();
        if (IsOp(")")) break;
        t->children.push_back(Expression());
      }
      ExpectOp(")");
      return t;
    }
    if (IsOp("[")) {
      auto e = Make(Expr::Kind::kList);
      Next();
      while (!IsOp("]")) {
        if (!e->children.empty()) ExpectOp(",");
        if (IsOp("]")) break;
        e->children.push_back(Expression());
      }
      Next();
      return e;
    }
    if (IsOp("{")) {
      auto e = Make(Expr::Kind::kDict);
      Next();
      while (!IsOp("}")) {
        if (!e->children.empty()) ExpectOp(",");
        if (IsOp("}")) break;
        e->children.push_back(Expression());
        ExpectOp(":");
        e->children.push_back(Expression());
      }
      Next();
      return e;
    }
    Fail("unexpected '" + Describe() + "'");
  }

  ExprPtr Postfix(ExprPtr e) {
    while (true) {
      if (IsOp(".")) {
        Next();
        auto g = Make(Expr::Kind::kGetAttr);
        if (Cur().type == Token::Type::kInt) {
          // `x.0` is x[0].
          g->kind = Expr::Kind::kGetItem;
          g->children.push_back(std::move(e));
          auto idx = Make(Expr::Kind::kLiteral);
          idx->literal = Value::Int(Cur().int_value);
          Next();
          g->children.push_back(std::move(idx));
        } else {
          g->name = ExpectName();
          g->children.push_back(std::move(e));
        }
        e = std::move(g);
      } else if (IsOp("[")) {
        Next();
        e = Subscript(std::move(e));
      } else if (IsOp("(")) {
        e = Call(std::move(e));
      } else {
        return e;
      }
    }
  }

  ExprPtr Subscript(ExprPtr obj) {
    ExprPtr parts[3];
    int n = 0;
    bool slice = false;
    while (true) {
      if (IsOp(":")) {
        slice = true;
        if (++n > 2) Fail("too many ':' in a slice");
        Next();
        continue;
      }
      if (IsOp("]")) break;
      if (parts[n]) Fail("expected ']'");
      parts[n] = Expression();
      if (!slice && IsOp(",")) Fail("unsupported tuple subscript");
    }
    Next();
    if (!slice) {
      if (!parts[0]) Fail("empty subscript");
      auto g = Make(Expr::Kind::kGetItem);
      g->children.push_back(std::move(obj));
      g->children.push_back(std::move(parts[0]));
      return g;
    }
    auto g = Make(Expr::Kind::kSlice);
    g->children.push_back(std::move(obj));
    for (auto& p : parts) g->children.push_back(std::move(p));
    return g;
  }

  void CallArgs(Expr& e) {
    ExpectOp("(");
    while (!IsOp(")")) {
      if (e.children.size() > 1 || !e.kwargs.empty()) ExpectOp(",");
      if (IsOp(")")) break;
      if (IsOp("*") || IsOp("**")) Fail("unsupported *args / **kwargs in a call");
      if (Cur().type == Token::Type::kName && Peek().type == Token::Type::kOp &&
          Peek().text == "=") {
        std::string name = ExpectName();
        Next();
        e.kwargs.emplace_back(std::move(name), Expression());
      } else {
        if (!e.kwargs.empty()) Fail("positional argument follows keyword argument");
        e.children.push_back(Expression());
      }
    }
    Next();
  }

  ExprPtr Call(ExprPtr fn) {
    auto c = Make(Expr::Kind::kCall);
    c->children.push_back(std::move(fn));
    CallArgs(*c);
    return c;
  }

  // `| name(args)` filters and `is [not] name args` tests after an operand.
  ExprPtr FilterChain(ExprPtr e, bool first_without_pipe) {
    bool need_pipe = !first_without_pipe;
    while (true) {
      if (!need_pipe || IsOp("|")) {
        if (need_pipe) Next();
        need_pipe = true;
        auto f = Make(Expr::Kind::kFilter);
        f->name = ExpectName();
        while (IsOp(".")) {  // dotted filter names
          Next();
          f->name += "." + ExpectName();
        }
        f->children.push_back(std::move(e));
        if (IsOp("(")) CallArgs(*f);
        e = std::move(f);
      } else if (IsName("is")) {
        Next();
        auto t = Make(Expr::Kind::kTest);
        if (IsName("not")) {
          t->negated = true;
          Next();
        }
        t->name = ExpectName();
        t->children.push_back(std::move(e));
        if (IsOp("(")) {
          CallArgs(*t);
        } else if (Cur().type == Token::Type::kString || Cur().type == Token::Type::kInt ||
                   Cur().type == Token::Type::kFloat ||
                   (Cur().type == Token::Type::kName &&
                    !(IsName("else") || IsName("or") || IsName("and") || IsName("if") ||
                      IsName("is") || IsName("in") || IsName("not"))) ||
                   IsOp("[") || IsOp("{")) {
          // `x is divisibleby 3`, `x is sameas none`: one argument without parentheses.
          t->children.push_back(Postfix(Primary()));
        }
        e = std::move(t);
      } else if (IsOp("(")) {
        e = Call(std::move(e));
      } else {
        return e;
      }
    }
  }

  std::vector<Token> t_;
  size_t i_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
};

}  // namespace

absl::StatusOr<Body> Parse(std::string_view source) {
  absl::StatusOr<std::vector<Token>> tokens = Lex(source);
  if (!tokens.ok()) return tokens.status();
  try {
    return Parser(*std::move(tokens)).Template();
  } catch (const ParseError& e) {
    return absl::InvalidArgumentError(e.message);
  }
}

}  // namespace textgen::jinja
