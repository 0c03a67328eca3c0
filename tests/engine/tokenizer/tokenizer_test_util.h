// Shared helpers for the tokenizer tests: cached tokenizers for the test models.
#ifndef TEXTGEN_TESTS_ENGINE_TOKENIZER_TOKENIZER_TEST_UTIL_H_
#define TEXTGEN_TESTS_ENGINE_TOKENIZER_TOKENIZER_TEST_UTIL_H_

#include <catch2/catch.hpp>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "engine/format/gguf_file.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/vocab.h"
#include "tests/test_util.h"

namespace textgen::testing {

inline const char kSpmVocab[] = "vocab/ggml-vocab-llama-spm.gguf";
inline const char kGpt2Vocab[] = "vocab/ggml-vocab-gpt-2.gguf";
inline const char kStories260K[] = "stories260K.gguf";
inline const char kStories656K[] = "TinyStories-656K-F32.gguf";
inline const char kHf656KDir[] = "tinystories-656k-hf";

inline VocabData LoadGgufVocab(const std::string& model_name) {
  absl::StatusOr<std::unique_ptr<GgufFile>> gguf = GgufFile::Open(ModelPath(model_name));
  if (!gguf.ok()) FAIL(gguf.status().ToString());
  absl::StatusOr<VocabData> vocab = VocabFromGguf(**gguf);
  if (!vocab.ok()) FAIL(vocab.status().ToString());
  return *std::move(vocab);
}

// Loaded once per process; Tokenizer is immutable so sharing across tests is fine.
inline const Tokenizer& GgufTokenizer(const std::string& model_name) {
  static std::mutex mu;
  static auto* cache = new std::map<std::string, std::unique_ptr<Tokenizer>>();
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = (*cache)[model_name];
  if (slot == nullptr) {
    absl::StatusOr<std::unique_ptr<Tokenizer>> tok = Tokenizer::Create(LoadGgufVocab(model_name));
    if (!tok.ok()) FAIL(tok.status().ToString());
    slot = *std::move(tok);
  }
  return *slot;
}

inline const Tokenizer& HfTokenizer656K() {
  static const Tokenizer* tok = [] {
    absl::StatusOr<VocabData> vocab = VocabFromHfTokenizerJson(ModelPath(kHf656KDir));
    if (!vocab.ok()) FAIL(vocab.status().ToString());
    absl::StatusOr<std::unique_ptr<Tokenizer>> t = Tokenizer::Create(*std::move(vocab));
    if (!t.ok()) FAIL(t.status().ToString());
    return t->release();
  }();
  return *tok;
}

}  // namespace textgen::testing

#endif  // TEXTGEN_TESTS_ENGINE_TOKENIZER_TOKENIZER_TEST_UTIL_H_
