// Filters and tests (jinja2/filters.py, jinja2/tests.py) and JSON / %-formatting.
#include "engine/chat/jinja_builtins.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <string>

#include "engine/chat/jinja_text.h"

namespace textgen::jinja {
namespace {

int64_t Length(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kString:
      return static_cast<int64_t>(Utf8Length(v.str()));
    case Value::Kind::kList:
      if (v.is_iterator()) TypeError("object of type '" + v.TypeName() + "' has no len()");
      return static_cast<int64_t>(v.list().size());
    case Value::Kind::kDict:
      return static_cast<int64_t>(v.dict().items.size());
    case Value::Kind::kUndefined:
      return 0;
    default:
      TypeError("object of type '" + v.TypeName() + "' has no len()");
  }
}

// Case-insensitive sort keys as jinja2's ignore_case: strings lowered.
Value SortKey(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value::Str(PyLower(v.str()));
  return v;
}

bool ArgBool(const Args& a, size_t pos, const std::string& name, bool def) {
  const Value v = a.Get(pos, name);
  return v.is_undefined() ? def : v.Truthy();
}

std::string Indent(const std::string& s, const Value& width, bool first, bool blank) {
  const std::string ind =
      width.is_string() ? width.str() : std::string(width.is_undefined() ? 4 : width.as_int(), ' ');
  std::vector<std::string> lines = PySplitLines(s + "\n");
  std::string rv;
  if (blank) {
    for (size_t i = 0; i < lines.size(); ++i) rv += (i ? "\n" + ind : "") + lines[i];
  } else {
    rv = lines.empty() ? "" : lines[0];
    for (size_t i = 1; i < lines.size(); ++i) {
      rv += "\n" + (lines[i].empty() ? "" : ind + lines[i]);
    }
  }
  return first ? ind + rv : rv;
}

// Python int(x) for the `int` filter (jinja2: int(), then int(float()), else the default).
Value ToInt(const Value& v, const Value& def, int base) {
  if (v.is_int() || v.is_bool()) return Value::Int(v.as_int());
  if (v.is_float()) return Value::Int(static_cast<int64_t>(std::trunc(v.as_double())));
  if (v.is_string()) {
    std::string s = PyStrip(v.str(), nullptr, true, true);
    s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
    if (!s.empty()) {
      char* end = nullptr;
      errno = 0;
      const long long i = std::strtoll(s.c_str(), &end, base);
      if (errno == 0 && *end == '\0') return Value::Int(i);
      const double d = std::strtod(s.c_str(), &end);
      if (*end == '\0' && std::isfinite(d)) return Value::Int(static_cast<int64_t>(std::trunc(d)));
    }
  }
  return def.is_undefined() ? Value::Int(0) : def;
}

Value ToFloat(const Value& v, const Value& def) {
  if (v.is_number()) return Value::Float(v.as_double());
  if (v.is_string()) {
    const std::string s = PyStrip(v.str(), nullptr, true, true);
    char* end = nullptr;
    const double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && *end == '\0') return Value::Float(d);
  }
  return def.is_undefined() ? Value::Float(0) : def;
}

// select / reject / selectattr / rejectattr.
Value SelectOrReject(Interpreter& in, const Value& seq, Args& a, bool with_attr, bool select) {
  const Value attr = with_attr ? a.Get(0, "attribute") : Value();
  const size_t test_pos = with_attr ? 1 : 0;
  const bool has_test = a.positional.size() > test_pos;
  std::string test;
  Args test_args;
  if (has_test) {
    if (!a.positional[test_pos].is_string()) TypeError("the test name must be a string");
    test = a.positional[test_pos].str();
    test_args.positional.assign(a.positional.begin() + test_pos + 1, a.positional.end());
    test_args.keyword = a.keyword;
  }
  List out;
  // jinja2 iterates only a true value (`if value: for item in value`): None gives nothing.
  for (const Value& item : seq.Truthy() ? IterateValue(seq) : List()) {
    const Value v = with_attr ? in.GetPath(item, attr) : item;
    const bool ok = has_test ? in.Test(test, v, test_args) : v.Truthy();
    if (ok == select) out.push_back(item);
  }
  return Value::MakeIterable(std::move(out), "generator");
}

