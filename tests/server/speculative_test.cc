// Speculative decoding through the server: the HTTP API's `speculative` and `prediction`
// change the speed only (the same completion text), report the drafts in
// usage.completion_tokens_details and in /metrics; a draft model of another vocabulary, or
// --speculative draft-model without one, stops the start naming the problem.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>
#include <vector>

#include "tests/server/openai_test_util.h"
#include "tests/support/generate_stream.h"

namespace textgen::testing {
namespace speculative_test {

Json Completion(int port, Json extra) {
  Json body = {{"prompt", "Once upon a time"}, {"max_tokens", 120}, {"temperature", 0}};
  body.update(extra);
  HttpReply r = Post(port, "/v1/completions", body);
  INFO(r.body);
  REQUIRE(r.status == 200);
  return Json::parse(r.body);
}

TEST_CASE("speculative and prediction change no completion and report their drafts",
          "[server][openai][speculative]") {
  // K fixed: how many drafts adaptive K runs depends on the passes' measured times, and the
  // counts below are about the drafts, not their number.
  auto server = StartHttpServer({"--draft-model", ModelPath("TinyStories-656K-Q8_0.gguf"),
                                 "--batch-invariant", "on", "--speculative-adaptive", "off"},
                                ModelPath("TinyStories-656K-F32.gguf"));
  const int port = server->http_port;
  const Json plain = Completion(port, Json::object());
  const std::string text = plain["choices"][0]["text"];
  CHECK(!plain["usage"].contains("completion_tokens_details"));  // nothing drafted

  // The server's draft model (asked for; the server default is off).
  const Json drafted = Completion(port, {{"speculative", true}});
  CHECK(drafted["choices"][0]["text"] == text);
  const Json& details = drafted["usage"]["completion_tokens_details"];
  CHECK(details["accepted_prediction_tokens"].get<int>() > 0);
  CHECK(details["rejected_prediction_tokens"].get<int>() >= 0);

  // A prediction of the whole answer: most tokens come from it (a draft is proposed only
  // after the answer's last two tokens matched it, and the first token never is).
  const Json predicted =
      Completion(port, {{"prediction", {{"type", "content"}, {"content", text}}}});
  CHECK(predicted["choices"][0]["text"] == text);
  const int completion_tokens = predicted["usage"]["completion_tokens"];
  const Json& predicted_details = predicted["usage"]["completion_tokens_details"];
  INFO(predicted_details.dump() << " of " << completion_tokens);
  CHECK(predicted_details["accepted_prediction_tokens"].get<int>() >= completion_tokens / 2);
  // Text parts, as OpenAI's SDK may send them; and speculation turned off wins over nothing.
  const Json parts = Completion(
      port,
      {{"prediction",
        {{"type", "content"}, {"content", Json::array({{{"type", "text"}, {"text", text}}})}}}});
  CHECK(parts["choices"][0]["text"] == text);
  const Json off = Completion(port, {{"speculative", false}});
  CHECK(off["choices"][0]["text"] == text);
  CHECK(!off["usage"].contains("completion_tokens_details"));

  // gRPC: the same answer, and the drafts in usage.
  auto stub = NewStub(*server->process);
  v1::GenerateRequest req;
  req.set_prompt("Once upon a time");
  req.set_max_new_tokens(120);
  const StreamResult grpc_plain = RunGenerate(*stub, req);
  req.set_speculative(true);
  const StreamResult grpc_spec = RunGenerate(*stub, req);
  REQUIRE(grpc_plain.status.ok());
  REQUIRE(grpc_spec.status.ok());
  CHECK(grpc_spec.ids == grpc_plain.ids);
  CHECK(grpc_plain.last.usage().drafted_tokens() == 0);
  CHECK(grpc_spec.last.usage().drafted_tokens() > 0);
  CHECK(grpc_spec.last.usage().accepted_tokens() > 0);
  CHECK(grpc_spec.last.usage().accepted_tokens() <= grpc_spec.last.usage().drafted_tokens());

  HttpReply metrics = Get(server->metrics_port, "/metrics");
  REQUIRE(metrics.status == 200);
  CHECK_THAT(metrics.body, Catch::Contains("textgen_speculative_drafted_tokens_total"));
  CHECK_THAT(metrics.body, Catch::Contains("textgen_speculative_accepted_tokens_total"));
  CHECK_THAT(metrics.body, !Catch::Contains("textgen_speculative_accepted_tokens_total 0\n"));
}

TEST_CASE("an unusable draft model stops the start naming it", "[server][speculative]") {
  const char* bin_dir = std::getenv("TEXTGEN_BIN_DIR");
  REQUIRE(bin_dir != nullptr);
  const std::string base = std::string(bin_dir) + "/textgen-server --model " +
                           ShellQuote(ModelPath("TinyStories-656K-F32.gguf")) +
                           " --listen 127.0.0.1:0 ";
  const std::string other = ModelPath("stories260K.gguf");
  CommandResult r = RunCommand(base + "--draft-model " + ShellQuote(other) + " 2>&1");
  INFO(r.out);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.out, Catch::Contains(other));
  CHECK_THAT(r.out, Catch::Contains("512 tokens, the target's 2048"));

  r = RunCommand(base + "--speculative draft-model 2>&1");
  INFO(r.out);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.out, Catch::Contains("--speculative draft-model needs --draft-model"));
  r = RunCommand(base + "--speculative-tokens 0 2>&1");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.out, Catch::Contains("--speculative-tokens"));
  r = RunCommand(base + "--speculative-adaptive sometimes 2>&1");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.out, Catch::Contains("--speculative-adaptive"));
}

}  // namespace speculative_test
}  // namespace textgen::testing
