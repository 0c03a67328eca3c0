// JSON Schema -> GBNF: each supported keyword (texts accepted and refused by the grammar), each
// refusal and invalid schema (keyword and JSON pointer in the message), the "too complex"
// limits within their time bound, and the grammars' bounds.
#include "engine/grammar/json_schema.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "tests/engine/grammar/grammar_test_util.h"

namespace textgen {
namespace json_schema_test {

// Sanitizer builds run several times slower; time bounds scale with them.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr double kSecond = 5.0;
#else
constexpr double kSecond = 1.0;
#endif

// Whether `text` is a complete sentence of `gbnf`; the last grammar is kept parsed (the checks
// below try many texts against one grammar).
bool Matches(const std::string& gbnf, std::string_view text) {
  static std::string* last_text = new std::string;
  static std::shared_ptr<const Grammar>* last = new std::shared_ptr<const Grammar>;
  if (*last == nullptr || *last_text != gbnf) {
    *last = testing::MustParse(gbnf);
    *last_text = gbnf;
  }
  GrammarMatcher m(*last);
  return m.AcceptString(text) && m.CanEnd();
}

absl::StatusOr<JsonSchemaGrammar> Convert(std::string_view schema,
                                          const JsonSchemaOptions& options = {}) {
  return ConvertJsonSchema(nlohmann::ordered_json::parse(schema), "root", options);
}

std::string Gbnf(std::string_view schema, const JsonSchemaOptions& options = {}) {
  absl::StatusOr<JsonSchemaGrammar> g = Convert(schema, options);
  if (!g.ok()) FAIL(g.status().ToString() << "\n" << schema);
  return g->gbnf;
}

// The error message; fails the test if the schema converts.
std::string Error(std::string_view schema, const JsonSchemaOptions& options = {}) {
  absl::StatusOr<JsonSchemaGrammar> g = Convert(schema, options);
  if (g.ok()) FAIL("converted, expected an error:\n" << schema << "\n" << g->gbnf);
  CHECK(g.status().code() == absl::StatusCode::kInvalidArgument);
  return std::string(g.status().message());
}

// Every text of `good` is accepted and none of `bad`.
void Check(std::string_view schema, const std::vector<std::string>& good,
           const std::vector<std::string>& bad) {
  const std::string gbnf = Gbnf(schema);
  for (const std::string& text : good) {
    INFO(schema << "\naccepts: " << text << "\n" << gbnf);
    CHECK(Matches(gbnf, text));
  }
  for (const std::string& text : bad) {
    INFO(schema << "\nrefuses: " << text << "\n" << gbnf);
    CHECK_FALSE(Matches(gbnf, text));
  }
}

TEST_CASE("json schema: types", "[grammar][json_schema]") {
  Check(R"({"type": "string"})", {R"("")", R"("abc")", R"("a\"b\\c\u00e9\n")", "\"\xC3\xA9\""},
        {"abc", R"("a)", R"("\x")", R"("\ud800")", "\"a\nb\"", "1"});
  Check(R"({"type": "integer"})", {"0", "-1", "1234567890123456"},
        {"01", "-0", "1.5", "1e3", "12345678901234567", "\"1\"", ""});
  Check(R"({"type": "number"})", {"0", "-1.5", "1e10", "2.5E-3", "0.0001"},
        {".5", "1.", "01", "+1", "NaN", "1e100"});
  Check(R"({"type": "boolean"})", {"true", "false"}, {"True", "1", "null"});
  Check(R"({"type": "null"})", {"null"}, {"None", "\"null\""});
  Check(R"({"type": ["string", "null"]})", {"null", R"("x")"}, {"1", "[]"});
  Check(R"({"type": "array"})", {"[]", "[1, \"a\", [null]]", "[\n  {}\n]"}, {"[1,]", "["});
  Check(R"({"type": "object"})", {"{}", R"({"a": 1, "b": {"c": []}})"}, {"{a: 1}", "[]"});
  Check("{}", {"1", "null", R"({"a": [true]})", R"("s")"}, {"", "undefined"});
  Check("true", {"1", "{}"}, {""});
  CHECK(Error("false") == "the schema admits no JSON value (its constraints contradict)");
}

TEST_CASE("json schema: whitespace is bounded", "[grammar][json_schema]") {
  const std::string g = Gbnf(R"({"type": "array", "items": {"type": "integer"}})");
  CHECK(Matches(g, "[ 1,\n  2 ,\n\t3 ]"));
  CHECK(Matches(g, "[1,\n" + std::string(20, ' ') + "2]"));
  CHECK_FALSE(Matches(g, "[1,\n" + std::string(21, ' ') + "2]"));
  CHECK_FALSE(Matches(g, "[1,  2]"));
  CHECK_FALSE(Matches(g, " [1]"));
  CHECK_FALSE(Matches(g, "[1] "));
  JsonSchemaOptions compact;
  compact.allow_whitespace = false;
  const std::string c = Gbnf(R"({"type": "array", "items": {"type": "integer"}})", compact);
  CHECK(Matches(c, "[1,2]"));
  CHECK_FALSE(Matches(c, "[1, 2]"));
}

TEST_CASE("json schema: enum and const", "[grammar][json_schema]") {
  Check(R"({"enum": ["red", "amber", null, 42, ["foo"], {"a": 1.5}]})",
        {R"("red")", "null", "42", R"(["foo"])", R"({"a":1.5})"},
        {R"("blue")", "420", "[\"foo\", 1]", "true"});
  Check(R"({"const": "a\"b"})", {R"("a\"b")"}, {R"("ab")"});
  Check(R"({"const": 2.0})", {"2"}, {"2.5"});
  // The other keywords filter the values.
  Check(R"({"type": "string", "enum": ["a", "bb", 1, null], "maxLength": 1})", {R"("a")"},
        {R"("bb")", "1", "null"});
  Check(R"({"type": "integer", "enum": [1, 2.5, 3.0, "4"], "minimum": 2})", {"3"},
        {"1", "2.5", "\"4\""});
  Check(R"({"enum": [1, 2, 3], "const": 2})", {"2"}, {"1", "3"});
  CHECK(Error(R"({"type": "string", "enum": [1, 2]})").find("admits no JSON value") !=
        std::string::npos);
  CHECK(Error(R"({"enum": []})") ==
        "invalid JSON Schema: \"enum\" must be a non-empty array at the root");
}