Value Map(Interpreter& in, const Value& seq, Args& a) {
  List out;
  const Value attr = a.Get(99, "attribute");
  if (!attr.is_undefined()) {
    const Value def = a.Get(99, "default");
    for (const Value& item : seq.Truthy() ? IterateValue(seq) : List()) {
      Value v = in.GetPath(item, attr);
      out.push_back(v.is_undefined() && !def.is_undefined() ? def : v);
    }
    return Value::MakeIterable(std::move(out), "generator");
  }
  if (a.positional.empty() || !a.positional[0].is_string())
    TypeError("map requires a filter argument");
  const std::string filter = a.positional[0].str();
  Args fargs;
  fargs.positional.assign(a.positional.begin() + 1, a.positional.end());
  fargs.keyword = a.keyword;
  for (const Value& item : seq.Truthy() ? IterateValue(seq) : List()) {
    out.push_back(in.Filter(filter, item, fargs));
  }
  return Value::MakeIterable(std::move(out), "generator");
}

// sort / unique / min / max key: optional attribute (comma-separated for sort), case folding.
Value ItemKey(Interpreter& in, const Value& item, const Value& attr, bool case_sensitive) {
  if (attr.is_undefined() || attr.is_none()) return SortKey(item, case_sensitive);
  if (attr.is_string() && attr.str().find(',') != std::string::npos) {
    List parts;
    const std::string comma = ",";
    for (const std::string& p : PySplit(attr.str(), &comma, -1)) {
      parts.push_back(
          SortKey(in.GetPath(item, Value::Str(PyStrip(p, nullptr, true, true))), case_sensitive));
    }
    return Value::MakeList(std::move(parts), true);
  }
  return SortKey(in.GetPath(item, attr), case_sensitive);
}

Value Sort(Interpreter& in, const Value& seq, const Args& a) {
  const bool reverse = ArgBool(a, 0, "reverse", false);
  const bool cs = ArgBool(a, 1, "case_sensitive", false);
  const Value attr = a.Get(2, "attribute");
  List items = IterateValue(seq);
  std::vector<std::pair<Value, Value>> keyed;
  for (const Value& v : items) keyed.emplace_back(ItemKey(in, v, attr, cs), v);
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
    return reverse ? Less(y.first, x.first) : Less(x.first, y.first);
  });
  List out;
  for (auto& [k, v] : keyed) out.push_back(std::move(v));
  return Value::MakeList(std::move(out));
}

Value MinMax(Interpreter& in, const Value& seq, const Args& a, bool want_max) {
  const bool cs = ArgBool(a, 0, "case_sensitive", false);
  const Value attr = a.Get(1, "attribute");
  const List items = IterateValue(seq);
  if (items.empty()) return Value::Undefined("No aggregated item, sequence was empty.");
  size_t best = 0;
  Value best_key = ItemKey(in, items[0], attr, cs);
  for (size_t i = 1; i < items.size(); ++i) {
    Value k = ItemKey(in, items[i], attr, cs);
    if (want_max ? Less(best_key, k) : Less(k, best_key)) {
      best = i;
      best_key = std::move(k);
    }
  }
  return items[best];
}

Value Unique(Interpreter& in, const Value& seq, const Args& a) {
  const bool cs = ArgBool(a, 0, "case_sensitive", false);
  const Value attr = a.Get(1, "attribute");
  List out, seen;
  for (const Value& v : IterateValue(seq)) {
    Value k = ItemKey(in, v, attr, cs);
    if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return Equal(s, k); })) {
      seen.push_back(std::move(k));
      out.push_back(v);
    }
  }
  return Value::MakeIterable(std::move(out), "generator");
}

