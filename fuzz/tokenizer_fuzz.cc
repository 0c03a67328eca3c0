// The tokenizer on arbitrary bytes, for real vocabularies of both kinds (SentencePiece-style and
// byte-level BPE with several pre-tokenizers), read from $TEXTGEN_MODELS/vocab at start.
// Input: byte 0 picks the vocabulary (low bits) and parse_special / add_bos (bits 6, 7); the
// rest is the text. Checks the streamed detokenization agrees with Decode when Decode is valid
// UTF-8 (IncrementalDetokenizer's contract), and decodes the text's bytes read as token ids.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/format/gguf_file.h"
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

std::vector<std::unique_ptr<textgen::Tokenizer>>* tokenizers = nullptr;

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
  tokenizers = new std::vector<std::unique_ptr<textgen::Tokenizer>>();
  for (const char* name : kVocabs) {
    const std::string path = std::string(models) + "/vocab/" + name;
    auto gguf = textgen::GgufFile::Open(path);
    auto tok = gguf.ok() ? textgen::Tokenizer::FromGguf(**gguf) : gguf.status();
    if (!tok.ok()) {
      std::fprintf(stderr, "fuzz_tokenizer: %s\n", std::string(tok.status().message()).c_str());
      std::exit(2);
    }
    tokenizers->push_back(*std::move(tok));
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const textgen::Tokenizer& tok = *(*tokenizers)[(data[0] & 0x3f) % tokenizers->size()];
  const bool parse_special = (data[0] & 0x40) != 0;
  const bool add_bos = (data[0] & 0x80) != 0;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);

  std::vector<int32_t> ids = tok.Encode(text, add_bos, parse_special);
  for (int32_t id : ids) {
    if (id < 0 || id >= tok.vocab_size()) std::abort();
  }
  CheckStreamedDecode(tok, ids);

  // Arbitrary ids, out-of-range ones included.
  std::vector<int32_t> raw(text.size() / 4);
  if (!raw.empty()) std::memcpy(raw.data(), text.data(), raw.size() * 4);
  CheckStreamedDecode(tok, raw);
  return 0;
}
