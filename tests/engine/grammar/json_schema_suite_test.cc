// The JSON Schema conformance suite (tests/data/json_schema/, MANIFEST.json): llama.cpp's own
// test schemas and real agent shapes. Each schema is either refused with the error its
// manifest entry names, or converted; then documents are generated the way a model with noise
// weights would under the constraint (random walks over the Qwen3 vocabulary with the
// grammar's GrammarMatcher: a greedy one and three seeded ones) and every document must
// validate under Debian's python3-jsonschema (validate_json.py). For bounded schemas each walk
// must end with IsTerminated() within the grammar's computed byte bound.
#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "engine/grammar/compiled_grammar.h"
#include "engine/grammar/gbnf_parser.h"
#include "engine/grammar/grammar.h"
#include "engine/grammar/grammar_matcher.h"
#include "engine/grammar/grammar_vocab.h"
#include "engine/grammar/json_schema.h"
#include "tests/engine/tokenizer/tokenizer_test_util.h"
#include "tests/test_util.h"

namespace textgen {
namespace json_schema_suite_test {

// Sanitizer builds run several times slower; time bounds scale with them.
// Under sanitizers (looking for memory errors, not coverage) fewer walks and mutations.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr double kSecond = 5.0;
constexpr uint64_t kWalks = 2;
constexpr int kMutations = 5;
#else
constexpr double kSecond = 1.0;
constexpr uint64_t kWalks = 4;  // the greedy one and three seeded ones
constexpr int kMutations = 20;
#endif

constexpr int kExploreSteps = 48;  // unbounded schemas: free steps before heading to the end
constexpr int kMaxSteps = 4000;

struct Walk {
  std::string text;
  bool complete = false;    // CanEnd (or terminated) when the walk stopped
  bool terminated = false;  // IsTerminated when the walk stopped
  int steps = 0;
};

// The id of the k-th allowed token (k < mask.Count()).
int32_t NthSet(const TokenBitmask& mask, int32_t k) {
  const auto words = mask.words();
  for (size_t w = 0; w < words.size(); ++w) {
    const int32_t n = __builtin_popcountll(words[w]);
    if (k >= n) {
      k -= n;
      continue;
    }
    uint64_t bits = words[w];
    for (int32_t i = 0; i < k; ++i) bits &= bits - 1;
    return static_cast<int32_t>(w * 64 + __builtin_ctzll(bits));
  }
  return -1;
}

// The texts a grammar is made of, for walks heading to an end: its literals and the first code
// point of each character-class range (whitespace-only ones left out).
std::vector<std::string> GrammarUnits(const std::string& gbnf) {
  absl::StatusOr<gbnf::ParsedGrammar> parsed = gbnf::Parse(gbnf, GrammarLimits{});
  REQUIRE(parsed.ok());
  std::vector<std::string> units;
  std::vector<const gbnf::Expr*> stack;
  for (const gbnf::Expr& body : parsed->bodies) stack.push_back(&body);
  while (!stack.empty()) {
    const gbnf::Expr* e = stack.back();
    stack.pop_back();
    for (const gbnf::Expr& kid : e->children) stack.push_back(&kid);
    if (e->kind == gbnf::Expr::Kind::kLiteral) units.push_back(e->bytes);
    if (e->kind == gbnf::Expr::Kind::kClass && !e->negated) {
      for (const auto& [lo, hi] : e->ranges) {
        std::string u;
        if (lo < 0x80) {
          u = std::string(1, static_cast<char>(lo));
        } else if (lo < 0x800) {
          u = {static_cast<char>(0xC0 | (lo >> 6)), static_cast<char>(0x80 | (lo & 0x3F))};
        } else {
          continue;  // ASCII and two-byte representatives are enough to end a text
        }
        units.push_back(u);
      }
    }
  }
  std::sort(units.begin(), units.end());
  units.erase(std::unique(units.begin(), units.end()), units.end());
  units.erase(std::remove_if(units.begin(), units.end(),
                             [](const std::string& u) {
                               return u.find_first_not_of(" \n\t\r") == std::string::npos;
                             }),
              units.end());
  return units;
}

// seed 0: the greedy walk (the lowest allowed id); otherwise uniformly random allowed tokens.
// A bounded grammar (max_bytes) is walked freely to its end. Otherwise, after kExploreSteps the
// walk heads for an end: it stops where the text is complete, else adds a grammar unit (see
// GrammarUnits): one that completes the text, else a closing quote, else a random one the
// grammar takes here; else a random allowed token.
Walk RandomWalk(const std::shared_ptr<const CompiledGrammar>& compiled,
                const std::vector<std::string>& units, uint64_t seed, bool bounded) {
  const GrammarVocab& vocab = *compiled->vocab();
  GrammarMatcher m(compiled);
  std::mt19937_64 rng(seed);
  TokenBitmask mask;
  Walk w;
  for (; w.steps < kMaxSteps; ++w.steps) {
    if (m.IsTerminated()) break;
    if (!bounded && w.steps >= kExploreSteps) {
      if (m.CanEnd()) break;
      // Units that complete the text; else a closing quote (one after which , : } or ] fits);
      // else any unit the grammar takes here.
      std::vector<const std::string*> ending, closing, any;
      for (const std::string& u : units) {
        GrammarMatcher next = m;
        if (!next.AcceptString(u)) continue;
        any.push_back(&u);
        if (next.CanEnd()) ending.push_back(&u);
        if (u != "\"") continue;
        for (const char* c : {",", ":", "}", "]"}) {
          GrammarMatcher after = next;
          if (after.AcceptString(c)) {
            closing.push_back(&u);
            break;
          }
        }
      }
      const std::vector<const std::string*>& best = !ending.empty()    ? ending
                                                    : !closing.empty() ? closing
                                                                       : any;
      if (!best.empty()) {
        const std::string& u = *best[rng() % best.size()];
        REQUIRE(m.AcceptString(u));
        w.text += u;
        continue;
      }
    }
    m.FillNextTokenMask(&mask);
    const int32_t n = mask.Count();
    REQUIRE(n > 0);
    const int32_t pick = seed == 0 ? NthSet(mask, 0) : NthSet(mask, rng() % n);
    REQUIRE(m.AcceptToken(pick));
    w.text += vocab.bytes(pick);
  }
  w.terminated = m.IsTerminated();
  w.complete = m.CanEnd() || w.terminated;
  return w;
}

std::string Read(const std::filesystem::path& p) { return testing::ReadFile(p.string()); }

TEST_CASE(
    "json schema suite: every schema converts or is refused as the manifest says, and "
    "every generated document validates",
    "[grammar][json_schema][suite]") {
  const std::filesystem::path dir =
      std::filesystem::path(testing::SourceDir()) / "tests/data/json_schema";
  const nlohmann::json manifest = nlohmann::json::parse(Read(dir / "MANIFEST.json"));
  std::map<std::string, std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() == ".json" && entry.path().filename() != "MANIFEST.json") {
      files[entry.path().stem().string()] = entry.path();
    }
  }
  for (const auto& [name, value] : manifest["schemas"].items()) {
    INFO(name);
    CHECK(files.count(name) == 1);  // every manifest entry has its schema
  }
  auto vocab = GrammarVocab::Create(testing::GgufTokenizer("vocab/ggml-vocab-qwen3.gguf"));
  const std::string scratch = testing::ScratchDir();
  std::string validate =
      "/usr/bin/python3 " +
      testing::ShellQuote(testing::SourceDir() + "/tests/engine/grammar/validate_json.py");
  int accepted = 0, refused = 0, bounded = 0, documents = 0;
  std::map<std::string, int> refused_by;
  for (const auto& [name, path] : files) {
    INFO(name);
    REQUIRE(manifest["schemas"].contains(name));  // every schema has a manifest entry
    const nlohmann::json& expect = manifest["schemas"][name];
    const auto schema = nlohmann::ordered_json::parse(Read(path));
    absl::StatusOr<JsonSchemaGrammar> g = ConvertJsonSchema(schema, "root");
    if (expect["expect"] == "refused") {
      REQUIRE_FALSE(g.ok());
      const std::string error(g.status().message());
      INFO(error);
      CHECK(error.rfind(expect["error"].get<std::string>(), 0) == 0);
      ++refused;
      ++refused_by[expect["kind"].get<std::string>()];
      continue;
    }
    REQUIRE(expect["expect"] == "grammar");
    if (!g.ok()) FAIL(g.status().ToString());
    ++accepted;
    absl::StatusOr<std::shared_ptr<const Grammar>> parsed = ParseGbnf(g->gbnf);
    if (!parsed.ok()) FAIL(parsed.status().ToString() << "\n" << g->gbnf);
    absl::StatusOr<std::shared_ptr<const CompiledGrammar>> compiled =
        CompiledGrammar::Compile(*parsed, vocab);
    REQUIRE(compiled.ok());
    bounded += g->max_bytes.has_value();
    nlohmann::json docs = nlohmann::json::array();
    const std::vector<std::string> units = GrammarUnits(g->gbnf);
    for (uint64_t seed = 0; seed < kWalks; ++seed) {
      const Walk w = RandomWalk(*compiled, units, seed, g->max_bytes.has_value());
      INFO("seed " << seed << " after " << w.steps << " steps: " << w.text);
      REQUIRE(w.complete);
      if (g->max_bytes) {
        CHECK(w.terminated);
        CHECK(static_cast<int64_t>(w.text.size()) <= *g->max_bytes);
      }
      docs.push_back(w.text);
    }
    documents += static_cast<int>(docs.size());
    const std::string docs_path = scratch + "/" + name + ".docs.json";
    testing::WriteFile(docs_path,
                       docs.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    validate += " " + testing::ShellQuote(path.string()) + " " + testing::ShellQuote(docs_path);
  }
  const testing::CommandResult r = testing::RunCommand(validate + " 2>&1");
  INFO(r.out);
  CHECK(r.exit_code == 0);
  std::string by;
  for (const auto& [kind, n] : refused_by) by += " " + kind + "=" + std::to_string(n);
  WARN("json schema suite: " << files.size() << " schemas, " << accepted << " converted ("
                             << bounded << " bounded), " << refused << " refused (" << by << " ), "
                             << documents << " documents validated");
}

// Bad input never crashes: every suite schema with random parts replaced by random values
// converts or is refused with InvalidArgument, within the time limit, and what converts parses.
TEST_CASE("json schema suite: mutated schemas are converted or refused, never crash",
          "[grammar][json_schema][suite]") {
  const std::filesystem::path dir =
      std::filesystem::path(testing::SourceDir()) / "tests/data/json_schema";
  const std::vector<nlohmann::ordered_json> values = {nullptr,
                                                      true,
                                                      false,
                                                      -1,
                                                      0,
                                                      3,
                                                      2.5,
                                                      1e308,
                                                      -1e308,
                                                      18446744073709551615u,
                                                      "",
                                                      "x",
                                                      "string",
                                                      "integer",
                                                      "#",
                                                      "#/$defs/x",
                                                      "^a+$",
                                                      "(",
                                                      nlohmann::ordered_json::array(),
                                                      nlohmann::ordered_json::object(),
                                                      {1, 2},
                                                      {{"type", "string"}},
                                                      {{"$ref", "#"}},
                                                      {{"anyOf", {true, false}}},
                                                      {{"enum", nlohmann::ordered_json::array()}}};
  std::mt19937_64 rng(20240601);
  int converted = 0, refused = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().filename() == "MANIFEST.json") continue;
    const auto original = nlohmann::ordered_json::parse(Read(entry.path()));
    for (int round = 0; round < kMutations; ++round) {
      nlohmann::ordered_json schema = original;
      // The nodes of the document, then a few of them replaced.
      std::vector<nlohmann::ordered_json*> nodes;
      std::vector<nlohmann::ordered_json*> stack = {&schema};
      while (!stack.empty()) {
        nlohmann::ordered_json* j = stack.back();
        stack.pop_back();
        nodes.push_back(j);
        if (j->is_structured()) {
          for (auto& item : *j) stack.push_back(&item);
        }
      }
      for (int k = 1 + static_cast<int>(rng() % 3); k > 0; --k) {
        *nodes[rng() % nodes.size()] = values[rng() % values.size()];
        nodes.resize(1);  // replaced nodes may be gone: later picks take the root
      }
      const auto t0 = std::chrono::steady_clock::now();
      absl::StatusOr<JsonSchemaGrammar> g = ConvertJsonSchema(schema, "root");
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      INFO(schema.dump());
      CHECK(s < 1.5 * kSecond);
      if (!g.ok()) {
        CHECK(g.status().code() == absl::StatusCode::kInvalidArgument);
        ++refused;
        continue;
      }
      ++converted;
      absl::StatusOr<std::shared_ptr<const Grammar>> parsed = ParseGbnf(g->gbnf);
      if (!parsed.ok()) FAIL(parsed.status().ToString() << "\n" << g->gbnf);
    }
  }
  WARN("mutated schemas: " << converted << " converted, " << refused << " refused");
}

}  // namespace json_schema_suite_test
}  // namespace textgen