TEST_CASE("json schema: properties in order, required, optional, additional",
          "[grammar][json_schema]") {
  // Declared order; optional ones skippable; additional properties (allowed by default) last.
  const char* schema = R"({"type": "object",
      "properties": {"b": {"type": "string"}, "a": {"type": "integer"}, "c": {"type": "boolean"}},
      "required": ["a"]})";
  Check(schema,
        {R"({"a": 1})", R"({"b": "x", "a": 1})", R"({"b": "x", "a": 1, "c": true})",
         R"({"a": 1, "c": true, "z": [1]})", R"({"a": 1, "zz": null, "y": 2})",
         R"({"a": 1, "bb": 0})", R"({"a": 1, "": 0})"},
        {"{}", R"({"b": "x"})", R"({"a": 1, "b": "x"})", R"({"a": "1"})", R"({"a": 1, "a": 2})",
         R"({"a": 1, "b": "x"})", R"({"z": 1, "a": 1})", R"({"a": 1, "\u0062": "x"})"});
  Check(R"({"properties": {"a": {"type": "integer"}}, "additionalProperties": false})",
        {"{}", R"({"a": 1})"}, {R"({"b": 1})", R"({"a": 1, "b": 1})"});
  Check(R"({"properties": {"a": {"type": "integer"}}, "additionalProperties": {"type": "string"}})",
        {R"({"a": 1, "b": "x"})", R"({"b": "x", "c": "y"})"}, {R"({"b": 1})"});
  // A required property that `properties` does not declare comes after the declared ones.
  Check(R"({"properties": {"a": {"type": "integer"}}, "required": ["z", "a"]})",
        {R"({"a": 1, "z": null})"}, {R"({"a": 1})", R"({"z": 1, "a": 1})"});
  Check(R"({"required": ["x"], "additionalProperties": {"type": "integer"}})", {R"({"x": 1})"},
        {R"({"x": "1"})", "{}"});
  Check(R"({"properties": {"a": false}, "additionalProperties": true})", {R"({"b": 1})", "{}"},
        {R"({"a": 1})"});
  CHECK(Error(R"({"type": "object", "properties": {"a": false}, "required": ["a"]})")
            .find("required property \"a\" is forbidden at the root") != std::string::npos);
  CHECK(Error(R"({"type": "object", "required": ["x"], "additionalProperties": false})")
            .find("required property \"x\" is forbidden") != std::string::npos);
  // Names with characters JSON escapes.
  Check(R"({"properties": {"a\"b": {"const": 1}, "é/~": {"const": 2}}, "required": ["a\"b"]})",
        {R"({"a\"b": 1, "é/~": 2})", R"({"a\"b": 1})"}, {R"({"é/~": 2})"});
}

TEST_CASE("json schema: property order follows the JSON object type", "[grammar][json_schema]") {
  const char* text = R"({"properties": {"b": {"const": 1}, "a": {"const": 2}},
                         "required": ["a", "b"], "additionalProperties": false})";
  const std::string ordered = *JsonSchemaToGbnf(nlohmann::ordered_json::parse(text));
  const std::string sorted = *JsonSchemaToGbnf(nlohmann::json::parse(text));
  CHECK(Matches(ordered, R"({"b": 1, "a": 2})"));
  CHECK_FALSE(Matches(ordered, R"({"a": 2, "b": 1})"));
  CHECK(Matches(sorted, R"({"a": 2, "b": 1})"));
}

TEST_CASE("json schema: minProperties and maxProperties", "[grammar][json_schema]") {
  Check(R"({"properties": {"a": {}, "b": {}}, "minProperties": 1, "maxProperties": 2})",
        {R"({"a": 1})", R"({"b": 1})", R"({"x": 1})", R"({"a": 1, "x": 2})", R"({"x": 1, "y": 2})"},
        {"{}", R"({"a": 1, "b": 2, "c": 3})", R"({"x": 1, "y": 2, "z": 3})"});
  Check(R"({"additionalProperties": {"type": "integer"}, "minProperties": 1})",
        {R"({"a": 1})", R"({"a": 1, "b": 2})"}, {"{}"});
  // Two additional properties might share a name (and count once): minProperties may rely on
  // one of them at most.
  Check(R"({"properties": {"a": {}}, "minProperties": 2})", {R"({"a": 1, "x": 2})"},
        {R"({"x": 1, "y": 2})", R"({"a": 1})"});
  CHECK(Error(R"({"type": "object", "additionalProperties": {"type": "integer"},
                  "minProperties": 2})") ==
        "unsupported JSON Schema keyword \"minProperties\" at the root: it needs two or more "
        "additional properties, whose names a grammar cannot keep distinct");
  Check(R"({"properties": {"a": {}}, "required": ["a"], "maxProperties": 1})", {R"({"a": 1})"},
        {R"({"a": 1, "b": 2})"});
  CHECK(Error(R"({"type": "object", "properties": {"a": {}}, "additionalProperties": false,
                  "minProperties": 2})")
            .find("no object satisfies the property counts") != std::string::npos);
  CHECK(Error(R"({"minProperties": 3, "maxProperties": 2})") ==
        "invalid JSON Schema: \"minProperties\" is greater than \"maxProperties\" at the root");
}

