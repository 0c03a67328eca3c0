// SchemaConverter: the rule of a conjunction, anyOf / oneOf, enum / const, strings, numbers.
#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/grammar/json_schema_converter.h"
#include "engine/grammar/regex_parser.h"
#include "engine/util/status_macros.h"

namespace textgen::json_schema_internal {
namespace {

constexpr int kMaxNesting = 4;  // enum filters inside enum filters

// Length bounds (code points) of each format's texts, for checking that minLength /
// maxLength beside a format already hold.
void FormatLengths(std::string_view format, int64_t& min, int64_t& max) {
  min = 0, max = -1;
  if (format == "date") min = 10, max = 10;
  if (format == "time") min = 9, max = 24;
  if (format == "date-time") min = 20, max = 35;
  if (format == "uuid") min = 36, max = 36;
  if (format == "ipv4") min = 7, max = 15;
  if (format == "ipv6") min = 2, max = 39;
  if (format == "hostname") min = 1, max = 251;
  if (format == "email") min = 3, max = 4 * 64 + 3 + 1 + 251;
}

}  // namespace

SchemaConverter::Conj SchemaConverter::Merge(Conj a, const Conj& b) {
  a.never = a.never || b.never;
  for (const Part& p : b.parts) {
    auto it =
        std::find_if(a.parts.begin(), a.parts.end(), [&](const Part& q) { return q.ptr == p.ptr; });
    if (it == a.parts.end()) {
      a.parts.push_back(p);
    } else {
      it->consumed &= p.consumed;
    }
  }
  return a;
}

absl::StatusOr<JsonSchemaGrammar> SchemaConverter::Run() {
  TG_ASSIGN_OR_RETURN(Conj conj, Flatten({""}));
  return RunConj(conj, kAllTypes);
}

absl::StatusOr<JsonSchemaGrammar> SchemaConverter::RunConj(const Conj& conj, uint8_t types) {
  for (const Part& p : conj.parts) TG_RETURN_IF_ERROR(CheckKeywords(p.ptr));
  TG_RETURN_IF_ERROR(Convert(conj, types, "root", 0, GbnfBuilder::kRoot).status());
  TG_ASSIGN_OR_RETURN(GbnfGrammar g,
                      b_.Finish(empty_reason_.empty()
                                    ? "the schema admits no JSON value (its constraints contradict)"
                                    : "the schema admits no JSON value: " + empty_reason_));
  return JsonSchemaGrammar{std::move(g.text), g.max_bytes, g.rules};
}

absl::StatusOr<Expr> SchemaConverter::Convert(const Conj& conj, uint8_t types,
                                              std::string_view hint, int depth, int rule) {
  if (conj.never || types == 0) {
    if (rule >= 0) b_.Define(rule, b_.Never());
    return b_.Never();
  }
  TG_RETURN_IF_ERROR(b_.CheckDeadline());
  if (depth > options_.max_depth) {
    return absl::InvalidArgumentError(
        absl::StrCat("schema too complex: subschemas nested deeper than ", options_.max_depth,
                     " at ", PointerForMessage(conj.parts.empty() ? "" : conj.parts[0].ptr)));
  }
  // A schema without constraints is the generic value.
  bool constrained = types != kAllTypes;
  for (const Part& p : conj.parts) {
    for (const auto& [key, value] : schemas_.at(p.ptr)->items()) {
      if (key == "type" || key == "enum" || key == "const" || ValueConstraintKeyword(key)) {
        if (Keyword(p, key.c_str()) != nullptr) constrained = true;
      }
    }
  }
  if (!constrained) {
    if (rule < 0) return pieces_.Value();
    b_.Define(rule, pieces_.Value());
    return b_.Ref(rule);
  }
  const std::string key = Key(conj, types);
  if (auto it = memo_.find(key); it != memo_.end()) return it->second;
  if (rule < 0) rule = b_.NewRule(hint, conj.parts.empty() ? "" : conj.parts[0].ptr);
  const Expr ref = b_.Ref(rule);
  memo_.emplace(key, ref);
  TG_ASSIGN_OR_RETURN(Expr body, ConvertBody(conj, types, depth));
  b_.Define(rule, body);
  TG_RETURN_IF_ERROR(b_.status());
  return ref;
}

absl::StatusOr<Expr> SchemaConverter::ConvertBody(const Conj& conj, uint8_t types, int depth) {
  for (const Part& p : conj.parts) {
    if (const Json* type = Keyword(p, "type")) types &= TypeMask(*type);
  }
  if (types == 0) {
    NoteEmpty("the \"type\" keywords of an allOf or $ref have no type in common");
    return b_.Never();
  }
  for (size_t i = 0; i < conj.parts.size(); ++i) {
    if (Keyword(conj.parts[i], "anyOf")) return Distribute(conj, i, "anyOf", types, depth);
    if (Keyword(conj.parts[i], "oneOf")) return Distribute(conj, i, "oneOf", types, depth);
  }
  for (const Part& p : conj.parts) {
    if (Keyword(p, "enum") || Keyword(p, "const")) return EnumExpr(conj, types);
  }
  std::vector<Expr> alts;
  if (types & kNull) alts.push_back(pieces_.Null());
  if (types & kBoolean) alts.push_back(pieces_.Boolean());
  if (types & kString) {
    TG_ASSIGN_OR_RETURN(Expr e, StringExpr(conj));
    alts.push_back(e);
  }
  if (types & (kInteger | kNumber)) {
    TG_ASSIGN_OR_RETURN(Expr e, NumberExpr(conj, !(types & kNumber)));
    alts.push_back(e);
  }
  if (types & kObject) {
    TG_ASSIGN_OR_RETURN(Expr e, ObjectExpr(conj, depth));
    alts.push_back(e);
  }
  if (types & kArray) {
    TG_ASSIGN_OR_RETURN(Expr e, ArrayExpr(conj, depth));
    alts.push_back(e);
  }
  return b_.Alt(std::move(alts));
}

// anyOf / oneOf at conj.parts[index]: the alternatives of the conjunction with each branch.
absl::StatusOr<Expr> SchemaConverter::Distribute(const Conj& conj, size_t index,
                                                 const char* keyword, uint8_t types, int depth) {
  const std::string ptr = conj.parts[index].ptr;
  const Json& branches = *Keyword(conj.parts[index], keyword);
  Conj rest = conj;
  rest.parts[index].consumed |= std::string_view(keyword) == "anyOf" ? kAnyOfDone : kOneOfDone;
  std::vector<Conj> conjs;
  for (size_t i = 0; i < branches.size(); ++i) {
    const std::string branch = absl::StrCat(ptr, "/", keyword, "/", i);
    TG_ASSIGN_OR_RETURN(Conj c, Flatten({branch}));
    conjs.push_back(Merge(rest, c));
  }
  if (std::string_view(keyword) == "oneOf") {
    std::vector<Summary> summaries;
    for (const Conj& c : conjs) {
      TG_RETURN_IF_ERROR(b_.CheckDeadline());
      TG_ASSIGN_OR_RETURN(Summary s, Summarize(c, types));
      summaries.push_back(std::move(s));
    }
    for (size_t i = 0; i < conjs.size(); ++i) {
      TG_RETURN_IF_ERROR(b_.CheckDeadline());
      for (size_t j = 0; j < i; ++j) {
        if (j % 64 == 63) TG_RETURN_IF_ERROR(b_.CheckDeadline());
        TG_ASSIGN_OR_RETURN(const bool disjoint, Disjoint(summaries[j], summaries[i], 0));
        if (!disjoint) {
          return absl::InvalidArgumentError(absl::StrCat(
              "unsupported JSON Schema keyword \"oneOf\" at ", PointerForMessage(ptr),
              ": branches ", j, " and ", i,
              " are not provably exclusive (different types, different const / enum values, "
              "or a required property one of them has a different const for or forbids), so "
              "exactly-one cannot be enforced; use anyOf if several may match"));
        }
      }
    }
  }
  std::vector<Expr> alts;
  for (size_t i = 0; i < conjs.size(); ++i) {
    TG_ASSIGN_OR_RETURN(
        Expr e, Convert(conjs[i], types, absl::StrCat(ptr, "-", keyword, "-", i), depth + 1));
    alts.push_back(e);
  }
  return b_.Alt(std::move(alts));
}

absl::StatusOr<Expr> SchemaConverter::EnumExpr(const Conj& conj, uint8_t types) {
  // The values every enum / const of the conjunction allows, in the first one's order.
  std::optional<std::vector<const Json*>> values;
  std::string where;
  bool other_constraints = false;
  for (const Part& p : conj.parts) {
    for (const auto& [key, value] : schemas_.at(p.ptr)->items()) {
      if (ValueConstraintKeyword(key) && Keyword(p, key.c_str())) other_constraints = true;
    }
    std::vector<const Json*> mine;
    if (const Json* e = Keyword(p, "enum")) {
      for (const Json& v : *e) mine.push_back(&v);
    }
    if (const Json* c = Keyword(p, "const")) {
      if (!mine.empty()) {
        std::vector<const Json*> both;
        for (const Json* v : mine) {
          if (*v == *c) both.push_back(v);
        }
        mine = std::move(both);
      } else {
        mine.push_back(c);
      }
      if (mine.empty())
        NoteEmpty("\"const\" is not among the \"enum\" values at " + PointerForMessage(p.ptr));
    }
    if (!Keyword(p, "enum") && !Keyword(p, "const")) continue;
    if (where.empty()) where = p.ptr;
    if (!values) {
      values = std::move(mine);
      continue;
    }
    std::vector<const Json*> kept;
    for (const Json* v : *values) {
      if (std::any_of(mine.begin(), mine.end(), [&](const Json* w) { return *w == *v; })) {
        kept.push_back(v);
      }
    }
    values = std::move(kept);
  }
  std::vector<std::string> texts;
  for (const Json* v : *values) {
    if (!(TypeBitsOfValue(*v) & types)) continue;
    auto text = CanonicalJson(*v);
    if (!text.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("invalid JSON Schema: \"enum\" or \"const\" "
                       "at ",
                       PointerForMessage(where), " has ", text.status().message()));
    }
    if (std::find(texts.begin(), texts.end(), *text) == texts.end()) texts.push_back(*text);
  }
  if (other_constraints && !texts.empty()) {
    Conj rest = conj;
    for (Part& p : rest.parts) p.consumed |= kEnumDone;
    TG_ASSIGN_OR_RETURN(std::vector<bool> ok, Accepts(rest, types, texts));
    std::vector<std::string> kept;
    for (size_t i = 0; i < texts.size(); ++i) {
      if (ok[i]) kept.push_back(texts[i]);
    }
    texts = std::move(kept);
  }
  if (texts.empty()) {
    NoteEmpty("no \"enum\" / \"const\" value at " + PointerForMessage(where) +
              " satisfies the schema's other constraints");
  }
  std::vector<Expr> alts;
  for (const std::string& t : texts) alts.push_back(b_.Literal(t));
  return b_.Alt(std::move(alts));
}

