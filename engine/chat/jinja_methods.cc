// Python's str / dict / list methods as the sandbox exposes them, and the template globals.
#include <cstdio>
#include <ctime>
#include <string>

#include "engine/chat/jinja_builtins.h"
#include "engine/chat/jinja_text.h"

namespace textgen::jinja {
namespace {

const std::string& StrArg(const Value& v, const char* method) {
  if (!v.is_string()) {
    TypeError(std::string(method) + "() argument must be str, not " + v.TypeName());
  }
  return v.str();
}

long IntArg(const Value& v, long def) {
  if (v.is_undefined() || v.is_none()) return def;
  if (!v.is_int() && !v.is_bool())
    TypeError("'" + v.TypeName() + "' object cannot be interpreted as an integer");
  return static_cast<long>(v.as_int());
}

// str.startswith / endswith with a str or a tuple of str.
bool AffixMatch(const std::string& s, const Value& affix, bool prefix, const char* method) {
  auto one = [&](const Value& a) {
    const std::string& x = StrArg(a, method);
    if (x.size() > s.size()) return false;
    return prefix ? s.compare(0, x.size(), x) == 0
                  : s.compare(s.size() - x.size(), x.size(), x) == 0;
  };
  if (affix.is_list() && affix.is_tuple()) {
    for (const Value& a : affix.list()) {
      if (one(a)) return true;
    }
    return false;
  }
  return one(affix);
}

// Python str.format with positional/keyword fields and !r / !s conversions (no format specs).
std::string StrFormat(const std::string& fmt, const Args& a) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    const char c = fmt[i];
    if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}')
        ++i;
      else
        throw RenderError("ValueError", "Single '}' encountered in format string");
      out.push_back('}');
      continue;
    }
    if (c != '{') {
      out.push_back(c);
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out.push_back('{');
      ++i;
      continue;
    }
    const size_t close = fmt.find('}', i);
    if (close == std::string::npos)
      throw RenderError("ValueError", "Single '{' encountered in format string");
    std::string field = fmt.substr(i + 1, close - i - 1);
    i = close;
    char conv = 's';
    if (const size_t bang = field.find('!'); bang != std::string::npos) {
      conv = bang + 1 < field.size() ? field[bang + 1] : 's';
      field.resize(bang);
    }
    if (field.find(':') != std::string::npos || field.find('.') != std::string::npos ||
        field.find('[') != std::string::npos) {
      throw RenderError("ValueError", "unsupported str.format field '{" + field + "}'");
    }
    Value v;
    if (field.empty()) {
      if (auto_index >= a.positional.size())
        throw RenderError("IndexError", "Replacement index out of range");
      v = a.positional[auto_index++];
    } else if (field.find_first_not_of("0123456789") == std::string::npos) {
      const size_t idx = std::stoul(field);
      if (idx >= a.positional.size())
        throw RenderError("IndexError", "Replacement index out of range");
      v = a.positional[idx];
    } else {
      v = a.Get(static_cast<size_t>(-1), field);
      if (v.is_undefined()) throw RenderError("KeyError", "'" + field + "'");
    }
    out += conv == 'r' ? v.Repr() : v.ToString();
  }
  return out;
}

Value Unsafe(const std::string& type, const std::string& name) {
  return Value::MakeCallable(name, [type, name](Interpreter&, Args&) -> Value {
    throw RenderError("SecurityError",
                      "access to attribute '" + name + "' of '" + type + "' object is unsafe.");
  });
}

template <typename F>
Value Method(const std::string& name, F f) {
  return Value::MakeCallable(name, [f](Interpreter& in, Args& a) -> Value { return f(in, a); });
}

