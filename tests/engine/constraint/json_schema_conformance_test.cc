// JSON Schema conformance at the model level (tests/data/json_schema/, MANIFEST.json): a
// random-weight model with Qwen3's vocabulary, written at test time by textgen-synth-model,
// generates under a GrammarConstraint over JsonSchemaToGbnf(schema), greedy and with three
// seeded samplings at temperature 1. Its weights are noise, so only the constraint can make an
// output valid. Each schema is either refused with its manifest error (which names the
// keyword), or every output validates under Debian's python3-jsonschema
// (tests/engine/grammar/validate_json.py, one run for all outputs) and is a sentence of the
// grammar; outputs of bounded schemas (ConvertJsonSchema's max_bytes) end with "stop"
// (kConstraintComplete, or EOS where the grammar could end) within max_bytes + 1 tokens.
//
// Unbounded schemas: noise weights rarely close a string (greedy ones may never), so after
// kFreeTokens tokens of the model's own choosing the test narrows the grammar's mask to one
// token heading to an end (FinishingConstraint). It only ever removes tokens the grammar
// allows, so validity still comes from the grammar alone.
//
// The default run (tag [json_schema_conformance]) covers every schema with the greedy output and
// a representative set (kSampledSchemas: every keyword family and real agent shapes) with the
// three samplings too; [.json_schema_conformance_full] samples every schema.
#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "engine/constraint/grammar_constraint.h"
#include "engine/decoding/generation.h"
#include "engine/grammar/compiled_grammar.h"
#include "engine/grammar/gbnf_parser.h"
#include "engine/grammar/grammar.h"
#include "engine/grammar/grammar_vocab.h"
#include "engine/grammar/json_schema.h"
#include "engine/kv_cache/kv_cache.h"
#include "engine/model/model.h"
#include "tests/test_util.h"

