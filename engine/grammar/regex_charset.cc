#include "engine/grammar/regex_charset.h"

#include <algorithm>

namespace textgen::json_schema_internal {
namespace {

constexpr uint32_t kSurrogateLo = 0xD800;
constexpr uint32_t kSurrogateHi = 0xDFFF;

// Unicode category Nd (decimal digits), which Python's \d matches: Unicode 14 as Python 3.11's
// unicodedata lists it, plus the digit blocks of Unicode 15 and 16 (a superset keeps the
// negated classes valid under newer Pythons too).
constexpr std::pair<uint32_t, uint32_t> kDecimalDigits[] = {
    {0x30, 0x39},       {0x660, 0x669},     {0x6F0, 0x6F9},     {0x7C0, 0x7C9},
    {0x966, 0x96F},     {0x9E6, 0x9EF},     {0xA66, 0xA6F},     {0xAE6, 0xAEF},
    {0xB66, 0xB6F},     {0xBE6, 0xBEF},     {0xC66, 0xC6F},     {0xCE6, 0xCEF},
    {0xD66, 0xD6F},     {0xDE6, 0xDEF},     {0xE50, 0xE59},     {0xED0, 0xED9},
    {0xF20, 0xF29},     {0x1040, 0x1049},   {0x1090, 0x1099},   {0x17E0, 0x17E9},
    {0x1810, 0x1819},   {0x1946, 0x194F},   {0x19D0, 0x19D9},   {0x1A80, 0x1A89},
    {0x1A90, 0x1A99},   {0x1B50, 0x1B59},   {0x1BB0, 0x1BB9},   {0x1C40, 0x1C49},
    {0x1C50, 0x1C59},   {0xA620, 0xA629},   {0xA8D0, 0xA8D9},   {0xA900, 0xA909},
    {0xA9D0, 0xA9D9},   {0xA9F0, 0xA9F9},   {0xAA50, 0xAA59},   {0xABF0, 0xABF9},
    {0xFF10, 0xFF19},   {0x104A0, 0x104A9}, {0x10D30, 0x10D39}, {0x10D40, 0x10D49},
    {0x11066, 0x1106F}, {0x110F0, 0x110F9}, {0x11136, 0x1113F}, {0x111D0, 0x111D9},
    {0x112F0, 0x112F9}, {0x11450, 0x11459}, {0x114D0, 0x114D9}, {0x11650, 0x11659},
    {0x116C0, 0x116C9}, {0x116D0, 0x116E3}, {0x11730, 0x11739}, {0x118E0, 0x118E9},
    {0x11950, 0x11959}, {0x11BF0, 0x11BF9}, {0x11C50, 0x11C59}, {0x11D50, 0x11D59},
    {0x11DA0, 0x11DA9}, {0x11F50, 0x11F59}, {0x16130, 0x16139}, {0x16A60, 0x16A69},
    {0x16AC0, 0x16AC9}, {0x16B50, 0x16B59}, {0x16D70, 0x16D79}, {0x1CCF0, 0x1CCF9},
    {0x1D7CE, 0x1D7FF}, {0x1E140, 0x1E149}, {0x1E2F0, 0x1E2F9}, {0x1E4F0, 0x1E4F9},
    {0x1E5F1, 0x1E5FA}, {0x1E950, 0x1E959}, {0x1FBF0, 0x1FBF9},
};

// ECMA-262's WhiteSpace and LineTerminator (\s).
constexpr std::pair<uint32_t, uint32_t> kEcmaSpace[] = {
    {0x09, 0x0D},     {0x20, 0x20},     {0xA0, 0xA0},     {0x1680, 0x1680}, {0x2000, 0x200A},
    {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}, {0xFEFF, 0xFEFF},
};
// Python's \s on str (str.isspace()).
constexpr std::pair<uint32_t, uint32_t> kPythonSpace[] = {
    {0x09, 0x0D},     {0x1C, 0x20},     {0x85, 0x85},     {0xA0, 0xA0},     {0x1680, 0x1680},
    {0x2000, 0x200A}, {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000},
};

template <size_t N>
CodePointSet FromTable(const std::pair<uint32_t, uint32_t> (&table)[N]) {
  CodePointSet set;
  for (const auto& [lo, hi] : table) set.Add(lo, hi);
  return set;
}

CodePointSet AsciiWord() {
  CodePointSet set;
  set.Add('0', '9');
  set.Add('A', 'Z');
  set.Add('_', '_');
  set.Add('a', 'z');
  return set;
}

}  // namespace

CodePointSet CodePointSet::Range(uint32_t lo, uint32_t hi) {
  CodePointSet set;
  set.Add(lo, hi);
  return set;
}

CodePointSet CodePointSet::All() { return Range(0, kMaxCodePoint); }

void CodePointSet::Add(uint32_t lo, uint32_t hi) {
  hi = std::min(hi, kMaxCodePoint);
  if (lo > hi) return;
  // Surrogates are never members: split around them.
  if (lo <= kSurrogateHi && hi >= kSurrogateLo) {
    if (lo < kSurrogateLo) Add(lo, kSurrogateLo - 1);
    if (hi > kSurrogateHi) Add(kSurrogateHi + 1, hi);
    return;
  }
  std::vector<std::pair<uint32_t, uint32_t>> out;
  out.reserve(ranges_.size() + 1);
  bool placed = false;
  for (const auto& r : ranges_) {
    if (r.second + 1 < lo) {
      out.push_back(r);
    } else if (hi + 1 < r.first) {
      if (!placed) out.emplace_back(lo, hi), placed = true;
      out.push_back(r);
    } else {  // overlapping or adjacent: merge into [lo, hi]
      lo = std::min(lo, r.first);
      hi = std::max(hi, r.second);
    }
  }
  if (!placed) out.emplace_back(lo, hi);
  ranges_ = std::move(out);
}

void CodePointSet::AddSet(const CodePointSet& other) {
  for (const auto& [lo, hi] : other.ranges_) Add(lo, hi);
}

CodePointSet CodePointSet::Complement() const {
  CodePointSet out;
  uint32_t next = 0;
  for (const auto& [lo, hi] : ranges_) {
    if (lo > next) out.Add(next, lo - 1);
    next = hi + 1;
  }
  if (next <= kMaxCodePoint) out.Add(next, kMaxCodePoint);
  return out;
}

CodePointSet CodePointSet::Intersect(const CodePointSet& other) const {
  CodePointSet out;
  size_t i = 0, j = 0;
  while (i < ranges_.size() && j < other.ranges_.size()) {
    const uint32_t lo = std::max(ranges_[i].first, other.ranges_[j].first);
    const uint32_t hi = std::min(ranges_[i].second, other.ranges_[j].second);
    if (lo <= hi) out.ranges_.emplace_back(lo, hi);
    if (ranges_[i].second < other.ranges_[j].second) {
      ++i;
    } else {
      ++j;
    }
  }
  return out;
}

bool CodePointSet::Contains(uint32_t cp) const {
  auto it = std::upper_bound(ranges_.begin(), ranges_.end(), cp,
                             [](uint32_t v, const auto& r) { return v < r.first; });
  return it != ranges_.begin() && std::prev(it)->second >= cp;
}

uint64_t CodePointSet::size() const {
  uint64_t n = 0;
  for (const auto& [lo, hi] : ranges_) n += hi - lo + 1;
  return n;
}

uint32_t CodePointSet::max() const { return ranges_.back().second; }

CodePointSet NarrowClassEscape(char kind) {
  switch (kind) {
    case 'd':
      return CodePointSet::Range('0', '9');
    case 'D':
      return WideClassEscape('d').Complement();
    case 'w':
      return AsciiWord();
    case 'W':
      return WideClassEscape('w').Complement();
    case 's':
      return FromTable(kEcmaSpace).Intersect(FromTable(kPythonSpace));
    case 'S':
      return WideClassEscape('s').Complement();
  }
  return {};
}

CodePointSet WideClassEscape(char kind) {
  switch (kind) {
    case 'd':
      return FromTable(kDecimalDigits);
    case 'D':
      return NarrowClassEscape('d').Complement();
    case 'w': {
      // Python's Unicode \w: every non-ASCII character may be a word character.
      CodePointSet set = AsciiWord();
      set.Add(0x80, kMaxCodePoint);
      return set;
    }
    case 'W':
      return NarrowClassEscape('w').Complement();
    case 's': {
      CodePointSet set = FromTable(kEcmaSpace);
      set.AddSet(FromTable(kPythonSpace));
      return set;
    }
    case 'S':
      return NarrowClassEscape('s').Complement();
  }
  return {};
}

CodePointSet DotSet() {
  CodePointSet set = CodePointSet::All();
  CodePointSet terminators;
  terminators.Add('\n', '\n');
  terminators.Add('\r', '\r');
  terminators.Add(0x2028, 0x2029);
  return set.Minus(terminators);
}

void AppendUtf8(uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

bool DecodeUtf8(std::string_view s, size_t& pos, uint32_t& cp) {
  if (pos >= s.size()) return false;
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char b0 = byte(pos);
  size_t len;
  uint32_t value, min;
  if (b0 < 0x80) {
    cp = b0;
    ++pos;
    return true;
  } else if ((b0 & 0xE0) == 0xC0) {
    len = 2, value = b0 & 0x1F, min = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3, value = b0 & 0x0F, min = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4, value = b0 & 0x07, min = 0x10000;
  } else {
    return false;
  }
  if (pos + len > s.size()) return false;
  for (size_t i = 1; i < len; ++i) {
    if ((byte(pos + i) & 0xC0) != 0x80) return false;
    value = (value << 6) | (byte(pos + i) & 0x3F);
  }
  if (value < min || value > kMaxCodePoint || (value >= kSurrogateLo && value <= kSurrogateHi)) {
    return false;
  }
  cp = value;
  pos += len;
  return true;
}

}  // namespace textgen::json_schema_internal