TEST_CASE("json schema: propertyNames", "[grammar][json_schema]") {
  Check(
      R"({"propertyNames": {"pattern": "^[a-z]+$"}, "additionalProperties": {"type": "integer"}})",
      {R"({"abc": 1})", "{}"}, {R"({"Abc": 1})", R"({"": 1})"});
  Check(R"({"properties": {"id": {"type": "integer"}}, "propertyNames": {"maxLength": 3}})",
        {R"({"id": 1, "abc": 2})"}, {R"({"abcd": 1})", R"({"id": 1, "id": 2})"});
  Check(R"({"properties": {"a": {}}, "propertyNames": {"enum": ["a", "b", "c"]}})",
        {R"({"a": 1, "b": 2})", R"({"c": 1})"}, {R"({"d": 1})", R"({"a": 1, "a": 1})"});
  CHECK(Error(R"({"properties": {"Id": {}}, "propertyNames": {"pattern": "^[a-z]+$"}})") ==
        "invalid JSON Schema: property \"Id\" at the root does not satisfy \"propertyNames\"");
  CHECK(Error(R"({"properties": {"id": {}}, "propertyNames": {"pattern": "^[a-z]+$"}})")
            .find("unsupported JSON Schema keyword \"propertyNames\" at the root") == 0);
  Check(R"({"properties": {"id": {}}, "propertyNames": {"pattern": "^[a-z]+$"},
            "additionalProperties": false})",
        {R"({"id": 1})"}, {R"({"x": 1})"});
}

TEST_CASE("json schema: arrays", "[grammar][json_schema]") {
  Check(R"({"items": {"type": "boolean"}, "minItems": 2, "maxItems": 3})",
        {"[true, false]", "[true,true,false]"}, {"[true]", "[true, true, true, true]", "[1, 2]"});
  Check(R"({"prefixItems": [{"type": "string"}, {"type": "integer"}]})",
        {"[]", R"(["a"])", R"(["a", 1])", R"(["a", 1, null, {}])"}, {"[1]", R"(["a", "b"])"});
  Check(R"({"prefixItems": [{"type": "string"}], "items": false, "minItems": 1})", {R"(["a"])"},
        {"[]", R"(["a", "b"])"});
  Check(R"({"prefixItems": [{"const": 1}, {"const": 2}], "items": {"const": 3}, "minItems": 3})",
        {"[1, 2, 3]", "[1,2,3,3]"}, {"[1, 2]", "[1, 3, 3]"});
  Check(R"({"type": "array", "maxItems": 0})", {"[]"}, {"[1]"});
  // draft-07 tuples: items as an array, additionalItems.
  Check(R"({"items": [{"type": "integer"}], "additionalItems": {"type": "string"}})",
        {"[1]", R"([1, "a", "b"])"}, {R"(["a"])", "[1, 2]"});
  CHECK(Error(R"({"minItems": 3, "maxItems": 2})") ==
        "invalid JSON Schema: \"minItems\" is greater than \"maxItems\" at the root");
  CHECK(Error(R"({"prefixItems": {"type": "string"}})") ==
        "invalid JSON Schema: \"prefixItems\" must be a non-empty array of schemas at the root");
}

TEST_CASE("json schema: string lengths in code points", "[grammar][json_schema]") {
  Check(R"({"type": "string", "minLength": 2, "maxLength": 3})",
        {R"("ab")", "\"\xC3\xA9\xE4\xB8\xAD\"", R"("\u00e9\n")", "\"\xF0\x9F\x98\x80x\""},
        {R"("a")", R"("abcd")", R"("\u00e9")", "\"\xF0\x9F\x98\x80\""});
  CHECK(Error(R"({"minLength": -1})") ==
        "invalid JSON Schema: \"minLength\" must be a non-negative integer at the root");
  CHECK(Error(R"({"minLength": 1.5})") ==
        "invalid JSON Schema: \"minLength\" must be a non-negative integer at the root");
  Check(R"({"minLength": 2.0})", {R"("ab")", "1"}, {R"("a")"});
}

