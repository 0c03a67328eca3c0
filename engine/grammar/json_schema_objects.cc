// SchemaConverter: objects (properties in order, counts, additional properties and their
// names) and arrays (prefixItems, items, counts).
#include <algorithm>
#include <map>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "engine/grammar/json_schema_converter.h"
#include "engine/util/status_macros.h"

namespace textgen::json_schema_internal {
namespace {

struct Property {
  std::string name;
  bool required = false;
  Expr member;  // "name" ws ":" ws value ws
};

}  // namespace

absl::StatusOr<Expr> SchemaConverter::ObjectExpr(const Conj& conj, int depth) {
  const std::string where = conj.parts.empty() ? "" : conj.parts[0].ptr;
  std::vector<std::string> names;  // declared, then required-only, in order
  absl::flat_hash_set<std::string> name_set;
  std::vector<std::string> required;
  absl::flat_hash_set<std::string> required_set;
  std::vector<std::string> extra_ptrs, name_ptrs;
  int64_t min_props = 0, max_props = -1;
  for (const Part& p : conj.parts) {
    if (const Json* props = Keyword(p, "properties")) {
      for (const auto& [name, value] : props->items()) {
        if (name_set.insert(name).second) names.push_back(name);
      }
    }
    if (const Json* req = Keyword(p, "required")) {
      for (const Json& r : *req) {
        const std::string name = r.get<std::string>();
        if (required_set.insert(name).second) required.push_back(name);
      }
    }
    if (Keyword(p, "additionalProperties"))
      extra_ptrs.push_back(PointerChild(p.ptr, "additionalProperties"));
    if (Keyword(p, "propertyNames")) name_ptrs.push_back(PointerChild(p.ptr, "propertyNames"));
    if (const Json* v = Keyword(p, "minProperties")) min_props = std::max(min_props, AsCount(*v));
    if (const Json* v = Keyword(p, "maxProperties")) {
      max_props = max_props < 0 ? AsCount(*v) : std::min(max_props, AsCount(*v));
    }
  }
  for (const std::string& r : required) {
    if (name_set.insert(r).second) names.push_back(r);
  }
  TG_ASSIGN_OR_RETURN(Conj name_conj, Flatten(name_ptrs));
  const Expr ws = pieces_.Ws();

  // Each part's declared names (ordered_json looks members up linearly).
  std::vector<absl::flat_hash_set<std::string>> declared_by(conj.parts.size());
  for (size_t i = 0; i < conj.parts.size(); ++i) {
    if (const Json* props = Keyword(conj.parts[i], "properties")) {
      for (const auto& [name, value] : props->items()) declared_by[i].insert(name);
    }
  }
  // Each property's value: the conjunction of what every part says about it.
  std::vector<Property> props;
  for (const std::string& name : names) {
    TG_RETURN_IF_ERROR(b_.CheckDeadline());
    std::vector<std::string> ptrs;
    for (size_t i = 0; i < conj.parts.size(); ++i) {
      const Part& p = conj.parts[i];
      if (declared_by[i].contains(name)) {
        ptrs.push_back(PointerChild(PointerChild(p.ptr, "properties"), name));
      } else if (Keyword(p, "additionalProperties")) {
        ptrs.push_back(PointerChild(p.ptr, "additionalProperties"));
      }
    }
    TG_ASSIGN_OR_RETURN(Conj value_conj, Flatten(ptrs));
    const bool is_required = required_set.contains(name);
    if (value_conj.never) {
      if (is_required) {
        NoteEmpty(absl::StrCat("required property \"", name, "\" is forbidden at ",
                               PointerForMessage(where)));
        return b_.Never();
      }
      continue;
    }
    TG_ASSIGN_OR_RETURN(std::string key, CanonicalJson(Json(name)));
    if (!name_conj.parts.empty() || name_conj.never) {
      TG_ASSIGN_OR_RETURN(std::vector<bool> ok, Accepts(name_conj, kString, {key}));
      if (!ok[0]) {
        return absl::InvalidArgumentError(absl::StrCat("invalid JSON Schema: property \"", name,
                                                       "\" at ", PointerForMessage(where),
                                                       " does not satisfy \"propertyNames\""));
      }
    }
    const std::string hint = absl::StrCat(where, "/", name);
    TG_ASSIGN_OR_RETURN(Expr value, Convert(value_conj, kAllTypes, hint, depth + 1));
    props.push_back(
        Property{name, is_required, b_.Seq({b_.Literal(key), ws, b_.Literal(":"), ws, value, ws})});
  }

  // Additional properties: any name but the declared ones, allowed by propertyNames.
  Expr extra = b_.Never();
  TG_ASSIGN_OR_RETURN(Conj extra_conj, Flatten(extra_ptrs));
  if (!extra_conj.never && !name_conj.never) {
    TG_ASSIGN_OR_RETURN(Expr key, ExtraKey(name_conj, names, where));
    TG_ASSIGN_OR_RETURN(
        Expr value, Convert(extra_conj, kAllTypes, absl::StrCat(where, "/additional"), depth + 1));
    const Expr member = b_.Seq({key, ws, b_.Literal(":"), ws, value, ws});
    if (member != b_.Never()) {
      const int rule = b_.NewRule(absl::StrCat(where, "/additional-member"), where);
      b_.Define(rule, member);
      extra = b_.Ref(rule);
    }
  }

  // States (i, c): properties from i on, c members written so far (capped at `top` when there
  // is no maxProperties: more makes no difference then).
  const int n = static_cast<int>(props.size());
  // c never exceeds n (only declared properties count before the additional ones).
  const int64_t top =
      std::min<int64_t>(n, max_props >= 0 ? max_props : std::max<int64_t>(min_props, 1));
  if ((n + 1) * (top + 1) > 4 * static_cast<int64_t>(options_.max_rules)) {
    return absl::InvalidArgumentError(
        absl::StrCat("schema too complex: minProperties / maxProperties over ", n,
                     " properties at ", PointerForMessage(where)));
  }
  std::vector<int> required_after(n + 1, 0);
  for (int i = n - 1; i >= 0; --i) required_after[i] = required_after[i + 1] + props[i].required;
  const bool has_extra = extra != b_.Never();
  // minProperties counts on at most one additional property: a grammar cannot keep the names of
  // several distinct (two equal names would count once).
  const auto feasible = [&](int i, int64_t c) {
    if (max_props >= 0 && c + required_after[i] > max_props) return false;
    return c + (n - i) + (has_extra ? 1 : 0) >= min_props;
  };
  const auto cap = [&](int64_t c) { return max_props >= 0 ? c : std::min(c, top); };
  const Expr comma = b_.Seq({b_.Literal(","), ws});
  std::vector<std::vector<char>> reach(n + 1, std::vector<char>(top + 1, 0));
  reach[0][0] = feasible(0, 0);
  for (int i = 0; i < n; ++i) {
    for (int64_t c = 0; c <= top; ++c) {
      if (!reach[i][c]) continue;
      if ((max_props < 0 || c + 1 <= max_props) && feasible(i + 1, cap(c + 1))) {
        reach[i + 1][cap(c + 1)] = 1;
      }
      if (!props[i].required && feasible(i + 1, c)) reach[i + 1][c] = 1;
    }
  }
  std::vector<std::vector<Expr>> state(n + 1, std::vector<Expr>(top + 1, b_.Never()));
  for (int64_t c = 0; c <= top; ++c) {
    if (!reach[n][c]) continue;
    const int64_t need = std::max<int64_t>(0, min_props - c);
    const int64_t allow = max_props >= 0 ? max_props - c : -1;
    if (!has_extra || allow == 0) {
      state[n][c] = need == 0 ? b_.Empty() : b_.Never();
    } else if (c == 0) {
      const Expr more = b_.Repeat(b_.Seq({comma, extra}), std::max<int64_t>(0, need - 1),
                                  allow < 0 ? -1 : allow - 1);
      const Expr list = b_.Seq({extra, more});
      state[n][c] = need == 0 ? b_.Optional(list) : list;
    } else {
      state[n][c] = b_.Repeat(b_.Seq({comma, extra}), need, allow);
    }
  }
  for (int i = n - 1; i >= 0; --i) {
    for (int64_t c = 0; c <= top; ++c) {
      if (!reach[i][c]) continue;
      std::vector<Expr> alts;
      if ((max_props < 0 || c + 1 <= max_props) && reach[i + 1][cap(c + 1)]) {
        alts.push_back(
            b_.Seq({c == 0 ? b_.Empty() : comma, props[i].member, state[i + 1][cap(c + 1)]}));
      }
      if (!props[i].required && reach[i + 1][c]) alts.push_back(state[i + 1][c]);
      if (alts.size() < 2) {
        state[i][c] = b_.Alt(std::move(alts));
        continue;
      }
      const int rule = b_.NewRule(absl::StrCat(where, "/after-", i, "-", c), where);
      b_.Define(rule, b_.Alt(std::move(alts)));
      state[i][c] = b_.Ref(rule);
    }
    TG_RETURN_IF_ERROR(b_.status());
  }
  if (!reach[0][0]) {
    if (has_extra && (max_props < 0 || max_props >= min_props)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "unsupported JSON Schema keyword \"minProperties\" at ", PointerForMessage(where),
          ": it needs two or more additional properties, whose names a grammar cannot keep "
          "distinct"));
    }
    NoteEmpty(
        absl::StrCat("no object satisfies the property counts at ", PointerForMessage(where)));
    return b_.Never();
  }
  return b_.Seq({b_.Literal("{"), ws, state[0][0], b_.Literal("}")});
}

