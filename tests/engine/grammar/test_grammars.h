// GBNF grammars shared by the grammar tests and tests/bench/grammar_bench.cc.
#ifndef TEXTGEN_TESTS_ENGINE_GRAMMAR_TEST_GRAMMARS_H_
#define TEXTGEN_TESTS_ENGINE_GRAMMAR_TEST_GRAMMARS_H_

namespace textgen::testing {

// An object schema as llama.cpp's json-schema-to-grammar writes it: strings with maxLength,
// a bounded integer, an enum, an array of strings, a nested object; bounded whitespace.
inline constexpr char kPersonSchemaGbnf[] =
    R"(root ::= "{" space name-kv "," space age-kv "," space status-kv "," space email-kv "," space tags-kv "," space address-kv "}" space
space ::= | " " | "\n" [ \t]{0,20}
char ::= [^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt] | "u" [0-9a-fA-F]{4})
name-kv ::= "\"name\"" space ":" space name
name ::= "\"" char{1,64} "\"" space
age-kv ::= "\"age\"" space ":" space age
# an integer in [0, 150]
age ::= ("0" | [1-9] [0-9]? | "1" [0-4] [0-9] | "150") space
status-kv ::= "\"status\"" space ":" space status
status ::= ("\"active\"" | "\"inactive\"" | "\"pending\"") space
email-kv ::= "\"email\"" space ":" space email
email ::= "\"" char{3,100} "\"" space
tags-kv ::= "\"tags\"" space ":" space tags
tags ::= "[" space (tag ("," space tag){0,9})? "]" space
tag ::= "\"" char{1,32} "\"" space
address-kv ::= "\"address\"" space ":" space address
address ::= "{" space street-kv "," space city-kv ("," space zip-kv)? "}" space
street-kv ::= "\"street\"" space ":" space street
street ::= "\"" char{0,128} "\"" space
city-kv ::= "\"city\"" space ":" space city
city ::= "\"" char{1,64} "\"" space
zip-kv ::= "\"zip\"" space ":" space zip
zip ::= "\"" [0-9]{5} "\"" space
)";

// Documents of kPersonSchemaGbnf.
inline constexpr const char* kPersonDocs[] = {
    R"({"name": "Ada Lovelace", "age": 36, "status": "active", "email": "ada@example.com", "tags": ["math", "poetry"], "address": {"street": "12 St James's Square", "city": "London", "zip": "10001"}})",
    R"({
  "name": "Grace Hopper",
  "age": 85,
  "status": "inactive",
  "email": "grace.hopper@navy.mil",
  "tags": ["cobol", "compilers", "navy"],
  "address": {
    "street": "1 Main St",
    "city": "Arlington"
  }
})",
    R"({"name":"Jos\u00e9 Mar\u00eda","age":150,"status":"pending","email":"jm@ex.es","tags":[],"address":{"street":"","city":"M\u00e1laga","zip":"29001"}})",
    R"({"name": "Zhang Wei 张伟", "age": 0, "status": "active", "email": "zw@example.cn", "tags": ["工程师", "tea \"oolong\""], "address": {"street": "88 Nanjing Rd\nSuite 5", "city": "上海"}})",
};

// Free-form JSON (llama.cpp's grammars/json.gbnf): strings unbounded.
inline constexpr char kJsonGbnf[] = R"(root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws
object ::=
  "{" ws (
            string ":" ws value
    ("," ws string ":" ws value)*
  )? "}" ws
array  ::=
  "[" ws (
            value
    ("," ws value)*
  )? "]" ws
string ::=
  "\"" (
    [^"\\\x7F\x00-\x1F] |
    "\\" (["\\bfnrt] | "u" [0-9a-fA-F]{4})
  )* "\"" ws
number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-7]{0,15})? ws
ws ::= | " " | "\n" [ \t]{0,20}
)";

inline constexpr const char* kJsonDocs[] = {
    R"({"id": 12345, "title": "Constrained decoding at vocabulary scale", "tags": ["grammar", "json", "llm"], "score": -3.25e+7, "ok": true, "none": null, "nested": {"a": [1, 2, {"b": "c"}], "text": "line one\nline two \"quoted\" \\ backslash \u00e9"}})",
    R"({
  "users": [
    {"name": "alice", "age": 30, "langs": ["en", "fr"]},
    {"name": "bob", "age": 25, "langs": []}
  ],
  "count": 2,
  "description": "A somewhat longer string value, with punctuation; numbers 0123456789 and unicode: 日本語のテキスト, Ελληνικά."
})",
};

}  // namespace textgen::testing

#endif  // TEXTGEN_TESTS_ENGINE_GRAMMAR_TEST_GRAMMARS_H_