TEST_CASE("json schema: pattern", "[grammar][json_schema]") {
  // Unanchored patterns match anywhere (JSON Schema's search semantics).
  Check(R"({"type": "string", "pattern": "ab+c"})", {R"("abc")", R"("xxabbbcyy")"}, {R"("ac")"});
  Check(R"({"type": "string", "pattern": "^ab+c$"})", {R"("abbc")"}, {R"("xabc")", R"("abcx")"});
  Check(R"({"type": "string", "pattern": "^\\d{3}-\\w+\\s?$"})", {R"("123-a_1")", R"("123-x ")"},
        {R"("12-a")", R"("123-")", "\"\xD9\xA3\xD9\xA3\xD9\xA3-a\""});
  // Characters JSON escapes are spelled escaped.
  Check(R"({"type": "string", "pattern": "^[\"\\\\\\n]+$"})", {R"("\"\\\n")"}, {R"("a")"});
  Check(R"({"type": "string", "pattern": "^[^a]$"})", {R"("b")", R"("\"")", R"("\u0001")"},
        {R"("a")", R"("")"});
  // Lengths beside a pattern only where the pattern already bounds them.
  Check(R"({"type": "string", "pattern": "^[0-9]{4}$", "minLength": 4, "maxLength": 4})",
        {R"("1234")"}, {R"("123")"});
  // ... or where one repetition of an anchored pattern can take them.
  Check(R"({"type": "string", "pattern": "^[0-9]+$", "maxLength": 4})", {R"("1")", R"("1234")"},
        {R"("")", R"("12345")"});
  Check(R"({"type": "string", "pattern": "^[A-Z]-(ab)*$|^x?$", "minLength": 3, "maxLength": 6})",
        {R"("A-ab")", R"("B-abab")"}, {R"("A-")", R"("A-ababab")", R"("x")", R"("")"});
  // Several parts of variable length when all but one have few fixed-length forms.
  Check(R"({"type": "string", "pattern": "^(?:[A-Z]{2}-)?\\d+$", "maxLength": 8})",
        {R"("AB-12345")", R"("12345678")", R"("AB-1")"},
        {R"("AB-123456")", R"("123456789")", R"("AB-")"});
  CHECK(Error(R"({"pattern": "^a+b*$", "maxLength": 4})") ==
        "unsupported JSON Schema keyword \"maxLength\" at the root: together with a \"pattern\" "
        "whose lengths it cannot bound (anchor the pattern with ^ and $ and let one repetition "
        "take the length)");
  CHECK(Error(R"({"pattern": "[0-9]", "minLength": 2})")
            .find("unsupported JSON Schema keyword \"minLength\"") == 0);
  CHECK(Error(R"j({"properties": {"p": {"pattern": "(?=a)"}}})j") ==
        "\"pattern\" at /properties/p: unsupported regex feature at offset 0: lookahead assertion");
  CHECK(Error(R"({"pattern": "(a"})") ==
        "\"pattern\" at the root: invalid regex at offset 2: missing )");
  CHECK(Error(R"j({"pattern": "(a)\\1"})j").find("backreference") != std::string::npos);
}

TEST_CASE("json schema: formats", "[grammar][json_schema]") {
  Check(R"({"format": "date"})",
        {R"("2024-02-29")", R"("2000-02-29")", R"("1999-12-31")", R"("0001-01-01")"},
        {R"("2023-02-29")", R"("1900-02-29")", R"("2024-04-31")", R"("2024-13-01")",
         R"("0000-01-01")", R"("2024-1-01")"});
  Check(R"({"format": "time"})", {R"("23:59:59Z")", R"("00:00:00.123456+05:30")"},
        {R"("24:00:00Z")", R"("12:00:00")", R"("12:60:00Z")"});
  Check(R"({"format": "date-time"})", {R"("2024-02-29T12:00:00-08:00")"},
        {R"("2024-02-29 12:00:00Z")", R"("2024-02-30T12:00:00Z")"});
  Check(R"({"format": "uuid"})", {R"("123e4567-e89b-12d3-A456-426614174000")"},
        {R"("123e4567e89b12d3a456426614174000")", R"("123e4567-e89b-12d3-a456-42661417400g")"});
  Check(R"({"format": "ipv4"})", {R"("0.0.0.0")", R"("255.255.255.255")", R"("10.1.20.3")"},
        {R"("256.1.1.1")", R"("01.1.1.1")", R"("1.2.3")"});
  Check(R"({"format": "ipv6"})",
        {R"("::")", R"("::1")", R"("1::")", R"("1:2:3:4:5:6:7:8")", R"("fe80::1:2")",
         R"("1:2:3:4:5:6:7::")", R"("abcd::ef01:2345")"},
        {R"("1:2:3:4:5:6:7:8:9")", R"("1::2::3")", R"("12345::")", R"(":1")",
         R"("1:2:3:4:5:6:7:8::")"});
  Check(R"({"format": "hostname"})", {R"("example.com")", R"("a-b.c1")", R"("localhost")"},
        {R"("-a.com")", R"("a..b")", R"("a_b")", R"("")"});
  Check(R"({"format": "email"})", {R"("a.b+c@example.com")", R"("x@y")"},
        {R"("a@")", R"("@b")", R"("a b@c")", R"("a..b@c")"});
  CHECK(Error(R"({"properties": {"u": {"format": "uri"}}})") ==
        "unsupported JSON Schema keyword \"format\" at /properties/u: unknown format \"uri\" "
        "(supported: date, time, date-time, email, uuid, ipv4, ipv6, hostname)");
  // Formats apply to strings only.
  Check(R"({"format": "date", "type": ["string", "integer"]})", {"5", R"("2024-01-01")"},
        {R"("x")"});
}

TEST_CASE("json schema: integer ranges exactly", "[grammar][json_schema]") {
  struct Range {
    const char* schema;
    long lo, hi;
  };
  const Range ranges[] = {
      {R"({"type": "integer", "minimum": 0})", 0, LONG_MAX},
      {R"({"type": "integer", "minimum": 25})", 25, LONG_MAX},
      {R"({"type": "integer", "maximum": 30})", LONG_MIN, 30},
      {R"({"type": "integer", "minimum": -123, "maximum": 42})", -123, 42},
      {R"({"type": "integer", "minimum": 15, "maximum": 300})", 15, 300},
      {R"({"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 100})", 1, 99},
      {R"({"type": "integer", "minimum": -5.5, "maximum": 7.2})", -5, 7},
      {R"({"type": "integer", "exclusiveMinimum": -5.0, "exclusiveMaximum": 7.2})", -4, 7},
      {R"({"type": "integer", "maximum": -9})", LONG_MIN, -9},
      {R"({"type": "integer", "minimum": 7, "maximum": 7})", 7, 7},
      {R"({"type": "integer", "minimum": 5, "exclusiveMinimum": true})", 6, LONG_MAX},  // draft 4
  };
  for (const Range& r : ranges) {
    const std::string g = Gbnf(r.schema);
    INFO(r.schema << "\n" << g);
    for (long v = -300; v <= 300; ++v) {
      INFO(v);
      CHECK(Matches(g, std::to_string(v)) == (v >= r.lo && v <= r.hi));
    }
    CHECK_FALSE(Matches(g, "-0"));
    CHECK_FALSE(Matches(g, "007"));
  }
  // Bounds beyond 16 digits are exact; unbounded sides stop at 16 digits.
  const std::string big = Gbnf(R"({"type": "integer", "minimum": 100000000000000000000})");
  CHECK(Matches(big, "100000000000000000000"));
  CHECK(Matches(big, "999999999999999999999"));
  CHECK_FALSE(Matches(big, "99999999999999999999"));
  const std::string any = Gbnf(R"({"type": "integer", "minimum": 1})");
  CHECK(Matches(any, "9999999999999999"));
  CHECK_FALSE(Matches(any, "10000000000000000"));
  CHECK(Error(R"({"type": "integer", "minimum": 3, "maximum": 2})") ==
        "invalid JSON Schema: \"minimum\" is greater than \"maximum\" at the root");
  CHECK(Error(R"({"type": "integer", "minimum": 2.5, "maximum": 2.7})")
            .find("no integer lies within the bounds at the root") != std::string::npos);
}

