// Code point sets -> UTF-8 byte-range sequences, the way a byte-level automaton matches a
// character class: [a-zé] becomes [61-7A] | [C3][A9].
#ifndef TEXTGEN_ENGINE_GRAMMAR_UTF8_RANGES_H_
#define TEXTGEN_ENGINE_GRAMMAR_UTF8_RANGES_H_

#include <cstdint>
#include <utility>
#include <vector>

namespace textgen::gbnf {

struct ByteRange {
  uint8_t lo, hi;
  bool operator==(const ByteRange& o) const { return lo == o.lo && hi == o.hi; }
  bool operator<(const ByteRange& o) const { return lo != o.lo ? lo < o.lo : hi < o.hi; }
};

// Sorts, merges and (when `negated`) complements inclusive code point ranges over
// [0, 0x10FFFF]; surrogates (U+D800-U+DFFF, not encodable in well-formed UTF-8) are removed.
std::vector<std::pair<uint32_t, uint32_t>> NormalizeCodePoints(
    std::vector<std::pair<uint32_t, uint32_t>> ranges, bool negated);

// Byte-range sequences (each 1-4 ranges long) whose concatenations are exactly the UTF-8
// encodings of the code points in `ranges` (normalized: sorted, disjoint, no surrogates).
std::vector<std::vector<ByteRange>> Utf8Sequences(
    const std::vector<std::pair<uint32_t, uint32_t>>& ranges);

}  // namespace textgen::gbnf

#endif  // TEXTGEN_ENGINE_GRAMMAR_UTF8_RANGES_H_
