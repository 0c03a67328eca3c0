// json-schema-bench: how long the JSON Schema -> grammar path takes per schema:
// JsonSchemaToGbnf (ConvertJsonSchema), ParseGbnf, CompiledGrammar::Compile for a real
// vocabulary, and the first FillNextTokenMask (masks are computed lazily, so the first one is
// part of a request's start), each the median of several runs. Also prints a schema's grammar
// (--print).
//
//   json-schema-bench [--vocab FILE.gguf] [--runs N] [--print] SCHEMA.json...
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "engine/format/gguf_file.h"
#include "engine/grammar/compiled_grammar.h"
#include "engine/grammar/grammar.h"
#include "engine/grammar/grammar_matcher.h"
#include "engine/grammar/grammar_vocab.h"
#include "engine/grammar/json_schema.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/vocab.h"

namespace {

double MedianMs(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

template <typename F>
double TimeMs(F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

int Usage() {
  std::fprintf(stderr,
               "usage: json-schema-bench [--vocab FILE.gguf] [--runs N] [--print] SCHEMA.json...\n"
               "Times JsonSchemaToGbnf, ParseGbnf and CompiledGrammar::Compile per schema.\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace textgen;
  std::string vocab_path;
  int runs = 5;
  bool print = false;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--vocab" && i + 1 < argc) {
      vocab_path = argv[++i];
    } else if (a == "--runs" && i + 1 < argc) {
      runs = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--print") {
      print = true;
    } else if (a == "--help" || a == "-h" || (!a.empty() && a[0] == '-')) {
      return Usage();
    } else {
      files.push_back(a);
    }
  }
  if (files.empty()) return Usage();
  std::shared_ptr<const GrammarVocab> vocab;
  if (!vocab_path.empty()) {
    auto gguf = GgufFile::Open(vocab_path);
    if (!gguf.ok()) return std::fprintf(stderr, "%s\n", gguf.status().ToString().c_str()), 1;
    auto data = VocabFromGguf(**gguf);
    if (!data.ok()) return std::fprintf(stderr, "%s\n", data.status().ToString().c_str()), 1;
    auto tok = Tokenizer::Create(*std::move(data));
    if (!tok.ok()) return std::fprintf(stderr, "%s\n", tok.status().ToString().c_str()), 1;
    vocab = GrammarVocab::Create(**tok);
  }
  if (!print) {
    std::printf(
        "| schema | convert ms | parse ms | compile ms | total ms | first mask ms | rules | GBNF "
        "bytes |\n|---|---:|---:|---:|---:|---:|---:|---:|\n");
  }
  for (const std::string& file : files) {
    std::ifstream in(file);
    std::stringstream ss;
    ss << in.rdbuf();
    nlohmann::ordered_json schema;
    try {
      schema = nlohmann::ordered_json::parse(ss.str());
    } catch (const nlohmann::json::exception& e) {
      std::fprintf(stderr, "%s: %s\n", file.c_str(), e.what());
      continue;
    }
    const std::string name = file.substr(file.find_last_of('/') + 1);
    absl::StatusOr<JsonSchemaGrammar> g = ConvertJsonSchema(schema, "root");
    if (!g.ok()) {
      std::printf(print ? "# %s: %s\n" : "| %s | refused: %s | | | | | | |\n", name.c_str(),
                  std::string(g.status().message()).c_str());
      continue;
    }
    if (print) {
      std::printf("# %s (max %s bytes)\n%s\n", name.c_str(),
                  g->max_bytes ? std::to_string(*g->max_bytes).c_str() : "unbounded",
                  g->gbnf.c_str());
      continue;
    }
    std::vector<double> convert, parse, compile, first_mask;
    bool failed = false;
    for (int r = 0; r < runs && !failed; ++r) {
      convert.push_back(TimeMs([&] { g = ConvertJsonSchema(schema, "root"); }));
      absl::StatusOr<std::shared_ptr<const Grammar>> grammar;
      parse.push_back(TimeMs([&] { grammar = ParseGbnf(g->gbnf); }));
      if (!grammar.ok()) {
        std::printf("| %s | grammar does not parse: %s | | | | | | |\n", name.c_str(),
                    std::string(grammar.status().message()).c_str());
        failed = true;
        break;
      }
      absl::StatusOr<std::shared_ptr<const CompiledGrammar>> compiled;
      compile.push_back(TimeMs([&] { compiled = CompiledGrammar::Compile(*grammar, vocab); }));
      if (vocab != nullptr && compiled.ok()) {
        GrammarMatcher matcher(*compiled);
        TokenBitmask mask;
        first_mask.push_back(TimeMs([&] { matcher.FillNextTokenMask(&mask); }));
      }
    }
    if (failed) continue;
    const double c = MedianMs(convert), p = MedianMs(parse), k = MedianMs(compile);
    std::printf("| %s | %.2f | %.2f | %.2f | %.2f | %.2f | %d | %zu |\n", name.c_str(), c, p, k,
                c + p + k, MedianMs(first_mask), g->rules, g->gbnf.size());
  }
  return 0;
}
