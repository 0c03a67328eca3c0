// Bad requests get the right gRPC status, with a message that names the problem.
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>

#include "tests/server/server_test_util.h"

namespace textgen::testing {
namespace errors_test {

struct BadCase {
  std::string name;
  std::function<void(v1::GenerateRequest*)> edit;
  grpc::StatusCode code;
  std::string message_part;  // the field the message must name
};

TEST_CASE("each bad Generate input gets its status", "[server][errors]") {
  auto stub = NewStub(SharedServer());
  const v1::ModelInfo info = GetInfo(*stub);
  const std::vector<BadCase> cases = {
      {"both prompt fields",
       [](auto* r) {
         r->set_prompt("hi");
         r->add_prompt_ids(1);
       },
       grpc::StatusCode::INVALID_ARGUMENT, "exactly one of prompt and prompt_ids"},
      {"neither prompt field", [](auto* r) { r->clear_prompt(); },
       grpc::StatusCode::INVALID_ARGUMENT, "exactly one of prompt and prompt_ids"},
      {"token id outside the vocab",
       [&](auto* r) {
         r->clear_prompt();
         r->add_prompt_ids(1);
         r->add_prompt_ids(static_cast<int32_t>(info.vocab_size()));
       },
       grpc::StatusCode::INVALID_ARGUMENT, "prompt_ids"},
      {"negative token id",
       [](auto* r) {
         r->clear_prompt();
         r->add_prompt_ids(-1);
       },
       grpc::StatusCode::INVALID_ARGUMENT, "prompt_ids"},
      {"num_beams 17",
       [](auto* r) {
         r->set_method(v1::BEAM);
         r->set_num_beams(17);
       },
       grpc::StatusCode::INVALID_ARGUMENT, "num_beams"},
      {"num_return_sequences > num_beams",
       [](auto* r) {
         r->set_method(v1::BEAM);
         r->set_num_beams(2);
         r->set_num_return_sequences(3);
       },
       grpc::StatusCode::INVALID_ARGUMENT, "num_return_sequences"},
      {"top_p 1.5",
       [](auto* r) {
         r->set_method(v1::SAMPLE);
         r->set_top_p(1.5f);
       },
       grpc::StatusCode::INVALID_ARGUMENT, "top_p"},
      {"temperature -1",
       [](auto* r) {
         r->set_method(v1::SAMPLE);
         r->set_temperature(-1.0f);
       },
       grpc::StatusCode::INVALID_ARGUMENT, "temperature"},
      {"top_logprobs 21", [](auto* r) { r->set_top_logprobs(21); },
       grpc::StatusCode::INVALID_ARGUMENT, "top_logprobs"},
      {"max_new_tokens over the max", [](auto* r) { r->set_max_new_tokens(kEndless + 1); },
       grpc::StatusCode::INVALID_ARGUMENT, "max_new_tokens"},
      {"prompt + max_new_tokens beyond the context",
       [&](auto* r) { r->set_max_new_tokens(info.context_length() + 1); },
       grpc::StatusCode::INVALID_ARGUMENT, "max_new_tokens"},
      {"prompt longer than the context",
       [&](auto* r) {
         r->clear_prompt();
         for (uint32_t i = 0; i < info.context_length() + 5; ++i) r->add_prompt_ids(300);
       },
       grpc::StatusCode::INVALID_ARGUMENT, "prompt"},
      {"GREEDY with a temperature",
       [](auto* r) {
         r->set_method(v1::GREEDY);
         r->set_temperature(0.8f);
       },
       grpc::StatusCode::INVALID_ARGUMENT, "temperature applies only to method SAMPLE"},
      {"SAMPLE with num_beams",
       [](auto* r) {
         r->set_method(v1::SAMPLE);
         r->set_num_beams(4);
       },
       grpc::StatusCode::INVALID_ARGUMENT, "num_beams applies only to method BEAM"},
      {"n_keep without sliding", [](auto* r) { r->set_n_keep(2); },
       grpc::StatusCode::INVALID_ARGUMENT, "n_keep"},
      {"length_penalty -3e38 (would score -inf)",
       [](auto* r) {
         r->set_num_beams(2);
         r->set_length_penalty(-3e38f);
       },
       grpc::StatusCode::INVALID_ARGUMENT, "length_penalty must be in [-10, 10]"},
      {"unknown method", [](auto* r) { r->set_method(static_cast<v1::DecodingMethod>(7)); },
       grpc::StatusCode::INVALID_ARGUMENT, "method"},
      {"unknown session", [](auto* r) { r->set_session_id("0123456789abcdef0123456789abcdef"); },
       grpc::StatusCode::NOT_FOUND, "session"},
  };
  for (const BadCase& c : cases) {
    INFO(c.name);
    v1::GenerateRequest req;
    req.set_prompt("Once upon a time");
    req.set_max_new_tokens(4);
    c.edit(&req);
    StreamResult r = RunGenerate(*stub, req);
    INFO("got " << r.status.error_code() << ": " << r.status.error_message());
    CHECK(r.status.error_code() == c.code);
    CHECK_THAT(r.status.error_message(), Catch::Contains(c.message_part));
    CHECK(r.messages.empty());
  }
}

TEST_CASE("length_penalty at either end of its range gives finite scores", "[server][errors]") {
  auto stub = NewStub(SharedServer());
  for (float penalty : {-10.0f, 10.0f}) {
    INFO("length_penalty " << penalty);
    v1::GenerateRequest req;
    req.set_prompt("Once upon a time");
    req.set_max_new_tokens(24);
    req.set_ignore_eos(true);
    req.set_num_beams(2);
    req.set_num_return_sequences(2);
    req.set_length_penalty(penalty);
    StreamResult r = RunGenerate(*stub, req);
    REQUIRE(r.status.ok());
    REQUIRE(r.last.hypotheses_size() == 2);
    for (const v1::Hypothesis& h : r.last.hypotheses()) CHECK(std::isfinite(h.score()));
  }
}

TEST_CASE("a full queue gives RESOURCE_EXHAUSTED", "[server][errors]") {
  // One request decoding, one waiting: the third has no room.
  ServerProcessOptions o;
  o.extra_args = {
      "--max-queued",           "1",           "--max-active", "1", "--max-max-new-tokens",
      std::to_string(kEndless), "--log-level", "warn"};
  ServerProcess server(o);
  auto stub = NewStub(server);
  const v1::GenerateRequest endless = EndlessRequest();

  grpc::ClientContext running_ctx;
  auto running = stub->Generate(&running_ctx, endless);
  v1::GenerateResponse msg;
  REQUIRE(running->Read(&msg));  // admitted and decoding

  grpc::ClientContext queued_ctx;
  auto queued = stub->Generate(&queued_ctx, endless);
  // The queued stream has no message to read; give its call time to reach the engine.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  StreamResult third = RunGenerate(*stub, endless, /*deadline_ms=*/5000);
  const grpc::StatusCode code = third.status.error_code();
  const std::string message = third.status.error_message();
  INFO(message);
  CHECK(code == grpc::StatusCode::RESOURCE_EXHAUSTED);
  CHECK_THAT(message, Catch::Contains("queue"));

  running_ctx.TryCancel();
  queued_ctx.TryCancel();
  while (running->Read(&msg)) {
  }
  CHECK(running->Finish().error_code() == grpc::StatusCode::CANCELLED);
  while (queued->Read(&msg)) {
  }
  CHECK(queued->Finish().error_code() == grpc::StatusCode::CANCELLED);
  CHECK(server.Stop() == 0);
}

}  // namespace errors_test
}  // namespace textgen::testing
