#include "engine/grammar/utf8_ranges.h"

#include <algorithm>

namespace textgen::gbnf {
namespace {

int EncodedLength(uint32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

void Encode(uint32_t cp, uint8_t* out) {
  switch (EncodedLength(cp)) {
    case 1:
      out[0] = static_cast<uint8_t>(cp);
      break;
    case 2:
      out[0] = static_cast<uint8_t>(0xC0 | (cp >> 6));
      out[1] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
      break;
    case 3:
      out[0] = static_cast<uint8_t>(0xE0 | (cp >> 12));
      out[1] = static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F));
      out[2] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
      break;
    default:
      out[0] = static_cast<uint8_t>(0xF0 | (cp >> 18));
      out[1] = static_cast<uint8_t>(0x80 | ((cp >> 12) & 0x3F));
      out[2] = static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F));
      out[3] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
  }
}

// [lo, hi] share an encoded length. Splits until every byte position of the encodings spans a
// full product of byte ranges (the utf8-ranges construction).
void Split(uint32_t lo, uint32_t hi, std::vector<std::vector<ByteRange>>* out) {
  int n = EncodedLength(lo);
  for (int i = 1; i < n; ++i) {
    uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        Split(lo, lo | m, out);
        Split((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        Split(lo, (hi & ~m) - 1, out);
        Split(hi & ~m, hi, out);
        return;
      }
    }
  }
  uint8_t a[4], b[4];
  Encode(lo, a);
  Encode(hi, b);
  std::vector<ByteRange> seq;
  for (int i = 0; i < n; ++i) seq.push_back(ByteRange{a[i], b[i]});
  out->push_back(std::move(seq));
}

}  // namespace

std::vector<std::pair<uint32_t, uint32_t>> NormalizeCodePoints(
    std::vector<std::pair<uint32_t, uint32_t>> ranges, bool negated) {
  std::sort(ranges.begin(), ranges.end());
  std::vector<std::pair<uint32_t, uint32_t>> merged;
  for (const auto& r : ranges) {
    if (!merged.empty() && r.first <= merged.back().second + 1) {
      merged.back().second = std::max(merged.back().second, r.second);
    } else {
      merged.push_back(r);
    }
  }
  if (negated) {
    std::vector<std::pair<uint32_t, uint32_t>> complement;
    uint32_t next = 0;
    for (const auto& r : merged) {
      if (r.first > next) complement.emplace_back(next, r.first - 1);
      next = r.second + 1;
    }
    if (next <= 0x10FFFF) complement.emplace_back(next, 0x10FFFF);
    merged = std::move(complement);
  }
  std::vector<std::pair<uint32_t, uint32_t>> out;
  for (const auto& r : merged) {
    if (r.second < 0xD800 || r.first > 0xDFFF) {
      out.push_back(r);
      continue;
    }
    if (r.first < 0xD800) out.emplace_back(r.first, 0xD7FF);
    if (r.second > 0xDFFF) out.emplace_back(0xE000, r.second);
  }
  return out;
}

std::vector<std::vector<ByteRange>> Utf8Sequences(
    const std::vector<std::pair<uint32_t, uint32_t>>& ranges) {
  static constexpr uint32_t kLengthEnds[] = {0x7F, 0x7FF, 0xFFFF, 0x10FFFF};
  std::vector<std::vector<ByteRange>> out;
  for (auto [lo, hi] : ranges) {
    for (uint32_t end : kLengthEnds) {
      if (lo > hi) break;
      if (lo > end) continue;
      uint32_t piece_hi = std::min(hi, end);
      Split(lo, piece_hi, &out);
      lo = piece_hi + 1;
    }
  }
  return out;
}

}  // namespace textgen::gbnf