// An exact decimal comparison for the number-range checks below.
int CompareDecimal(const std::string& a, const std::string& b) {
  const auto split = [](std::string s, bool& neg, std::string& i, std::string& f) {
    neg = !s.empty() && s[0] == '-';
    if (neg) s.erase(0, 1);
    const size_t dot = s.find('.');
    i = s.substr(0, dot);
    f = dot == std::string::npos ? "" : s.substr(dot + 1);
    i.erase(0, std::min(i.find_first_not_of('0'), i.size() - 1));
    while (!f.empty() && f.back() == '0') f.pop_back();
    if (i == "0" && f.empty()) neg = false;
  };
  bool na, nb;
  std::string ia, fa, ib, fb;
  split(a, na, ia, fa);
  split(b, nb, ib, fb);
  if (na != nb) return na ? -1 : 1;
  int c = ia.size() != ib.size() ? (ia.size() < ib.size() ? -1 : 1) : ia.compare(ib);
  if (c == 0) {
    const size_t n = std::max(fa.size(), fb.size());
    fa.resize(n, '0');
    fb.resize(n, '0');
    c = fa.compare(fb);
  }
  c = c < 0 ? -1 : c > 0;
  return na ? -c : c;
}

TEST_CASE("json schema: number ranges on the decimal value", "[grammar][json_schema]") {
  struct Range {
    const char* schema;
    const char* lo;  // inclusive; "" unbounded
    const char* hi;
  };
  const Range ranges[] = {
      {R"({"type": "number", "minimum": 0.5, "maximum": 99.95})", "0.5", "99.95"},
      {R"({"type": "number", "minimum": -2.25, "maximum": 3})", "-2.25", "3"},
      {R"({"type": "number", "maximum": -0.125})", "", "-0.125"},
      {R"({"type": "number", "minimum": 10.05})", "10.05", ""},
      {R"({"type": "number", "minimum": 1.5, "maximum": 1.75})", "1.5", "1.75"},
      {R"({"type": "number", "exclusiveMinimum": 0, "maximum": 1})", "0.0000000000000001", "1"},
      {R"({"type": "number", "minimum": -1, "exclusiveMaximum": 0.5})", "-1", "0.4999999999999999"},
  };
  uint32_t state = 12345;
  const auto next = [&] { return state = state * 1664525u + 1013904223u; };
  for (const Range& r : ranges) {
    const std::string g = Gbnf(r.schema);
    INFO(r.schema << "\n" << g);
    std::vector<std::string> samples = {"0",
                                        "-0.5",
                                        "1",
                                        "0.5",
                                        "99.95",
                                        "99.951",
                                        "99.9500",
                                        "-2.25",
                                        "-2.250001",
                                        "3.0",
                                        "3.00001",
                                        "-0.125",
                                        "-0.1249",
                                        "10.05",
                                        "10.049",
                                        "1.75",
                                        "1.7500000001",
                                        "0.0000000000000001",
                                        "0.4999999999999999",
                                        "0.5"};
    for (int i = 0; i < 300; ++i) {
      std::string s = (next() % 3 == 0) ? "-" : "";
      s += std::to_string(next() % 120);
      if (next() % 4 != 0) {
        s += ".";
        const int digits = 1 + next() % 5;
        for (int d = 0; d < digits; ++d) s += static_cast<char>('0' + next() % 10);
      }
      samples.push_back(s);
    }
    for (const std::string& s : samples) {
      const bool in = (*r.lo == 0 || CompareDecimal(s, r.lo) >= 0) &&
                      (*r.hi == 0 || CompareDecimal(s, r.hi) <= 0);
      // "-0" parses to 0 but the grammar never writes a negative zero.
      const bool negative_zero = s[0] == '-' && CompareDecimal(s, "0") == 0;
      INFO(s);
      if (!negative_zero) CHECK(Matches(g, s) == in);
    }
    CHECK_FALSE(Matches(g, "1e0"));
  }
  // At most 16 fraction digits (bounds included).
  const std::string g = Gbnf(R"({"type": "number", "minimum": 0, "maximum": 1})");
  CHECK(Matches(g, "0.1234567890123456"));
  CHECK_FALSE(Matches(g, "0.12345678901234567"));
}

TEST_CASE("json schema: anyOf, oneOf, allOf", "[grammar][json_schema]") {
  Check(R"({"anyOf": [{"type": "string"}, {"type": "null"}]})", {R"("a")", "null"}, {"1"});
  Check(R"({"type": "object", "anyOf": [{"required": ["a"]}, {"required": ["b"]}]})",
        {R"({"a": 1})", R"({"b": 1})", R"({"a": 1, "b": 2})"}, {"{}", "1"});
  // oneOf whose branches are provably exclusive.
  Check(R"({"oneOf": [{"type": "string"}, {"type": "integer"}]})", {R"("a")", "1"}, {"1.5"});
  Check(R"({"type": "object", "oneOf": [
             {"properties": {"kind": {"const": "a"}, "x": {"type": "integer"}}, "required": ["kind"]},
             {"properties": {"kind": {"enum": ["b", "c"]}}, "required": ["kind"]}]})",
        {R"({"kind": "a", "x": 1})", R"({"kind": "c"})"}, {R"({"kind": "d"})"});
  Check(R"({"oneOf": [{"properties": {"a": {}}, "required": ["a"], "additionalProperties": false},
                      {"type": "object", "required": ["b"]}]})",
        {R"({"a": 1})", R"({"b": 1})"}, {"{}"});
  Check(R"({"oneOf": [{"type": "integer", "maximum": 0}, {"type": "integer", "minimum": 1}]})",
        {"0", "1"}, {});
  CHECK(Error(R"({"properties": {"x": {"oneOf": [{"type": "integer"}, {"type": "number"}]}}})")
            .find("unsupported JSON Schema keyword \"oneOf\" at /properties/x: branches 0 and 1 "
                  "are not provably exclusive") == 0);
  // allOf merges: properties, required, types, bounds.
  Check(R"({"allOf": [{"properties": {"a": {"type": "integer"}}, "required": ["a"]},
                      {"properties": {"b": {"type": "string"}, "a": {"minimum": 5}},
                       "required": ["b"]}]})",
        {R"({"a": 5, "b": "x"})"},
        {R"({"a": 4, "b": "x"})", R"({"a": 5})", R"({"b": "x", "a": 5})"});
  Check(R"({"allOf": [{"additionalProperties": false, "properties": {"a": {}}},
                      {"properties": {"a": {}, "b": {}}}]})",
        {R"({"a": 1})"}, {R"({"b": 1})"});
  Check(R"({"allOf": [{"type": ["string", "integer"]}, {"type": ["integer", "null"]}]})", {"1"},
        {R"("a")", "null"});
  CHECK(Error(R"({"allOf": [{"type": "string"}, {"type": "integer"}]})")
            .find("have no type in common") != std::string::npos);
  CHECK(Error(R"({"allOf": [{"pattern": "a"}, {"pattern": "b"}]})") ==
        "unsupported JSON Schema keyword \"pattern\" at /allOf/1: several different patterns "
        "apply (allOf)");
}