namespace textgen {
namespace json_schema_conformance_test {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// Unbounded schemas: tokens of the model's own choosing, then at most kClosingTokens narrowed
// toward an end.
constexpr int kFreeTokens = 32;
constexpr int kClosingTokens = 2000;

// Sampled (3 seeds) in the default run besides the greedy output of every schema: each keyword
// family (formats, numeric bounds, patterns, lengths, property names, tuples, combinators,
// recursion) and the real agent shapes.
const std::set<std::string> kSampledSchemas = {
    "allof-merge-objects",
    "anyof-objects",
    "boolean-subschemas",
    "const-object",
    "draft7-tuple-additional-items",
    "expression-tree",
    "formats-all",
    "integer-beyond-double",
    "json-patch",
    "linked-list",
    "llama-additional-props",
    "llama-anyof-integer-boolean",
    "llama-int-min-neg123-max-42",
    "llama-regexp",
    "llama-string-min-max-length",
    "min-max-properties",
    "number-exclusive-float",
    "number-or-integer-bounded",
    "oneof-types",
    "openai-get-weather-strict",
    "openai-strict-nullable",
    "pattern-json-escapes",
    "prefix-items-rest",
    "property-names-pattern",
    "pydantic-v2-order",
    "string-lengths-unicode",
    "tool-call-envelope",
    "type-list-all",
};

// The random-weight model (BF16, so that the 152K-row output layer streams half the bytes of
// F32), written and loaded once per process; one compute thread (ctest runs two tests at once).
struct TinyQwen {
  std::unique_ptr<Model> model;
  std::unique_ptr<KvCache> cache;
  std::shared_ptr<const GrammarVocab> vocab;
  std::vector<int32_t> prompt;
  std::vector<std::pair<char, int32_t>> byte_tokens;  // printable ASCII byte -> its token
  std::vector<int32_t> eog;                           // end-of-generation tokens
};

TinyQwen& Tiny() {
  static TinyQwen* tiny = nullptr;
  if (tiny != nullptr) return *tiny;
  const char* bin_dir = std::getenv("TEXTGEN_BIN_DIR");
  REQUIRE(bin_dir != nullptr);
  const std::string path = testing::ScratchDir() + "/tiny-qwen3.gguf";
  const testing::CommandResult r = testing::RunCommand(
      std::string(bin_dir) +
      "/textgen-synth-model --shape custom --arch qwen3 --dim 64 --layers 2 --heads 4 "
      "--kv-heads 2 --head-dim 32 --ffn 128 --ctx 4096 --type bf16 --vocab " +
      testing::ShellQuote(testing::ModelPath("vocab/ggml-vocab-qwen3.gguf")) + " --out " +
      testing::ShellQuote(path) + " 2>&1");
  INFO(r.out);
  REQUIRE(r.exit_code == 0);
  ModelOptions options;
  options.threads = 1;
  auto model = Model::Load(path, options);
  REQUIRE(model.ok());
  auto t = std::make_unique<TinyQwen>();
  t->model = std::move(model).value();
  const ModelConfig& c = t->model->config();
  KvCacheOptions o;
  o.n_layers = c.n_layers;
  o.n_kv_heads = c.n_kv_heads;
  o.head_dim = c.head_dim;
  o.num_blocks = c.n_ctx / o.block_size + 8;
  auto cache = KvCache::Create(o);
  REQUIRE(cache.ok());
  t->cache = std::move(cache).value();
  const Tokenizer& tok = t->model->tokenizer();
  t->vocab = GrammarVocab::Create(tok);
  t->prompt = tok.Encode("Answer in JSON:", true);
  for (char b = '!'; b <= '~'; ++b) {
    const std::vector<int32_t> ids = tok.Encode(std::string(1, b), false);
    if (ids.size() == 1) t->byte_tokens.emplace_back(b, ids[0]);
  }
  for (int32_t id = 0; id < c.n_vocab; ++id) {
    if (tok.IsEog(id)) t->eog.push_back(id);
  }
  tiny = t.release();
  return *tiny;
}

// The grammar's constraint; after `free_steps` tokens of the model's choosing it keeps one
// allowed token, drawn by a seeded generator, heading to an end: an end-of-generation token
// where the text can end, else a single printable byte after which it can end, else at even
// odds a quote, a closing bracket or a token of the grammar's literals (property names, a
// pattern's "foo") or any printable non-space byte. (Drawn, not the model's argmax: greedy
// noise weights can pick "{" over "null" forever.)
class FinishingConstraint : public TokenConstraint {
 public:
  FinishingConstraint(std::shared_ptr<const CompiledGrammar> grammar, const TinyQwen* tiny,
                      std::shared_ptr<const std::vector<int32_t>> literal_tokens, int free_steps,
                      uint64_t seed)
      : inner_(std::move(grammar)),
        tiny_(tiny),
        literal_tokens_(std::move(literal_tokens)),
        free_steps_(free_steps),
        rng_(seed) {}

  std::unique_ptr<TokenConstraint> Clone() const override {
    return std::make_unique<FinishingConstraint>(*this);
  }
  bool Mask(absl::Span<float> logits) const override {
    if (!inner_.Mask(logits)) return false;
    if (steps_ >= free_steps_) Narrow(logits);
    return true;
  }
  bool Accept(int32_t token) override {
    ++steps_;
    return inner_.Accept(token);
  }
  bool Complete() const override { return inner_.Complete(); }

