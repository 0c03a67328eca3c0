// Bounded work per request: texts over --max-prompt-bytes are refused naming the field before
// any tokenizing (gRPC and HTTP), and clients sending megabyte texts do not stall health checks
// and small requests (long texts are tokenized off gRPC's threads).
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "tests/server/openai_test_util.h"
#include "tests/server/server_test_util.h"

namespace textgen::testing {
namespace limits_test {

std::string ChatTemplatePath() {
  return ChatTemplatesDir() + "/templates/Qwen-Qwen2.5-7B-Instruct.jinja";
}

grpc::Status Tokenize(v1::TextGeneration::Stub& stub, const std::string& text) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  v1::TokenizeRequest req;
  req.set_text(text);
  v1::TokenizeResponse resp;
  return stub.Tokenize(&ctx, req, &resp);
}

grpc::Status Generate(v1::TextGeneration::Stub& stub, const v1::GenerateRequest& req) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  auto reader = stub.Generate(&ctx, req);
  v1::GenerateResponse msg;
  while (reader->Read(&msg)) {
  }
  return reader->Finish();
}

grpc::Status Chat(v1::TextGeneration::Stub& stub, const std::string& content) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  v1::ChatRequest req;
  v1::ChatMessage* m = req.add_messages();
  m->set_role("user");
  m->set_content(content);
  req.set_max_new_tokens(4);
  auto reader = stub.Chat(&ctx, req);
  v1::GenerateResponse msg;
  while (reader->Read(&msg)) {
  }
  return reader->Finish();
}

void CheckTooLong(const grpc::Status& st, const std::string& field) {
  INFO(st.error_code() << ": " << st.error_message());
  CHECK(st.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK_THAT(st.error_message(), Catch::StartsWith(field + ": 1001 bytes"));
  CHECK_THAT(st.error_message(), Catch::Contains("limit of 1000 bytes"));
}

TEST_CASE("texts over --max-prompt-bytes are refused naming the field and the limit",
          "[server][limits]") {
  auto server =
      StartHttpServer({"--max-prompt-bytes", "1000", "--chat-template", ChatTemplatePath()});
  auto stub = NewStub(*server->process);
  const std::string at_limit(1000, 'a');
  const std::string over(1001, 'a');

  CHECK(Tokenize(*stub, at_limit).ok());
  CheckTooLong(Tokenize(*stub, over), "text");

  v1::GenerateRequest req;
  req.set_max_new_tokens(2);
  req.set_prompt(over);
  CheckTooLong(Generate(*stub, req), "prompt");
  req.set_prompt(std::string(1000, ' '));
  CHECK(Generate(*stub, req).ok());

  // Role and content count: "user" is 4 bytes.
  CheckTooLong(Chat(*stub, std::string(997, 'a')), "messages");
  CHECK(Chat(*stub, std::string(40, 'a')).ok());

  // The HTTP API: the same limit, a 400 naming the field.
  HttpReply r =
      Post(server->http_port, "/v1/completions", Json{{"prompt", over}, {"max_tokens", 2}});
  CHECK(r.status == 400);
  CHECK(r.json["error"]["param"] == "prompt");
  CHECK_THAT(r.json["error"]["message"].get<std::string>(), Catch::Contains("limit of 1000"));
  r = Post(
      server->http_port, "/v1/chat/completions",
      Json{{"messages", Json::array({{{"role", "user"}, {"content", over}}})}, {"max_tokens", 2}});
  CHECK(r.status == 400);
  CHECK(r.json["error"]["param"] == "messages");
  r = Post(server->http_port, "/v1/completions",
           Json{{"prompt", std::string(1000, ' ')}, {"max_tokens", 2}});
  CHECK(r.status == 200);
}

TEST_CASE("clients sending megabyte texts do not stall health checks and small requests",
          "[server][limits]") {
  ServerProcess& server = SharedServer();
  // Under the default limit of 1 MiB, each taking the tokenizer about half a second.
  std::string big;
  const std::vector<std::string> words = {"the ", "cat ", "sat ", "on ", "a ", "mat ", "Lily "};
  for (size_t i = 0; big.size() < 1000000 - 8; i = (i * 7 + 3) % words.size()) big += words[i];
  std::atomic<bool> stop{false};
  std::atomic<int> sent{0};
  std::vector<std::thread> hammers;
  for (int t = 0; t < 8; ++t) {
    hammers.emplace_back([&, t] {
      auto stub = v1::TextGeneration::NewStub(server.NewChannel());
      v1::GenerateRequest req;
      req.set_prompt(big);
      req.set_max_new_tokens(1);
      while (!stop.load()) {
        // Either kind of answer will do (the Generate prompts cannot fit the context).
        if (t % 2 == 0) {
          (void)Tokenize(*stub, big);
        } else {
          (void)Generate(*stub, req);
        }
        ++sent;
      }
    });
  }
  while (sent.load() < 8) std::this_thread::sleep_for(std::chrono::milliseconds(10));

  auto stub = NewStub(server);
  v1::GenerateRequest small;
  small.set_prompt("Once upon a time");
  small.set_max_new_tokens(16);
  double worst_health = 0, worst_small = 0;
  for (int i = 0; i < 5; ++i) {
    auto start = std::chrono::steady_clock::now();
    HealthReply h = CheckHealth(*server.channel(), "", std::chrono::seconds(60));
    worst_health =
        std::max(worst_health,
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    CHECK(h.ok);
    start = std::chrono::steady_clock::now();
    CHECK(Generate(*stub, small).ok());
    worst_small =
        std::max(worst_small,
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  stop.store(true);
  for (auto& t : hammers) t.join();
  // Idle, each takes milliseconds; with the long texts tokenized on gRPC's threads they took
  // 8-14 s here. The bound leaves room for two shared cores.
  INFO("worst health check " << worst_health << " s, worst small Generate " << worst_small
                             << " s, while " << sent.load() << " long texts were sent");
  CHECK(worst_health < 2.0);
  CHECK(worst_small < 2.0);
}

}  // namespace limits_test
}  // namespace textgen::testing
