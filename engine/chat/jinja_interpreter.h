// Runs a parsed template: statements, expressions, scopes and macros with jinja2's semantics
// (sandboxed, non-strict Undefined). Errors are thrown as RenderError; one Interpreter renders
// one template once, on one thread.
#ifndef TEXTGEN_ENGINE_CHAT_JINJA_INTERPRETER_H_
#define TEXTGEN_ENGINE_CHAT_JINJA_INTERPRETER_H_

#include <ctime>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/chat/jinja_ast.h"
#include "engine/chat/jinja_value.h"

namespace textgen::jinja {

// Variables of one frame: the template's top level, one loop iteration, one macro call.
struct Scope {
  std::unordered_map<std::string, Value> vars;
  std::shared_ptr<Scope> parent;
  const Value* Find(const std::string& name) const;
};

class Interpreter {
 public:
  // `now`: the local time strftime_now formats.
  explicit Interpreter(std::tm now) : now_(now) {}
  ~Interpreter();
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  // Renders `body` with `root` (the template's variables; globals are added to it).
  std::string Render(const Body& body, std::shared_ptr<Scope> root);

  // Used by the builtins.
  Value GetAttr(const Value& obj, const std::string& name);
  Value GetItem(const Value& obj, const Value& key);
  // jinja2's attrgetter for filters: "a.b.0" looks up a, then b, then item 0.
  Value GetPath(const Value& obj, const Value& path);
  Value Call(const Value& fn, Args& args);
  Value Filter(const std::string& name, const Value& input, Args& args);
  bool Test(const std::string& name, const Value& input, Args& args);
  const std::tm& now() const { return now_; }
  // Namespaces are the only mutable values; the interpreter empties them when it is done.
  void TrackNamespace(const Value& ns);

 private:
  enum class Flow { kNormal, kBreak, kContinue };
  Flow Exec(const Body& body, const std::shared_ptr<Scope>& scope, std::string& out);
  Flow ExecOne(const Stmt& s, const std::shared_ptr<Scope>& scope, std::string& out);
  void ExecFor(const Stmt& s, const std::shared_ptr<Scope>& scope, std::string& out);
  void Assign(const std::vector<std::string>& targets, const Value& v, Scope& scope);
  // A macro (or a call block's body, then `caller`) closing over `scope`.
  Value MakeMacro(const Stmt& s, const std::shared_ptr<Scope>& scope);
  Value Eval(const Expr& e, const std::shared_ptr<Scope>& scope);
  Value EvalCall(const Expr& e, const std::shared_ptr<Scope>& scope);
  Args EvalArgs(const Expr& e, size_t first, const std::shared_ptr<Scope>& scope);
  Value Compare(const Expr& e, const std::shared_ptr<Scope>& scope);
  void Step();

  std::tm now_;
  std::vector<std::shared_ptr<Scope>> pinned_scopes_;  // scopes macros close over
  std::vector<Value> namespaces_;
  int call_depth_ = 0;
  long steps_ = 0;
  int line_ = 0;  // of the statement being run, for error messages
};

// Throws the UndefinedError jinja2 raises when an Undefined is used as a value.
[[noreturn]] void FailUndefined(const Value& v);

}  // namespace textgen::jinja

#endif  // TEXTGEN_ENGINE_CHAT_JINJA_INTERPRETER_H_
