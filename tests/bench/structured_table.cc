#include "tests/bench/structured_table.h"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <system_error>
#include <vector>

#include "absl/strings/str_format.h"
#include "engine/constraint/grammar_constraint.h"
#include "engine/grammar/compiled_grammar.h"
#include "engine/grammar/grammar.h"
#include "engine/grammar/grammar_matcher.h"
#include "engine/grammar/grammar_vocab.h"
#include "engine/grammar/json_schema.h"
#include "engine/ops/threading.h"
#include "tests/bench/bench_util.h"

namespace textgen::bench {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// An agent's next action, as a tool-using agent asks for it: every property required, every
// string bounded (so the constrained run ends by itself).
constexpr char kAgentSchema[] = R"({
  "type": "object",
  "properties": {
    "action": {"enum": ["search", "open_url", "send_email", "create_ticket", "finish"]},
    "query": {"type": "string", "minLength": 1, "maxLength": 80},
    "max_results": {"type": "integer", "minimum": 1, "maximum": 50},
    "tags": {"type": "array", "items": {"type": "string", "maxLength": 20}, "maxItems": 4},
    "reason": {"type": "string", "maxLength": 120},
    "target": {
      "type": "object",
      "properties": {
        "id": {"type": "string", "maxLength": 24},
        "priority": {"type": "integer", "minimum": 0, "maximum": 5}
      },
      "required": ["id", "priority"],
      "additionalProperties": false
    }
  },
  "required": ["action", "query", "max_results", "tags", "reason", "target"],
  "additionalProperties": false
})";

constexpr char kPrompt[] = "Decide the next action and answer with one JSON object:";

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// This thread's CPU time in ms: the constraint's work runs on the calling thread while the
// pool's workers wait, and unlike wall time it does not count the time other processes hold
// the core (a shared 2-core VM).
double ThreadCpuMs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Median milliseconds of `runs` calls of f().
template <typename F>
double MedianMs(int runs, F&& f) {
  std::vector<double> ms;
  for (int r = 0; r < runs; ++r) {
    const Clock::time_point t0 = Clock::now();
    f();
    ms.push_back(Ms(Clock::now() - t0));
  }
  return Median(ms);
}

// A constraint's Mask and Accept, timed (thread CPU ms).
struct ConstraintTimes {
  double ms = 0;
  int tokens = 0;  // Accept calls
};

class TimedConstraint : public TokenConstraint {
 public:
  TimedConstraint(std::unique_ptr<TokenConstraint> inner, ConstraintTimes* times)
      : inner_(std::move(inner)), times_(times) {}
  std::unique_ptr<TokenConstraint> Clone() const override {
    return std::make_unique<TimedConstraint>(inner_->Clone(), times_);
  }
  bool Mask(absl::Span<float> logits) const override {
    const double t0 = ThreadCpuMs();
    const bool any = inner_->Mask(logits);
    times_->ms += ThreadCpuMs() - t0;
    return any;
  }
  bool Accept(int32_t token) override {
    const double t0 = ThreadCpuMs();
    const bool ok = inner_->Accept(token);
    times_->ms += ThreadCpuMs() - t0;
    ++times_->tokens;
    return ok;
  }
  bool Complete() const override { return inner_->Complete(); }

 private:
  std::unique_ptr<TokenConstraint> inner_;
  ConstraintTimes* times_;
};

struct BenchGrammar {
  const char* name;
  std::string gbnf;
  double to_gbnf_ms = 0;
};

std::shared_ptr<const CompiledGrammar> CompileOrDie(const std::string& gbnf,
                                                    const std::shared_ptr<const GrammarVocab>& v) {
  auto g = ParseGbnf(gbnf);
  if (!g.ok()) Die("grammar: " + std::string(g.status().message()));
  auto c = CompiledGrammar::Compile(*g, v);
  if (!c.ok()) Die("grammar: " + std::string(c.status().message()));
  return *c;
}

std::vector<BenchGrammar> Grammars(int runs) {
  const auto schema = nlohmann::ordered_json::parse(kAgentSchema);
  std::vector<BenchGrammar> out(2);
  out[0].name = "agent JSON Schema";
  out[0].to_gbnf_ms = MedianMs(runs, [&] {
    auto g = JsonSchemaToGbnf(schema);
    if (!g.ok()) Die("agent schema: " + std::string(g.status().message()));
    out[0].gbnf = *std::move(g);
  });
  out[1].name = "json_object";
  out[1].to_gbnf_ms = MedianMs(runs, [&] { out[1].gbnf = JsonObjectGbnf(); });
  return out;
}

