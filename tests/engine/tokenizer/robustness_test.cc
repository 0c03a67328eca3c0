// No input may crash Encode/Decode; results stay well-formed; concurrent use is safe; long
// prompts are fast.
#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "engine/tokenizer/incremental_detokenizer.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/unicode.h"
#include "tests/engine/tokenizer/tokenizer_test_util.h"

namespace textgen {
namespace robustness_test {

using testing::GgufTokenizer;

std::vector<const Tokenizer*> AllTokenizers() {
  return {&GgufTokenizer(testing::kSpmVocab), &GgufTokenizer(testing::kGpt2Vocab),
          &GgufTokenizer(testing::kStories260K), &GgufTokenizer(testing::kStories656K),
          &testing::HfTokenizer656K()};
}

std::string RandomBytes(std::mt19937& rng, size_t n) {
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng() & 0xFF);
  return s;
}

void CheckIdsInRange(const Tokenizer& tok, const std::vector<int32_t>& ids) {
  const bool in_range = std::all_of(ids.begin(), ids.end(),
                                    [&](int32_t id) { return id >= 0 && id < tok.vocab_size(); });
  REQUIRE(in_range);
}

const std::vector<std::string>& NastyInputs() {
  static const auto* inputs = new std::vector<std::string>{
      "",
      std::string("\0", 1),
      std::string("a\0b\0\0c", 6),
      "\x01\x02\x03\x1B[31m\x7F",
      "\x80",
      "\xBF\xBF\x80",
      "\xC0\x80",              // overlong NUL
      "\xC1\xBF",              // overlong
      "\xE0\x80\xAF",          // overlong '/'
      "\xED\xA0\x80",          // UTF-16 surrogate
      "\xF4\x90\x80\x80",      // above U+10FFFF
      "\xF8\x88\x80\x80\x80",  // 5-byte form
      "\xFE\xFF",              // never valid
      "\xE4\xBD",              // truncated at end
      "\xE4\xBD"
      "abc",           // truncated mid-text
      "\xF0\x9F\x98",  // truncated emoji
      "abc\xC3",       // truncated 2-byte
      " \xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7\xE2\x80\x8D"
      "\xF0\x9F\x91\xA6 family",                                   // ZWJ sequence
      "\xF0\x9F\x8F\xB3\xEF\xB8\x8F\xE2\x80\x8D\xF0\x9F\x8C\x88",  // flag ZWJ
      "e\xCC\x81\xCC\x81\xCC\x81",                                 // combining marks
      "\xEF\xBB\xBF"
      "BOM",
      "\xE2\x80\xA8\xE2\x80\xA9\xC2\x85\xC2\xA0\xE3\x80\x80",  // exotic whitespace
      std::string(10000, ' '),
      std::string(10000, '\n'),
      std::string(5000, 'a'),
      "<s></s><unk><|endoftext|><|start_story|><|end_story|><0x41>",
      "'s'S'll'LL 're''''",
      "\xE2\x96\x81\xE2\x96\x81 already escaped",
  };
  return *inputs;
}

TEST_CASE("Encode and Decode survive hostile input", "[tokenizer][robustness]") {
  std::mt19937 rng(42);
  for (const Tokenizer* tok : AllTokenizers()) {
    for (const std::string& text : NastyInputs()) {
      for (bool special : {false, true}) {
        const std::vector<int32_t> ids = tok->Encode(text, /*add_bos=*/true, special);
        CheckIdsInRange(*tok, ids);
        (void)tok->Decode(ids);
      }
    }
    for (int i = 0; i < 200; ++i) {
      const std::string text = RandomBytes(rng, rng() % 64);
      CheckIdsInRange(*tok, tok->Encode(text, false));
    }
  }
}

TEST_CASE("Byte-fallback and byte-level vocabs round-trip arbitrary bytes",
          "[tokenizer][robustness]") {
  std::mt19937 rng(99);
  for (const char* name : {testing::kSpmVocab, testing::kStories260K}) {
    const Tokenizer& tok = GgufTokenizer(name);
    for (const std::string& text : NastyInputs()) {
      // Skip texts spelling special tokens or containing '▁' (both decode differently).
      if (text.find('<') != std::string::npos || text.find("\xE2\x96\x81") != std::string::npos) {
        continue;
      }
      const std::string decoded = tok.Decode(tok.Encode(text, false));
      CHECK(decoded == (text.empty() ? "" : " " + text));
    }
    for (int i = 0; i < 100; ++i) {
      const std::string text = RandomBytes(rng, 1 + rng() % 64);
      CHECK(tok.Decode(tok.Encode(text, false)) == " " + text);
    }
  }
  // Byte-level BPE sees ill-formed input as U+FFFD (as llama.cpp does), so it round-trips
  // exactly the sanitized text.
  const Tokenizer& gpt2 = GgufTokenizer(testing::kGpt2Vocab);
  for (const std::string& text : NastyInputs()) {
    CHECK(gpt2.Decode(gpt2.Encode(text, false)) == SanitizeUtf8(text));
  }
  for (int i = 0; i < 100; ++i) {
    const std::string text = RandomBytes(rng, 1 + rng() % 64);
    CHECK(gpt2.Decode(gpt2.Encode(text, false)) == SanitizeUtf8(text));
  }
}

TEST_CASE("One megabyte of random bytes", "[tokenizer][robustness]") {
  std::mt19937 rng(5);
  const std::string text = RandomBytes(rng, 1 << 20);
  for (const Tokenizer* tok : AllTokenizers()) {
    const auto start = std::chrono::steady_clock::now();
    const std::vector<int32_t> ids = tok->Encode(text, true, true);
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    CheckIdsInRange(*tok, ids);
    IncrementalDetokenizer detok(*tok);
    std::string streamed;
    for (int32_t id : ids) streamed += detok.Add(id);
    streamed += detok.Flush();
    CHECK(IsValidUtf8(streamed));
    WARN("1 MiB random bytes: " << ids.size() << " tokens in " << secs << " s");
  }
}

TEST_CASE("Long prompts encode quickly", "[tokenizer][robustness]") {
  // ~400 KB of English-like text: the queue-based merges are O(n log n), not quadratic.
  std::string text;
  while (text.size() < 400000) {
    text +=
        "Once upon a time, there was a little girl named Lily. She loved to play outside "
        "in the park with her friends, and they'd say: \"Let's go!\" 12345 times.\n";
  }
  for (const Tokenizer* tok : AllTokenizers()) {
    const auto start = std::chrono::steady_clock::now();
    const std::vector<int32_t> ids = tok->Encode(text, true);
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    WARN("400 KB prompt: " << ids.size() << " tokens in " << secs << " s");
    CHECK(secs < 10.0);  // generous: sanitizer builds are slow; an O(n^2) bug takes minutes
    CHECK(tok->Decode(ids) == (tok->model() == VocabModel::kLlama ? " " + text : text));
  }
}

TEST_CASE("Out-of-range ids decode to nothing", "[tokenizer][robustness]") {
  for (const Tokenizer* tok : AllTokenizers()) {
    for (int32_t id : {-1, -100, tok->vocab_size(), tok->vocab_size() + 1, INT32_MAX, INT32_MIN}) {
      CHECK(tok->TokenBytes(id).empty());
      CHECK(tok->TokenText(id).empty());
      CHECK_FALSE(tok->IsControl(id));
      CHECK(tok->token_type(id) == TokenType::kUndefined);
    }
    CHECK(tok->Decode({-1, INT32_MAX, tok->vocab_size()}).empty());
    IncrementalDetokenizer detok(*tok);
    CHECK(detok.Add(-7).empty());
    CHECK(detok.Flush().empty());
  }
}

TEST_CASE("Concurrent Encode and Decode agree with serial results", "[tokenizer][robustness]") {
  std::mt19937 rng(11);
  std::vector<std::string> texts;
  for (int i = 0; i < 50; ++i) texts.push_back(RandomBytes(rng, rng() % 200));
  for (const std::string& t : NastyInputs()) texts.push_back(t);
  for (const Tokenizer* tok : AllTokenizers()) {
    std::vector<std::vector<int32_t>> expected;
    for (const std::string& t : texts) expected.push_back(tok->Encode(t, true));
    std::vector<int> mismatches(4, 0);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        for (int round = 0; round < 3; ++round) {
          for (size_t i = 0; i < texts.size(); ++i) {
            const std::vector<int32_t> ids = tok->Encode(texts[i], true);
            if (ids != expected[i] || tok->Decode(ids) != tok->Decode(expected[i])) {
              ++mismatches[t];
            }
          }
        }
      });
    }
    for (std::thread& th : threads) th.join();
    for (int m : mismatches) CHECK(m == 0);
  }
}

}  // namespace robustness_test
}  // namespace textgen