 private:
  void Narrow(absl::Span<float> logits) const {
    constexpr float kNegInf = -std::numeric_limits<float>::infinity();
    const GrammarMatcher& m = inner_.matcher();
    std::vector<int32_t> classes[4];
    if (m.CanEnd()) {
      for (int32_t id : tiny_->eog) {
        if (logits[id] != kNegInf) classes[0].push_back(id);
      }
    }
    for (const auto& [byte, id] : tiny_->byte_tokens) {
      if (logits[id] == kNegInf) continue;
      GrammarMatcher next = m;
      if (!next.AcceptToken(id)) continue;
      const int c = next.CanEnd() ? 1 : (byte == '"' || byte == '}' || byte == ']') ? 2 : 3;
      classes[c].push_back(id);
    }
    for (int32_t id : *literal_tokens_) {
      if (logits[id] != kNegInf) classes[2].push_back(id);
    }
    // Ends first; then, at even odds, a closing byte or literal, or any of these or a byte (a
    // quote or bracket may only be text inside a string, e.g. before a pattern's "@").
    std::vector<int32_t> pick = !classes[0].empty() ? classes[0] : classes[1];
    if (pick.empty()) {
      if (!classes[2].empty() && rng_() % 2 == 0) {
        pick = classes[2];
      } else {
        pick = classes[2];
        pick.insert(pick.end(), classes[3].begin(), classes[3].end());
      }
    }
    if (pick.empty()) return;
    const int32_t id = pick[rng_() % pick.size()];
    const float kept = logits[id];
    std::fill(logits.begin(), logits.end(), kNegInf);
    logits[id] = kept;
  }

