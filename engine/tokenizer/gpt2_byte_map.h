// GPT-2 byte-level BPE: the byte <-> code point mapping (the pre-tokenizer split is one of
// pretokenizer.h's regex lists).
#ifndef TEXTGEN_ENGINE_TOKENIZER_GPT2_BYTE_MAP_H_
#define TEXTGEN_ENGINE_TOKENIZER_GPT2_BYTE_MAP_H_

#include <cstdint>

namespace textgen {

// GPT-2's reversible byte -> code point map: printable Latin-1 bytes map to themselves, the
// rest to U+0100.. in byte order, so every byte has a visible, non-space vocab character.
uint32_t Gpt2ByteToCodepoint(uint8_t byte);
// The inverse; -1 for code points that are not the image of a byte.
int Gpt2CodepointToByte(uint32_t codepoint);

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_TOKENIZER_GPT2_BYTE_MAP_H_