TEST_CASE("json schema: $ref, $defs, definitions, recursion", "[grammar][json_schema]") {
  const char* tree = R"({"$defs": {"node": {"type": "object",
      "properties": {"v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
      "required": ["v"], "additionalProperties": false}}, "$ref": "#/$defs/node"})";
  Check(tree, {R"({"v": 1})", R"({"v": 1, "kids": [{"v": 2, "kids": [{"v": 3}]}, {"v": 4}]})"},
        {R"({"v": 1, "kids": [{}]})", R"({"kids": []})"});
  CHECK_FALSE(Convert(tree)->max_bytes.has_value());
  Check(R"({"type": "object", "properties": {"next": {"anyOf": [{"$ref": "#"}, {"type": "null"}]}},
            "required": ["next"], "additionalProperties": false})",
        {R"({"next": null})", R"({"next": {"next": null}})"}, {"{}"});
  Check(R"({"definitions": {"a~b/c": {"const": 1}}, "$ref": "#/definitions/a~0b~1c"})", {"1"},
        {"2"});
  Check(R"({"$defs": {"x y": {"const": 1}}, "$ref": "#/$defs/x%20y"})", {"1"}, {"2"});
  Check(R"({"$id": "https://example.com/s.json", "$defs": {"a": {"const": 1}},
            "$ref": "https://example.com/s.json#/$defs/a"})",
        {"1"}, {"2"});
  // A $ref with siblings: both apply.
  Check(R"({"$defs": {"s": {"type": "string"}}, "$ref": "#/$defs/s", "maxLength": 1})", {R"("a")"},
        {R"("ab")", "1"});
  CHECK(Error(R"({"properties": {"a": {"$ref": "other.json#/x"}}})") ==
        "unsupported JSON Schema keyword \"$ref\" at /properties/a: remote reference "
        "\"other.json#/x\"");
  CHECK(Error(R"({"$ref": "#foo"})") ==
        "unsupported JSON Schema keyword \"$ref\" at the root: reference to an anchor \"#foo\"");
  CHECK(Error(R"({"items": {"$ref": "#/$defs/missing"}})") ==
        "invalid JSON Schema: dangling $ref \"#/$defs/missing\" at /items");
  CHECK(Error(R"({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}},
                  "$ref": "#/$defs/a"})")
            .find("circular $ref or allOf") != std::string::npos);
  CHECK(Error(R"({"anyOf": [{"$ref": "#"}, {"type": "string"}]})").find("left-recursive") !=
        std::string::npos);
  // Recursion that can never end admits no value.
  CHECK(Error(R"({"type": "object", "properties": {"a": {"$ref": "#"}}, "required": ["a"]})")
            .find("admits no JSON value") != std::string::npos);
}

TEST_CASE("json schema: annotations are ignored, other keywords refused with a pointer",
          "[grammar][json_schema]") {
  Check(R"({"title": "T", "description": "d", "default": 1, "examples": [1], "$comment": "c",
            "$schema": "https://json-schema.org/draft/2020-12/schema", "deprecated": true,
            "readOnly": false, "writeOnly": false, "x-vendor": {"anything": 1}, "nullable": true,
            "type": "integer"})",
        {"1"}, {"null"});
  const struct {
    const char* schema;
    const char* keyword;
    const char* where;
  } refused[] = {
      {R"({"properties": {"price": {"type": "number", "multipleOf": 0.01}}})", "multipleOf",
       "/properties/price"},
      {R"({"uniqueItems": true})", "uniqueItems", "the root"},
      {R"({"not": {"type": "string"}})", "not", "the root"},
      {R"({"if": {}, "then": {}})", "if", "the root"},
      {R"({"items": {"then": {}}})", "then", "/items"},
      {R"({"else": {}})", "else", "the root"},
      {R"({"dependentRequired": {"a": ["b"]}})", "dependentRequired", "the root"},
      {R"({"dependentSchemas": {"a": {}}})", "dependentSchemas", "the root"},
      {R"({"dependencies": {"a": ["b"]}})", "dependencies", "the root"},
      {R"({"patternProperties": {"^x": {}}})", "patternProperties", "the root"},
      {R"({"contains": {"type": "integer"}})", "contains", "the root"},
      {R"({"minContains": 1})", "minContains", "the root"},
      {R"({"unevaluatedProperties": false})", "unevaluatedProperties", "the root"},
      {R"({"unevaluatedItems": false})", "unevaluatedItems", "the root"},
      {R"({"contentEncoding": "base64"})", "contentEncoding", "the root"},
      {R"({"contentMediaType": "text/html"})", "contentMediaType", "the root"},
      {R"({"$defs": {"a": {"$dynamicRef": "#x"}}, "$ref": "#/$defs/a"})", "$dynamicRef",
       "/$defs/a"},
      {R"({"anyOf": [{"type": "string"}, {"$recursiveRef": "#"}]})", "$recursiveRef", "/anyOf/1"},
  };
  for (const auto& r : refused) {
    INFO(r.schema);
    CHECK(Error(r.schema) ==
          absl::StrCat("unsupported JSON Schema keyword \"", r.keyword, "\" at ", r.where));
  }
  Check(R"({"uniqueItems": false, "type": "array"})", {"[1, 1]"}, {});
}

TEST_CASE("json schema: invalid schemas name the keyword and pointer", "[grammar][json_schema]") {
  const struct {
    const char* schema;
    const char* message;
  } invalid[] = {
      {R"({"type": "kaboom"})", "\"type\" must be a type name"},
      {R"({"type": 123})", "\"type\" must be a type name"},
      {R"({"type": ["string", "string"]})", "\"type\" must be a type name"},
      {R"({"properties": {"a": {"required": "a"}}})",
       "\"required\" must be an array of distinct strings at /properties/a"},
      {R"({"properties": []})", "\"properties\" must be an object of schemas at the root"},
      {R"({"items": 3})", "\"items\" must be a schema at the root"},
      {R"({"anyOf": []})", "\"anyOf\" must be a non-empty array of schemas at the root"},
      {R"({"anyOf": [3]})", "a schema must be an object or a boolean at /anyOf/0"},
      {R"({"$ref": 1})", "\"$ref\" must be a string at the root"},
      {R"({"minimum": "1"})", "\"minimum\" must be a finite number at the root"},
      {R"({"pattern": 1})", "\"pattern\" must be a string at the root"},
      {R"({"$defs": 1})", "\"$defs\" must be an object at the root"},
      {R"({"maxItems": -1})", "\"maxItems\" must be a non-negative integer at the root"},
      {R"({"additionalProperties": "no"})", "\"additionalProperties\" must be a schema"},
  };
  for (const auto& i : invalid) {
    INFO(i.schema);
    const std::string e = Error(i.schema);
    CHECK(e.find("invalid JSON Schema: ") == 0);
    CHECK(e.find(i.message) != std::string::npos);
  }
}

// Each "too complex" schema is refused quickly.
void CheckTooComplex(const std::string& schema, const JsonSchemaOptions& options = {}) {
  const auto t0 = std::chrono::steady_clock::now();
  absl::StatusOr<JsonSchemaGrammar> g =
      ConvertJsonSchema(nlohmann::ordered_json::parse(schema), "root", options);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO(schema.substr(0, 200));
  REQUIRE_FALSE(g.ok());
  CHECK(g.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(g.status().message()).find("too complex") != std::string::npos);
  CHECK(s < kSecond);
}

TEST_CASE("json schema: schemas that would explode are too complex", "[grammar][json_schema]") {
  // A huge enum.
  nlohmann::ordered_json e = nlohmann::ordered_json::array();
  for (int i = 0; i < 5000; ++i) e.push_back(i);
  CheckTooComplex(nlohmann::ordered_json{{"enum", e}}.dump());
  // allOf of anyOfs: 3^16 combinations.
  nlohmann::ordered_json all = nlohmann::ordered_json::array();
  for (int i = 0; i < 16; ++i) {
    all.push_back({{"anyOf",
                    {{{"required", {"a" + std::to_string(i)}}},
                     {{"required", {"b" + std::to_string(i)}}},
                     {{"required", {"c" + std::to_string(i)}}}}}});
  }
  CheckTooComplex(nlohmann::ordered_json{{"allOf", all}}.dump());
  // Deep nesting of distinct subschemas.
  std::string deep = R"({"type": "integer"})";
  for (int i = 0; i < 200; ++i) deep = R"({"type": "array", "items": )" + deep + "}";
  CheckTooComplex(deep);
  // Deeper than the JSON nesting limit.
  CheckTooComplex(std::string(600, '[') + std::string(600, ']'));
  // maxProperties over many optional properties.
  nlohmann::ordered_json props = nlohmann::ordered_json::object();
  for (int i = 0; i < 300; ++i) props["p" + std::to_string(i)] = {{"type", "integer"}};
  CheckTooComplex(nlohmann::ordered_json{{"properties", props}, {"maxProperties", 150}}.dump());
  // A pattern whose grammar is too large.
  std::string pattern;
  for (int i = 0; i < 60000; ++i) pattern += "[a-z]";
  CheckTooComplex(nlohmann::ordered_json{{"pattern", pattern}}.dump());
  // A long chain of definitions (one rule each).
  nlohmann::ordered_json defs = nlohmann::ordered_json::object();
  for (int i = 0; i < 6000; ++i) {
    defs["d" + std::to_string(i)] = {{"type", "array"},
                                     {"items", {{"$ref", "#/$defs/d" + std::to_string(i + 1)}}}};
  }
  defs["d6000"] = {{"type", "integer"}};
  JsonSchemaOptions shallow;
  CheckTooComplex(nlohmann::ordered_json{{"$defs", defs}, {"$ref", "#/$defs/d0"}}.dump(), shallow);
  // allOf reaching the same definitions along many paths (a diamond per level).
  nlohmann::ordered_json diamond = nlohmann::ordered_json::object();
  for (int i = 0; i < 60; ++i) {
    diamond["d" + std::to_string(i)] = {{"allOf",
                                         {{{"$ref", "#/$defs/d" + std::to_string(i + 1)}},
                                          {{"$ref", "#/$defs/d" + std::to_string(i + 2)}}}}};
  }
  diamond["d60"] = {{"type", "string"}};
  diamond["d61"] = {{"maxLength", 3}};
  const auto t0 = std::chrono::steady_clock::now();
  CHECK(
      ConvertJsonSchema(nlohmann::ordered_json{{"$defs", diamond}, {"$ref", "#/$defs/d0"}}, "root")
          .ok());
  CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < kSecond);
  // oneOf exclusivity checks are quadratic in the branches.
  nlohmann::ordered_json branches = nlohmann::ordered_json::array();
  for (int i = 0; i < 2000; ++i) {
    branches.push_back(
        {{"type", "object"}, {"properties", {{"k", {{"const", i}}}}}, {"required", {"k"}}});
  }
  CheckTooComplex(nlohmann::ordered_json{{"oneOf", branches}}.dump());
  // The limits are options.
  JsonSchemaOptions small;
  small.max_rules = 3;
  CheckTooComplex(R"({"properties": {"a": {"type": "string"}, "b": {"type": "integer"},
                      "c": {"type": "object", "properties": {"d": {"type": "boolean"}}}}})",
                  small);
}

