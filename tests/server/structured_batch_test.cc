// A constrained request under the scheduler: with --batch-invariant on, a json_schema Generate
// writes the same text alone and while other streams (constrained or not) share its batches;
// a constrained stream cancelled mid-answer gives its KV blocks back and the next constrained
// request is served.
#include <google/protobuf/util/json_util.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/server/server_test_util.h"

namespace textgen::testing {
namespace structured_batch_test {

std::unique_ptr<ServerProcess> StartServer() {
  ServerProcessOptions o;
  o.model = QwenVocabModel();
  o.extra_args = {"--chat-template",   ChatTemplatesDir() + "/templates/Qwen-Qwen3-0.6B.jinja",
                  "--batch-invariant", "on",
                  "--kv-cache-mib",    "64"};
  return std::make_unique<ServerProcess>(o);
}

v1::GenerateRequest WithSchema(const std::string& schema, uint32_t max_new_tokens) {
  v1::GenerateRequest gen;
  gen.set_prompt("A record, as JSON:");
  gen.set_max_new_tokens(max_new_tokens);
  google::protobuf::Struct s;
  REQUIRE(google::protobuf::util::JsonStringToMessage(schema, &s).ok());
  *gen.mutable_response_format()->mutable_json_schema() = s;
  return gen;
}

// Bounded: a noise model's answer ends well within 300 tokens.
const char* kRecord = R"({"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 12},
    "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 3},
    "n": {"type": "integer", "minimum": 0, "maximum": 999}},
  "required": ["name", "tags", "n"], "additionalProperties": false})";

v1::GenerateRequest Free(const std::string& prompt) {
  v1::GenerateRequest gen;
  gen.set_prompt(prompt);
  gen.set_max_new_tokens(48);
  gen.set_ignore_eos(true);
  return gen;
}

TEST_CASE("a constrained answer is the same alone and batched with other streams",
          "[server][constraint][batch]") {
  auto server = StartServer();
  auto stub = NewStub(*server);
  const StreamResult alone = RunGenerate(*stub, WithSchema(kRecord, 300));
  INFO(alone.status.error_message());
  REQUIRE(alone.status.ok());
  const nlohmann::json doc = nlohmann::json::parse(alone.last.hypotheses(0).text(), nullptr, false);
  REQUIRE(doc.is_object());
  CHECK(doc["n"].is_number_integer());
  const StreamResult again = RunGenerate(*stub, WithSchema(kRecord, 300));
  CHECK(again.last.hypotheses(0).text() == alone.last.hypotheses(0).text());
  const StreamResult free_alone = RunGenerate(*stub, Free("Story 0:"));

  // Three free streams and a second constrained one run while the request is repeated.
  std::vector<StreamResult> others(4);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      others[i] = i == 3 ? RunGenerate(*stub, WithSchema(kRecord, 300))
                         : RunGenerate(*stub, Free("Story " + std::to_string(i) + ":"));
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const StreamResult batched = RunGenerate(*stub, WithSchema(kRecord, 300));
  for (std::thread& t : threads) t.join();
  REQUIRE(batched.status.ok());
  CHECK(batched.last.hypotheses(0).text() == alone.last.hypotheses(0).text());
  CHECK(batched.ids == alone.ids);
  for (const StreamResult& r : others) CHECK(r.status.ok());
  CHECK(others[0].ids == free_alone.ids);
  CHECK(others[3].last.hypotheses(0).text() == alone.last.hypotheses(0).text());
}

TEST_CASE("a cancelled constrained stream frees its blocks and the next one is served",
          "[server][constraint][cancel]") {
  auto server = StartServer();
  auto stub = NewStub(*server);
  const uint32_t idle = WaitForFreeBlocks(*stub, GetInfo(*stub).kv_blocks_total());
  // An unbounded string: the noise model keeps writing until cancelled.
  const v1::GenerateRequest endless = WithSchema(
      R"({"type": "object", "properties": {"text": {"type": "string"}},
          "required": ["text"], "additionalProperties": false})",
      2000);
  grpc::ClientContext ctx;
  auto reader = stub->Generate(&ctx, endless);
  v1::GenerateResponse msg;
  int read = 0;
  while (read < 5 && reader->Read(&msg)) ++read;
  REQUIRE(read == 5);
  ctx.TryCancel();
  while (reader->Read(&msg)) {
  }
  CHECK(reader->Finish().error_code() == grpc::StatusCode::CANCELLED);
  CHECK(WaitForFreeBlocks(*stub, idle) == idle);

  const StreamResult next = RunGenerate(*stub, WithSchema(kRecord, 300));
  INFO(next.status.error_message());
  REQUIRE(next.status.ok());
  CHECK(nlohmann::json::parse(next.last.hypotheses(0).text(), nullptr, false).is_object());
}

}  // namespace structured_batch_test
}  // namespace textgen::testing
