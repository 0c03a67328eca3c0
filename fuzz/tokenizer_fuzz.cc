// The tokenizer on arbitrary bytes, for real vocabularies of both kinds (SentencePiece-style and
// byte-level BPE with several pre-tokenizers), read from $TEXTGEN_MODELS/vocab at start.
// Input: byte 0 picks the vocabulary (low bits) and parse_special / add_bos (bits 6, 7); the
// rest is the text. Checks that ids are in range, that valid UTF-8 without special-token texts
// decodes back to itself (these vocabularies cover every byte; SPM adds its space prefix), that
// the streamed detokenization agrees with Decode when Decode is valid UTF-8
// (IncrementalDetokenizer's contract), and decodes the text's bytes read as token ids.
#include <bitset>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/format/gguf_file.h"
#include "engine/tokenizer/gpt2_byte_map.h"
#include "engine/tokenizer/incremental_detokenizer.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/unicode.h"

namespace {

// One of each tokenizer kind and BPE pre-tokenizer family the engine has; small files first.
constexpr const char* kVocabs[] = {
    "ggml-vocab-llama-spm.gguf", "ggml-vocab-phi-3.gguf",     "ggml-vocab-gpt-2.gguf",
    "ggml-vocab-llama3.1.gguf",  "ggml-vocab-qwen3.gguf",     "ggml-vocab-deepseek-coder.gguf",
    "ggml-vocab-falcon.gguf",    "ggml-vocab-starcoder.gguf",
};

struct Vocab {
  std::unique_ptr<textgen::Tokenizer> tokenizer;
  // Bytes the vocabulary has a byte token for (byte-level character or <0xXX>): text with any
  // other byte loses it, as in llama.cpp (Falcon lacks most control characters).
  std::bitset<256> has_byte;
};
std::vector<Vocab>* vocabs = nullptr;

std::bitset<256> BytesWithTokens(const textgen::Tokenizer& tok) {
  std::bitset<256> has;
  for (int b = 0; b < 256; ++b) {
    std::string text;
    if (tok.model() == textgen::VocabModel::kGpt2) {
      textgen::AppendUtf8(textgen::Gpt2ByteToCodepoint(static_cast<uint8_t>(b)), &text);
    } else {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "<0x%02X>", b);
      text = hex;
    }
    has[b] = tok.TokenToId(text) >= 0;
  }
  return has;
}

// Text a token matched as a unit even without parse_special could spell (user-defined tokens
// such as <think>, with their whitespace stripping): such text need not round-trip.
bool MayMatchSpecial(const textgen::Tokenizer& tok, std::string_view text) {
  const textgen::VocabData& v = tok.vocab();
  for (size_t id = 0; id < v.types.size(); ++id) {
    if (v.types[id] == textgen::TokenType::kUserDefined &&
        text.find(v.tokens[id]) != std::string_view::npos) {
      return true;
    }
  }
  return false;
}

void CheckRoundTrip(const Vocab& vocab, std::string_view text, const std::vector<int32_t>& ids) {
  const textgen::Tokenizer& tok = *vocab.tokenizer;
  if (!textgen::IsValidUtf8(text) || MayMatchSpecial(tok, text)) return;
  for (char c : text) {
    if (!vocab.has_byte[static_cast<uint8_t>(c)]) return;
  }
  // SentencePiece writes spaces as U+2581, so a literal U+2581 decodes as a space.
  if (tok.model() == textgen::VocabModel::kLlama && text.find("\xe2\x96\x81") != text.npos) {
    return;
  }
  std::string expected(text);
  if (tok.model() == textgen::VocabModel::kLlama && tok.vocab().add_space_prefix && !text.empty()) {
    expected.insert(0, " ");
  }
  if (tok.Decode(ids) != expected) {
    std::fprintf(stderr, "Decode(Encode(text)) != text\n");
    std::abort();
  }
}

void CheckStreamedDecode(const textgen::Tokenizer& tok, const std::vector<int32_t>& ids) {
  textgen::IncrementalDetokenizer detok(tok);
  std::string streamed;
  for (int32_t id : ids) streamed += detok.Add(id);
  streamed += detok.Flush();
  const std::string whole = tok.Decode(ids);
  if (textgen::IsValidUtf8(whole) && streamed != whole) {
    std::fprintf(stderr, "streamed detokenization differs from Decode\n");
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  const char* models = std::getenv("TEXTGEN_MODELS");
  if (models == nullptr || *models == '\0') {
    std::fprintf(stderr,
                 "fuzz_tokenizer: set TEXTGEN_MODELS (the vocabularies are in its vocab/)\n");
    std::exit(2);
  }
  vocabs = new std::vector<Vocab>();
  for (const char* name : kVocabs) {
    const std::string path = std::string(models) + "/vocab/" + name;
    auto gguf = textgen::GgufFile::Open(path);
    auto tok = gguf.ok() ? textgen::Tokenizer::FromGguf(**gguf) : gguf.status();
    if (!tok.ok()) {
      std::fprintf(stderr, "fuzz_tokenizer: %s\n", std::string(tok.status().message()).c_str());
      std::exit(2);
    }
    std::bitset<256> has_byte = BytesWithTokens(**tok);
    vocabs->push_back({*std::move(tok), has_byte});
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const Vocab& vocab = (*vocabs)[(data[0] & 0x3f) % vocabs->size()];
  const textgen::Tokenizer& tok = *vocab.tokenizer;
  const bool parse_special = (data[0] & 0x40) != 0;
  const bool add_bos = (data[0] & 0x80) != 0;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);

  std::vector<int32_t> ids = tok.Encode(text, add_bos, parse_special);
  for (int32_t id : ids) {
    if (id < 0 || id >= tok.vocab_size()) std::abort();
  }
  if (!parse_special && !add_bos) CheckRoundTrip(vocab, text, ids);
  CheckStreamedDecode(tok, ids);

  // Arbitrary ids, out-of-range ones included.
  std::vector<int32_t> raw(text.size() / 4);
  if (!raw.empty()) std::memcpy(raw.data(), text.data(), raw.size() * 4);
  CheckStreamedDecode(tok, raw);
  return 0;
}
