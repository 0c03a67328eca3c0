// Thinking models over the OpenAI API and gRPC Chat: the reasoning block goes to
// reasoning_content / reasoning_text (whole and streamed), never into the answer's text; a
// reasoning budget closes the block; reasoning_format raw keeps today's text; a response_format
// applies to the answer after the reasoning. On a random-weight model with Qwen3's vocabulary and a
// template whose prompt opens the block (DeepSeek-R1's distills with enable_thinking), so the
// answer starts inside it.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>
#include <vector>

#include "tests/server/openai_test_util.h"

namespace textgen::testing {
namespace reasoning_test {

HttpServer& Server() {
  static std::unique_ptr<HttpServer> server = StartHttpServer(
      {"--chat-template",
       ChatTemplatesDir() + "/templates/deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja"},
      QwenVocabModel());
  return *server;
}

Json Request(int max_tokens) {
  return {{"messages", {{{"role", "user"}, {"content", "Why is the sky blue?"}}}},
          {"max_tokens", max_tokens},
          {"temperature", 0},
          {"chat_template_kwargs", {{"enable_thinking", true}}}};
}

Json MessageOf(const HttpReply& r) {
  INFO(r.body);
  REQUIRE(r.status == 200);
  return r.json["choices"][0]["message"];
}

TEST_CASE("reasoning goes to reasoning_content, closed by its budget",
          "[server][openai][reasoning]") {
  HttpServer& s = Server();
  Json req = Request(40);
  req["reasoning_budget"] = 8;
  const HttpReply r = Post(s.http_port, "/v1/chat/completions", req);
  const Json m = MessageOf(r);
  REQUIRE(m.contains("reasoning_content"));
  const std::string reasoning = m["reasoning_content"];
  const std::string content = m["content"].is_string() ? m["content"].get<std::string>() : "";
  CHECK(!reasoning.empty());
  CHECK(content.find("think>") == std::string::npos);
  CHECK(reasoning.find("think>") == std::string::npos);
  // The answer after the block got the rest of the tokens: the budget closed it after 8.
  CHECK(r.json["usage"]["completion_tokens"].get<int>() == 40);
  CHECK(!content.empty());

  // Without a budget a noise model never closes the block: all of it is reasoning.
  const Json unbounded = MessageOf(Post(s.http_port, "/v1/chat/completions", Request(20)));
  CHECK(!unbounded["reasoning_content"].get<std::string>().empty());
  CHECK((unbounded["content"].is_null() || unbounded["content"] == ""));

  // Budget 0: the block closes at once; no reasoning.
  req["reasoning_budget"] = 0;
  const Json none = MessageOf(Post(s.http_port, "/v1/chat/completions", req));
  CHECK(!none.contains("reasoning_content"));
  CHECK(!none["content"].get<std::string>().empty());
}

TEST_CASE("streamed reasoning and content reassemble to the whole answer",
          "[server][openai][reasoning]") {
  HttpServer& s = Server();
  Json req = Request(30);
  req["reasoning_budget"] = 6;
  const Json whole = MessageOf(Post(s.http_port, "/v1/chat/completions", req));
  req["stream"] = true;
  const HttpReply r = Post(s.http_port, "/v1/chat/completions", req);
  REQUIRE(r.status == 200);
  const SseStream stream = ParseSse(r.body);
  REQUIRE(stream.done);
  std::string reasoning, content;
  bool content_started = false;
  for (const Json& c : stream.chunks) {
    const Json& delta = c["choices"][0]["delta"];
    if (delta.contains("reasoning_content")) {
      CHECK_FALSE(content_started);  // reasoning comes first
      reasoning += delta["reasoning_content"].get<std::string>();
    }
    if (delta.contains("content") && !delta["content"].get<std::string>().empty()) {
      content_started = true;
      content += delta["content"].get<std::string>();
    }
  }
  CHECK(reasoning == whole["reasoning_content"].get<std::string>());
  CHECK(content == whole["content"].get<std::string>());
}

TEST_CASE("reasoning_format raw keeps the markup in the content", "[server][openai][reasoning]") {
  HttpServer& s = Server();
  Json req = Request(30);
  req["reasoning_budget"] = 5;
  req["reasoning_format"] = "raw";
  const Json m = MessageOf(Post(s.http_port, "/v1/chat/completions", req));
  CHECK(!m.contains("reasoning_content"));
  CHECK(m["content"].get<std::string>().find("</think>") != std::string::npos);
}

TEST_CASE("a response_format applies to the answer after the reasoning",
          "[server][openai][reasoning]") {
  HttpServer& s = Server();
  Json req = Request(200);
  req["reasoning_budget"] = 6;
  req["response_format"] = {
      {"type", "json_schema"},
      {"json_schema",
       {{"name", "answer"},
        {"schema",
         {{"type", "object"},
          {"properties", {{"color", {{"type", "string"}, {"enum", {"blue", "red"}}}}}},
          {"required", {"color"}},
          {"additionalProperties", false}}}}}};
  const HttpReply r = Post(s.http_port, "/v1/chat/completions", req);
  const Json m = MessageOf(r);
  CHECK(!m["reasoning_content"].get<std::string>().empty());
  const Json answer = Json::parse(m["content"].get<std::string>(), nullptr, false);
  INFO(m.dump());
  REQUIRE(answer.is_object());
  CHECK((answer["color"] == "blue" || answer["color"] == "red"));
  CHECK(r.json["choices"][0]["finish_reason"] == "stop");
}

TEST_CASE("gRPC Chat streams reasoning_text apart from text, and the hypothesis has both",
          "[server][reasoning]") {
  HttpServer& s = Server();
  auto stub = NewStub(*s.process);
  v1::ChatRequest req;
  v1::ChatMessage* m = req.add_messages();
  m->set_role("user");
  m->set_content("Why is the sky blue?");
  req.set_max_new_tokens(30);
  req.set_reasoning_budget(6);
  (*req.mutable_template_kwargs()->mutable_fields())["enable_thinking"].set_bool_value(true);
  StreamResult r = RunChat(*stub, req);
  INFO(r.status.error_message());
  REQUIRE(r.status.ok());
  std::string reasoning;
  for (const v1::GenerateResponse& msg : r.messages) reasoning += msg.reasoning_text();
  REQUIRE(r.last.hypotheses_size() == 1);
  const v1::Hypothesis& h = r.last.hypotheses(0);
  CHECK(!reasoning.empty());
  CHECK(reasoning == h.reasoning());
  CHECK(r.text == h.text());
  CHECK(h.text().find("think>") == std::string::npos);
  CHECK(!h.text().empty());

  // REASONING_RAW: the markup stays in the text.
  req.set_reasoning_format(v1::REASONING_RAW);
  StreamResult raw = RunChat(*stub, req);
  REQUIRE(raw.status.ok());
  CHECK(raw.last.hypotheses(0).reasoning().empty());
  CHECK(raw.text.find("</think>") != std::string::npos);
}

}  // namespace reasoning_test
}  // namespace textgen::testing
