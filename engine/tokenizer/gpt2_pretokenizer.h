// GPT-2 byte-level BPE helpers: the pre-tokenizer split and the byte <-> code point mapping.
#ifndef TEXTGEN_ENGINE_TOKENIZER_GPT2_PRETOKENIZER_H_
#define TEXTGEN_ENGINE_TOKENIZER_GPT2_PRETOKENIZER_H_

#include <cstdint>
#include <string_view>
#include <vector>

namespace textgen {

// Splits `text` (expected valid UTF-8; ill-formed bytes are treated as punctuation) into the
// words matched by GPT-2's pre-tokenizer regex, evaluated over code points:
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// The words are views into `text` and concatenate back to it.
std::vector<std::string_view> SplitGpt2Words(std::string_view text);

// GPT-2's reversible byte -> code point map: printable Latin-1 bytes map to themselves, the
// rest to U+0100.. in byte order, so every byte has a visible, non-space vocab character.
uint32_t Gpt2ByteToCodepoint(uint8_t byte);
// The inverse; -1 for code points that are not the image of a byte.
int Gpt2CodepointToByte(uint32_t codepoint);

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_TOKENIZER_GPT2_PRETOKENIZER_H_