// Per-token ms of a run after its first token.
double DecodeMsPerToken(const GenerationStats& s) {
  return s.generated_tokens < 2
             ? 0
             : (s.total_s - s.time_to_first_token_s) * 1e3 / (s.generated_tokens - 1);
}

struct Replay {
  double fill_ms = 0, apply_ms = 0, accept_ms = 0;  // per token, medians
};

// The generated ids through a fresh matcher of the (warm) grammar, each step timed in parts.
Replay ReplayIds(const std::shared_ptr<const CompiledGrammar>& compiled,
                 const std::vector<int32_t>& ids, int n_vocab, int runs) {
  std::vector<float> row(n_vocab), logits(n_vocab);
  std::mt19937 rng(1);
  std::normal_distribution<float> noise;
  for (float& x : row) x = noise(rng);
  std::vector<double> fill, apply, accept;
  TokenBitmask mask;
  for (int r = 0; r < runs; ++r) {
    GrammarMatcher m(compiled);
    double f = 0, a = 0, c = 0;
    for (int32_t id : ids) {
      std::copy(row.begin(), row.end(), logits.begin());
      const double t0 = ThreadCpuMs();
      m.FillNextTokenMask(&mask);
      const double t1 = ThreadCpuMs();
      ApplyTokenBitmask(mask, absl::MakeSpan(logits));
      const double t2 = ThreadCpuMs();
      if (!m.AcceptToken(id)) Die("replay: the grammar refused a token it had allowed");
      const double t3 = ThreadCpuMs();
      f += t1 - t0;
      a += t2 - t1;
      c += t3 - t2;
    }
    fill.push_back(f / ids.size());
    apply.push_back(a / ids.size());
    accept.push_back(c / ids.size());
  }
  return {Median(fill), Median(apply), Median(accept)};
}

struct DecodeRow {
  int tokens = 0;
  FinishReason finish = FinishReason::kLength;
  double without_ms = 0, with_ms = 0, cold_with_ms = 0;  // medians (wall)
  double fastest_without_ms = 0;
  double constraint_ms = 0, cold_constraint_ms = 0;  // Mask + Accept per token
  std::vector<int32_t> ids;                          // the constrained output
};

DecodeRow MeasureDecode(Model& m, KvCache& cache, const std::vector<int32_t>& prompt,
                        const std::shared_ptr<const CompiledGrammar>& compiled,
                        const BenchOptions& o) {
  const int room = m.config().n_ctx - static_cast<int>(prompt.size());
  ConstraintTimes times;
  DecodingOptions with;
  with.max_new_tokens = std::max(2, std::min(o.structured_tokens, room));
  with.constraint = [&compiled, &times] {
    return std::make_unique<TimedConstraint>(std::make_unique<GrammarConstraint>(compiled), &times);
  };
  DecodeRow row;
  // Cold: the grammar's mask cache starts empty.
  const GenerationResult cold = RunGeneration(m, cache, prompt, with);
  row.tokens = cold.stats.generated_tokens;
  row.finish = cold.finish_reason;
  row.ids = cold.hypotheses[0].ids;
  row.cold_with_ms = DecodeMsPerToken(cold.stats);
  row.cold_constraint_ms = times.ms / std::max(1, times.tokens);

  DecodingOptions without;
  without.max_new_tokens = std::max(2, row.tokens);
  without.ignore_eos = true;
  std::vector<double> with_ms, without_ms, constraint_ms;
  for (int r = 0; r < o.repeats; ++r) {
    // Alternating which runs first, so that a drift in the machine's speed hits both.
    for (int k = 0; k < 2; ++k) {
      if ((k == 0) == (r % 2 == 0)) {
        without_ms.push_back(DecodeMsPerToken(RunGeneration(m, cache, prompt, without).stats));
      } else {
        times = {};
        const GenerationResult g = RunGeneration(m, cache, prompt, with);
        if (g.hypotheses[0].ids != row.ids) Die("greedy constrained runs differ");
        with_ms.push_back(DecodeMsPerToken(g.stats));
        constraint_ms.push_back(times.ms / std::max(1, times.tokens));
      }
    }
  }
  row.without_ms = Median(without_ms);
  row.fastest_without_ms = *std::min_element(without_ms.begin(), without_ms.end());
  row.with_ms = Median(with_ms);
  row.constraint_ms = Median(constraint_ms);
  return row;
}

