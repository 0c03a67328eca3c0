// Constrained decoding cost: per generated token, GrammarMatcher::FillNextTokenMask +
// AcceptToken while "generating" JSON documents (tokenized as the model would emit them), on real
// vocabularies; plus vocabulary preparation and grammar parse + compile times.
//
// Usage: grammar-bench [--models DIR] [--vocab FILE]... [--docs N]
//   DIR defaults to $TEXTGEN_MODELS or ../shared/models; FILE is relative to DIR (default: the
//   Qwen3, Llama 3.1 and Gemma 3 vocabularies). N: documents per measured set (default 20).
//
// Cold: a fresh CompiledGrammar (empty mask cache), the first document. Warm: after N documents
// filled the cache, N other documents (different strings, lengths and whitespace).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "engine/format/gguf_file.h"
#include "engine/grammar/compiled_grammar.h"
#include "engine/grammar/grammar_matcher.h"
#include "engine/grammar/grammar_vocab.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/engine/grammar/test_grammars.h"

namespace textgen {
namespace {

using Clock = std::chrono::steady_clock;

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

const char* const kWords[] = {
    "alpha",  "Bravo",  "charlie", "delta-echo", "foxtrot",  "Golf",    "hotel", "India",
    "juliet", "kilo",   "lima",    "mike's",     "november", "Oscar",   "papa",  "quebec",
    "romeo",  "sierra", "tango",   "uniform",    "victor",   "whiskey", "x-ray", "yankee",
    "zulu",   "Zürich", "東京",    "café",       "naïve",    "O'Brien", "42",    "2024-05-01"};

std::string Words(std::mt19937& rng, int min_words, int max_words) {
  int n = min_words + static_cast<int>(rng() % (max_words - min_words + 1));
  std::string s;
  for (int i = 0; i < n; ++i) {
    if (i > 0) s += ' ';
    s += kWords[rng() % (sizeof(kWords) / sizeof(kWords[0]))];
  }
  return s;
}

// A document of kPersonSchemaGbnf: compact, spaced or pretty-printed.
std::string PersonDoc(std::mt19937& rng) {
  int style = static_cast<int>(rng() % 3);
  std::string nl = style == 2 ? "\n  " : "", sp = style == 0 ? "" : " ";
  std::string end = style == 2 ? "\n" : "";
  auto kv = [&](const std::string& k, const std::string& v) {
    return nl + "\"" + k + "\":" + sp + v;
  };
  auto str = [](const std::string& s) { return "\"" + s + "\""; };
  std::string tags = "[";
  int n_tags = static_cast<int>(rng() % 5);
  for (int i = 0; i < n_tags; ++i) tags += (i ? "," + sp : "") + str(Words(rng, 1, 2));
  tags += "]";
  const char* status[] = {"active", "inactive", "pending"};
  std::string addr = "{" + sp + "\"street\":" + sp + str(Words(rng, 0, 4)) + "," + sp +
                     "\"city\":" + sp + str(Words(rng, 1, 2));
  if (rng() % 2) addr += "," + sp + "\"zip\":" + sp + str(std::to_string(10000 + rng() % 89999));
  addr += sp + "}";
  return "{" + kv("name", str(Words(rng, 1, 3))) + "," + kv("age", std::to_string(rng() % 151)) +
         "," + kv("status", str(status[rng() % 3])) + "," +
         kv("email", str(Words(rng, 1, 1) + "@example.com")) + "," + kv("tags", tags) + "," +
         kv("address", addr) + end + "}";
}

// A free-form JSON value (objects, arrays, strings, numbers, literals), nested up to `depth`.
std::string JsonValue(std::mt19937& rng, int depth) {
  int kind = static_cast<int>(rng() % (depth > 0 ? 6 : 4));
  switch (kind) {
    case 0:
      return "\"" + Words(rng, 1, 12) + "\"";
    case 1:
      return std::to_string(static_cast<int>(rng() % 100000) - 500);
    case 2:
      return rng() % 2 ? "true" : "null";
    case 3:
      return std::to_string(rng() % 1000) + "." + std::to_string(rng() % 1000);
    case 4: {
      std::string s = "[";
      int n = static_cast<int>(rng() % 4);
      for (int i = 0; i < n; ++i) s += (i ? ", " : "") + JsonValue(rng, depth - 1);
      return s + "]";
    }
    default: {
      std::string s = "{";
      int n = 1 + static_cast<int>(rng() % 4);
      for (int i = 0; i < n; ++i) {
        s += (i ? ", \"" : "\"") + Words(rng, 1, 1) + "\": " + JsonValue(rng, depth - 1);
      }
      return s + "}";
    }
  }
}

std::string JsonDoc(std::mt19937& rng) {
  std::string s = "{";
  int n = 2 + static_cast<int>(rng() % 4);
  for (int i = 0; i < n; ++i) {
    s += (i ? ",\n  \"" : "\n  \"") + Words(rng, 1, 1) + std::to_string(i) +
         "\": " + JsonValue(rng, 3);
  }
  return s + "\n}";
}

struct Run {
  int64_t tokens = 0;
  double total_ms = 0, max_ms = 0;
};

// "Generates" `doc`: mask + accept per token. Aborts if the grammar refuses a token.
void Generate(const std::shared_ptr<const CompiledGrammar>& compiled, const Tokenizer& tok,
              const std::string& doc, Run* run) {
  std::vector<int32_t> ids = tok.Encode(doc, /*add_bos=*/false);
  GrammarMatcher m(compiled);
  TokenBitmask mask;
  for (int32_t id : ids) {
    auto t0 = Clock::now();
    m.FillNextTokenMask(&mask);
    bool ok = mask.Test(id) && m.AcceptToken(id);
    double ms = Ms(Clock::now() - t0);
    if (!ok) {
      std::fprintf(stderr, "grammar refused token %d in:\n%s\n", id, doc.c_str());
      std::exit(1);
    }
    run->tokens++;
    run->total_ms += ms;
    run->max_ms = std::max(run->max_ms, ms);
  }
  auto t0 = Clock::now();
  m.FillNextTokenMask(&mask);  // the EOG step
  run->total_ms += Ms(Clock::now() - t0);
  if (!m.CanEnd()) {
    std::fprintf(stderr, "document incomplete for the grammar:\n%s\n", doc.c_str());
    std::exit(1);
  }
}

void BenchGrammar(const char* name, const char* gbnf, std::string (*make_doc)(std::mt19937&),
                  const std::shared_ptr<const GrammarVocab>& vocab, const Tokenizer& tok,
                  int n_docs) {
  // Parse + compile (no masks yet): best of 5.
  double parse_ms = 1e30, compile_ms = 1e30;
  for (int i = 0; i < 5; ++i) {
    auto t0 = Clock::now();
    auto g = ParseGbnf(gbnf);
    auto t1 = Clock::now();
    auto c = CompiledGrammar::Compile(*g, vocab);
    auto t2 = Clock::now();
    if (!g.ok() || !c.ok()) {
      std::fprintf(stderr, "%s: does not compile\n", name);
      std::exit(1);
    }
    parse_ms = std::min(parse_ms, Ms(t1 - t0));
    compile_ms = std::min(compile_ms, Ms(t2 - t1));
  }
  auto compiled = *CompiledGrammar::Compile(*ParseGbnf(gbnf), vocab);
  std::mt19937 rng(12345);
  Run cold_first;
  Generate(compiled, tok, make_doc(rng), &cold_first);
  Run fill;
  for (int i = 1; i < n_docs; ++i) Generate(compiled, tok, make_doc(rng), &fill);
  Run warm;
  for (int i = 0; i < n_docs; ++i) Generate(compiled, tok, make_doc(rng), &warm);
  CompiledGrammar::CacheStats stats = compiled->cache_stats();
  std::printf(
      "| %-6s | %5.2f | %6.2f | %7.1f (%3lld tok) | %6.1f | %6.3f | %6.2f | %5lld | %6.1f |\n",
      name, parse_ms, compile_ms, cold_first.total_ms, static_cast<long long>(cold_first.tokens),
      fill.total_ms, warm.total_ms / std::max<int64_t>(1, warm.tokens), warm.max_ms,
      static_cast<long long>(stats.entries), stats.bytes / 1048576.0);
}

std::string PersonDocFn(std::mt19937& rng) { return PersonDoc(rng); }
std::string JsonDocFn(std::mt19937& rng) { return JsonDoc(rng); }

}  // namespace
}  // namespace textgen

