// Generate end to end (real server process, real gRPC stubs): llama.cpp parity, the stream
// against the final message, beam hypotheses, many concurrent streams, a small step budget.
#include <atomic>
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "nlohmann/json.hpp"
#include "tests/server/server_test_util.h"

namespace textgen::testing {
namespace generate_test {

v1::GenerateRequest GreedyIds(const ReferenceCase& c, int n_predict) {
  v1::GenerateRequest req;
  req.mutable_prompt_ids()->Add(c.prompt_ids.begin(), c.prompt_ids.end());
  req.set_max_new_tokens(static_cast<uint32_t>(n_predict));
  return req;
}

TEST_CASE("greedy Generate reproduces the llama.cpp reference", "[server][generate]") {
  auto stub = NewStub(SharedServer());
  int n_predict = 0;
  for (const ReferenceCase& c : LoadReference(&n_predict)) {
    INFO("prompt: \"" << c.prompt << "\"");
    StreamResult r = RunGenerate(*stub, GreedyIds(c, n_predict));
    INFO(r.status.error_message());
    REQUIRE(r.status.ok());
    CHECK(r.ids == c.generated_ids);
    REQUIRE(r.last.hypotheses_size() == 1);
    const v1::Hypothesis& best = r.last.hypotheses(0);
    CHECK(std::vector<int32_t>(best.ids().begin(), best.ids().end()) == c.generated_ids);
    CHECK(best.text() == c.text);
    // The stream is the answer: its pieces add up to the final hypothesis.
    CHECK(r.text == best.text());
    CHECK(r.last.finish_reason() == v1::LENGTH);
    CHECK(r.last.usage().prompt_tokens() == c.prompt_ids.size());
    CHECK(r.last.usage().generated_tokens() == c.generated_ids.size());
    CHECK(r.last.usage().total_ms() > 0);
    // Only the last message carries the verdict.
    for (size_t i = 0; i + 1 < r.messages.size(); ++i) {
      CHECK(r.messages[i].finish_reason() == v1::FINISH_REASON_UNSPECIFIED);
      CHECK(r.messages[i].hypotheses_size() == 0);
    }
  }
}

TEST_CASE("a text prompt is tokenized like llama.cpp's", "[server][generate]") {
  auto stub = NewStub(SharedServer());
  int n_predict = 0;
  for (const ReferenceCase& c : LoadReference(&n_predict)) {
    if (c.prompt.empty()) continue;  // "" is not a prompt; the ids case covers it
    INFO("prompt: \"" << c.prompt << "\"");
    v1::GenerateRequest req;
    req.set_prompt(c.prompt);
    req.set_max_new_tokens(static_cast<uint32_t>(n_predict));
    StreamResult r = RunGenerate(*stub, req);
    INFO(r.status.error_message());
    REQUIRE(r.status.ok());
    CHECK(r.ids == c.generated_ids);
    CHECK(r.last.usage().prompt_tokens() == c.prompt_ids.size());

    grpc::ClientContext ctx;
    v1::TokenizeRequest treq;
    treq.set_text(c.prompt);
    treq.set_add_special(true);
    v1::TokenizeResponse tresp;
    REQUIRE(stub->Tokenize(&ctx, treq, &tresp).ok());
    CHECK(std::vector<int32_t>(tresp.ids().begin(), tresp.ids().end()) == c.prompt_ids);
    CHECK(tresp.pieces_size() == tresp.ids_size());
  }
}

TEST_CASE("top_logprobs come with each streamed token", "[server][generate]") {
  auto stub = NewStub(SharedServer());
  v1::GenerateRequest req;
  req.set_prompt("Once upon a time");
  req.set_max_new_tokens(8);
  req.set_top_logprobs(3);
  StreamResult r = RunGenerate(*stub, req);
  REQUIRE(r.status.ok());
  size_t tokens = 0;
  for (const auto& m : r.messages) {
    for (const auto& t : m.tokens()) {
      ++tokens;
      REQUIRE(t.top_logprobs_size() == 3);
      // Greedy picks the most likely token.
      CHECK(t.top_logprobs(0).id() == t.id());
      CHECK(t.top_logprobs(0).logprob() == Approx(t.logprob()));
      CHECK(t.logprob() <= 0);
    }
  }
  CHECK(tokens == 8);
}

TEST_CASE("beam search returns num_return_sequences hypotheses, best first", "[server][generate]") {
  auto stub = NewStub(SharedServer());
  v1::GenerateRequest req;
  req.set_prompt("Once upon a time");
  req.set_method(v1::BEAM);
  req.set_num_beams(4);
  req.set_num_return_sequences(2);
  req.set_max_new_tokens(24);
  StreamResult r = RunGenerate(*stub, req);
  INFO(r.status.error_message());
  REQUIRE(r.status.ok());
  REQUIRE(r.last.hypotheses_size() == 2);
  CHECK(r.last.hypotheses(0).score() >= r.last.hypotheses(1).score());
  for (const auto& h : r.last.hypotheses()) CHECK(h.ids_size() > 0);
  // The stream (certain prefix, completed by the last message) is the best hypothesis.
  const v1::Hypothesis& best = r.last.hypotheses(0);
  CHECK(r.ids == std::vector<int32_t>(best.ids().begin(), best.ids().end()));
  CHECK(r.text == best.text());

  // The same hypotheses as the engine run offline (textgen-run) with the same parameters.
  const char* bin_dir = std::getenv("TEXTGEN_BIN_DIR");
  REQUIRE(bin_dir != nullptr);
  CommandResult run = RunCommand(
      std::string(bin_dir) + "/textgen-run --model " + ShellQuote(ModelPath("stories260K.gguf")) +
      " --compute f32 --prompt 'Once upon a time' --beams 4 --num-return 2"
      " --max-new-tokens 24 --json 2>/dev/null");
  REQUIRE(run.exit_code == 0);
  nlohmann::json offline = nlohmann::json::parse(run.out);
  REQUIRE(offline["hypotheses"].size() == 2);
  for (int i = 0; i < 2; ++i) {
    const v1::Hypothesis& h = r.last.hypotheses(i);
    CHECK(std::vector<int32_t>(h.ids().begin(), h.ids().end()) ==
          offline["hypotheses"][i]["ids"].get<std::vector<int32_t>>());
    CHECK(h.score() == Approx(offline["hypotheses"][i]["score"].get<double>()).margin(1e-6));
    CHECK(h.text() == offline["hypotheses"][i]["text"].get<std::string>());
  }
}

TEST_CASE("sampling fields sample without a method, and SAMPLE alone samples",
          "[server][generate]") {
  auto stub = NewStub(SharedServer());
  v1::GenerateRequest greedy;
  greedy.set_prompt("Once upon a time");
  greedy.set_max_new_tokens(24);
  StreamResult g = RunGenerate(*stub, greedy);
  REQUIRE(g.status.ok());
  // Before method was optional, both of these were silently greedy.
  for (const bool explicit_sample : {false, true}) {
    INFO("explicit SAMPLE: " << explicit_sample);
    int differ = 0;
    for (uint64_t seed = 1; seed <= 4; ++seed) {
      v1::GenerateRequest req = greedy;
      req.set_seed(seed);
      if (explicit_sample) {
        req.set_method(v1::SAMPLE);  // no temperature: 1.0
      } else {
        req.set_temperature(0.8f);  // no method
      }
      StreamResult r = RunGenerate(*stub, req);
      INFO(r.status.error_message());
      REQUIRE(r.status.ok());
      if (r.ids != g.ids) ++differ;
    }
    CHECK(differ > 0);
  }
}

TEST_CASE("32 concurrent streams all complete correctly", "[server][generate]") {
  ServerProcess& server = SharedServer();
  int n_predict = 0;
  const std::vector<ReferenceCase> cases = LoadReference(&n_predict);
  constexpr int kStreams = 32;
  std::vector<StreamResult> results(kStreams);
  std::vector<std::thread> threads;
  for (int i = 0; i < kStreams; ++i) {
    threads.emplace_back([&, i] {
      // Half share the common channel, half bring their own connection.
      auto stub = v1::TextGeneration::NewStub(i % 2 == 0 ? server.channel() : server.NewChannel());
      results[i] = RunGenerate(*stub, GreedyIds(cases[i % cases.size()], n_predict));
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < kStreams; ++i) {
    INFO("stream " << i << ": " << results[i].status.error_message());
    REQUIRE(results[i].status.ok());
    CHECK(results[i].ids == cases[i % cases.size()].generated_ids);
    CHECK(results[i].last.finish_reason() == v1::LENGTH);
  }
}

TEST_CASE("a small --step-token-budget prefills in chunks and changes no answer",
          "[server][generate]") {
  ServerProcessOptions o;
  o.extra_args = {"--step-token-budget", "3", "--idle-step-tokens", "5", "--log-level", "warn"};
  ServerProcess server(o);
  int n_predict = 0;
  const std::vector<ReferenceCase> cases = LoadReference(&n_predict);
  constexpr int kStreams = 8;
  std::vector<StreamResult> results(kStreams);
  std::vector<std::thread> threads;
  for (int i = 0; i < kStreams; ++i) {
    threads.emplace_back([&, i] {
      auto stub = v1::TextGeneration::NewStub(server.channel());
      results[i] = RunGenerate(*stub, GreedyIds(cases[i % cases.size()], n_predict));
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < kStreams; ++i) {
    INFO("stream " << i << ": " << results[i].status.error_message());
    REQUIRE(results[i].status.ok());
    CHECK(results[i].ids == cases[i % cases.size()].generated_ids);
  }
  CHECK(server.Stop() == 0);

  const char* bin_dir = std::getenv("TEXTGEN_BIN_DIR");
  REQUIRE(bin_dir != nullptr);
  // The older name is the same flag.
  for (const char* flag : {"--step-token-budget", "--max-step-tokens", "--idle-step-tokens"}) {
    CommandResult bad = RunCommand(std::string(bin_dir) + "/textgen-server " + flag + " 0 2>&1");
    CHECK(bad.exit_code == 2);
    CHECK_THAT(bad.out, Catch::Contains(flag));
  }
}

TEST_CASE("a defaulted max_new_tokens stops at the context limit", "[server][generate]") {
  // With the server default (256) a prompt near the end of the context would not fit; the
  // request runs until the context is full instead of failing.
  auto stub = NewStub(SharedServer());
  const v1::ModelInfo info = GetInfo(*stub);
  v1::GenerateRequest req;
  for (uint32_t i = 0; i + 10 < info.context_length(); ++i) req.add_prompt_ids(i == 0 ? 1 : 300);
  req.set_ignore_eos(true);
  StreamResult r = RunGenerate(*stub, req);
  INFO(r.status.error_message());
  REQUIRE(r.status.ok());
  CHECK(r.last.finish_reason() == v1::CONTEXT_FULL);
  // The token that fills the last slot is generated from the full context too.
  CHECK(r.last.usage().generated_tokens() >= 10);
  CHECK(r.last.usage().generated_tokens() <= 11);
}

}  // namespace generate_test
}  // namespace textgen::testing