absl::StatusOr<std::vector<bool>> SchemaConverter::Accepts(const Conj& conj, uint8_t types,
                                                           const std::vector<std::string>& texts) {
  if (nesting_ >= kMaxNesting) {
    return absl::InvalidArgumentError(
        "schema too complex: enum / const values filtered through nested enum constraints");
  }
  if (!accepts_) {
    return absl::InternalError("JSON Schema conversion has no grammar matcher to check values");
  }
  JsonSchemaOptions compact = options_;
  compact.allow_whitespace = false;
  SchemaConverter sub(doc_, "root", compact, deadline_, accepts_, nesting_ + 1);
  auto grammar = sub.RunConj(conj, types);
  std::vector<bool> out(texts.size(), false);
  if (!grammar.ok()) {
    // A conjunction that admits nothing accepts no value; anything else is an error.
    if (absl::StrContains(grammar.status().message(), "admits no JSON value")) return out;
    return grammar.status();
  }
  for (size_t i = 0; i < texts.size(); ++i) {
    if (i % 64 == 63) TG_RETURN_IF_ERROR(b_.CheckDeadline());
    TG_ASSIGN_OR_RETURN(const bool accepted, accepts_(grammar->gbnf, texts[i]));
    out[i] = accepted;
  }
  return out;
}