Value DictSort(const Value& v, const Args& a) {
  if (!v.is_dict()) TypeError("dictsort requires a mapping");
  const bool cs = ArgBool(a, 0, "case_sensitive", false);
  const Value by = a.Get(1, "by");
  const bool by_value = by.is_string() && by.str() == "value";
  if (by.is_string() && by.str() != "key" && by.str() != "value") {
    throw RenderError("FilterArgumentError", "You can only sort by either \"key\" or \"value\"");
  }
  const bool reverse = ArgBool(a, 2, "reverse", false);
  std::vector<std::pair<Value, Value>> items = v.dict().items;
  std::stable_sort(items.begin(), items.end(), [&](const auto& x, const auto& y) {
    const Value kx = SortKey(by_value ? x.second : x.first, cs);
    const Value ky = SortKey(by_value ? y.second : y.first, cs);
    return reverse ? Less(ky, kx) : Less(kx, ky);
  });
  List out;
  for (auto& [k, val] : items) out.push_back(Value::MakeList({k, val}, true));
  return Value::MakeList(std::move(out));
}

JsonOptions ToJsonOptions(const Args& a) {
  JsonOptions o;
  o.ensure_ascii = ArgBool(a, 0, "ensure_ascii", false);
  const Value indent = a.Get(1, "indent");
  if (!indent.is_undefined() && !indent.is_none()) {
    o.has_indent = true;
    o.indent =
        indent.is_string() ? indent.str() : std::string(std::max<int64_t>(0, indent.as_int()), ' ');
    o.item_sep = ",";
  }
  const Value seps = a.Get(2, "separators");
  if (seps.is_list() && seps.list().size() == 2) {
    o.item_sep = seps.list()[0].ToString();
    o.key_sep = seps.list()[1].ToString();
  }
  o.sort_keys = ArgBool(a, 3, "sort_keys", false);
  return o;
}

void DumpJson(const Value& v, const JsonOptions& o, int level, std::string& out) {
  auto newline = [&](int lvl) {
    if (!o.has_indent) return;
    out += "\n";
    for (int i = 0; i < lvl; ++i) out += o.indent;
  };
  switch (v.kind()) {
    case Value::Kind::kNone:
      out += "null";
      return;
    case Value::Kind::kBool:
      out += v.as_bool() ? "true" : "false";
      return;
    case Value::Kind::kInt:
      out += std::to_string(v.as_int());
      return;
    case Value::Kind::kFloat: {
      const double d = v.as_double();
      out += std::isnan(d)   ? "NaN"
             : std::isinf(d) ? (d < 0 ? "-Infinity" : "Infinity")
                             : PyFloatRepr(d);
      return;
    }
    case Value::Kind::kString:
      out += JsonQuote(v.str(), o.ensure_ascii);
      return;
    case Value::Kind::kList: {
      if (!v.is_plain_list())
        TypeError("Object of type " + v.TypeName() + " is not JSON serializable");
      if (v.list().empty()) {
        out += "[]";
        return;
      }
      out += "[";
      for (size_t i = 0; i < v.list().size(); ++i) {
        if (i) out += o.item_sep;
        newline(level + 1);
        DumpJson(v.list()[i], o, level + 1, out);
      }
      newline(level);
      out += "]";
      return;
    }
    case Value::Kind::kDict: {
      if (v.dict().items.empty()) {
        out += "{}";
        return;
      }
      std::vector<std::pair<std::string, const Value*>> items;
      for (const auto& [k, val] : v.dict().items) {
        std::string key;
        if (k.is_string()) {
          key = k.str();
        } else if (k.is_bool()) {
          key = k.as_bool() ? "true" : "false";
        } else if (k.is_none()) {
          key = "null";
        } else if (k.is_int() || k.is_float()) {
          key = k.is_int() ? std::to_string(k.as_int()) : PyFloatRepr(k.as_double());
        } else {
          TypeError("keys must be str, int, float, bool or None, not " + k.TypeName());
        }
        items.emplace_back(std::move(key), &val);
      }
      if (o.sort_keys) {
        std::stable_sort(items.begin(), items.end(),
                         [](const auto& x, const auto& y) { return x.first < y.first; });
      }
      out += "{";
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += o.item_sep;
        newline(level + 1);
        out += JsonQuote(items[i].first, o.ensure_ascii) + o.key_sep;
        DumpJson(*items[i].second, o, level + 1, out);
      }
      newline(level);
      out += "}";
      return;
    }
    default:
      TypeError("Object of type " + v.TypeName() + " is not JSON serializable");
  }
}

