// SchemaConverter: one JSON Schema document to a grammar. Internal to json_schema.cc.
//
// A schema position is a conjunction of schemas at JSON pointers in the document ("Conj"):
// $ref and allOf are flattened into it, so that merging (allOf, a $ref with siblings, a
// property declared by several schemas) is the union of the conjunctions, and anyOf / oneOf
// are distributed over it. Each distinct conjunction becomes one rule, memoized, which is what
// makes recursive schemas finite grammars.
#ifndef TEXTGEN_ENGINE_GRAMMAR_JSON_SCHEMA_CONVERTER_H_
#define TEXTGEN_ENGINE_GRAMMAR_JSON_SCHEMA_CONVERTER_H_

#include <cmath>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "engine/grammar/json_schema.h"
#include "engine/grammar/json_schema_ir.h"
#include "engine/grammar/json_schema_numbers.h"
#include "engine/grammar/json_schema_pieces.h"

namespace textgen::json_schema_internal {

using Json = nlohmann::ordered_json;

// JSON types as bits; kNumber means non-integral numbers (a "number" type is both bits).
enum TypeBit : uint8_t {
  kNull = 1,
  kBoolean = 2,
  kObject = 4,
  kArray = 8,
  kString = 16,
  kInteger = 32,
  kNumber = 64,
  kAllTypes = 127,
};
uint8_t TypeBitsOfValue(const Json& value);
uint8_t TypeBitsOfName(const std::string& name);  // 0 for an unknown name
uint8_t TypeMask(const Json& type);               // of a valid "type" keyword
bool IsNonNegativeInteger(const Json& v);         // incl. integral floats such as 2.0
int64_t AsCount(const Json& v);                   // of a non-negative integer
// Keywords besides type / enum / const that constrain a value.
bool ValueConstraintKeyword(std::string_view key);

// Whether `text` (a JSON document) is accepted by the GBNF grammar `gbnf` (root rule "root").
// The converter filters enum values and checks property names with it.
using GrammarAcceptsFn =
    std::function<absl::StatusOr<bool>(const std::string& gbnf, const std::string& text)>;

// A JSON value as the grammar spells it: compact, integral doubles as integers, other doubles
// in their shortest form. InvalidArgument for strings that are not UTF-8.
absl::StatusOr<std::string> CanonicalJson(const Json& value);
// The pointer to member `key` of the value at `ptr` (~ and / escaped).
std::string PointerChild(const std::string& ptr, std::string_view key);
// "the root" or the pointer, for messages.
std::string PointerForMessage(std::string_view pointer);

class SchemaConverter {
 public:
  // `doc` must outlive the converter. `accepts` checks texts against grammars.
  SchemaConverter(const Json& doc, std::string root_name, const JsonSchemaOptions& options,
                  absl::Time deadline, GrammarAcceptsFn accepts, int nesting = 0);

  absl::StatusOr<JsonSchemaGrammar> Run();

 private:
  enum Consumed : uint8_t { kAnyOfDone = 1, kOneOfDone = 2, kEnumDone = 4 };
  struct Part {
    std::string ptr;  // JSON pointer of a schema object
    uint8_t consumed = 0;
  };
  struct Conj {
    std::vector<Part> parts;  // first-seen order; the first part's property order wins
    bool never = false;       // contains the `false` schema
  };
  struct Bound {
    const Json* value;
    bool exclusive;
    std::string ptr;
  };

  // Documents, keywords and flattening (json_schema_converter.cc).
  absl::StatusOr<const Json*> At(const std::string& ptr) const;
  absl::Status CheckKeywords(const std::string& ptr);
  absl::StatusOr<std::string> ResolveRef(const std::string& ptr, const Json& ref) const;
  // Adds the schema at `ptr` and what its $ref / allOf reach; `chain`: the references being
  // followed (a repeat is a cycle), `visited`: schemas already added (a repeat is a diamond).
  absl::Status FlattenInto(const std::string& ptr, Conj& conj, std::vector<std::string>& chain,
                           absl::flat_hash_set<std::string>& visited);
  absl::StatusOr<Conj> Flatten(const std::vector<std::string>& ptrs);
  const Json* Keyword(const Part& part, const char* name) const;
  std::string Key(const Conj& conj, uint8_t types) const;

  // Conversion (json_schema_converter.cc).
  absl::StatusOr<JsonSchemaGrammar> RunConj(const Conj& conj, uint8_t types);
  absl::StatusOr<Expr> Convert(const Conj& conj, uint8_t types, std::string_view hint, int depth,
                               int rule = -1);
  absl::StatusOr<Expr> ConvertBody(const Conj& conj, uint8_t types, int depth);
  absl::StatusOr<Expr> Distribute(const Conj& conj, size_t part, const char* keyword, uint8_t types,
                                  int depth);
  absl::StatusOr<Expr> EnumExpr(const Conj& conj, uint8_t types);
  // Which of `texts` the grammar of (conj, types) accepts.
  absl::StatusOr<std::vector<bool>> Accepts(const Conj& conj, uint8_t types,
                                            const std::vector<std::string>& texts);
  absl::StatusOr<Expr> StringExpr(const Conj& conj);
  static Conj Merge(Conj a, const Conj& b);
  absl::StatusOr<Expr> NumberExpr(const Conj& conj, bool integer);
  void NoteEmpty(std::string reason);

  // Objects and arrays (json_schema_objects.cc).
  absl::StatusOr<Expr> ObjectExpr(const Conj& conj, int depth);
  absl::StatusOr<Expr> ArrayExpr(const Conj& conj, int depth);
  absl::StatusOr<Expr> ExtraKey(const Conj& names, const std::vector<std::string>& declared,
                                const std::string& ptr);

  // oneOf exclusivity (json_schema_disjoint.cc): what a conjunction surely requires.
  struct Summary {
    Conj conj;
    uint8_t types = kAllTypes;
    std::optional<std::vector<Json>> values;  // enum / const
    double min = -INFINITY, max = INFINITY;   // numeric bounds
    bool min_exclusive = false, max_exclusive = false;
    std::vector<std::string> required;
    std::vector<std::vector<std::string>> closed;  // additionalProperties: false: the names allowed
    std::vector<std::string> false_properties;     // declared with the false schema
    bool Forbids(const std::string& name) const;
  };
  absl::StatusOr<Summary> Summarize(const Conj& conj, uint8_t types);
  absl::StatusOr<bool> Disjoint(const Summary& a, const Summary& b, int depth);

  const Json& doc_;
  std::string root_name_;
  const JsonSchemaOptions& options_;
  absl::Time deadline_;
  GrammarAcceptsFn accepts_;
  int nesting_;  // sub-converters (enum filters) inside sub-converters
  GbnfBuilder b_;
  JsonPieces pieces_;
  absl::flat_hash_map<std::string, Expr> memo_;  // Key(conj, types) -> rule reference
  // Schemas whose keywords were checked, by pointer.
  absl::flat_hash_map<std::string, const Json*> schemas_;
  std::string empty_reason_;  // the first contradiction seen
};

}  // namespace textgen::json_schema_internal

#endif  // TEXTGEN_ENGINE_GRAMMAR_JSON_SCHEMA_CONVERTER_H_