TEST_CASE("json schema: counts above the engine's repetition limit", "[grammar][json_schema]") {
  // Built from counted repetitions of at most 65000, without ambiguity: the parse keeps a few
  // stacks however long the text.
  const std::string g = Gbnf(R"({"type": "string", "minLength": 70000, "maxLength": 140000})");
  for (size_t n : {69999, 70000, 130001, 140000, 140001}) {
    GrammarMatcher m(testing::MustParse(g));
    const bool fits = m.AcceptString("\"" + std::string(n, 'a'));
    CHECK(fits == (n <= 140000));
    CHECK(m.num_stacks() <= 8);
    CHECK((fits && m.AcceptString("\"") && m.CanEnd()) == (n >= 70000 && n <= 140000));
  }
  // Larger maxima are unbounded (no text gets there); larger minima too complex.
  CHECK_FALSE(Convert(R"({"type": "string", "maxLength": 1e12})")->max_bytes.has_value());
  CHECK(Error(R"({"type": "string", "minLength": 1e12})") ==
        "schema too complex: a repetition of at least 1000000000000 (at most 4000000)");
  CHECK(Error(R"({"type": "array", "minItems": 5000000})").find("schema too complex") == 0);
}

TEST_CASE("json schema: bounded schemas have a bounded grammar", "[grammar][json_schema]") {
  absl::StatusOr<JsonSchemaGrammar> g = Convert(R"({"type": "object", "properties": {
      "name": {"type": "string", "maxLength": 8}, "age": {"type": "integer", "minimum": 0},
      "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 3},
      "ok": {"type": "boolean"}}, "required": ["name"], "additionalProperties": false})");
  REQUIRE(g.ok());
  REQUIRE(g->max_bytes.has_value());
  CHECK(*g->max_bytes > 0);
  CHECK(*g->max_bytes < 2000);
  CHECK_FALSE(Convert(R"({"type": "string"})")->max_bytes.has_value());
  CHECK_FALSE(Convert(R"({"type": "object", "properties": {"a": {"type": "integer"}}})")
                  ->max_bytes.has_value());  // additional properties: any number
  CHECK(*Convert(R"({"const": "abc"})")->max_bytes == 5);
  CHECK(*Convert(R"({"type": "integer", "minimum": -5, "maximum": 100})")->max_bytes == 3);
}