absl::StatusOr<Expr> SchemaConverter::StringExpr(const Conj& conj) {
  int64_t min_len = 0, max_len = -1;
  std::string length_ptr;
  std::vector<std::pair<std::string, std::string>> patterns, formats;  // (value, pointer)
  for (const Part& p : conj.parts) {
    if (const Json* v = Keyword(p, "minLength")) {
      min_len = std::max(min_len, AsCount(*v));
      length_ptr = p.ptr;
    }
    if (const Json* v = Keyword(p, "maxLength")) {
      max_len = max_len < 0 ? AsCount(*v) : std::min(max_len, AsCount(*v));
      length_ptr = p.ptr;
    }
    for (auto [key, list] : {std::pair{"pattern", &patterns}, std::pair{"format", &formats}}) {
      if (const Json* v = Keyword(p, key)) {
        const std::string s = v->get<std::string>();
        if (std::none_of(list->begin(), list->end(), [&](const auto& x) { return x.first == s; })) {
          list->emplace_back(s, p.ptr);
        }
      }
    }
  }
  if (max_len >= 0 && min_len > max_len) {
    NoteEmpty("\"minLength\" is greater than \"maxLength\" at " + PointerForMessage(length_ptr));
    return b_.Never();
  }
  const auto refuse = [&](const char* keyword, const std::string& ptr, std::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("unsupported JSON Schema keyword \"", keyword,
                                                   "\" at ", PointerForMessage(ptr), ": ",
                                                   std::string(why)));
  };
  if (patterns.size() > 1) {
    return refuse("pattern", patterns[1].second, "several different patterns apply (allOf)");
  }
  if (formats.size() > 1) {
    return refuse("format", formats[1].second, "several different formats apply (allOf)");
  }
  if (!patterns.empty() && !formats.empty()) {
    return refuse("pattern", patterns[0].second, "together with \"format\"");
  }
  // minLength / maxLength beside a format only if its texts already satisfy them; beside a
  // pattern, also if the pattern is anchored and a repetition in it can take them.
  const auto bounded_by = [&](int64_t lo, int64_t hi) {
    return lo >= min_len && (max_len < 0 || (hi >= 0 && hi <= max_len));
  };
  Expr content;
  if (!patterns.empty()) {
    TG_ASSIGN_OR_RETURN(ParsedRegex regex, ParseRegex(patterns[0].first));
    for (RegexBranch& branch : regex.branches) {
      int64_t lo, hi;
      RegexLengthBounds(branch.node, lo, hi);
      if (!branch.anchored_start || !branch.anchored_end) hi = -1;
      if (bounded_by(lo, hi)) continue;
      std::optional<RegexNode> constrained;
      if (branch.anchored_start && branch.anchored_end) {
        constrained = ConstrainLength(branch.node, min_len, max_len);
      }
      if (!constrained) {
        return refuse(min_len > lo ? "minLength" : "maxLength", length_ptr,
                      "together with a \"pattern\" whose lengths it cannot bound (anchor the "
                      "pattern with ^ and $ and let one repetition take the length)");
      }
      branch.node = *std::move(constrained);
    }
    content = pieces_.PatternContent(regex);
  } else if (!formats.empty()) {
    int64_t lo, hi;
    FormatLengths(formats[0].first, lo, hi);
    if (!bounded_by(lo, hi)) {
      return refuse(min_len > lo ? "minLength" : "maxLength", length_ptr,
                    "together with a \"format\" whose texts it does not bound");
    }
    content = pieces_.Format(formats[0].first);
  } else {
    content = b_.Repeat(pieces_.AnyChar(), min_len, max_len);
  }
  return b_.Seq({b_.Literal("\""), content, b_.Literal("\"")});
}