  GrammarConstraint inner_;
  const TinyQwen* tiny_;
  std::shared_ptr<const std::vector<int32_t>> literal_tokens_;
  int free_steps_;
  mutable std::mt19937_64 rng_;
  int steps_ = 0;
};

// The tokens of the grammar's literals (their tokenizations), for FinishingConstraint.
std::vector<int32_t> LiteralTokens(const std::string& gbnf, const Tokenizer& tok) {
  absl::StatusOr<gbnf::ParsedGrammar> parsed = gbnf::Parse(gbnf, GrammarLimits{});
  REQUIRE(parsed.ok());
  std::set<int32_t> ids;
  std::vector<const gbnf::Expr*> stack;
  for (const gbnf::Expr& body : parsed->bodies) stack.push_back(&body);
  while (!stack.empty()) {
    const gbnf::Expr* e = stack.back();
    stack.pop_back();
    for (const gbnf::Expr& kid : e->children) stack.push_back(&kid);
    if (e->kind != gbnf::Expr::Kind::kLiteral) continue;
    for (int32_t id : tok.Encode(e->bytes, false)) ids.insert(id);
  }
  return {ids.begin(), ids.end()};
}

struct Output {
  std::string text;
  FinishReason reason = FinishReason::kLength;
  int tokens = 0;
};

// seed 0: greedy; otherwise sampling at temperature 1 with that seed.
// `literal_tokens`: see FinishingConstraint (unbounded schemas).
Output Run(TinyQwen& t, const std::shared_ptr<const CompiledGrammar>& grammar,
           const std::shared_ptr<const std::vector<int32_t>>& literal_tokens, bool bounded,
           int max_new_tokens, uint64_t seed) {
  DecodingOptions o;
  o.max_new_tokens = max_new_tokens;
  if (seed != 0) {
    o.method = DecodingMethod::kSample;
    o.sampling.temperature = 1.0f;
    o.sampling.seed = seed;
  }
  if (bounded) {
    o.constraint = [grammar] { return std::make_unique<GrammarConstraint>(grammar); };
  } else {
    o.constraint = [grammar, &t, literal_tokens, seed] {
      return std::make_unique<FinishingConstraint>(grammar, &t, literal_tokens, kFreeTokens, seed);
    };
  }
  absl::StatusOr<GenerationResult> r =
      Generate(t.model->lm(), t.model->tokenizer(), *t.cache, t.prompt, o);
  if (!r.ok()) FAIL(r.status().ToString());
  if (std::getenv("TEXTGEN_CONFORMANCE_IDS") != nullptr) {
    for (int32_t id : r->hypotheses[0].ids) {
      std::printf("%d:%s ", id,
                  nlohmann::json(std::string(t.vocab->bytes(id)))
                      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
                      .c_str());
    }
    std::printf("\n");
  }
  return {r->hypotheses[0].text, r->finish_reason, r->stats.generated_tokens};
}

std::string Read(const fs::path& p) { return testing::ReadFile(p.string()); }

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

struct Counts {
  int schemas = 0, accepted = 0, bounded = 0, refused = 0, outputs = 0, by_eos = 0;
  std::map<std::string, int> refused_by;
};

// Every schema of the corpus: refused ones against the manifest, accepted ones generated
// (greedy; with seeds 1-3 too where `sampled(name)`) and validated in one validator run.
Counts CheckCorpus(bool (*sampled)(const std::string&)) {
  const fs::path dir = fs::path(testing::SourceDir()) / "tests/data/json_schema";
  const nlohmann::json manifest = nlohmann::json::parse(Read(dir / "MANIFEST.json"));
  std::map<std::string, fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() == ".json" && entry.path().filename() != "MANIFEST.json") {
      files[entry.path().stem().string()] = entry.path();
    }
  }
  CHECK(files.size() == manifest["schemas"].size());
  for (const std::string& name : kSampledSchemas) {
    INFO(name);
    CHECK(files.count(name) == 1);
  }
  TinyQwen& t = Tiny();
  const std::string scratch = testing::ScratchDir();
  std::string validate =
      "/usr/bin/python3 " +
      testing::ShellQuote(testing::SourceDir() + "/tests/engine/grammar/validate_json.py");
  // Debugging: TEXTGEN_CONFORMANCE_VERBOSE=1 prints every output; TEXTGEN_CONFORMANCE_ONLY=S
  // runs only the schemas whose name contains S.
  const char* verbose = std::getenv("TEXTGEN_CONFORMANCE_VERBOSE");
  const char* only = std::getenv("TEXTGEN_CONFORMANCE_ONLY");
  Counts n;
  for (const auto& [name, path] : files) {
    if (only != nullptr && name.find(only) == std::string::npos) continue;
    INFO(name);
    REQUIRE(manifest["schemas"].contains(name));
    const nlohmann::json& expect = manifest["schemas"][name];
    const auto schema = nlohmann::ordered_json::parse(Read(path));
    ++n.schemas;
    absl::StatusOr<std::string> gbnf = JsonSchemaToGbnf(schema);
    if (expect["expect"] == "refused") {
      REQUIRE_FALSE(gbnf.ok());
      const std::string error(gbnf.status().message());
      const std::string kind = expect["kind"];
      INFO(error);
      CHECK(gbnf.status().code() == absl::StatusCode::kInvalidArgument);
      CHECK(error.rfind(expect["error"].get<std::string>(), 0) == 0);
      if (kind != "invalid" && kind != "contradiction" && kind != "left recursion") {
        CHECK(error.find("\"" + kind + "\"") != std::string::npos);  // names the keyword
      }
      ++n.refused;
      ++n.refused_by[kind];
      continue;
    }
    REQUIRE(expect["expect"] == "grammar");
    if (!gbnf.ok()) FAIL(gbnf.status().ToString());
    absl::StatusOr<JsonSchemaGrammar> info = ConvertJsonSchema(schema, "root");
    REQUIRE(info.ok());
    const bool bounded = info->max_bytes.has_value();
    absl::StatusOr<std::shared_ptr<const Grammar>> parsed = ParseGbnf(*gbnf);
    REQUIRE(parsed.ok());
    absl::StatusOr<std::shared_ptr<const CompiledGrammar>> compiled =
        CompiledGrammar::Compile(*parsed, t.vocab);
    REQUIRE(compiled.ok());
    ++n.accepted;
    n.bounded += bounded;
    // A bounded output is at most max_bytes long, so it ends within max_bytes + 1 tokens (an EOS
    // may follow); bounds past the context (zod-user-profile: 6,664 bytes) get the context.
    const int room = t.model->config().n_ctx - static_cast<int>(t.prompt.size());
    const int budget = bounded ? static_cast<int>(std::min<int64_t>(*info->max_bytes + 1, room))
                               : kFreeTokens + kClosingTokens;
    const auto literal_tokens = std::make_shared<const std::vector<int32_t>>(
        bounded ? std::vector<int32_t>() : LiteralTokens(*gbnf, t.model->tokenizer()));
    nlohmann::json docs = nlohmann::json::array();
    std::vector<uint64_t> seeds = {0};
    if (sampled(name)) seeds.insert(seeds.end(), {1, 2, 3});
    for (uint64_t seed : seeds) {
      const Clock::time_point start = Clock::now();
      const Output out = Run(t, *compiled, literal_tokens, bounded, budget, seed);
      if (verbose != nullptr) {
        std::printf("%s seed %d: %s, %d tokens, %.2f s, %s: %.100s\n", name.c_str(),
                    static_cast<int>(seed), std::string(FinishReasonName(out.reason)).c_str(),
                    out.tokens, Seconds(start), bounded ? "bounded" : "unbounded",
                    out.text.c_str());
        std::fflush(stdout);
      }
      INFO("seed " << seed << ", " << FinishReasonName(out.reason) << " after " << out.tokens
                   << " tokens: " << out.text);
      // Ended by the grammar (complete, or EOS where it could end), never by the budget.
      CHECK((out.reason == FinishReason::kConstraintComplete || out.reason == FinishReason::kEos));
      n.by_eos += out.reason == FinishReason::kEos;
      // The text as the engine returns it is a whole sentence of the grammar.
      GrammarMatcher check(*compiled);
      CHECK(check.AcceptString(out.text));
      CHECK(check.CanEnd());
      docs.push_back(out.text);
    }
    n.outputs += static_cast<int>(docs.size());
    const std::string docs_path = scratch + "/" + name + ".docs.json";
    testing::WriteFile(docs_path,
                       docs.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    validate += " " + testing::ShellQuote(path.string()) + " " + testing::ShellQuote(docs_path);
  }
  const testing::CommandResult r = testing::RunCommand(validate + " 2>&1");
  INFO(r.out);
  CHECK(r.exit_code == 0);
  // One "ok" line per output.
  size_t ok_lines = 0;
  for (size_t at = r.out.find(": ok\n"); at != std::string::npos;
       at = r.out.find(": ok\n", at + 1)) {
    ++ok_lines;
  }
  CHECK(ok_lines == static_cast<size_t>(n.outputs));
  return n;
}

void Report(const Counts& n, Clock::time_point start) {
  std::string by;
  for (const auto& [kind, count] : n.refused_by) by += " " + kind + "=" + std::to_string(count);
  WARN("json schema conformance: " << n.schemas << " schemas, " << n.accepted << " accepted ("
                                   << n.bounded << " bounded), " << n.refused << " refused (" << by
                                   << " ), " << n.outputs << " outputs validated (" << n.by_eos
                                   << " ended by EOS), " << Seconds(start) << " s");
}

// Under sanitizers (a slower build that looks for memory errors, not for more outputs) the
// default run is greedy only: every schema still runs through the model and the matcher.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kUnderSanitizers = true;
#else
constexpr bool kUnderSanitizers = false;
#endif

bool SampledByDefault(const std::string& name) {
  return !kUnderSanitizers && kSampledSchemas.count(name) > 0;
}
bool Always(const std::string&) { return true; }

TEST_CASE("json schema conformance: refused as the manifest says, or every output validates",
          "[constraint][json_schema][json_schema_conformance]") {
  const Clock::time_point start = Clock::now();
  Report(CheckCorpus(SampledByDefault), start);
}

TEST_CASE("json schema conformance, every schema greedy and with three seeds",
          "[constraint][json_schema][.json_schema_conformance_full]") {
  const Clock::time_point start = Clock::now();
  Report(CheckCorpus(Always), start);
}

}  // namespace json_schema_conformance_test
}  // namespace textgen
