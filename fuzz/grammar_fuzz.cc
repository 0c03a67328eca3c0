// The constrained decoder's inputs from arbitrary bytes: byte 0 picks the form (0: a GBNF
// grammar, 1: a JSON Schema, 2: a regular expression), the rest is its text. Whatever converts
// is parsed as GBNF, and a matcher then walks the input's tail bytes through it: every path
// must end in a status or a sentence, never a crash, a hang (-timeout) or a blow-up
// (-rss_limit_mb).
#include <cstdint>
#include <string>
#include <string_view>

#include "engine/grammar/grammar.h"
#include "engine/grammar/grammar_matcher.h"
#include "engine/grammar/json_schema.h"
#include "engine/grammar/regex_to_gbnf.h"
#include "nlohmann/json.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace textgen;
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  absl::StatusOr<std::string> gbnf = std::string(text);
  switch (data[0] % 3) {
    case 1: {
      const auto schema = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
      if (schema.is_discarded()) return 0;
      gbnf = JsonSchemaToGbnf(schema);
      break;
    }
    case 2:
      gbnf = RegexToGbnf(text);
      break;
    default:
      break;
  }
  if (!gbnf.ok()) return 0;
  absl::StatusOr<std::shared_ptr<const Grammar>> grammar = ParseGbnf(*gbnf);
  if (!grammar.ok()) return 0;
  // The input's own bytes as a candidate sentence: exercises the matcher's stacks on whatever
  // the grammar allows of it.
  GrammarMatcher m(*grammar);
  for (char c : text.substr(0, 256)) {
    if (!m.AcceptString(std::string_view(&c, 1))) break;
  }
  (void)m.CanEnd();
  return 0;
}