using FilterFn = std::function<Value(Interpreter&, const Value&, Args&)>;

Value Str(std::string s) { return Value::Str(std::move(s)); }

const std::map<std::string, FilterFn>& Filters() {
  static const auto* filters = new std::map<std::string, FilterFn>{
      {"abs", [](Interpreter&, const Value& v, Args&) {
         if (!v.is_number()) TypeError("bad operand type for abs(): '" + v.TypeName() + "'");
         return v.is_float() ? Value::Float(std::fabs(v.as_double())) : Value::Int(std::llabs(v.as_int()));
       }},
      {"attr", [](Interpreter& in, const Value& v, Args& a) { return in.GetAttr(v, a.Get(0, "name").ToString()); }},
      {"capitalize", [](Interpreter&, const Value& v, Args&) { return Value::StrLike(PyCapitalize(v.ToString()), v); }},
      {"center", [](Interpreter&, const Value& v, Args& a) {
         const std::string s = v.ToString();
         const Value w = a.Get(0, "width");
         const int64_t width = w.is_undefined() ? 80 : w.as_int();
         const int64_t len = static_cast<int64_t>(Utf8Length(s));
         if (width <= len) return Str(s);
         const int64_t pad = width - len, left = pad / 2 + (pad & width & 1);
         return Str(std::string(left, ' ') + s + std::string(pad - left, ' '));
       }},
      {"count", [](Interpreter&, const Value& v, Args&) { return Value::Int(Length(v)); }},
      {"default", [](Interpreter&, const Value& v, Args& a) {
         const bool boolean = ArgBool(a, 1, "boolean", false);
         if (v.is_undefined() || (boolean && !v.Truthy())) {
           return a.Has(0, "default_value") ? a.Get(0, "default_value") : Str("");
         }
         return v;
       }},
      {"dictsort", [](Interpreter&, const Value& v, Args& a) { return DictSort(v, a); }},
      {"escape", [](Interpreter&, const Value& v, Args&) {
         return v.is_safe() ? v : Value::Markup(HtmlEscape(v.ToString()));
       }},
      {"first", [](Interpreter&, const Value& v, Args&) {
         List items = IterateValue(v);
         return items.empty() ? Value::Undefined("No first item, sequence was empty.") : items.front();
       }},
      {"float", [](Interpreter&, const Value& v, Args& a) { return ToFloat(v, a.Get(0, "default")); }},
      {"format", [](Interpreter&, const Value& v, Args& a) {
         return Str(PercentFormat(v.ToString(), Value::MakeList(a.positional, true)));
       }},
      {"indent", [](Interpreter&, const Value& v, Args& a) {
         return Str(Indent(v.ToString(), a.Get(0, "width"), ArgBool(a, 1, "first", false), ArgBool(a, 2, "blank", false)));
       }},
      {"int", [](Interpreter&, const Value& v, Args& a) {
         const Value base = a.Get(1, "base");
         return ToInt(v, a.Get(0, "default"), base.is_undefined() ? 10 : static_cast<int>(base.as_int()));
       }},
      {"items", [](Interpreter&, const Value& v, Args&) {
         if (v.is_undefined()) return Value::MakeIterable({}, "generator");
         if (!v.is_dict()) TypeError("Can only get item pairs from a mapping.");
         List out;
         for (const auto& [k, val] : v.dict().items) out.push_back(Value::MakeList({k, val}, true));
         return Value::MakeIterable(std::move(out), "generator");
       }},
      {"join", [](Interpreter& in, const Value& v, Args& a) {
         const Value sep = a.Get(0, "d");
         const Value attr = a.Get(1, "attribute");
         std::string out;
         bool first = true;
         for (const Value& item : IterateValue(v)) {
           if (!first) out += sep.ToString();
           first = false;
           out += (attr.is_undefined() || attr.is_none() ? item : in.GetPath(item, attr)).ToString();
         }
         return Str(std::move(out));
       }},
      {"last", [](Interpreter&, const Value& v, Args&) {
         List items = IterateValue(v);
         return items.empty() ? Value::Undefined("No last item, sequence was empty.") : items.back();
       }},
      {"length", [](Interpreter&, const Value& v, Args&) { return Value::Int(Length(v)); }},
      {"list", [](Interpreter&, const Value& v, Args&) { return Value::MakeList(IterateValue(v)); }},
      {"lower", [](Interpreter&, const Value& v, Args&) { return Value::StrLike(PyLower(v.ToString()), v); }},
      {"map", [](Interpreter& in, const Value& v, Args& a) { return Map(in, v, a); }},
      {"max", [](Interpreter& in, const Value& v, Args& a) { return MinMax(in, v, a, true); }},
      {"min", [](Interpreter& in, const Value& v, Args& a) { return MinMax(in, v, a, false); }},
      {"reject", [](Interpreter& in, const Value& v, Args& a) { return SelectOrReject(in, v, a, false, false); }},
      {"rejectattr", [](Interpreter& in, const Value& v, Args& a) { return SelectOrReject(in, v, a, true, false); }},
      {"replace", [](Interpreter&, const Value& v, Args& a) {
         const Value count = a.Get(2, "count");
         return Str(PyReplace(v.ToString(), a.Get(0, "old").ToString(), a.Get(1, "new").ToString(),
                              count.is_undefined() || count.is_none() ? -1 : count.as_int()));
       }},
      {"reverse", [](Interpreter&, const Value& v, Args&) {
         if (v.is_string()) {
           std::u32string cps = Utf8ToCodepoints(v.str());
           std::reverse(cps.begin(), cps.end());
           return Str(CodepointsToUtf8(cps));
         }
         List items = IterateValue(v);
         std::reverse(items.begin(), items.end());
         return Value::MakeIterable(std::move(items), "list_reverseiterator");
       }},
      {"round", [](Interpreter&, const Value& v, Args& a) {
         const Value p = a.Get(0, "precision");
         const Value m = a.Get(1, "method");
         const std::string method = m.is_undefined() ? "common" : m.ToString();
         const double scale = std::pow(10.0, p.is_undefined() ? 0 : p.as_int());
         const double x = v.as_double() * scale;
         const double r = method == "ceil" ? std::ceil(x) : method == "floor" ? std::floor(x) : std::round(x);
         return Value::Float(r / scale);
       }},
      {"safe", [](Interpreter&, const Value& v, Args&) { return Value::Markup(v.ToString()); }},
      {"select", [](Interpreter& in, const Value& v, Args& a) { return SelectOrReject(in, v, a, false, true); }},
      {"selectattr", [](Interpreter& in, const Value& v, Args& a) { return SelectOrReject(in, v, a, true, true); }},
      {"sort", [](Interpreter& in, const Value& v, Args& a) { return Sort(in, v, a); }},
      {"string", [](Interpreter&, const Value& v, Args&) { return Value::StrLike(v.ToString(), v); }},
      {"sum", [](Interpreter& in, const Value& v, Args& a) {
         const Value attr = a.Get(0, "attribute");
         Value acc = a.Has(1, "start") ? a.Get(1, "start") : Value::Int(0);
         for (const Value& item : IterateValue(v)) {
           const Value x = attr.is_undefined() ? item : in.GetPath(item, attr);
           if (!acc.is_number() || !x.is_number()) TypeError("unsupported operand type(s) for +");
           acc = acc.is_float() || x.is_float() ? Value::Float(acc.as_double() + x.as_double())
                                                : Value::Int(acc.as_int() + x.as_int());
         }
         return acc;
       }},
      {"title", [](Interpreter&, const Value& v, Args&) { return Value::StrLike(PyTitle(v.ToString()), v); }},
      {"tojson", [](Interpreter&, const Value& v, Args& a) { return Str(JsonDumps(v, ToJsonOptions(a))); }},
      {"trim", [](Interpreter&, const Value& v, Args& a) {
         const Value chars = a.Get(0, "chars");
         const std::string c = chars.ToString();
         return Value::StrLike(
             PyStrip(v.ToString(), chars.is_undefined() || chars.is_none() ? nullptr : &c, true, true), v);
       }},
      {"unique", [](Interpreter& in, const Value& v, Args& a) { return Unique(in, v, a); }},
      {"upper", [](Interpreter&, const Value& v, Args&) { return Value::StrLike(PyUpper(v.ToString()), v); }},
      {"wordcount", [](Interpreter&, const Value& v, Args&) {
         return Value::Int(static_cast<int64_t>(PySplit(v.ToString(), nullptr, -1).size()));
       }},
  };
  return *filters;
}