absl::StatusOr<Expr> SchemaConverter::ExtraKey(const Conj& names,
                                               const std::vector<std::string>& declared,
                                               const std::string& ptr) {
  const Expr quote = b_.Literal("\"");
  if (declared.empty()) {
    if (names.parts.empty()) return pieces_.AnyString();
    return Convert(names, kString, absl::StrCat(ptr, "/property-names"), 0);
  }
  // Names must differ from every declared one. Spelled canonically (one spelling per
  // character), so that a different spelling of a declared name cannot slip through.
  int64_t min_len = 0, max_len = -1;
  uint8_t types = kAllTypes;
  std::optional<std::vector<std::string>> listed;  // from enum / const
  for (const Part& p : names.parts) {
    for (const char* k : {"pattern", "format", "anyOf", "oneOf"}) {
      if (Keyword(p, k)) {
        return absl::InvalidArgumentError(
            absl::StrCat("unsupported JSON Schema keyword \"propertyNames\" at ",
                         PointerForMessage(ptr), ": with \"", k,
                         "\" beside declared properties and additional properties (only "
                         "enum / const and lengths are supported there)"));
      }
    }
    if (const Json* t = Keyword(p, "type")) types &= TypeMask(*t);
    if (const Json* v = Keyword(p, "minLength")) min_len = std::max(min_len, AsCount(*v));
    if (const Json* v = Keyword(p, "maxLength")) {
      max_len = max_len < 0 ? AsCount(*v) : std::min(max_len, AsCount(*v));
    }
    if (Keyword(p, "enum") || Keyword(p, "const")) listed.emplace();
  }
  if (!(types & kString) || (max_len >= 0 && min_len > max_len)) return b_.Never();
  std::vector<std::string> keys;
  for (const std::string& d : declared) {
    TG_ASSIGN_OR_RETURN(std::string key, CanonicalJson(Json(d)));
    keys.push_back(key);
  }
  if (listed) {
    // The listed names that pass every constraint, minus the declared ones.
    std::vector<std::string> texts;
    for (const Part& p : names.parts) {
      for (const char* k : {"enum", "const"}) {
        const Json* v = Keyword(p, k);
        if (v == nullptr) continue;
        const std::vector<Json> values =
            std::string_view(k) == "enum" ? v->get<std::vector<Json>>() : std::vector<Json>{*v};
        for (const Json& value : values) {
          if (!value.is_string()) continue;
          TG_ASSIGN_OR_RETURN(std::string text, CanonicalJson(value));
          if (std::find(keys.begin(), keys.end(), text) == keys.end() &&
              std::find(texts.begin(), texts.end(), text) == texts.end()) {
            texts.push_back(text);
          }
        }
      }
    }
    TG_ASSIGN_OR_RETURN(std::vector<bool> ok, Accepts(names, kString, texts));
    std::vector<Expr> alts;
    for (size_t i = 0; i < texts.size(); ++i) {
      if (ok[i]) alts.push_back(b_.Literal(texts[i]));
    }
    return b_.Alt(std::move(alts));
  }
  // A trie of the declared names (code points); each node's expression is "the rest of a name
  // that is not a declared one", built children first without recursion.
  struct Node {
    std::map<uint32_t, int> children;
    bool terminal = false;
    int64_t depth = 0;
  };
  std::vector<Node> trie(1);
  for (const std::string& d : declared) {
    int at = 0;
    size_t pos = 0;
    uint32_t cp;
    while (DecodeUtf8(d, pos, cp)) {
      auto it = trie[at].children.find(cp);
      if (it == trie[at].children.end()) {
        trie.push_back(Node{{}, false, trie[at].depth + 1});
        it = trie[at].children.emplace(cp, static_cast<int>(trie.size() - 1)).first;
      }
      at = it->second;
    }
    trie[at].terminal = true;
  }
  const Expr key_char = pieces_.KeyChar();
  std::vector<Expr> rest(trie.size(), b_.Never());
  for (int node = static_cast<int>(trie.size()) - 1; node >= 0; --node) {
    const Node& t = trie[node];
    const bool room = max_len < 0 || t.depth + 1 <= max_len;
    std::vector<Expr> alts;
    if (!t.terminal && t.depth >= min_len) alts.push_back(b_.Empty());
    if (room) {
      CodePointSet others = CodePointSet::All();
      for (const auto& [cp, child] : t.children) {
        others = others.Minus(CodePointSet::Of(cp));
        alts.push_back(b_.Seq({pieces_.Units(CodePointSet::Of(cp)), rest[child]}));
      }
      alts.push_back(b_.Seq(
          {pieces_.Units(others), b_.Repeat(key_char, std::max<int64_t>(0, min_len - t.depth - 1),
                                            max_len < 0 ? -1 : max_len - t.depth - 1)}));
    }
    rest[node] = b_.Alt(std::move(alts));
    if (node > 0 && t.depth % 16 == 0) {  // keeps expressions shallow for long names
      const int rule = b_.NewRule(absl::StrCat(ptr, "/name"), ptr);
      b_.Define(rule, rest[node]);
      rest[node] = b_.Ref(rule);
    }
    TG_RETURN_IF_ERROR(b_.status());
  }
  const int rule = b_.NewRule(absl::StrCat(ptr, "/additional-name"), ptr);
  b_.Define(rule, b_.Seq({quote, rest[0], quote}));
  return b_.Ref(rule);
}

