// textgen-run: the offline command-line generator (like llama-cli).
//
//   textgen-run --model PATH (--prompt TEXT | --prompt-ids 1,2,3) [--max-new-tokens N]
//               [--no-cache] [--json] [--threads N]
//   textgen-run --model PATH --tokenize TEXT [--no-bos] [--json]
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "engine/decoding/generator.h"
#include "engine/kv_cache/kv_cache.h"
#include "engine/model/model.h"
#include "engine/tokenizer/incremental_detokenizer.h"
#include "nlohmann/json.hpp"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"

namespace textgen {
namespace {

constexpr char kUsage[] = R"(textgen-run: generate text from a Llama model on the CPU.

Usage:
  textgen-run --model PATH (--prompt TEXT | --prompt-ids 1,2,3) [options]
  textgen-run --model PATH --tokenize TEXT [--no-bos] [--json]

Options:
  --model PATH          GGUF file or Hugging Face directory (default: $TEXTGEN_MODELS/stories260K.gguf,
                        else models/stories260K.gguf)
  --prompt TEXT         prompt text (BOS is added when the model's tokenizer asks for it)
  --prompt-ids LIST     prompt as comma-separated token ids, used as given
  --max-new-tokens N    tokens to generate at most (default 256)
  --no-cache            recompute the whole sequence at every step instead of using the KV cache
  --json                print one JSON object instead of streaming text
  --tokenize TEXT       print the token ids and pieces of TEXT and exit (vocab-only GGUFs work)
  --no-bos              with --tokenize: do not add BOS
  --compute f32|bf16    matmul arithmetic: f32 (exact, default) or bf16 (fast; weights and
                        activations rounded to bfloat16, F32 accumulation)
  --threads N           compute threads (default: chosen for the model size)
  --kv-block-size N     tokens per KV cache block (default 16)
  --verbose             debug logging
  --help                this text
)";

struct Args {
  std::string model;
  std::optional<std::string> prompt;
  std::optional<std::vector<int32_t>> prompt_ids;
  std::optional<std::string> tokenize;
  int max_new_tokens = 256;
  bool use_cache = true;
  bool json = false;
  bool bos = true;
  int threads = 0;
  int block_size = 16;
  bool bf16 = false;
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

std::string DefaultModel() {
  const char* dir = std::getenv("TEXTGEN_MODELS");
  if (dir != nullptr && *dir != '\0') return std::string(dir) + "/stories260K.gguf";
  return "models/stories260K.gguf";
}

Args ParseArgs(int argc, char** argv) {
  Args a;
  a.model = DefaultModel();
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
    } else if (flag == "--prompt") {
      a.prompt = value();
    } else if (flag == "--prompt-ids") {
      std::vector<int32_t> ids;
      for (absl::string_view part : absl::StrSplit(value(), ',', absl::SkipWhitespace())) {
        int32_t id = 0;
        if (!absl::SimpleAtoi(part, &id))
          Die("--prompt-ids: '" + std::string(part) + "' is not an integer");
        ids.push_back(id);
      }
      a.prompt_ids = std::move(ids);
    } else if (flag == "--tokenize") {
      a.tokenize = value();
    } else if (flag == "--max-new-tokens") {
      a.max_new_tokens = ParseInt(flag, value(), 0);
    } else if (flag == "--no-cache") {
      a.use_cache = false;
    } else if (flag == "--json") {
      a.json = true;
    } else if (flag == "--no-bos") {
      a.bos = false;
    } else if (flag == "--compute") {
      std::string v = value();
      if (v != "f32" && v != "bf16") Die("--compute: expected f32 or bf16, got '" + v + "'");
      a.bf16 = v == "bf16";
    } else if (flag == "--threads") {
      a.threads = ParseInt(flag, value(), 1);
    } else if (flag == "--kv-block-size") {
      a.block_size = ParseInt(flag, value(), 1);
    } else if (flag == "--verbose") {
      spdlog::set_level(spdlog::level::debug);
    } else {
      Die("unknown flag '" + flag + "' (see --help)");
    }
  }
  if (!a.tokenize && a.prompt.has_value() == a.prompt_ids.has_value()) {
    Die("give exactly one of --prompt and --prompt-ids (or --tokenize)");
  }
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

int RunGenerate(const Args& a) {
  ModelOptions model_options;
  model_options.threads = a.threads;
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
  kv.num_blocks = (c.n_ctx + a.block_size - 1) / a.block_size + 1;
  auto cache = KvCache::Create(kv);
  if (!cache.ok()) Die(std::string(cache.status().message()));

  GenerateOptions options;
  options.max_new_tokens = a.max_new_tokens;
  options.use_cache = a.use_cache;
  IncrementalDetokenizer detok(tok);
  TokenCallback stream;
  if (!a.json) {
    if (a.prompt) std::fputs(a.prompt->c_str(), stdout);
    stream = [&](int32_t id, double) {
      std::string piece = detok.Add(id);
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
    };
  }
  auto result = GenerateGreedy(m.llama(), **cache, prompt, tok.eos_id(), options, stream);
  if (!result.ok()) Die(std::string(result.status().message()));
  if (!a.json) {
    std::string rest = detok.Flush();
    std::fwrite(rest.data(), 1, rest.size(), stdout);
    std::fputs("\n", stdout);
    const double decode_tokens = static_cast<double>(result->ids.size()) - 1;
    spdlog::info("prompt {} tokens in {:.2f} ms; {} tokens generated, {:.1f} tokens/s ({})",
                 prompt.size(), result->prefill_seconds * 1e3, result->ids.size(),
                 decode_tokens > 0 ? decode_tokens / result->decode_seconds : 0.0,
                 FinishReasonName(result->finish_reason));
    return 0;
  }
  nlohmann::json j;
  j["model"] = c.name;
  if (a.prompt) j["prompt"] = *a.prompt;
  j["prompt_ids"] = prompt;
  j["generated_ids"] = result->ids;
  j["text"] = tok.Decode(result->ids);
  j["logprobs"] = result->logprobs;
  j["finish_reason"] = std::string(FinishReasonName(result->finish_reason));
  j["timings"] = {{"prefill_ms", result->prefill_seconds * 1e3},
                  {"decode_ms", result->decode_seconds * 1e3}};
  std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  return 0;
}

}  // namespace
}  // namespace textgen

int main(int argc, char** argv) {
  spdlog::set_pattern("[%H:%M:%S.%e] [%^%l%$] %v");
  spdlog::set_default_logger(spdlog::stderr_color_mt("textgen-run"));
  spdlog::set_pattern("[%H:%M:%S.%e] [%^%l%$] %v");
  textgen::Args args = textgen::ParseArgs(argc, argv);
  return args.tokenize ? textgen::RunTokenize(args) : textgen::RunGenerate(args);
}
