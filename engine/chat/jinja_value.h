// The values a Jinja chat template computes with, modelled on the Python objects jinja2 sees:
// None, bool, int, float, str, list/tuple, dict (insertion-ordered), namespace, callables, and
// jinja2's (non-strict) Undefined. Lists and dicts are shared and immutable (the sandbox forbids
// mutating them); namespaces are the only mutable objects, as in jinja2.
#ifndef TEXTGEN_ENGINE_CHAT_JINJA_VALUE_H_
#define TEXTGEN_ENGINE_CHAT_JINJA_VALUE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "nlohmann/json.hpp"

namespace textgen::jinja {

// A template error while rendering. The interpreter throws it internally (rendering is a deep
// recursion where every step can fail) and ChatTemplate::Render turns it into a Status; it
// never crosses the module boundary. `type` is the Python exception jinja2 would raise.
struct RenderError : std::runtime_error {
  RenderError(std::string type, const std::string& message)
      : std::runtime_error(message), type(std::move(type)) {}
  std::string type;  // "TypeError", "UndefinedError", "TemplateError", "SecurityError", ...
};

// Python's TypeError, which the builtins, the methods and the interpreter all raise.
[[noreturn]] inline void TypeError(const std::string& msg) { throw RenderError("TypeError", msg); }

class Value;
class Interpreter;
using List = std::vector<Value>;
// Python dicts keep insertion order; keys are compared with Python equality.
struct Dict {
  std::vector<std::pair<Value, Value>> items;
  const Value* Find(const Value& key) const;
  const Value* Find(const std::string& key) const;
  void Set(Value key, Value value);
};

struct Args;
// A builtin, a bound method or a macro.
struct Callable {
  std::string name;
  std::function<Value(Interpreter&, Args&)> fn;
};

class Value {
 public:
  enum class Kind {
    kUndefined,
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kList,
    kDict,
    kNamespace,
    kCallable
  };

  Value() = default;  // Undefined
  static Value Undefined(std::string hint = "") {
    Value v;
    v.str_ = std::move(hint);
    return v;
  }
  static Value None() { return Value(Kind::kNone); }
  static Value Bool(bool b) {
    Value v(Kind::kBool);
    v.int_ = b;
    return v;
  }
  static Value Int(int64_t i) {
    Value v(Kind::kInt);
    v.int_ = i;
    return v;
  }
  static Value Float(double f) {
    Value v(Kind::kFloat);
    v.float_ = f;
    return v;
  }
  static Value Str(std::string s) {
    Value v(Kind::kString);
    v.str_ = std::move(s);
    return v;
  }
  // markupsafe.Markup (from `|safe`, `|escape`): printed as is, but `markup + str` escapes
  // the str, which templates that write `"..."|safe + x` rely on.
  static Value Markup(std::string s) {
    Value v = Str(std::move(s));
    v.safe_ = true;
    return v;
  }
  // `s` as a Markup when `like` is one (string filters keep Markup, as soft_str does).
  static Value StrLike(std::string s, const Value& like) {
    return like.is_safe() ? Markup(std::move(s)) : Str(std::move(s));
  }
  static Value MakeList(List items, bool tuple = false) {
    Value v(Kind::kList);
    v.list_ = std::make_shared<const List>(std::move(items));
    v.tuple_ = tuple;
    return v;
  }
  // A lazy Python object that iterates like a list but is not one: "generator" (map, select,
  // ...), "list_reverseiterator", "dict_items" / "dict_keys" / "dict_values", "range". It
  // keeps the differences templates can observe: a generator is always true and has no len(),
  // none of them is JSON serializable, and they print as Python prints them.
  static Value MakeIterable(List items, std::string py_type) {
    Value v = MakeList(std::move(items));
    v.str_ = std::move(py_type);
    return v;
  }
  static Value MakeDict(Dict d) {
    Value v(Kind::kDict);
    v.dict_ = std::make_shared<Dict>(std::move(d));
    return v;
  }
  static Value MakeNamespace(Dict d) {
    Value v(Kind::kNamespace);
    v.dict_ = std::make_shared<Dict>(std::move(d));
    return v;
  }
  static Value MakeCallable(std::string name, std::function<Value(Interpreter&, Args&)> fn) {
    Value v(Kind::kCallable);
    v.callable_ = std::make_shared<const Callable>(Callable{std::move(name), std::move(fn)});
    return v;
  }
  static Value FromJson(const nlohmann::ordered_json& j);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  bool is_number() const { return is_int() || is_float() || is_bool(); }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_safe() const { return kind_ == Kind::kString && safe_; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_tuple() const { return kind_ == Kind::kList && tuple_; }
  // A list or tuple proper (not a generator, view or range).
  bool is_plain_list() const { return kind_ == Kind::kList && str_.empty(); }
  // Generators and iterators: no len(), no indexing, always true.
  bool is_iterator() const {
    return kind_ == Kind::kList && (str_ == "generator" || str_ == "list_reverseiterator");
  }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_namespace() const { return kind_ == Kind::kNamespace; }
  bool is_callable() const { return kind_ == Kind::kCallable; }

  bool as_bool() const { return int_ != 0; }
  int64_t as_int() const { return int_; }  // int or bool
  double as_double() const { return is_float() ? float_ : static_cast<double>(int_); }
  // A string; an Undefined's hint; the Python type of a MakeIterable.
  const std::string& str() const { return str_; }
  const List& list() const { return *list_; }
  const Dict& dict() const { return *dict_; }
  Dict& namespace_dict() const { return *dict_; }  // namespaces are mutable
  const Callable& callable() const { return *callable_; }
  const void* identity() const;  // for `is sameas` on shared objects

  // Python truthiness.
  bool Truthy() const;
  // jinja2's str(): what `{{ x }}` prints (Undefined prints nothing).
  std::string ToString() const;
  // Python repr() (strings quoted), used inside printed lists and dicts.
  std::string Repr() const;
  // The Python type name for error messages ("str", "NoneType", "dict", ...).
  std::string TypeName() const;

 private:
  explicit Value(Kind k) : kind_(k) {}
  Kind kind_ = Kind::kUndefined;
  bool tuple_ = false;
  bool safe_ = false;
  int64_t int_ = 0;
  double float_ = 0;
  std::string str_;
  std::shared_ptr<const List> list_;
  std::shared_ptr<Dict> dict_;
  std::shared_ptr<const Callable> callable_;
};

// markupsafe.escape of a text.
std::string HtmlEscape(const std::string& s);

// Python ==.
bool Equal(const Value& a, const Value& b);
// Python <, raising TypeError for unorderable types.
bool Less(const Value& a, const Value& b);

// Positional and keyword arguments of a call.
struct Args {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
  // The argument at `pos` or named `name`, or Undefined.
  Value Get(size_t pos, const std::string& name) const;
  bool Has(size_t pos, const std::string& name) const;
};

}  // namespace textgen::jinja

#endif  // TEXTGEN_ENGINE_CHAT_JINJA_VALUE_H_
