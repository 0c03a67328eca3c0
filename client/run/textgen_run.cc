// textgen-run: the offline command-line generator (like llama-cli).
//
//   textgen-run --model PATH (--prompt TEXT | --prompt-ids 1,2,3) [decoding flags] [--json]
//   textgen-run --model PATH --tokenize TEXT [--no-bos] [--parse-special] [--json]
//   textgen-run (--chat-template FILE | --model PATH) --messages FILE.json --render [...]
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "cli/flags.h"
#include "client/run/render_chat.h"
#include "engine/decoding/generation.h"
#include "engine/kv_cache/kv_cache.h"
#include "engine/model/arch.h"
#include "engine/model/model.h"
#include "engine/ops/kernel_calibration.h"
#include "engine/ops/kernel_select.h"
#include "engine/ops/threading.h"
#include "engine/scheduler/engine.h"
#include "nlohmann/json.hpp"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"

namespace textgen {
namespace {

constexpr char kDescription[] = R"(textgen-run: generate text from a Llama model on the CPU.

Usage:
  textgen-run --model PATH (--prompt TEXT | --prompt-ids 1,2,3) [options]
  textgen-run --model PATH --tokenize TEXT [--no-bos] [--parse-special] [--json]
  textgen-run (--chat-template FILE | --model PATH) --messages FILE.json --render
              [--tools FILE.json] [--add-generation-prompt] [--bos-token TEXT]
              [--eos-token TEXT] [--template-kwargs JSON]
  textgen-run --list-architectures)";

struct Args {
  std::string model;
  std::optional<std::string> prompt;
  std::optional<std::vector<int32_t>> prompt_ids;
  std::optional<std::string> tokenize;
  RenderChatArgs render;
  DecodingOptions decoding;
  bool json = false;
  bool bos = true;
  bool parse_special = false;  // --tokenize: special-token texts become their ids
  bool list_architectures = false;
  int threads = 0;
  int n_ctx = 0;
  int block_size = 16;
  int kv_blocks = 0;
  bool bf16 = true;
  bool batch_invariant = ops::BatchInvariantByDefault();
  std::optional<ops::KernelSelectMode> kernel_select;  // --kernel-select
  std::optional<KvType> kv_type;                       // unset: AutoKvType of the compute mode
};

[[noreturn]] void Die(const std::string& message) {
  std::fprintf(stderr, "textgen-run: %s\n", message.c_str());
  std::exit(2);
}

std::string DefaultModel() {
  const char* dir = std::getenv("TEXTGEN_MODELS");
  if (dir != nullptr && *dir != '\0') return std::string(dir) + "/stories260K.gguf";
  return "models/stories260K.gguf";
}

constexpr int kIntMax = std::numeric_limits<int>::max();

void AddRenderFlags(cli::FlagSet& f, RenderChatArgs& r) {
  f.SetGroup("Chat template rendering (exit 0 with exactly the text, 2 on a template error)");
  f.Flag("--render", &r.render, "render --messages with the chat template and exit");
  f.Add("--chat-template", &r.template_path, cli::Text(), "FILE",
        "Jinja template file (with --model: overrides the model's)");
  f.Add("--messages", &r.messages_path, cli::Text(), "FILE.json",
        "[{\"role\": ..., \"content\": ...}, ...]");
  f.Add("--tools", &r.tools_path, cli::Text(), "FILE.json", "the `tools` list (default: None)");
  f.Flag("--add-generation-prompt", &r.add_generation_prompt,
         "end with the assistant's turn header");
  f.AddWith<std::string>("--bos-token", cli::Text(), "TEXT",
                         "bos_token (default with --model: the model's; else not passed)",
                         [&r](const std::string& v) { r.bos_token = v; });
  f.AddWith<std::string>("--eos-token", cli::Text(), "TEXT", "eos_token (likewise)",
                         [&r](const std::string& v) { r.eos_token = v; });
  f.Add("--template-kwargs", &r.kwargs_json, cli::Text(), "JSON",
        "further template variables, e.g. '{\"enable_thinking\": false}'");
}

void AddModelFlags(cli::FlagSet& f, Args& a) {
  f.SetGroup("Model and output");
  f.Add("--model", &a.model, cli::Text(), "PATH",
        "GGUF file or Hugging Face directory (default:\n$TEXTGEN_MODELS/stories260K.gguf, else "
        "models/stories260K.gguf)");
  f.AddWith<std::string>("--prompt", cli::Text(), "TEXT",
                         "prompt text (BOS is added when the model's tokenizer asks for it)",
                         [&a](const std::string& v) { a.prompt = v; });
  f.AddWith<std::vector<int32_t>>("--prompt-ids", cli::IntList(), "LIST",
                                  "prompt as comma-separated token ids, used as given",
                                  [&a](std::vector<int32_t> ids) { a.prompt_ids = ids; });
  f.Flag("--json", &a.json, "print one JSON object instead of streaming text");
  f.AddWith<std::string>("--tokenize", cli::Text(), "TEXT",
                         "print the token ids and pieces of TEXT and exit (vocab-only GGUFs work)",
                         [&a](const std::string& v) { a.tokenize = v; });
  f.Flag("--no-bos", "with --tokenize: do not add BOS", [&a] { a.bos = false; });
  f.Flag("--parse-special", &a.parse_special,
         "with --tokenize: text spelling a special token (<|im_start|>,\n<s>, ...) becomes its id, "
         "as in a rendered chat prompt\n(llama.cpp's parse_special)");
  f.Flag("--list-architectures", &a.list_architectures,
         "print the table of supported architectures (Markdown, as in\ndocs/models.md) and exit");
}

void AddSamplingFlags(cli::FlagSet& f, SamplingParams& s) {
  f.Add("--temperature", &s.temperature, cli::Float(), "T", "sampling temperature (0 = greedy)");
  f.Add("--top-k", &s.top_k, cli::Int<int>(0, kIntMax), "K",
        "keep the K most likely tokens (0 = off)");
  f.Add("--top-p", &s.top_p, cli::Float(), "P", "nucleus sampling mass in (0, 1] (1 = off)");
  f.Add("--min-p", &s.min_p, cli::Float(), "P",
        "drop tokens below P times the best probability (0 = off)");
  f.Add("--repetition-penalty", &s.repetition_penalty, cli::Float(), "R",
        "HF/CTRL penalty on tokens already in the context (1 = off)");
  f.AddWith<uint64_t>("--seed", cli::Uint64(), "N",
                      "random seed: the same seed gives the same tokens",
                      [&s](uint64_t seed) { s.seed = seed; });
}

void AddDecodingFlags(cli::FlagSet& f, DecodingOptions& d) {
  f.SetGroup("Decoding (greedy unless --temperature > 0 or --beams is given)");
  f.Add("--max-new-tokens", &d.max_new_tokens, cli::Int<int>(1, kIntMax), "N",
        "tokens to generate at most (default 256)");
  f.Flag("--no-cache", "recompute every sequence at each step instead of using the KV cache",
         [&d] { d.use_cache = false; });
  AddSamplingFlags(f, d.sampling);
  f.Add("--beams", &d.beam.num_beams, cli::Int<int>(0, kIntMax), "B",
        "beam search with B beams (1..16)");
  f.Add("--length-penalty", &d.beam.length_penalty, cli::Float(), "A",
        "beam score = cum_logprob / length^A (default 1.0)");
  f.AddWith<std::string>("--early-stopping", cli::OneOf({"heuristic", "early", "never"}), "MODE",
                         "heuristic (default), early or never", [&d](const std::string& v) {
                           d.beam.early_stopping = v == "early"   ? EarlyStopping::kEarly
                                                   : v == "never" ? EarlyStopping::kNever
                                                                  : EarlyStopping::kHeuristic;
                         });
  f.Add("--num-return", &d.beam.num_return_sequences, cli::Int<int>(0, kIntMax), "N",
        "hypotheses to return (1..beams)");
  f.AddWith<std::string>("--stop", cli::Text(), "TEXT",
                         "stop when TEXT appears (repeatable); TEXT is not returned",
                         [&d](const std::string& v) { d.stop.push_back(v); });
  f.Flag("--ignore-eos", &d.ignore_eos, "keep generating after EOS");
  f.Add("--top-logprobs", &d.top_logprobs, cli::Int<int>(0, kIntMax), "N",
        "report the N (<= 20) most likely alternatives per token (with --json)");
  f.AddWith<std::string>("--context-overflow", cli::OneOf({"error", "slide"}), "M",
                         "error (default) or slide: keep --n-keep tokens, drop the oldest rest",
                         [&d](const std::string& v) {
                           d.context_overflow =
                               v == "slide" ? ContextOverflow::kSlide : ContextOverflow::kError;
                         });
  f.Add("--n-keep", &d.n_keep, cli::Int<int>(0, kIntMax), "N",
        "tokens never dropped by the sliding window (default 0)");
}

void AddEngineFlags(cli::FlagSet& f, Args& a) {
  f.SetGroup("Engine");
  f.AddWith<std::string>("--compute", cli::OneOf({"f32", "bf16"}), "bf16|f32",
                         "matmul arithmetic: bf16 (fast, default) or f32 (exact, for parity work)",
                         [&a](const std::string& v) { a.bf16 = v == "bf16"; });
  // TEXTGEN_BATCH_INVARIANT too, as for textgen-server.
  f.SetEnvPrefix("TEXTGEN_");
  f.Add(
      "--batch-invariant", &a.batch_invariant, cli::AutoOnOff(ops::BatchInvariantByDefault),
      "auto|on|off",
      "on: each row of a batch computed alone, in a fixed order; off:\nprefill through oneDNN "
      "(faster on some CPUs); auto (default): on\nat the avx512, avx512vnni and avx512bf16 kernel "
      "levels, off at\navx2 and amx (docs/kernels.md: Batch invariance)");
  f.AddWith<std::string>(
      "--kernel-select", cli::OneOf({"measure", "table"}), "measure|table",
      "measure (default): after loading, time each weight format's\nkernels at every level this "
      "CPU runs and keep the fastest (only\nformats whose levels give the same bytes); table: the "
      "highest\nlevel (docs/kernels.md: Kernels chosen by measurement)",
      [&a](const std::string& v) {
        a.kernel_select =
            v == "table" ? ops::KernelSelectMode::kTable : ops::KernelSelectMode::kMeasure;
      });
  f.SetEnvPrefix("");
  f.Add("--threads", &a.threads, cli::Int<int>(1, kIntMax), "N",
        "compute threads (default: chosen for the model size)");
  f.Add("--context", &a.n_ctx, cli::Int<int>(1, kIntMax), "N",
        "context length to serve, at most the model's (default: the model's)");
  f.AddWith<std::string>("--kv-type", cli::OneOf({"f32", "bf16", "auto"}), "f32|bf16|auto",
                         "KV cache element type (default auto: bf16 with --compute bf16, f32\n"
                         "with --compute f32)",
                         [&a](const std::string& v) {
                           if (v == "auto") {
                             a.kv_type.reset();
                           } else {
                             a.kv_type = v == "bf16" ? KvType::kBf16 : KvType::kF32;
                           }
                         });
  f.Add("--kv-block-size", &a.block_size, cli::Int<int>(1, kIntMax), "N",
        "tokens per KV cache block (default 16)");
  f.Add("--kv-blocks", &a.kv_blocks, cli::Int<int>(1, kIntMax), "N",
        "KV cache pool size in blocks (default: enough for the request)");
  f.Flag("--verbose", "debug logging", [] { spdlog::set_level(spdlog::level::debug); });
}

Args ParseArgs(int argc, char** argv) {
  Args a;
  a.model = DefaultModel();
  cli::FlagSet f("textgen-run", kDescription, cli::Wording::kExpected);
  AddRenderFlags(f, a.render);
  AddModelFlags(f, a);
  AddDecodingFlags(f, a.decoding);
  AddEngineFlags(f, a);
  f.Parse(argc, argv);
  if (a.list_architectures) return a;
  if (a.render.render) {
    if (f.Given("--model")) a.render.model_path = a.model;
    return a;
  }
  if (!a.tokenize && a.prompt.has_value() == a.prompt_ids.has_value()) {
    f.Fail("give exactly one of --prompt and --prompt-ids (or --tokenize)");
  }
  if (a.parse_special && !a.tokenize) f.Fail("--parse-special works only with --tokenize");
  DecodingOptions& d = a.decoding;
  const bool beam = f.Given("--beams");
  // The default temperature (1) samples only when asked for.
  const bool sample = f.Given("--temperature") && d.sampling.temperature != 0.0f;
  if (beam && sample) f.Fail("--beams and --temperature > 0 cannot be combined");
  d.method = beam     ? DecodingMethod::kBeam
             : sample ? DecodingMethod::kSample
                      : DecodingMethod::kGreedy;
  return a;
}

int RunTokenize(const Args& a) {
  auto tokenizer = LoadTokenizer(a.model);
  if (!tokenizer.ok()) Die(std::string(tokenizer.status().message()));
  const Tokenizer& tok = **tokenizer;
  std::vector<int32_t> ids = tok.Encode(*a.tokenize, a.bos && tok.add_bos(), a.parse_special);
  if (a.json) {
    nlohmann::json j;
    j["ids"] = ids;
    std::vector<std::string> pieces;
    for (int32_t id : ids) pieces.emplace_back(tok.TokenText(id));
    j["pieces"] = pieces;
    std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else {
    for (int32_t id : ids) std::cout << id << "\t'" << tok.TokenText(id) << "'\n";
  }
  return 0;
}

nlohmann::json TokenJson(const GeneratedToken& t) {
  nlohmann::json j = {{"id", t.id}, {"text", t.text}, {"logprob", t.logprob}};
  if (!t.top.empty()) {
    nlohmann::json top = nlohmann::json::array();
    for (const TokenLogprob& c : t.top) top.push_back({{"id", c.id}, {"logprob", c.logprob}});
    j["top_logprobs"] = top;
  }
  return j;
}

int RunGenerate(const Args& a) {
  const absl::StatusOr<ops::KernelChoice> kernels = ops::ChooseKernels();
  if (!kernels.ok()) Die(std::string(kernels.status().message()));
  spdlog::info("{}", ops::DescribeKernels(*kernels));
  spdlog::info("{}", ops::DescribeThreadDefault());
  ModelOptions model_options;
  model_options.threads = a.threads;
  model_options.llama.n_ctx = a.n_ctx;
  if (a.bf16) model_options.llama.linear.compute = ops::LinearCompute::kBf16;
  model_options.llama.linear.batch_invariant = a.batch_invariant;
  model_options.llama.kernel_select = a.kernel_select;
  auto model = Model::Load(a.model, model_options);
  if (!model.ok()) Die(std::string(model.status().message()));
  Model& m = **model;
  const ModelConfig& c = m.config();
  const Tokenizer& tok = m.tokenizer();
  std::vector<int32_t> prompt = a.prompt_ids ? *a.prompt_ids : tok.Encode(*a.prompt, tok.add_bos());

  KvCacheOptions kv;
  kv.n_layers = c.n_layers;
  kv.n_kv_heads = c.n_kv_heads;
  kv.head_dim = c.head_dim;
  kv.block_size = a.block_size;
  kv.type = a.kv_type.value_or(AutoKvType(model_options.llama.linear.compute));
  // Enough for every beam to hold a whole context (blocks are shared, so this is generous).
  const int beams = a.decoding.method == DecodingMethod::kBeam ? a.decoding.beam.num_beams : 1;
  kv.num_blocks = a.kv_blocks > 0
                      ? a.kv_blocks
                      : std::max(1, beams) * ((c.n_ctx + a.block_size - 1) / a.block_size + 1);
  auto cache = KvCache::Create(kv);
  if (!cache.ok()) Die(std::string(cache.status().message()));

  StreamSink sink;
  if (!a.json) {
    if (a.prompt) std::fputs(a.prompt->c_str(), stdout);
    sink = [](const StreamDelta& d) {
      std::fwrite(d.text.data(), 1, d.text.size(), stdout);
      std::fflush(stdout);
    };
  }
  auto result = Generate(m.lm(), tok, **cache, prompt, a.decoding, sink);
  if (!result.ok()) Die(std::string(result.status().message()));
  const GenerationStats& st = result->stats;
  const Hypothesis& best = result->hypotheses.at(0);
  if (!a.json) {
    std::fputs("\n", stdout);
    std::fflush(stdout);  // the summary goes to stderr: keep it after the story
    spdlog::info("{} prompt tokens, {} generated in {:.1f} ms (first token after {:.2f} ms), {}",
                 st.prompt_tokens, st.generated_tokens, st.total_s * 1e3,
                 st.time_to_first_token_s * 1e3, FinishReasonName(result->finish_reason));
    return 0;
  }
  nlohmann::json j;
  j["model"] = c.name;
  if (a.prompt) j["prompt"] = *a.prompt;
  j["prompt_ids"] = prompt;
  j["generated_ids"] = best.ids;
  j["text"] = best.text;
  j["logprobs"] = best.logprobs;
  j["finish_reason"] = std::string(FinishReasonName(result->finish_reason));
  if (a.decoding.top_logprobs > 0) {
    nlohmann::json tokens = nlohmann::json::array();
    for (const GeneratedToken& t : result->tokens) tokens.push_back(TokenJson(t));
    j["tokens"] = tokens;
  }
  nlohmann::json hyps = nlohmann::json::array();
  for (const Hypothesis& h : result->hypotheses) {
    hyps.push_back({{"ids", h.ids},
                    {"text", h.text},
                    {"score", h.score},
                    {"cum_logprob", h.cum_logprob},
                    {"finish_reason", std::string(FinishReasonName(h.finish_reason))}});
  }
  j["hypotheses"] = hyps;
  j["usage"] = {{"prompt_tokens", st.prompt_tokens},
                {"generated_tokens", st.generated_tokens},
                {"peak_kv_blocks", st.peak_kv_blocks},
                {"context_shifts", st.context_shifts},
                {"time_to_first_token_ms", st.time_to_first_token_s * 1e3},
                {"total_ms", st.total_s * 1e3}};
  std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  return 0;
}

}  // namespace
}  // namespace textgen

int main(int argc, char** argv) {
  spdlog::set_default_logger(spdlog::stderr_color_mt("textgen-run"));
  spdlog::set_pattern("[%H:%M:%S.%e] [%^%l%$] %v");
  textgen::Args args = textgen::ParseArgs(argc, argv);
  if (args.list_architectures) {
    std::fputs(textgen::ArchitectureTable().c_str(), stdout);
    return 0;
  }
  if (args.render.render) return textgen::RenderChatMain(args.render);
  return args.tokenize ? textgen::RunTokenize(args) : textgen::RunGenerate(args);
}
