#include "engine/tokenizer/gpt2_pretokenizer.h"

#include <array>

#include "engine/tokenizer/unicode.h"

namespace textgen {
namespace {

enum class CharClass : uint8_t { kLetter, kNumber, kSpace, kOther };

CharClass Classify(uint32_t cp) {
  if (IsUnicodeWhitespace(cp)) return CharClass::kSpace;
  if (IsUnicodeLetter(cp)) return CharClass::kLetter;
  if (IsUnicodeNumber(cp)) return CharClass::kNumber;
  return CharClass::kOther;
}

bool IsPrintableLatin1(int b) {
  return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

struct ByteMaps {
  std::array<uint32_t, 256> to_cp;
  std::array<int16_t, 512> from_cp;  // images are all below U+0144
  ByteMaps() {
    from_cp.fill(-1);
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      to_cp[b] = IsPrintableLatin1(b) ? static_cast<uint32_t>(b) : next++;
      from_cp[to_cp[b]] = static_cast<int16_t>(b);
    }
  }
};

const ByteMaps& Maps() {
  static const ByteMaps* maps = new ByteMaps();
  return *maps;
}

}  // namespace

uint32_t Gpt2ByteToCodepoint(uint8_t byte) { return Maps().to_cp[byte]; }

int Gpt2CodepointToByte(uint32_t codepoint) {
  return codepoint < 512 ? Maps().from_cp[codepoint] : -1;
}

std::vector<std::string_view> SplitGpt2Words(std::string_view text) {
  // Decode once; offsets[i] is the byte offset of code point i (offsets[n] == text.size()).
  std::vector<uint32_t> cps;
  std::vector<CharClass> cls;
  std::vector<size_t> offsets;
  cps.reserve(text.size());
  cls.reserve(text.size());
  offsets.reserve(text.size() + 1);
  for (size_t pos = 0; pos < text.size();) {
    const Utf8Char c = DecodeUtf8(text, pos);
    offsets.push_back(pos);
    cps.push_back(c.codepoint);
    cls.push_back(Classify(c.codepoint));
    pos += c.length;
  }
  offsets.push_back(text.size());
  const size_t n = cps.size();

  std::vector<std::string_view> words;
  const auto emit = [&](size_t begin, size_t end) {
    words.push_back(text.substr(offsets[begin], offsets[end] - offsets[begin]));
  };
  size_t pos = 0;
  while (pos < n) {
    const uint32_t cp = cps[pos];
    // 's|'t|'re|'ve|'m|'ll|'d (case-sensitive, tried before everything else)
    if (cp == '\'' && pos + 1 < n) {
      const uint32_t c1 = cps[pos + 1];
      if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') {
        emit(pos, pos + 2);
        pos += 2;
        continue;
      }
      if (pos + 2 < n) {
        const uint32_t c2 = cps[pos + 2];
        if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) {
          emit(pos, pos + 3);
          pos += 3;
          continue;
        }
      }
    }
    // ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`: an optional single space, then a run of
    // one class. A space not followed by such a run falls through to the whitespace rules.
    const bool space = cp == ' ';
    if (!space || pos + 1 < n) {
      const CharClass run = space ? cls[pos + 1] : cls[pos];
      if (run != CharClass::kSpace) {
        size_t end = pos + (space ? 1 : 0);
        while (end < n && cls[end] == run) ++end;
        emit(pos, end);
        pos = end;
        continue;
      }
    }
    // `\s+(?!\S)`: a whitespace run followed by a non-space gives up its last character (so
    // that one can prefix the next word); at the end of text it takes the whole run. `\s+`
    // covers the single-character case.
    size_t ws = 0;
    while (pos + ws < n && cls[pos + ws] == CharClass::kSpace) ++ws;
    if (ws == 0) ws = 1;  // unreachable: cls[pos] is kSpace here; guarantees progress
    const size_t end = (ws > 1 && pos + ws < n) ? pos + ws - 1 : pos + ws;
    emit(pos, end);
    pos = end;
  }
  return words;
}

}  // namespace textgen