int main(int argc, char** argv) {
  using namespace textgen;
  std::string models =
      std::getenv("TEXTGEN_MODELS") ? std::getenv("TEXTGEN_MODELS") : "../shared/models";
  std::vector<std::string> vocabs;
  int n_docs = 20;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--models" && i + 1 < argc) {
      models = argv[++i];
    } else if (a == "--vocab" && i + 1 < argc) {
      vocabs.push_back(argv[++i]);
    } else if (a == "--docs" && i + 1 < argc) {
      n_docs = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: grammar-bench [--models DIR] [--vocab FILE]... [--docs N]\n");
      return a == "--help" ? 0 : 2;
    }
  }
  if (vocabs.empty()) {
    vocabs = {"vocab/ggml-vocab-qwen3.gguf", "vocab/ggml-vocab-llama3.1.gguf",
              "vocab/ggml-vocab-gemma3.gguf"};
  }
  for (const std::string& v : vocabs) {
    auto gguf = GgufFile::Open(models + "/" + v);
    if (!gguf.ok()) {
      std::fprintf(stderr, "%s: %s\n", v.c_str(), gguf.status().ToString().c_str());
      return 1;
    }
    auto tok = Tokenizer::FromGguf(**gguf);
    if (!tok.ok()) {
      std::fprintf(stderr, "%s: %s\n", v.c_str(), tok.status().ToString().c_str());
      return 1;
    }
    auto t0 = Clock::now();
    auto vocab = GrammarVocab::Create(**tok);
    double vocab_ms = Ms(Clock::now() - t0);
    std::printf(
        "\n%s: %d tokens (%d byte-matchable, longest %d bytes, %zu longer than %d); "
        "GrammarVocab::Create %.1f ms\n\n",
        v.c_str(), vocab->size(), vocab->num_sorted(), vocab->max_token_bytes(),
        vocab->long_tokens().size(), GrammarVocab::kLongTokenBytes, vocab_ms);
    std::printf(
        "| grammar | parse ms | compile ms | cold: 1st doc ms | next %d docs ms | warm ms/token "
        "| warm max ms | cache entries | cache MiB |\n|---|---|---|---|---|---|---|---|---|\n",
        n_docs - 1);
    BenchGrammar("schema", testing::kPersonSchemaGbnf, PersonDocFn, vocab, **tok, n_docs);
    BenchGrammar("json", testing::kJsonGbnf, JsonDocFn, vocab, **tok, n_docs);
  }
  return 0;
}
