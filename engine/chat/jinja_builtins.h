// jinja2's filters, tests and globals, Python's str/dict/list methods, and the two functions
// Hugging Face adds (raise_exception, strftime_now) plus its json.dumps-based tojson.
#ifndef TEXTGEN_ENGINE_CHAT_JINJA_BUILTINS_H_
#define TEXTGEN_ENGINE_CHAT_JINJA_BUILTINS_H_

#include <string>

#include "engine/chat/jinja_interpreter.h"
#include "engine/chat/jinja_value.h"

namespace textgen::jinja {

// The filter `name` applied to `input`. Throws RenderError ("No filter named ..." for an
// unknown one, as jinja2 does when it compiles one).
Value ApplyFilter(Interpreter& in, const std::string& name, const Value& input, Args& args);
bool ApplyTest(Interpreter& in, const std::string& name, const Value& input, Args& args);

// The method `name` of a str, dict or list bound to `obj`; Undefined when there is none. The
// methods that mutate (list.append, dict.update, ...) raise SecurityError when called, as in
// jinja2's ImmutableSandboxedEnvironment.
Value BoundMethod(const Value& obj, const std::string& name);

// range, dict, namespace, raise_exception, strftime_now, cycler, joiner into `scope`.
void AddGlobals(Scope& scope);

// The items a for loop or a filter iterates: list items, dict keys, a string's characters;
// nothing for undefined; TypeError for anything else.
List IterateValue(const Value& v);

// json.dumps(v, ensure_ascii, indent, separators, sort_keys); indent < 0: none.
struct JsonOptions {
  bool ensure_ascii = false;
  std::string indent;  // one level of indentation
  bool has_indent = false;
  std::string item_sep = ", ";
  std::string key_sep = ": ";
  bool sort_keys = false;
};
std::string JsonDumps(const Value& v, const JsonOptions& o);

// Python's `fmt % args` for %s %r %d %i %f %x %%.
std::string PercentFormat(const std::string& fmt, const Value& args);

}  // namespace textgen::jinja

#endif  // TEXTGEN_ENGINE_CHAT_JINJA_BUILTINS_H_