TEST_CASE("json schema: rules to embed carry the root name as prefix", "[grammar][json_schema]") {
  const char* a =
      R"({"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]})";
  const char* b =
      R"({"$defs": {"n": {"type": "integer"}}, "type": "array", "items": {"$ref": "#/$defs/n"}})";
  absl::StatusOr<std::string> ra = JsonSchemaToGbnfRules(nlohmann::json::parse(a), "tool-a");
  absl::StatusOr<std::string> rb = JsonSchemaToGbnfRules(nlohmann::json::parse(b), "tool-b");
  REQUIRE(ra.ok());
  REQUIRE(rb.ok());
  for (const std::string* rules : {&*ra, &*rb}) {
    const std::string prefix = rules == &*ra ? "tool-a" : "tool-b";
    size_t pos = 0;
    while (pos < rules->size()) {
      const std::string name = rules->substr(pos, rules->find(" ::= ", pos) - pos);
      CHECK((name == prefix || name.rfind(prefix + "-", 0) == 0));
      pos = rules->find('\n', pos) + 1;
    }
  }
  const std::string combined = "root ::= tool-a | tool-b\n" + *ra + *rb;
  CHECK(Matches(combined, R"({"x": "1"})"));
  CHECK(Matches(combined, "[1, 2]"));
  CHECK_FALSE(Matches(combined, "{}"));
  CHECK(JsonSchemaToGbnfRules(nlohmann::json::parse(a), "bad name").status().code() ==
        absl::StatusCode::kInvalidArgument);
}

TEST_CASE("json schema: json_object and choices", "[grammar][json_schema]") {
  const std::string obj = JsonObjectGbnf();
  CHECK(Matches(obj, "{}"));
  CHECK(Matches(obj, R"({"a": [1, 2.5e3, "x", null, true, {"b": {}}]})"));
  CHECK_FALSE(Matches(obj, "[]"));
  CHECK_FALSE(Matches(obj, "1"));
  CHECK_FALSE(Matches(obj, R"({"a": 1e100})"));
  const std::string choice = ChoiceToGbnf({"yes", "no", "a \"quoted\" \\ \xC3\xA9", ""});
  CHECK(Matches(choice, "yes"));
  CHECK(Matches(choice, "no"));
  CHECK(Matches(choice, "a \"quoted\" \\ \xC3\xA9"));
  CHECK(Matches(choice, ""));
  CHECK_FALSE(Matches(choice, "ye"));
  CHECK_FALSE(Matches(choice, "\"yes\""));
  const std::string none = ChoiceToGbnf({});
  CHECK_FALSE(Matches(none, ""));
  CHECK_FALSE(Matches(none, "a"));
}

}  // namespace json_schema_test
}  // namespace textgen
