#include "engine/tokenizer/gpt2_byte_map.h"

#include <array>

namespace textgen {
namespace {

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

}  // namespace textgen
