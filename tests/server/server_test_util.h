// Helpers shared by the end-to-end server tests (header-only: the test glob compiles only
// *_test.cc files).
#ifndef TEXTGEN_TESTS_SERVER_SERVER_TEST_UTIL_H_
#define TEXTGEN_TESTS_SERVER_SERVER_TEST_UTIL_H_

#include <grpcpp/grpcpp.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/generate_stream.h"
#include "tests/support/server_process.h"
#include "tests/test_util.h"
#include "textgen/v1/textgen.grpc.pb.h"

namespace textgen::testing {

namespace v1 = ::textgen::v1;

// Generation long enough to be cut short by a cancel, deadline or shutdown: a sliding window
// keeps going for this many tokens (tens of seconds on stories260K).
inline constexpr uint32_t kEndless = 1000000;

// A Generate request that runs for kEndless tokens (servers need --max-max-new-tokens kEndless).
inline v1::GenerateRequest EndlessRequest() {
  v1::GenerateRequest req;
  req.set_prompt("Once upon a time");
  req.set_max_new_tokens(kEndless);
  req.set_ignore_eos(true);
  req.set_context_overflow(v1::CONTEXT_OVERFLOW_SLIDE);
  return req;
}

// A random-weight model with Qwen3's vocabulary (151,936 tokens), written once per test process
// with textgen-synth-model: outputs are noise, so whatever structure they have comes from an
// output constraint. Serve it with a Qwen or DeepSeek template for tool calls and reasoning.
inline std::string QwenVocabModel() {
  static const std::string path = [] {
    const char* bin_dir = std::getenv("TEXTGEN_BIN_DIR");
    REQUIRE(bin_dir != nullptr);
    const std::string out = ScratchDir() + "/qwen3-vocab-noise.gguf";
    CommandResult synth =
        RunCommand(std::string(bin_dir) +
                   "/textgen-synth-model --shape custom --arch qwen3 --dim 64 --layers 2 --heads 4 "
                   "--kv-heads 2 --head-dim 32 --ffn 128 --ctx 2048 --type f32 --vocab " +
                   ShellQuote(ModelsDir() + "/vocab/ggml-vocab-qwen3.gguf") + " --out " +
                   ShellQuote(out) + " 2>&1");
    INFO(synth.out);
    REQUIRE(synth.exit_code == 0);
    return out;
  }();
  return path;
}

// One server per test process, started on first use with limits the tests rely on. (ctest runs
// each test case in its own process; startup takes well under a second.)
inline ServerProcess& SharedServer() {
  // Stopped with SIGTERM by the static destructor when the test process exits.
  static std::unique_ptr<ServerProcess> server = [] {
    ServerProcessOptions o;
    o.extra_args = {"--max-max-new-tokens", std::to_string(kEndless), "--log-level", "info"};
    return std::make_unique<ServerProcess>(o);
  }();
  return *server;
}

inline std::unique_ptr<v1::TextGeneration::Stub> NewStub(const ServerProcess& server) {
  return v1::TextGeneration::NewStub(server.channel());
}

inline v1::ModelInfo GetInfo(v1::TextGeneration::Stub& stub) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  v1::ModelInfo info;
  grpc::Status st = stub.GetModelInfo(&ctx, v1::GetModelInfoRequest(), &info);
  REQUIRE(st.ok());
  return info;
}

// Polls GetModelInfo until kv_blocks_free == want (blocks are freed at the engine's next
// step boundary after a cancel); returns the last value seen.
inline uint32_t WaitForFreeBlocks(v1::TextGeneration::Stub& stub, uint32_t want,
                                  int timeout_ms = 5000) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  uint32_t free = 0;
  while (true) {
    free = GetInfo(stub).kv_blocks_free();
    if (free == want || std::chrono::steady_clock::now() >= deadline) return free;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// The llama.cpp greedy reference for stories260K (see ../shared/reference/README.md).
struct ReferenceCase {
  std::string prompt;
  std::vector<int32_t> prompt_ids;
  std::vector<int32_t> generated_ids;
  std::string text;
};

// `file` under ReferenceDir(), e.g. "arch/qwen2.greedy.json".
inline std::vector<ReferenceCase> LoadReference(
    int* n_predict, const std::string& file = "stories260K.greedy.json") {
  auto j = nlohmann::json::parse(ReadFile(ReferenceDir() + "/" + file));
  *n_predict = j.at("n_predict").get<int>();
  std::vector<ReferenceCase> cases;
  for (const auto& c : j.at("cases")) {
    cases.push_back(
        {c.at("prompt").get<std::string>(), c.at("prompt_ids").get<std::vector<int32_t>>(),
         c.at("generated_ids").get<std::vector<int32_t>>(), c.at("text").get<std::string>()});
  }
  REQUIRE(!cases.empty());
  return cases;
}

}  // namespace textgen::testing

#endif  // TEXTGEN_TESTS_SERVER_SERVER_TEST_UTIL_H_
