#include "engine/tokenizer/unicode.h"

#include <algorithm>

#include "engine/tokenizer/unicode_tables.h"

namespace textgen {
namespace {

using unicode_internal::CodepointRange;

bool InRanges(const CodepointRange* ranges, size_t n, uint32_t cp) {
  // First range whose end is >= cp; binary search keeps the tables compact and lookups cheap.
  const CodepointRange* end = ranges + n;
  const CodepointRange* it = std::lower_bound(
      ranges, end, cp, [](const CodepointRange& r, uint32_t v) { return r.last < v; });
  return it != end && it->first <= cp;
}

}  // namespace

Utf8Char DecodeUtf8(std::string_view text, size_t pos) {
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(text[i]); };
  const uint8_t b0 = byte(pos);
  if (b0 < 0x80) return {Utf8Status::kOk, b0, 1};
  // Per lead byte: total length, initial bits and the allowed range of the second byte
  // (the narrower ranges exclude overlongs, surrogates and > U+10FFFF).
  size_t need;
  uint32_t cp;
  uint8_t lo = 0x80, hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 2;
    cp = b0 & 0x1F;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 3;
    cp = b0 & 0x0F;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 4;
    cp = b0 & 0x07;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return {Utf8Status::kInvalid, kReplacementChar, 1};
  }
  for (size_t i = 1; i < need; ++i) {
    if (pos + i >= text.size()) return {Utf8Status::kTruncated, kReplacementChar, i};
    const uint8_t b = byte(pos + i);
    const uint8_t min = i == 1 ? lo : 0x80;
    const uint8_t max = i == 1 ? hi : 0xBF;
    if (b < min || b > max) return {Utf8Status::kInvalid, kReplacementChar, i};
    cp = (cp << 6) | (b & 0x3F);
  }
  return {Utf8Status::kOk, cp, need};
}

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) cp = kReplacementChar;
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool IsValidUtf8(std::string_view text) {
  for (size_t pos = 0; pos < text.size();) {
    const Utf8Char c = DecodeUtf8(text, pos);
    if (c.status != Utf8Status::kOk) return false;
    pos += c.length;
  }
  return true;
}

std::string SanitizeUtf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const Utf8Char c = DecodeUtf8(text, pos);
    if (c.status == Utf8Status::kOk) {
      out.append(text.substr(pos, c.length));
    } else {
      AppendUtf8(kReplacementChar, &out);
    }
    pos += c.length;
  }
  return out;
}

size_t IncompleteUtf8Tail(std::string_view text) {
  // A sequence is at most 4 bytes, so only a lead byte within the last 3 can start one.
  const size_t n = text.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const uint8_t b = static_cast<uint8_t>(text[n - back]);
    if ((b & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
    const Utf8Char c = DecodeUtf8(text, n - back);
    return c.status == Utf8Status::kTruncated ? back : 0;
  }
  return 0;
}

bool IsUnicodeLetter(uint32_t cp) {
  if (cp < 0x80) return (cp | 0x20) >= 'a' && (cp | 0x20) <= 'z';
  return InRanges(unicode_internal::kLetterRanges, unicode_internal::kLetterRangesSize, cp);
}

bool IsUnicodeNumber(uint32_t cp) {
  if (cp < 0x80) return cp >= '0' && cp <= '9';
  return InRanges(unicode_internal::kNumberRanges, unicode_internal::kNumberRangesSize, cp);
}

bool IsUnicodeWhitespace(uint32_t cp) {
  switch (cp) {
    case 0x20:
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x2000 && cp <= 0x200A);
  }
}

}  // namespace textgen