// The Qwen2.5-0.5B shape in Q4_K_M, written once (see structured_table.h).
std::string SyntheticQwen(std::string* temp_dir) {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) Die("cannot find this binary's folder: " + ec.message());
  const fs::path synth = exe.parent_path() / "textgen-synth-model";
  const char* cache_dir = std::getenv("TEXTGEN_BENCH_MODELS");
  fs::path dir;
  if (cache_dir != nullptr && *cache_dir != '\0') {
    dir = cache_dir;
    fs::create_directories(dir, ec);
  } else {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern =
        std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/textgen-bench-XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) Die("cannot make a temporary folder");
    dir = pattern;
    *temp_dir = pattern;
  }
  const fs::path path = dir / "qwen2.5-0.5b-q4_k_m.gguf";
  if (fs::exists(path)) return path.string();
  const std::string partial = path.string() + ".partial.gguf";
  const std::string command =
      synth.string() + " --shape qwen2.5-0.5b --type q4_k_m --out '" + partial + "' >&2";
  std::fprintf(stderr, "textgen-bench: writing %s\n", path.c_str());
  if (std::system(command.c_str()) != 0) Die("failed: " + command);
  fs::rename(partial, path, ec);
  if (ec) Die("cannot rename " + partial + ": " + ec.message());
  return path.string();
}

void PrintModelRows(const std::string& path, const std::vector<BenchGrammar>& grammars,
                    const BenchOptions& o) {
  std::unique_ptr<Model> model = LoadModel(path, o);
  Model& m = *model;
  auto cache = MakeCache(m.config(), 1, o);
  const int setup_runs = std::max(5, o.repeats);
  std::shared_ptr<const GrammarVocab> vocab;
  const double vocab_ms =
      MedianMs(setup_runs, [&] { vocab = GrammarVocab::Create(m.tokenizer()); });
  const std::vector<int32_t> prompt = m.tokenizer().Encode(kPrompt, true);
  {  // warm-up: first touch of the weights, kernels
    DecodingOptions d;
    d.max_new_tokens = 8;
    d.ignore_eos = true;
    RunGeneration(m, *cache, prompt, d);
  }
  for (const BenchGrammar& g : grammars) {
    const double compile_ms = MedianMs(setup_runs, [&] { CompileOrDie(g.gbnf, vocab); });
    std::vector<double> first;
    for (int r = 0; r < setup_runs; ++r) {
      GrammarMatcher matcher(CompileOrDie(g.gbnf, vocab));
      TokenBitmask mask;
      first.push_back(MedianMs(1, [&] { matcher.FillNextTokenMask(&mask); }));
    }
    const std::shared_ptr<const CompiledGrammar> compiled = CompileOrDie(g.gbnf, vocab);
    const DecodeRow d = MeasureDecode(m, *cache, prompt, compiled, o);
    const Replay rp = ReplayIds(compiled, d.ids, m.config().n_vocab, setup_runs);
    absl::PrintF(
        "| %s | %d | %s | %d (%s) | %.1f | %.2f | %.2f | %.2f | %.2f | %.2f (cold %.2f) | "
        "%+.1f%% | %.3f (cold %.3f) | %.2f%% | %.3f | %.3f | %.3f |\n",
        DisplayName(m), ops::NumThreads(), g.name, d.tokens, FinishReasonName(d.finish), vocab_ms,
        g.to_gbnf_ms, compile_ms, Median(first), d.without_ms, d.with_ms, d.cold_with_ms,
        100 * (d.with_ms - d.without_ms) / d.without_ms, d.constraint_ms, d.cold_constraint_ms,
        100 * d.constraint_ms / d.fastest_without_ms, rp.fill_ms, rp.apply_ms, rp.accept_ms);
    std::fflush(stdout);
  }
}

}  // namespace

void PrintStructuredTable(const BenchOptions& o) {
  std::vector<std::string> models = o.models;
  std::string temp_dir;
  if (models.empty()) models.push_back(SyntheticQwen(&temp_dir));
  const std::vector<BenchGrammar> grammars = Grammars(std::max(5, o.repeats));
  if (!o.rows_only) {
    absl::PrintF(
        "| model | threads | grammar | tokens (finish) | GrammarVocab ms | schema → GBNF ms | "
        "parse + compile ms | 1st mask (cold) ms | decode ms/token without | with | overhead | "
        "constraint CPU ms/token in run | its share | fill mask | apply mask | accept |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  }
  for (const std::string& path : models) PrintModelRows(path, grammars, o);
  if (!temp_dir.empty()) {
    std::error_code ec;
    fs::remove_all(temp_dir, ec);
  }
}

}  // namespace textgen::bench