Value StringMethod(const Value& obj, const std::string& name) {
  const std::string s = obj.str();
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const bool l = name != "rstrip", r = name != "lstrip";
    return Method(name, [s, l, r](Interpreter&, Args& a) {
      const Value chars = a.Get(0, "chars");
      if (chars.is_undefined() || chars.is_none()) return Value::Str(PyStrip(s, nullptr, l, r));
      return Value::Str(PyStrip(s, &StrArg(chars, "strip"), l, r));
    });
  }
  if (name == "split" || name == "rsplit") {
    const bool right = name == "rsplit";
    return Method(name, [s, right](Interpreter&, Args& a) {
      const Value sep = a.Get(0, "sep");
      const long maxsplit = IntArg(a.Get(1, "maxsplit"), -1);
      const std::string* sep_p =
          sep.is_undefined() || sep.is_none() ? nullptr : &StrArg(sep, "split");
      if (sep_p && sep_p->empty()) throw RenderError("ValueError", "empty separator");
      List out;
      for (auto& part : right ? PyRSplit(s, sep_p, maxsplit) : PySplit(s, sep_p, maxsplit)) {
        out.push_back(Value::Str(std::move(part)));
      }
      return Value::MakeList(std::move(out));
    });
  }
  if (name == "splitlines") {
    return Method(name, [s](Interpreter&, Args&) {
      List out;
      for (auto& line : PySplitLines(s)) out.push_back(Value::Str(std::move(line)));
      return Value::MakeList(std::move(out));
    });
  }
  if (name == "startswith" || name == "endswith") {
    const bool prefix = name == "startswith";
    return Method(name, [s, prefix, name](Interpreter&, Args& a) {
      return Value::Bool(AffixMatch(s, a.Get(0, "prefix"), prefix, name.c_str()));
    });
  }
  if (name == "removeprefix" || name == "removesuffix") {
    const bool prefix = name == "removeprefix";
    return Method(name, [s, prefix, name](Interpreter&, Args& a) {
      const Value affix = a.Get(0, "affix");
      if (!AffixMatch(s, affix, prefix, name.c_str())) return Value::Str(s);
      const size_t n = affix.str().size();
      return Value::Str(prefix ? s.substr(n) : s.substr(0, s.size() - n));
    });
  }
  if (name == "replace") {
    return Method(name, [s](Interpreter&, Args& a) {
      return Value::Str(PyReplace(s, StrArg(a.Get(0, "old"), "replace"),
                                  StrArg(a.Get(1, "new"), "replace"),
                                  IntArg(a.Get(2, "count"), -1)));
    });
  }
  if (name == "upper")
    return Method(name, [s](Interpreter&, Args&) { return Value::Str(PyUpper(s)); });
  if (name == "lower")
    return Method(name, [s](Interpreter&, Args&) { return Value::Str(PyLower(s)); });
  if (name == "title")
    return Method(name, [s](Interpreter&, Args&) { return Value::Str(PyTitle(s)); });
  if (name == "capitalize") {
    return Method(name, [s](Interpreter&, Args&) { return Value::Str(PyCapitalize(s)); });
  }
  if (name == "format") {
    return Method(name, [s](Interpreter&, Args& a) { return Value::Str(StrFormat(s, a)); });
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    return Method(name, [s, name](Interpreter&, Args& a) {
      // A copy: a.Get returns a temporary Value, which StrArg would return a reference into.
      const std::string sub = StrArg(a.Get(0, "sub"), name.c_str());
      if (name == "count") {
        if (sub.empty()) return Value::Int(static_cast<int64_t>(Utf8Length(s) + 1));
        int64_t n = 0;
        for (size_t p = s.find(sub); p != std::string::npos; p = s.find(sub, p + sub.size())) ++n;
        return Value::Int(n);
      }
      const size_t p = name[0] == 'r' ? s.rfind(sub) : s.find(sub);
      if (p == std::string::npos) {
        if (name == "index" || name == "rindex")
          throw RenderError("ValueError", "substring not found");
        return Value::Int(-1);
      }
      return Value::Int(static_cast<int64_t>(Utf8Length(std::string_view(s).substr(0, p))));
    });
  }
  if (name == "join") {
    return Method(name, [s](Interpreter&, Args& a) {
      const Value seq = a.Get(0, "iterable");
      std::string out;
      List items;
      if (seq.is_list()) {
        items = seq.list();  // generators and views too
      } else if (seq.is_dict()) {
        for (const auto& [k, v] : seq.dict().items) items.push_back(k);
      } else if (seq.is_string()) {
        for (char32_t c : Utf8ToCodepoints(seq.str()))
          items.push_back(Value::Str(CodepointsToUtf8(std::u32string(1, c))));
      } else {
        TypeError("can only join an iterable");
      }
      for (size_t i = 0; i < items.size(); ++i) {
        if (!items[i].is_string()) {
          TypeError("sequence item " + std::to_string(i) + ": expected str instance, " +
                    items[i].TypeName() + " found");
        }
        if (i) out += s;
        out += items[i].str();
      }
      return Value::Str(std::move(out));
    });
  }
  if (name == "isdigit" || name == "isalpha" || name == "isalnum" || name == "isspace" ||
      name == "islower" || name == "isupper" || name == "isnumeric" || name == "isdecimal") {
    return Method(name, [s, name](Interpreter&, Args&) {
      const std::u32string cps = Utf8ToCodepoints(s);
      if (cps.empty()) return Value::Bool(false);
      if (name == "islower" || name == "isupper") {
        const std::string other = name == "islower" ? PyLower(s) : PyUpper(s);
        return Value::Bool(other == s && PyLower(s) != PyUpper(s));
      }
      for (char32_t c : cps) {
        const bool digit = c >= '0' && c <= '9';
        const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0xC0;
        const bool ok = name == "isspace"   ? IsPySpace(c)
                        : name == "isalpha" ? alpha && !IsPySpace(c)
                        : name == "isalnum" ? (alpha && !IsPySpace(c)) || digit
                                            : digit;
        if (!ok) return Value::Bool(false);
      }
      return Value::Bool(true);
    });
  }
  return Value::Undefined("'str object' has no attribute '" + name + "'");
}