bool IsIntLike(const Value& v) { return v.is_int(); }

}  // namespace

List IterateValue(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kList:
      return v.list();
    case Value::Kind::kDict: {
      List keys;
      for (const auto& [k, val] : v.dict().items) keys.push_back(k);
      return keys;
    }
    case Value::Kind::kString: {
      List chars;
      for (char32_t c : Utf8ToCodepoints(v.str())) {
        chars.push_back(Value::Str(CodepointsToUtf8(std::u32string(1, c))));
      }
      return chars;
    }
    case Value::Kind::kUndefined:
      return {};
    default:
      TypeError("'" + v.TypeName() + "' object is not iterable");
  }
}

Value ApplyFilter(Interpreter& in, const std::string& name, const Value& input, Args& args) {
  static const std::map<std::string, std::string> kAliases = {
      {"d", "default"}, {"e", "escape"}, {"forceescape", "escape"}};
  auto alias = kAliases.find(name);
  const std::string& real = alias == kAliases.end() ? name : alias->second;
  auto it = Filters().find(real);
  if (it == Filters().end())
    throw RenderError("TemplateAssertionError", "No filter named '" + name + "'.");
  return it->second(in, input, args);
}

bool ApplyTest(Interpreter& in, const std::string& name, const Value& v, Args& a) {
  const Value arg = a.Get(0, "other");
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_dict();
  if (name == "iterable") return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined();
  if (name == "sequence") {
    return v.is_string() || (v.is_list() && !v.is_iterator()) || v.is_dict() || v.is_undefined();
  }
  if (name == "number") return v.is_number();
  if (name == "integer") return IsIntLike(v);
  if (name == "float") return v.is_float();
  if (name == "boolean") return v.is_bool();
  if (name == "true") return v.is_bool() && v.as_bool();
  if (name == "false") return v.is_bool() && !v.as_bool();
  if (name == "callable") return v.is_callable();
  if (name == "odd" || name == "even") {
    if (!v.is_int() && !v.is_bool()) TypeError("odd/even need an integer");
    return (v.as_int() % 2 != 0) == (name == "odd");
  }
  if (name == "divisibleby") {
    const Value d = a.Get(0, "num");
    if (!d.is_number() || d.as_double() == 0)
      throw RenderError("ZeroDivisionError", "divisibleby 0 or non-number");
    return std::fmod(v.as_double(), d.as_double()) == 0;
  }
  if (name == "eq" || name == "equalto" || name == "==") return Equal(v, arg);
  if (name == "ne" || name == "!=") return !Equal(v, arg);
  if (name == "lt" || name == "lessthan" || name == "<") return Less(v, arg);
  if (name == "gt" || name == "greaterthan" || name == ">") return Less(arg, v);
  if (name == "le" || name == "<=") return !Less(arg, v);
  if (name == "ge" || name == ">=") return !Less(v, arg);
  if (name == "in") {
    const Value seq = a.Get(0, "seq");
    if (seq.is_string() && v.is_string()) return seq.str().find(v.str()) != std::string::npos;
    for (const Value& item : IterateValue(seq)) {
      if (Equal(item, v)) return true;
    }
    return false;
  }
  if (name == "sameas") {
    if (v.identity() || arg.identity()) return v.identity() == arg.identity();
    return v.kind() == arg.kind() && (v.is_none() || (v.is_bool() && v.as_bool() == arg.as_bool()));
  }
  if (name == "lower") return v.is_string() && PyLower(v.str()) == v.str();
  if (name == "upper") return v.is_string() && PyUpper(v.str()) == v.str();
  if (name == "escaped") return false;
  if (name == "filter")
    return v.is_string() && (Filters().count(v.str()) || v.str() == "d" || v.str() == "e");
  if (name == "test") {
    static const char* const kTests[] = {
        "defined", "undefined", "none",        "string",  "mapping", "iterable", "sequence",
        "number",  "integer",   "float",       "boolean", "true",    "false",    "callable",
        "odd",     "even",      "divisibleby", "eq",      "equalto", "ne",       "lt",
        "gt",      "le",        "ge",          "in",      "sameas",  "lower",    "upper",
        "escaped", "filter",    "test"};
    return v.is_string() && std::any_of(std::begin(kTests), std::end(kTests),
                                        [&](const char* t) { return v.str() == t; });
  }
  throw RenderError("TemplateAssertionError", "No test named '" + name + "'.");
}

