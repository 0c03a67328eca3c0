// Sets of Unicode code points for the regex and JSON Schema converters: closed ranges, the
// character-class escapes (\d \w \s and their negations) and JSON's string encoding of a set.
#ifndef TEXTGEN_ENGINE_GRAMMAR_REGEX_CHARSET_H_
#define TEXTGEN_ENGINE_GRAMMAR_REGEX_CHARSET_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace textgen::json_schema_internal {

inline constexpr uint32_t kMaxCodePoint = 0x10FFFF;

// A set of Unicode scalar values (surrogates D800-DFFF are never members: UTF-8 text cannot
// hold them) as sorted, disjoint, non-adjacent closed ranges. A value type; not thread-safe
// to mutate concurrently.
class CodePointSet {
 public:
  CodePointSet() = default;
  static CodePointSet Of(uint32_t cp) { return Range(cp, cp); }
  static CodePointSet Range(uint32_t lo, uint32_t hi);  // empty if lo > hi
  static CodePointSet All();

  void Add(uint32_t lo, uint32_t hi);
  void AddSet(const CodePointSet& other);
  CodePointSet Complement() const;  // within All()
  CodePointSet Intersect(const CodePointSet& other) const;
  CodePointSet Minus(const CodePointSet& other) const { return Intersect(other.Complement()); }

  bool empty() const { return ranges_.empty(); }
  bool Contains(uint32_t cp) const;
  uint64_t size() const;  // number of code points
  uint32_t max() const;   // largest member; the set must not be empty
  const std::vector<std::pair<uint32_t, uint32_t>>& ranges() const { return ranges_; }
  bool operator==(const CodePointSet& other) const { return ranges_ == other.ranges_; }

 private:
  std::vector<std::pair<uint32_t, uint32_t>> ranges_;
};

// The class escapes' sets. ECMA-262 (JSON Schema's regex dialect) and Python's `re` (which the
// common validators use) disagree on them: \d and \w are ASCII in ECMA but Unicode in Python,
// \s differs in a few characters. To stay valid under both, a class takes the `narrow` set
// (inside both dialects' sets) where it matches positively and the complement of the `wide`
// set (outside both) where it is negated. `kind` is one of "dDwWsS".
CodePointSet NarrowClassEscape(char kind);
CodePointSet WideClassEscape(char kind);

// ECMA-262's `.` without the s flag (any character but the line terminators \n \r U+2028
// U+2029), which Python's `.` (anything but \n) also matches.
CodePointSet DotSet();

// The UTF-8 encoding of `cp` appended to `out`.
void AppendUtf8(uint32_t cp, std::string& out);
// Decodes one UTF-8 character of `s` at `pos`, advancing `pos`; false on invalid UTF-8 (then
// `pos` is unchanged).
bool DecodeUtf8(std::string_view s, size_t& pos, uint32_t& cp);

}  // namespace textgen::json_schema_internal

#endif  // TEXTGEN_ENGINE_GRAMMAR_REGEX_CHARSET_H_