Value DictMethod(const Value& obj, const std::string& name) {
  if (name == "get") {
    return Method(name, [obj](Interpreter&, Args& a) {
      const Value* v = obj.dict().Find(a.Get(0, "key"));
      if (v) return *v;
      return a.Has(1, "default") ? a.Get(1, "default") : Value::None();
    });
  }
  if (name == "items" || name == "keys" || name == "values") {
    return Method(name, [obj, name](Interpreter&, Args&) {
      List out;
      for (const auto& [k, v] : obj.dict().items) {
        out.push_back(name == "items" ? Value::MakeList({k, v}, true) : name == "keys" ? k : v);
      }
      return Value::MakeIterable(std::move(out), "dict_" + name);
    });
  }
  if (name == "copy") return Method(name, [obj](Interpreter&, Args&) { return obj; });
  if (name == "pop" || name == "popitem" || name == "setdefault" || name == "update" ||
      name == "clear") {
    return Unsafe("dict", name);
  }
  return Value::Undefined();
}

Value ListMethod(const Value& obj, const std::string& name) {
  if (name == "index" || name == "count") {
    return Method(name, [obj, name](Interpreter&, Args& a) {
      const Value x = a.Get(0, "value");
      int64_t n = 0;
      for (size_t i = 0; i < obj.list().size(); ++i) {
        if (!Equal(obj.list()[i], x)) continue;
        if (name == "index") return Value::Int(static_cast<int64_t>(i));
        ++n;
      }
      if (name == "index") throw RenderError("ValueError", x.Repr() + " is not in list");
      return Value::Int(n);
    });
  }
  if (name == "copy" && !obj.is_tuple())
    return Method(name, [obj](Interpreter&, Args&) { return obj; });
  if (!obj.is_tuple() &&
      (name == "append" || name == "extend" || name == "insert" || name == "pop" ||
       name == "remove" || name == "reverse" || name == "sort" || name == "clear")) {
    return Unsafe("list", name);
  }
  return Value::Undefined();
}

Value Range(Interpreter&, Args& a) {
  int64_t start = 0, stop, step = 1;
  if (a.positional.size() == 1) {
    stop = IntArg(a.positional[0], 0);
  } else if (a.positional.size() == 2 || a.positional.size() == 3) {
    start = IntArg(a.positional[0], 0);
    stop = IntArg(a.positional[1], 0);
    if (a.positional.size() == 3) step = IntArg(a.positional[2], 1);
  } else {
    TypeError("range expected 1 to 3 arguments");
  }
  if (step == 0) throw RenderError("ValueError", "range() arg 3 must not be zero");
  const int64_t n = step > 0 ? (stop > start ? (stop - start + step - 1) / step : 0)
                             : (start > stop ? (start - stop - step - 1) / -step : 0);
  if (n > 100000) {
    throw RenderError("OverflowError",
                      "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
  }
  List out;
  for (int64_t i = 0; i < n; ++i) out.push_back(Value::Int(start + i * step));
  return Value::MakeIterable(std::move(out), "range");
}

Dict KwargsDict(const Args& a, size_t first_positional_dicts) {
  Dict d;
  for (size_t i = 0; i < a.positional.size() && i < first_positional_dicts; ++i) {
    if (!a.positional[i].is_dict())
      TypeError("namespace()/dict() positional argument must be a mapping");
    for (const auto& [k, v] : a.positional[i].dict().items) d.Set(k, v);
  }
  for (const auto& [k, v] : a.keyword) d.Set(Value::Str(k), v);
  return d;
}

}  // namespace

Value BoundMethod(const Value& obj, const std::string& name) {
  switch (obj.kind()) {
    case Value::Kind::kString:
      return StringMethod(obj, name);
    case Value::Kind::kDict:
      return DictMethod(obj, name);
    case Value::Kind::kList:
      return ListMethod(obj, name);
    default:
      return Value::Undefined();
  }
}

void AddGlobals(Scope& scope) {
  auto add = [&](const char* name, std::function<Value(Interpreter&, Args&)> fn) {
    if (!scope.vars.count(name)) scope.vars[name] = Value::MakeCallable(name, std::move(fn));
  };
  add("range", Range);
  add("dict", [](Interpreter&, Args& a) { return Value::MakeDict(KwargsDict(a, 1)); });
  add("namespace", [](Interpreter& in, Args& a) {
    Value ns = Value::MakeNamespace(KwargsDict(a, 1));
    in.TrackNamespace(ns);
    return ns;
  });
  add("raise_exception", [](Interpreter&, Args& a) -> Value {
    throw RenderError("TemplateError", a.Get(0, "message").ToString());
  });
  add("strftime_now", [](Interpreter& in, Args& a) {
    const std::string fmt = StrArg(a.Get(0, "format"), "strftime_now");
    char buf[512];
    const size_t n = std::strftime(buf, sizeof(buf), fmt.c_str(), &in.now());
    if (n == 0 && !fmt.empty())
      throw RenderError("ValueError", "strftime_now: format too long or empty result");
    return Value::Str(std::string(buf, n));
  });
}

}  // namespace textgen::jinja
