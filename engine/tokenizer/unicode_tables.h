// Internal: generated code point range tables (see gen_unicode_tables.py).
#ifndef TEXTGEN_ENGINE_TOKENIZER_UNICODE_TABLES_H_
#define TEXTGEN_ENGINE_TOKENIZER_UNICODE_TABLES_H_

#include <cstddef>
#include <cstdint>

namespace textgen::unicode_internal {

// Inclusive range [first, last], sorted ascending and disjoint within a table.
struct CodepointRange {
  uint32_t first;
  uint32_t last;
};

extern const CodepointRange kLetterRanges[];  // general category L*
extern const size_t kLetterRangesSize;
extern const CodepointRange kNumberRanges[];  // general category N*
extern const size_t kNumberRangesSize;

}  // namespace textgen::unicode_internal

#endif  // TEXTGEN_ENGINE_TOKENIZER_UNICODE_TABLES_H_