absl::StatusOr<Expr> SchemaConverter::NumberExpr(const Conj& conj, bool integer) {
  const int frac_digits = integer ? 0 : options_.max_fraction_digits;
  std::optional<Decimal> lo, hi;
  bool bounded = false;
  for (const Part& p : conj.parts) {
    // Draft 4: exclusiveMinimum / exclusiveMaximum are booleans that modify the bound.
    const Json* excl_min = Keyword(p, "exclusiveMinimum");
    const Json* excl_max = Keyword(p, "exclusiveMaximum");
    const bool draft4_min = excl_min && excl_min->is_boolean() && excl_min->get<bool>();
    const bool draft4_max = excl_max && excl_max->is_boolean() && excl_max->get<bool>();
    const auto add = [&](const Json* v, bool exclusive, bool lower) {
      if (v == nullptr || v->is_boolean()) return;
      bounded = true;
      std::optional<Decimal> d =
          lower ? LowerBound(*v, exclusive, frac_digits) : UpperBound(*v, exclusive, frac_digits);
      if (!d) return;
      std::optional<Decimal>& side = lower ? lo : hi;
      if (!side || (lower ? CompareDecimal(*d, *side) > 0 : CompareDecimal(*d, *side) < 0)) {
        side = std::move(d);
      }
    };
    add(Keyword(p, "minimum"), draft4_min, true);
    add(Keyword(p, "maximum"), draft4_max, false);
    add(excl_min, true, true);
    add(excl_max, true, false);
  }
  if (!bounded) return integer ? pieces_.Integer() : pieces_.Number();
  const Expr e = NumberRange(b_, lo, hi, options_.max_integer_digits, frac_digits);
  if (e == b_.Never()) {
    NoteEmpty(absl::StrCat(
        "no ",
        integer ? "integer"
                : "number with at most " + std::to_string(frac_digits) + " fraction digits",
        " lies within the bounds at ",
        PointerForMessage(conj.parts.empty() ? "" : conj.parts[0].ptr)));
  }
  return e;
}

}  // namespace textgen::json_schema_internal
