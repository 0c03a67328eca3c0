// /v1/chat/completions end to end: messages rendered with the chat template (--chat-template,
// checked against the text Python's jinja2 renders in ../shared/chat-templates), the same tokens
// as the gRPC API given that text, chat chunks and logprobs, template options and errors.
#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "tests/server/openai_test_util.h"

namespace textgen::testing {
namespace openai_chat_test {

std::string ChatTemplates() { return ModelsDir() + "/../chat-templates"; }

// ChatML (Qwen2.5's template: a default system message when none is given).
std::string QwenTemplate() { return ChatTemplates() + "/templates/Qwen-Qwen2.5-7B-Instruct.jinja"; }

HttpServer& ChatServer() {
  // Prefix cache off: the HTTP request repeating a gRPC one would be served from its cached
  // rows and run the rest in another batch shape, which moves the default (bf16) compute's
  // logprobs by ~1e-6; the cache's exactness is tested under --compute f32 (prefix_cache_test).
  static std::unique_ptr<HttpServer> server =
      StartHttpServer({"--chat-template", QwenTemplate(), "--prefix-cache", "off"});
  return *server;
}

Json Conversation(const std::string& name) {
  return Json::parse(ReadFile(ChatTemplates() + "/conversations/" + name + ".json"))["messages"];
}

Json Chat(const Json& body, int status = 200) {
  HttpReply r = Post(ChatServer().http_port, "/v1/chat/completions", body);
  INFO(r.body);
  REQUIRE(r.status == status);
  return r.json;
}

TEST_CASE("chat completions render the template as jinja2 does and give the gRPC API's tokens",
          "[server][openai][chat]") {
  // What Python's jinja2 renders for this template and conversation (with the generation
  // prompt), sent through gRPC as raw text without BOS: the prompt the chat endpoint must build.
  const std::string rendered = ReadFile(ChatTemplates() +
                                        "/expected/Qwen-Qwen2.5-7B-Instruct/"
                                        "03-user-only.agp-true.txt");
  v1::GenerateRequest req;
  req.set_prompt(rendered);
  req.set_add_bos(false);
  req.set_max_new_tokens(30);
  req.set_top_logprobs(2);
  auto stub = NewStub(*ChatServer().process);
  StreamResult grpc = RunGenerate(*stub, req);
  REQUIRE(grpc.status.ok());
  std::vector<double> grpc_lp;
  for (const auto& m : grpc.messages) {
    for (const auto& t : m.tokens()) grpc_lp.push_back(t.logprob());
  }
  REQUIRE(grpc_lp.size() == 30);

  const Json body = {{"messages", Conversation("03-user-only")},
                     {"max_tokens", 30},
                     {"temperature", 0},
                     {"logprobs", true},
                     {"top_logprobs", 2}};
  const Json whole = Chat(body);
  CHECK(whole.at("object") == "chat.completion");
  CHECK(whole.at("id").get<std::string>().rfind("chatcmpl-", 0) == 0);
  REQUIRE(whole.at("choices").size() == 1);
  const Json& choice = whole["choices"][0];
  CHECK(choice.at("message").at("role") == "assistant");
  CHECK(choice.at("message").at("content") == grpc.text);
  CHECK(choice.at("finish_reason") == "length");
  CHECK(whole.at("usage").at("prompt_tokens") == grpc.last.usage().prompt_tokens());
  const Json& content = choice.at("logprobs").at("content");
  REQUIRE(content.size() == 30);
  std::string joined;
  for (size_t i = 0; i < content.size(); ++i) {
    const Json& t = content[i];
    CHECK(std::abs(t.at("logprob").get<double>() - grpc_lp[i]) < 1e-6);
    std::string bytes;
    for (const Json& b : t.at("bytes")) bytes += static_cast<char>(b.get<int>());
    CHECK(bytes == t.at("token").get<std::string>());
    joined += bytes;
    REQUIRE(t.at("top_logprobs").size() == 2);
    CHECK(t["top_logprobs"][0]["logprob"].get<double>() >=
          t["top_logprobs"][1]["logprob"].get<double>());
  }
  CHECK(joined == grpc.text);

  Json stream_body = body;
  stream_body["stream"] = true;
  stream_body["stream_options"] = {{"include_usage", true}};
  HttpReply r = Post(ChatServer().http_port, "/v1/chat/completions", stream_body);
  REQUIRE(r.status == 200);
  REQUIRE(r.content_type == "text/event-stream");
  const SseStream s = ParseSse(r.body);
  REQUIRE(s.done);
  REQUIRE(s.chunks.size() >= 4);
  // First the role, then content deltas, then the end of the choice, then usage.
  const Json& first = s.chunks.front()["choices"][0];
  CHECK(first.at("delta") == Json{{"role", "assistant"}, {"content", ""}});
  std::string text;
  size_t streamed_tokens = 0;
  std::string finish;
  for (size_t i = 0; i + 1 < s.chunks.size(); ++i) {
    const Json& c = s.chunks[i];
    CHECK(c.at("object") == "chat.completion.chunk");
    CHECK(c.at("id") == s.chunks[0].at("id"));
    CHECK(c.at("usage").is_null());
    const Json& ch = c.at("choices").at(0);
    CHECK(ch.at("index") == 0);
    CHECK(finish.empty());
    if (ch["delta"].contains("content")) text += ch["delta"]["content"].get<std::string>();
    if (!ch["logprobs"].is_null()) streamed_tokens += ch["logprobs"]["content"].size();
    if (!ch.at("finish_reason").is_null()) {
      finish = ch["finish_reason"];
      CHECK(ch["delta"] == Json::object());
    }
  }
  CHECK(text == grpc.text);
  CHECK(streamed_tokens == 30);
  CHECK(finish == "length");
  CHECK(s.chunks.back().at("choices").empty());
  CHECK(s.chunks.back().at("usage").at("completion_tokens") == 30);
}

TEST_CASE("chat options reach the template: text parts, developer, add_generation_prompt, kwargs",
          "[server][openai][chat]") {
  const Json base = {{"max_tokens", 8}, {"temperature", 0}};
  auto prompt_tokens = [&](const Json& messages, const Json& extra = Json::object()) {
    Json body = base;
    body["messages"] = messages;
    body.update(extra);
    return Chat(body)["usage"]["prompt_tokens"].get<int>();
  };
  const int plain =
      prompt_tokens({{{"role", "user"}, {"content", "Write a haiku about the sea."}}});
  const int parts = prompt_tokens({{{"role", "user"},
                                    {"content",
                                     {{{"type", "text"}, {"text", "Write a haiku "}},
                                      {{"type", "text"}, {"text", "about the sea."}}}}}});
  CHECK(parts == plain);
  const int system = prompt_tokens(
      {{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "Hi"}}});
  const int developer = prompt_tokens(
      {{{"role", "developer"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "Hi"}}});
  CHECK(developer == system);
  // Without the generation prompt "<|im_start|>assistant\n" is not appended.
  const Json user = {{{"role", "user"}, {"content", "Hi"}}};
  CHECK(prompt_tokens(user, {{"add_generation_prompt", false}}) < prompt_tokens(user));
  // Qwen2.5's template reads no kwargs, so an unknown one changes nothing (jinja2 ignores
  // undefined variables the template does not use).
  CHECK(prompt_tokens(user, {{"chat_template_kwargs", {{"enable_thinking", false}}}}) ==
        prompt_tokens(user));
}

// 13-tools-openai's messages as transformers' templates expect them (what 14 and 15 carry):
// an assistant's content "" instead of null, tool-call arguments as objects.
Json TransformersShape(Json messages) {
  for (Json& m : messages) {
    if (m.contains("content") && m["content"].is_null()) m["content"] = "";
    if (!m.contains("tool_calls")) continue;
    for (Json& c : m["tool_calls"]) {
      c["function"]["arguments"] = Json::parse(c["function"]["arguments"].get<std::string>());
    }
  }
  return messages;
}

TEST_CASE("an assistant's tool calls as OpenAI sends them render as the object form",
          "[server][openai][chat][tools]") {
  // OpenAI's shape (content null, arguments a JSON string), as SDKs send the answer back.
  const Json conversation =
      Json::parse(ReadFile(ChatTemplates() + "/conversations/13-tools-openai.json"));
  const Json openai = {{"messages", conversation["messages"]},
                       {"tools", conversation["tools"]},
                       {"max_tokens", 8},
                       {"temperature", 0}};
  Json transformers = openai;
  transformers["messages"] = TransformersShape(conversation["messages"]);

  // Qwen2.5's template writes `arguments | tojson`: given the string, jinja2 renders it quoted
  // (expected/, as transformers would); the server parses it first, as vLLM and llama.cpp do,
  // so the prompt is jinja2's text with the object in its place.
  std::string rendered =
      ReadFile(ChatTemplates() + "/expected/Qwen-Qwen2.5-7B-Instruct/13-tools-openai.agp-true.txt");
  const std::string quoted = R"("{\"location\": \"Paris, France\", \"unit\": \"celsius\"}")";
  const size_t at = rendered.find(quoted);
  REQUIRE(at != std::string::npos);
  rendered.replace(at, quoted.size(), R"({"location": "Paris, France", "unit": "celsius"})");
  v1::GenerateRequest req;
  req.set_prompt(rendered);
  req.set_add_bos(false);
  req.set_max_new_tokens(8);
  auto stub = NewStub(*ChatServer().process);
  StreamResult grpc = RunGenerate(*stub, req);
  REQUIRE(grpc.status.ok());
  for (const Json& body : {openai, transformers}) {
    const Json r = Chat(body);
    CHECK(r["usage"]["prompt_tokens"] == grpc.last.usage().prompt_tokens());
    CHECK(r["choices"][0]["message"]["content"] == grpc.text);
  }

  // Qwen3's template reads the content without checking for none (`'</think>' in
  // message.content`): null reaches it as "".
  auto qwen3 =
      StartHttpServer({"--chat-template", ChatTemplates() + "/templates/Qwen-Qwen3-0.6B.jinja"});
  int prompt_tokens = -1;
  for (const Json& body : {openai, transformers}) {
    HttpReply r = Post(qwen3->http_port, "/v1/chat/completions", body);
    INFO(r.body);
    REQUIRE(r.status == 200);
    if (prompt_tokens < 0) prompt_tokens = r.json["usage"]["prompt_tokens"].get<int>();
    CHECK(r.json["usage"]["prompt_tokens"] == prompt_tokens);
  }
}

TEST_CASE("a template that refuses the conversation is 400 with its message",
          "[server][openai][chat]") {
  auto server = StartHttpServer(
      {"--chat-template", ChatTemplates() + "/templates/google-gemma-2-2b-it.jinja"});
  HttpReply r = Post(server->http_port, "/v1/chat/completions",
                     Json{{"messages", Conversation("01-system-user")}, {"max_tokens", 4}});
  INFO(r.body);
  CHECK(r.status == 400);
  const Json e = ErrorOf(r);
  CHECK(e.at("param") == "messages");
  CHECK_THAT(e.at("message").get<std::string>(), Catch::Contains("System role not supported"));
  // The conversation it accepts works.
  r = Post(server->http_port, "/v1/chat/completions",
           Json{{"messages", Conversation("03-user-only")}, {"max_tokens", 4}});
  CHECK(r.status == 200);
}

TEST_CASE("a --chat-template that cannot be read or parsed fails the start",
          "[server][openai][chat]") {
  const char* bin_dir = std::getenv("TEXTGEN_BIN_DIR");
  REQUIRE(bin_dir != nullptr);
  const std::string bad = ScratchDir() + "/bad.jinja";
  WriteFile(bad, "{% if %}");
  for (const std::string& path : {std::string("/nonexistent/t.jinja"), bad}) {
    CommandResult r = RunCommand(std::string(bin_dir) + "/textgen-server --model " +
                                 ModelPath("stories260K.gguf") +
                                 " --listen 127.0.0.1:0 --http-listen 127.0.0.1:0 "
                                 "--chat-template " +
                                 path + " 2>&1");
    INFO(r.out);
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.out, Catch::Contains(path));
  }
}

}  // namespace openai_chat_test
}  // namespace textgen::testing
