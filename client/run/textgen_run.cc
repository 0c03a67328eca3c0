// textgen-run: the offline command-line generator (like llama-cli).
//
//   textgen-run --model PATH (--prompt TEXT | --prompt-ids 1,2,3) [decoding flags] [--json]
//   textgen-run --model PATH --tokenize TEXT [--no-bos] [--json]
//   textgen-run (--chat-template FILE | --model PATH) --messages FILE.json --render [...]
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "client/run/render_chat.h"
#include "engine/decoding/generation.h"
#include "engine/kv_cache/kv_cache.h"
#include "engine/model/model.h"
#include "engine/ops/kernel_select.h"
#include "engine/ops/threading.h"
#include "engine/scheduler/engine.h"
#include "nlohmann/json.hpp"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"

namespace textgen {
namespace {

constexpr char kUsage[] = R"(textgen-run: generate text from a Llama model on the CPU.

Usage:
  textgen-run --model PATH (--prompt TEXT | --prompt-ids 1,2,3) [options]
  textgen-run --model PATH --tokenize TEXT [--no-bos] [--json]
  textgen-run (--chat-template FILE | --model PATH) --messages FILE.json --render
              [--tools FILE.json] [--add-generation-prompt] [--bos-token TEXT]
              [--eos-token TEXT] [--template-kwargs JSON]

Chat template rendering (--render prints exactly the rendered text, exit 0; a template error
is printed to stderr with exit 2):
  --chat-template FILE    Jinja template file (with --model: overrides the model's)
  --messages FILE.json    [{"role": ..., "content": ...}, ...]
  --tools FILE.json       the `tools` list (default: None)
  --add-generation-prompt end with the assistant's turn header
  --bos-token TEXT        bos_token (default with --model: the model's; else not passed)
  --eos-token TEXT        eos_token (likewise)
  --template-kwargs JSON  further template variables, e.g. '{"enable_thinking": false}'

Model and output:
  --model PATH            GGUF file or Hugging Face directory (default:
                          $TEXTGEN_MODELS/stories260K.gguf, else models/stories260K.gguf)
  --prompt TEXT           prompt text (BOS is added when the model's tokenizer asks for it)
  --prompt-ids LIST       prompt as comma-separated token ids, used as given
  --json                  print one JSON object instead of streaming text
  --tokenize TEXT         print the token ids and pieces of TEXT and exit (vocab-only GGUFs work)
  --no-bos                with --tokenize: do not add BOS

Decoding (greedy unless --temperature > 0 or --beams is given):
  --max-new-tokens N      tokens to generate at most (default 256)
  --no-cache              recompute every sequence at each step instead of using the KV cache
  --temperature T         sampling temperature (0 = greedy)
  --top-k K               keep the K most likely tokens (0 = off)
  --top-p P               nucleus sampling mass in (0, 1] (1 = off)
  --min-p P               drop tokens below P times the best probability (0 = off)
  --repetition-penalty R  HF/CTRL penalty on tokens already in the context (1 = off)
  --seed N                random seed: the same seed gives the same tokens
  --beams B               beam search with B beams (1..16)
  --length-penalty A      beam score = cum_logprob / length^A (default 1.0)
  --early-stopping MODE   heuristic (default), early or never
  --num-return N          hypotheses to return (1..beams)
  --stop TEXT             stop when TEXT appears (repeatable); TEXT is not returned
  --ignore-eos            keep generating after EOS
  --top-logprobs N        report the N (<= 20) most likely alternatives per token (with --json)
  --context-overflow M    error (default) or slide: keep --n-keep tokens, drop the oldest rest
  --n-keep N              tokens never dropped by the sliding window (default 0)

Engine:
  --compute bf16|f32      matmul arithmetic: bf16 (fast, default) or f32 (exact, for parity work)
  --threads N             compute threads (default: chosen for the model size)
  --context N             context length to serve, at most the model's (default: the model's)
  --kv-type f32|bf16|auto KV cache element type (default auto: bf16 with --compute bf16, f32
                          with --compute f32)
  --kv-block-size N       tokens per KV cache block (default 16)
  --kv-blocks N           KV cache pool size in blocks (default: enough for the request)
  --verbose               debug logging
  --help                  this text
)";

struct Args {
  std::string model;
  std::optional<std::string> prompt;
  std::optional<std::vector<int32_t>> prompt_ids;
  std::optional<std::string> tokenize;
  RenderChatArgs render;
  bool model_given = false;
  DecodingOptions decoding;
  bool json = false;
  bool bos = true;
  int threads = 0;
  int n_ctx = 0;
  int block_size = 16;
  int kv_blocks = 0;
  bool bf16 = true;
  std::optional<KvType> kv_type;  // unset: AutoKvType of the compute mode
};

[[noreturn]] void Die(const std::string& message) {
  std::fprintf(stderr, "textgen-run: %s\n", message.c_str());
  std::exit(2);
}

int ParseInt(const std::string& flag, const std::string& value, int min) {
  int v = 0;
  if (!absl::SimpleAtoi(value, &v) || v < min) {
    Die(flag + ": expected an integer >= " + std::to_string(min) + ", got '" + value + "'");
  }
  return v;
}

float ParseFloat(const std::string& flag, const std::string& value) {
  float v = 0;
  if (!absl::SimpleAtof(value, &v)) Die(flag + ": expected a number, got '" + value + "'");
  return v;
}

std::string DefaultModel() {
  const char* dir = std::getenv("TEXTGEN_MODELS");
  if (dir != nullptr && *dir != '\0') return std::string(dir) + "/stories260K.gguf";
  return "models/stories260K.gguf";
}

Args ParseArgs(int argc, char** argv) {
  Args a;
  a.model = DefaultModel();
  DecodingOptions& d = a.decoding;
  bool sample = false, beam = false;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) Die(flag + ": missing value");
      return argv[++i];
    };
    if (flag == "--help" || flag == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (flag == "--model") {
      a.model = value();
      a.model_given = true;
    } else if (flag == "--render") {
      a.render.render = true;
    } else if (flag == "--chat-template") {
      a.render.template_path = value();
    } else if (flag == "--messages") {
      a.render.messages_path = value();
    } else if (flag == "--tools") {
      a.render.tools_path = value();
    } else if (flag == "--add-generation-prompt") {
      a.render.add_generation_prompt = true;
    } else if (flag == "--bos-token") {
      a.render.bos_token = value();
    } else if (flag == "--eos-token") {
      a.render.eos_token = value();
    } else if (flag == "--template-kwargs") {
      a.render.kwargs_json = value();
    } else if (flag == "--prompt") {
      a.prompt = value();
    } else if (flag == "--prompt-ids") {
      std::vector<int32_t> ids;
      for (absl::string_view part : absl::StrSplit(value(), ',', absl::SkipWhitespace())) {
        int32_t id = 0;
        if (!absl::SimpleAtoi(part, &id)) {
          Die("--prompt-ids: '" + std::string(part) + "' is not an integer");
        }
        ids.push_back(id);
      }
      a.prompt_ids = std::move(ids);
    } else if (flag == "--tokenize") {
      a.tokenize = value();
    } else if (flag == "--max-new-tokens") {
      d.max_new_tokens = ParseInt(flag, value(), 1);
    } else if (flag == "--no-cache") {
      d.use_cache = false;
    } else if (flag == "--temperature") {
      d.sampling.temperature = ParseFloat(flag, value());
      sample = d.sampling.temperature != 0.0f;
    } else if (flag == "--top-k") {
      d.sampling.top_k = ParseInt(flag, value(), 0);
    } else if (flag == "--top-p") {
      d.sampling.top_p = ParseFloat(flag, value());
    } else if (flag == "--min-p") {
      d.sampling.min_p = ParseFloat(flag, value());
    } else if (flag == "--repetition-penalty") {
      d.sampling.repetition_penalty = ParseFloat(flag, value());
    } else if (flag == "--seed") {
      uint64_t seed = 0;
      std::string v = value();
      if (!absl::SimpleAtoi(v, &seed)) Die("--seed: expected an unsigned integer, got '" + v + "'");
      d.sampling.seed = seed;
    } else if (flag == "--beams") {
      d.beam.num_beams = ParseInt(flag, value(), 0);
      beam = true;
    } else if (flag == "--length-penalty") {
      d.beam.length_penalty = ParseFloat(flag, value());
    } else if (flag == "--early-stopping") {
      std::string v = value();
      if (v == "heuristic") {
        d.beam.early_stopping = EarlyStopping::kHeuristic;
      } else if (v == "early") {
        d.beam.early_stopping = EarlyStopping::kEarly;
      } else if (v == "never") {
        d.beam.early_stopping = EarlyStopping::kNever;
      } else {
        Die("--early-stopping: expected heuristic, early or never, got '" + v + "'");
      }
    } else if (flag == "--num-return") {
      d.beam.num_return_sequences = ParseInt(flag, value(), 0);
    } else if (flag == "--stop") {
      d.stop.push_back(value());
    } else if (flag == "--ignore-eos") {
      d.ignore_eos = true;
    } else if (flag == "--top-logprobs") {
      d.top_logprobs = ParseInt(flag, value(), 0);
    } else if (flag == "--context-overflow") {
      std::string v = value();
      if (v != "error" && v != "slide") {
        Die("--context-overflow: expected error or slide, got '" + v + "'");
      }
      d.context_overflow = v == "slide" ? ContextOverflow::kSlide : ContextOverflow::kError;
    } else if (flag == "--n-keep") {
      d.n_keep = ParseInt(flag, value(), 0);
    } else if (flag == "--json") {
      a.json = true;
    } else if (flag == "--no-bos") {
      a.bos = false;
    } else if (flag == "--compute") {
      std::string v = value();
      if (v != "f32" && v != "bf16") Die("--compute: expected f32 or bf16, got '" + v + "'");
      a.bf16 = v == "bf16";
    } else if (flag == "--kv-type") {
      std::string v = value();
      if (v == "auto") {
        a.kv_type.reset();
      } else if (v == "f32" || v == "bf16") {
        a.kv_type = v == "bf16" ? KvType::kBf16 : KvType::kF32;
      } else {
        Die("--kv-type: expected f32, bf16 or auto, got '" + v + "'");
      }
    } else if (flag == "--threads") {
      a.threads = ParseInt(flag, value(), 1);
    } else if (flag == "--context") {
      a.n_ctx = ParseInt(flag, value(), 1);
    } else if (flag == "--kv-block-size") {
      a.block_size = ParseInt(flag, value(), 1);
    } else if (flag == "--kv-blocks") {
      a.kv_blocks = ParseInt(flag, value(), 1);
    } else if (flag == "--verbose") {
      spdlog::set_level(spdlog::level::debug);
    } else {
      Die("unknown flag '" + flag + "' (see --help)");
    }
  }
  if (a.render.render) {
    if (a.model_given) a.render.model_path = a.model;
    return a;
  }
  if (!a.tokenize && a.prompt.has_value() == a.prompt_ids.has_value()) {
    Die("give exactly one of --prompt and --prompt-ids (or --tokenize)");
  }
  if (beam && sample) Die("--beams and --temperature > 0 cannot be combined");
  d.method = beam     ? DecodingMethod::kBeam
             : sample ? DecodingMethod::kSample
                      : DecodingMethod::kGreedy;
  return a;
}

int RunTokenize(const Args& a) {
  auto tokenizer = LoadTokenizer(a.model);
  if (!tokenizer.ok()) Die(std::string(tokenizer.status().message()));
  const Tokenizer& tok = **tokenizer;
  std::vector<int32_t> ids = tok.Encode(*a.tokenize, a.bos && tok.add_bos());
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
  auto result = Generate(m.llama(), tok, **cache, prompt, a.decoding, sink);
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
  if (args.render.render) return textgen::RenderChatMain(args.render);
  return args.tokenize ? textgen::RunTokenize(args) : textgen::RunGenerate(args);
}