std::string JsonDumps(const Value& v, const JsonOptions& o) {
  std::string out;
  DumpJson(v, o, 0, out);
  return out;
}

std::string PercentFormat(const std::string& fmt, const Value& args) {
  const List items = args.is_tuple() ? args.list() : List{args};
  size_t next = 0;
  std::string out;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out.push_back(fmt[i]);
      continue;
    }
    if (++i >= fmt.size()) throw RenderError("ValueError", "incomplete format");
    const char c = fmt[i];
    if (c == '%') {
      out.push_back('%');
      continue;
    }
    if (next >= items.size()) TypeError("not enough arguments for format string");
    const Value& v = items[next++];
    char buf[64];
    switch (c) {
      case 's':
        out += v.ToString();
        break;
      case 'r':
        out += v.Repr();
        break;
      case 'd':
      case 'i':
        if (!v.is_number()) TypeError("%d format: a real number is required, not " + v.TypeName());
        out += std::to_string(v.is_float() ? static_cast<int64_t>(v.as_double()) : v.as_int());
        break;
      case 'f':
        if (!v.is_number()) TypeError("must be real number, not " + v.TypeName());
        std::snprintf(buf, sizeof(buf), "%f", v.as_double());
        out += buf;
        break;
      case 'x':
        if (!v.is_int()) TypeError("%x format: an integer is required");
        std::snprintf(buf, sizeof(buf), "%llx", static_cast<long long>(v.as_int()));
        out += buf;
        break;
      default:
        throw RenderError("ValueError", std::string("unsupported format character '") + c + "'");
    }
  }
  if (next < items.size()) TypeError("not all arguments converted during string formatting");
  return out;
}

}  // namespace textgen::jinja