absl::StatusOr<Expr> SchemaConverter::ArrayExpr(const Conj& conj, int depth) {
  const std::string where = conj.parts.empty() ? "" : conj.parts[0].ptr;
  // Per part: its schemas by position and for the positions after them.
  struct Shape {
    std::vector<std::string> prefix;
    std::optional<std::string> rest;
  };
  std::vector<Shape> shapes;
  int64_t min_items = 0, max_items = -1;
  size_t k = 0;
  for (const Part& p : conj.parts) {
    Shape s;
    const Json* prefix = Keyword(p, "prefixItems");
    const Json* items = Keyword(p, "items");
    if (items != nullptr && items->is_array()) {  // draft 2019 and older: a tuple
      for (size_t i = 0; i < items->size(); ++i)
        s.prefix.push_back(PointerChild(PointerChild(p.ptr, "items"), std::to_string(i)));
      if (Keyword(p, "additionalItems")) s.rest = PointerChild(p.ptr, "additionalItems");
    } else {
      if (prefix != nullptr) {
        for (size_t i = 0; i < prefix->size(); ++i) {
          s.prefix.push_back(PointerChild(PointerChild(p.ptr, "prefixItems"), std::to_string(i)));
        }
      }
      if (items != nullptr) s.rest = PointerChild(p.ptr, "items");
    }
    k = std::max(k, s.prefix.size());
    shapes.push_back(std::move(s));
    if (const Json* v = Keyword(p, "minItems")) min_items = std::max(min_items, AsCount(*v));
    if (const Json* v = Keyword(p, "maxItems")) {
      max_items = max_items < 0 ? AsCount(*v) : std::min(max_items, AsCount(*v));
    }
  }
  std::vector<Expr> prefix;
  for (size_t i = 0; i < k; ++i) {
    std::vector<std::string> ptrs;
    for (const Shape& s : shapes) {
      if (i < s.prefix.size()) {
        ptrs.push_back(s.prefix[i]);
      } else if (s.rest) {
        ptrs.push_back(*s.rest);
      }
    }
    TG_ASSIGN_OR_RETURN(Conj c, Flatten(ptrs));
    TG_ASSIGN_OR_RETURN(Expr e, Convert(c, kAllTypes, absl::StrCat(where, "/item-", i), depth + 1));
    if (e == b_.Never()) {  // no item can be here: the array ends before
      max_items = max_items < 0 ? static_cast<int64_t>(i) : std::min<int64_t>(max_items, i);
      break;
    }
    prefix.push_back(e);
  }
  std::vector<std::string> rest_ptrs;
  for (const Shape& s : shapes) {
    if (s.rest) rest_ptrs.push_back(*s.rest);
  }
  TG_ASSIGN_OR_RETURN(Conj rest_conj, Flatten(rest_ptrs));
  TG_ASSIGN_OR_RETURN(Expr rest,
                      Convert(rest_conj, kAllTypes, absl::StrCat(where, "/items"), depth + 1));
  if (rest == b_.Never() && prefix.size() == k) {
    max_items = max_items < 0 ? static_cast<int64_t>(k) : std::min<int64_t>(max_items, k);
  }
  if (max_items >= 0 && min_items > max_items) {
    NoteEmpty(absl::StrCat("no array satisfies the item counts at ", PointerForMessage(where)));
    return b_.Never();
  }
  const Expr ws = pieces_.Ws();
  const Expr comma = b_.Seq({b_.Literal(","), ws});
  const int64_t reachable = max_items < 0 ? static_cast<int64_t>(prefix.size())
                                          : std::min<int64_t>(max_items, prefix.size());
  // Items from position `reachable` on: the rest schema, comma-separated.
  const int64_t rest_min = std::max<int64_t>(0, min_items - reachable);
  const int64_t rest_max = max_items < 0 ? -1 : max_items - reachable;
  Expr tail;
  if (reachable == 0) {
    const Expr list =
        b_.Seq({rest, ws,
                b_.Repeat(b_.Seq({comma, rest, ws}), std::max<int64_t>(0, rest_min - 1),
                          rest_max < 0 ? -1 : rest_max - 1)});
    tail = rest_max == 0 ? b_.Empty() : rest_min == 0 ? b_.Optional(list) : list;
  } else {
    tail = b_.Repeat(b_.Seq({comma, rest, ws}), rest_min, rest_max);
    for (int64_t i = reachable - 1; i >= 0; --i) {
      const Expr item = b_.Seq({i == 0 ? b_.Empty() : comma, prefix[i], ws, tail});
      tail = (i > 0 && i >= min_items) ? b_.Optional(item) : item;
    }
    if (min_items == 0) tail = b_.Optional(tail);
  }
  return b_.Seq({b_.Literal("["), ws, tail, b_.Literal("]")});
}

}  // namespace textgen::json_schema_internal
