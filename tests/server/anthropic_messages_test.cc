// Anthropic's Messages API end to end (POST /v1/messages, /v1/messages/count_tokens): the
// answer the OpenAI route gives for the same conversation, as content blocks; the event
// stream reassembled into the whole message; stop sequences; token counts; every refusal in
// Anthropic's error shape; API keys in x-api-key; the request metrics.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <vector>

#include "tests/server/anthropic_test_util.h"
#include "tests/support/metrics_scrape.h"

namespace textgen::testing {
namespace anthropic_messages_test {

constexpr char kModel[] = "stories260K.gguf";

// ChatML without tools in use; prefix cache off so that the two APIs' answers to one prompt
// are computed alike (see SharedHttpServer).
HttpServer& Server() {
  static std::unique_ptr<HttpServer> server = StartHttpServer(
      {"--chat-template", TemplatePath("Qwen-Qwen2.5-7B-Instruct"), "--prefix-cache", "off"});
  return *server;
}

Json UserMessages(const std::string& text) {
  return Json::array({{{"role", "user"}, {"content", text}}});
}

// A valid greedy request with `extra` merged in.
Json Body(const Json& extra = Json::object()) {
  Json b = {{"model", kModel},
            {"max_tokens", 16},
            {"temperature", 0},
            {"messages", UserMessages("Tell me a story about a cat.")}};
  b.update(extra);
  return b;
}

Json Create(const Json& body) {
  HttpReply r = Post(Server().http_port, kMessagesPath, body);
  INFO(r.body);
  REQUIRE(r.status == 200);
  REQUIRE(r.content_type == "application/json");
  return r.json;
}

std::vector<SseEvent> CreateStreamed(Json body) {
  body["stream"] = true;
  HttpReply r = Post(Server().http_port, kMessagesPath, body);
  INFO(r.body);
  REQUIRE(r.status == 200);
  REQUIRE(r.content_type == "text/event-stream");
  return ParseAnthropicSse(r.body);
}

// The whole message's text (its text blocks joined).
std::string TextOf(const Json& message) {
  std::string text;
  for (const Json& b : message.at("content")) {
    if (b.at("type") == "text") text += b.at("text").get<std::string>();
  }
  return text;
}

void CheckMessageShape(const Json& m) {
  CHECK(m.at("id").get<std::string>().rfind("msg_", 0) == 0);
  CHECK(m.at("id").get<std::string>().size() == 28);
  CHECK(m.at("type") == "message");
  CHECK(m.at("role") == "assistant");
  CHECK(m.at("model") == kModel);
  CHECK(m.at("content").is_array());
  const Json& usage = m.at("usage");
  CHECK(usage.at("input_tokens").get<int>() > 0);
  CHECK(usage.at("output_tokens").get<int>() > 0);
  CHECK(usage.at("cache_read_input_tokens") == 0);  // the prefix cache is off
  CHECK(usage.at("cache_creation_input_tokens") == 0);
}

TEST_CASE("a message is the OpenAI route's chat completion as content blocks",
          "[server][anthropic]") {
  const Json system = Json::array(
      {{{"type", "text"}, {"text", "You are "}},
       {{"type", "text"}, {"text", "a storyteller."}, {"cache_control", {{"type", "ephemeral"}}}}});
  const Json m = Create(Body({{"system", system}, {"metadata", {{"user_id", "u-1"}}}}));
  CheckMessageShape(m);
  REQUIRE(m.at("content").size() == 1);
  CHECK(m["content"][0].at("type") == "text");
  CHECK(m.at("stop_reason") == "max_tokens");
  CHECK(m.at("stop_sequence").is_null());
  CHECK(m["usage"]["output_tokens"] == 16);

  // The same conversation through /v1/chat/completions: the system blocks are one message.
  Json messages = UserMessages("Tell me a story about a cat.");
  messages.insert(messages.begin(),
                  Json{{"role", "system"}, {"content", "You are a storyteller."}});
  HttpReply openai = Post(Server().http_port, "/v1/chat/completions",
                          Json{{"messages", messages}, {"max_tokens", 16}, {"temperature", 0}});
  REQUIRE(openai.status == 200);
  CHECK(m["content"][0]["text"] == openai.json["choices"][0]["message"]["content"]);
  CHECK(m["usage"]["input_tokens"] == openai.json["usage"]["prompt_tokens"]);

  // count_tokens renders the same prompt.
  HttpReply count = Post(Server().http_port, kCountTokensPath,
                         Json{{"model", kModel},
                              {"system", system},
                              {"messages", UserMessages("Tell me a story about a cat.")}});
  REQUIRE(count.status == 200);
  CHECK(count.json == Json{{"input_tokens", m["usage"]["input_tokens"]}});
}

TEST_CASE("a streamed message reassembles into the whole one", "[server][anthropic][stream]") {
  const Json whole = Create(Body({{"max_tokens", 24}}));
  const std::vector<SseEvent> events = CreateStreamed(Body({{"max_tokens", 24}}));
  // message_start, one text block (start, deltas, stop), message_delta, message_stop.
  CHECK(events[1].name == "content_block_start");
  CHECK(events[1].data.at("content_block") == Json{{"type", "text"}, {"text", ""}});
  CHECK(events.size() > 6);
  CHECK(events.front().data["message"]["usage"]["input_tokens"] == whole["usage"]["input_tokens"]);
  CHECK(events.front().data["message"]["usage"]["output_tokens"] == 0);
  Json streamed = ReassembleMessage(events);
  CheckMessageShape(streamed);
  CHECK(streamed.at("id") != whole.at("id"));
  streamed["id"] = whole["id"];
  CHECK(streamed == whole);
}

TEST_CASE("a stop sequence ends the message and is named", "[server][anthropic]") {
  const std::string text = TextOf(Create(Body({{"max_tokens", 24}})));
  REQUIRE(text.size() > 12);
  const std::string stop = text.substr(text.size() / 2, 3);
  const std::string before = text.substr(0, text.find(stop));
  const Json body = Body({{"max_tokens", 24}, {"stop_sequences", {"never-appears-here", stop}}});
  const Json m = Create(body);
  CHECK(TextOf(m) == before);
  CHECK(m.at("stop_reason") == "stop_sequence");
  CHECK(m.at("stop_sequence") == stop);
  Json streamed = ReassembleMessage(CreateStreamed(body));
  streamed["id"] = m["id"];
  CHECK(streamed == m);
}

TEST_CASE("count_tokens counts the tools and the thinking switch the template renders",
          "[server][anthropic]") {
  const Json base = {{"model", kModel}, {"messages", UserMessages("What is the weather?")}};
  auto count = [](const Json& body) {
    HttpReply r = Post(Server().http_port, kCountTokensPath, body);
    INFO(r.body);
    REQUIRE(r.status == 200);
    return r.json.at("input_tokens").get<int>();
  };
  const int plain = count(base);
  Json with_tools = base;
  with_tools["tools"] = {{{"name", "get_weather"},
                          {"description", "The weather in a city"},
                          {"input_schema",
                           {{"type", "object"},
                            {"properties", {{"city", {{"type", "string"}}}}},
                            {"required", {"city"}}}}}};
  const int tools = count(with_tools);
  CHECK(tools > plain + 10);
  // tool_choice none: the tools are not offered, so not rendered.
  with_tools["tool_choice"] = {{"type", "none"}};
  CHECK(count(with_tools) == plain);
  // A message's input_tokens equals the count.
  const Json m = Create(Body({{"messages", UserMessages("What is the weather?")}}));
  CHECK(m["usage"]["input_tokens"] == plain);
}

struct ErrorCase {
  std::string path;
  std::string body;  // raw, so that invalid JSON can be sent
  int status;
  std::string type;     // Anthropic's error type
  std::string message;  // a part of the message
};

void CheckError(int port, const ErrorCase& c) {
  HttpReply r = Post(port, c.path, c.body);
  INFO(c.path << " " << c.body << " -> " << r.status << " " << r.body);
  CHECK(r.status == c.status);
  CHECK(r.content_type == "application/json");
  const Json e = AnthropicErrorOf(r);
  CHECK(e.at("type") == c.type);
  CHECK_THAT(e.at("message").get<std::string>(), Catch::Contains(c.message));
}

std::string Bad(const Json& extra) { return Body(extra).dump(); }

std::string WithoutField(const std::string& key) {
  Json b = Body();
  b.erase(key);
  return b.dump();
}

// A user message whose content is `blocks`.
Json UserBlocks(const Json& blocks) {
  return Json::array({{{"role", "user"}, {"content", blocks}}});
}

const Json kTool = {
    {"name", "get_weather"},
    {"input_schema", {{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}}}}};

TEST_CASE("malformed requests are 400 invalid_request_error naming the field",
          "[server][anthropic][errors]") {
  const std::string m = kMessagesPath;
  const std::string inv = "invalid_request_error";
  for (const ErrorCase& c : std::vector<ErrorCase>{
           {m, "{\"model\": ", 400, inv, "not valid JSON"},
           {m, "[1]", 400, inv, "must be a JSON object, got an array"},
           {m, WithoutField("max_tokens"), 400, inv, "max_tokens: is required"},
           {m, WithoutField("model"), 400, inv, "model: is required"},
           {m, WithoutField("messages"), 400, inv, "messages: is required"},
           {m, Bad({{"messages", Json::array()}}), 400, inv, "messages: must be a non-empty"},
           {m, Bad({{"max_tokens", 0}}), 400, inv, "max_tokens: must be an integer in [1, "},
           {m, Bad({{"max_tokens", 2.5}}), 400, inv, "max_tokens: must be an integer"},
           {m, Bad({{"temperature", 1.5}}), 400, inv, "temperature: must be in [0, 1]"},
           {m, Bad({{"top_p", 0.5}}), 400, inv, "top_p: has no effect with temperature 0"},
           {m, Bad({{"top_k", 5}}), 400, inv, "top_k: has no effect with temperature 0"},
           {m, Bad({{"stream", "yes"}}), 400, inv, "stream: expected a boolean"},
           {m, Bad({{"stop_sequences", "END"}}), 400, inv, "stop_sequences: expected an array"},
           {m, Bad({{"stop_sequences", {""}}}), 400, inv, "stop_sequences[0]: must not be empty"},
           {m, Bad({{"metadata", {{"session", "x"}}}}), 400, inv, "metadata.session: unknown"},
           {m, Bad({{"frequency_penalty", 0}}), 400, inv,
            "frequency_penalty: unknown field for /v1/messages"},
           {m, Bad({{"service_tier", "auto"}}), 400, inv,
            "service_tier: is not supported by this server"},
           {m, Bad({{"cache_control", {{"type", "persistent"}}}}), 400, inv,
            "cache_control.type: must be \"ephemeral\""},
           {m, Bad({{"output_config", {{"effort", "high"}}}}), 400, inv,
            "output_config.effort: is not supported"},
           {m, Bad({{"thinking", {{"type", "enabled"}, {"budget_tokens", 16}}}}), 400, inv,
            "thinking.budget_tokens: must be less than max_tokens (16)"},
           {m, Bad({{"thinking", {{"type", "enabled"}}}}), 400, inv,
            "thinking.budget_tokens: is required"},
           {m, Bad({{"thinking", {{"type", "sometimes"}}}}), 400, inv,
            "thinking.type: must be enabled, adaptive or disabled"},
           {m, Bad({{"thinking", {{"type", "adaptive"}, {"display", "omitted"}}}}), 400, inv,
            "thinking.display: only \"summarized\""},
           // Qwen2.5's template has no reasoning block.
           {m, Bad({{"thinking", {{"type", "enabled"}, {"budget_tokens", 8}}}}), 400, inv,
            "thinking: this model's chat template has no reasoning block"},
           {m, Bad({{"max_tokens", 4000}}), 400, inv, "max_tokens (4000) = "},
           {m, Bad({{"model", "claude-opus-4"}}), 404, "not_found_error",
            "model: \"claude-opus-4\" does not exist; this server serves \"stories260K.gguf\""},
           {kCountTokensPath, Body().dump(), 400, inv,
            "max_tokens: unknown field for /v1/messages/count_tokens"},
           // --max-prompt-bytes (1 MiB by default) counts every text of the conversation.
           {m, Bad({{"messages", UserMessages(std::string((1 << 20) + 1, 'a'))}}), 400, inv,
            "messages: 1048577 bytes of text, over the server's limit of 1048576 bytes"},
           {m,
            Bad({{"system", std::string(1 << 19, 'a')},
                 {"messages", UserMessages(std::string((1 << 19) + 1, 'a'))}}),
            400, inv, "messages: 1048577 bytes of text"},
           {kCountTokensPath,
            Json{{"model", kModel}, {"messages", UserMessages(std::string((1 << 20) + 1, 'a'))}}
                .dump(),
            400, inv, "over the server's limit of 1048576 bytes"},
       }) {
    CheckError(Server().http_port, c);
  }
}

TEST_CASE("bad messages and content blocks are 400 naming the block",
          "[server][anthropic][errors]") {
  const std::string m = kMessagesPath;
  const std::string inv = "invalid_request_error";
  const Json tool_use = {{"role", "assistant"},
                         {"content",
                          {{{"type", "tool_use"},
                            {"id", "toolu_1"},
                            {"name", "get_weather"},
                            {"input", {{"city", "Paris"}}}}}}};
  const Json result_for = {
      {"role", "user"},
      {"content", {{{"type", "tool_result"}, {"tool_use_id", "toolu_2"}, {"content", "sunny"}}}}};
  for (const ErrorCase& c : std::vector<ErrorCase>{
           {m, Bad({{"messages", {{{"role", "system"}, {"content", "x"}}}}}), 400, inv,
            "messages[0].role: must be \"user\" or \"assistant\", got \"system\" (the system "
            "prompt is the top-level \"system\" field)"},
           {m, Bad({{"messages", {{{"role", "tool"}, {"content", "x"}}}}}), 400, inv,
            "messages[0].role: must be \"user\" or \"assistant\""},
           {m, Bad({{"messages", {{{"content", "x"}}}}}), 400, inv,
            "messages[0].role: is required"},
           {m, Bad({{"messages", {{{"role", "user"}}}}}), 400, inv,
            "messages[0].content: is required"},
           {m, Bad({{"messages", {{{"role", "user"}, {"content", 5}}}}}), 400, inv,
            "messages[0].content: expected a string or a non-empty array"},
           {m, Bad({{"messages", {{{"role", "user"}, {"content", "x"}, {"name", "bob"}}}}}), 400,
            inv, "messages[0].name: unknown field"},
           {m, Bad({{"messages", UserBlocks({{{"type", "image"}, {"source", {}}}})}}), 400, inv,
            "messages[0].content[0].type: \"image\" blocks are not supported by this server"},
           {m, Bad({{"messages", UserBlocks({{{"type", "document"}}})}}), 400, inv,
            "messages[0].content[0].type: \"document\" blocks are not supported"},
           {m, Bad({{"messages", UserBlocks({{{"type", "video"}}})}}), 400, inv,
            "messages[0].content[0].type: unknown content block type \"video\""},
           {m, Bad({{"messages", UserBlocks({{{"text", "hi"}}})}}), 400, inv,
            "messages[0].content[0].type: is required"},
           {m, Bad({{"messages", UserBlocks({{{"type", "text"}}})}}), 400, inv,
            "messages[0].content[0].text: is required"},
           {m, Bad({{"messages", UserBlocks({{{"type", "text"}, {"text", "a"}, {"lang", "en"}}})}}),
            400, inv, "messages[0].content[0].lang: unknown field"},
           {m,
            Bad({{"messages",
                  UserBlocks({{{"type", "text"}, {"text", "a"}, {"citations", Json::array()}}})}}),
            400, inv, "messages[0].content[0].citations: citations are not supported"},
           {m, Bad({{"messages", UserBlocks({{{"type", "thinking"}, {"thinking", "hm"}}})}}), 400,
            inv, "messages[0].content[0].type: \"thinking\" blocks are not allowed in user"},
           {m, Bad({{"messages", {tool_use, result_for}}}), 400, inv,
            "messages[1].content[0].tool_use_id: no tool_use block of an earlier assistant "
            "message has the id \"toolu_2\""},
           {m,
            Bad({{"messages",
                  {{{"role", "user"}, {"content", "hi"}},
                   {{"role", "assistant"},
                    {"content", {{{"type", "tool_result"}, {"tool_use_id", "toolu_1"}}}}},
                   {{"role", "user"}, {"content", "and?"}}}}}),
            400, inv,
            "messages[1].content[0].type: \"tool_result\" blocks are not allowed in "
            "assistant messages"},
           {m,
            Bad({{"messages",
                  {{{"role", "user"}, {"content", "hi"}},
                   {{"role", "assistant"},
                    {"content",
                     {{{"type", "tool_use"}, {"id", "t"}, {"name", "f"}, {"input", "x"}}}}},
                   {{"role", "user"}, {"content", "and?"}}}}}),
            400, inv, "messages[1].content[0].input: expected an object, got a string"},
           {m,
            Bad({{"messages",
                  {{{"role", "user"}, {"content", "hi"}},
                   {{"role", "assistant"}, {"content", "A"}}}}}),
            400, inv, "messages[1]: a final assistant message (a prefill"},
           {m, Bad({{"system", {{{"type", "image"}}}}}), 400, inv,
            "system[0].type: \"image\" blocks are not supported"},
           {m, Bad({{"system", 3}}), 400, inv, "system: expected a string or an array of text"},
       }) {
    CheckError(Server().http_port, c);
  }
}

TEST_CASE("bad tools and tool_choice are 400 naming them", "[server][anthropic][errors]") {
  const std::string m = kMessagesPath;
  const std::string inv = "invalid_request_error";
  const Json priced = {
      {"name", "buy"},
      {"input_schema",
       {{"type", "object"}, {"properties", {{"price", {{"type", "number"}, {"multipleOf", 5}}}}}}}};
  for (const ErrorCase& c : std::vector<ErrorCase>{
           {m, Bad({{"tools", kTool}}), 400, inv, "tools: expected an array"},
           {m, Bad({{"tools", {{{"name", "f"}}}}}), 400, inv, "tools[0].input_schema: is required"},
           {m, Bad({{"tools", {{{"name", "bad name"}, {"input_schema", {{"type", "object"}}}}}}}),
            400, inv, "tools[0].name: must be 1 to 64 of"},
           {m, Bad({{"tools", {{{"name", "f"}, {"input_schema", {{"type", "array"}}}}}}}), 400, inv,
            "tools[0].input_schema.type: must be \"object\""},
           {m, Bad({{"tools", {kTool, kTool}}}), 400, inv,
            "tools[1].name: \"get_weather\" is given twice"},
           {m, Bad({{"tools", {{{"type", "web_search_20250305"}, {"name", "web_search"}}}}}), 400,
            inv, "tools[0].type: server tools (\"web_search_20250305\") are not supported"},
           {m, Bad({{"tools", {kTool}}, {"tool_choice", {{"type", "tool"}, {"name", "nope"}}}}),
            400, inv, "tool_choice.name: no tool is named \"nope\""},
           {m, Bad({{"tool_choice", {{"type", "any"}}}}), 400, inv,
            "tool_choice: \"any\" needs tools"},
           {m, Bad({{"tools", {kTool}}, {"tool_choice", "auto"}}), 400, inv,
            "tool_choice: expected an object"},
           {m, Bad({{"tools", {kTool}}, {"tool_choice", {{"type", "required"}}}}), 400, inv,
            "tool_choice.type: must be auto, any, tool or none"},
           {m, Bad({{"tools", {kTool}}, {"tool_choice", {{"type", "none"}, {"name", "x"}}}}), 400,
            inv, "tool_choice.name: unknown field"},
           // A schema keyword the grammar cannot enforce: named with its pointer.
           {m, Bad({{"tools", {priced}}}), 400, inv,
            "tools[0].input_schema: unsupported JSON Schema keyword \"multipleOf\" at "
            "/properties/price"},
           {m,
            Bad({{"output_config",
                  {{"format",
                    {{"type", "json_schema"},
                     {"schema", {{"type", "array"}, {"uniqueItems", true}}}}}}}}),
            400, inv,
            "output_config.format.schema: unsupported JSON Schema keyword \"uniqueItems\""},
       }) {
    CheckError(Server().http_port, c);
  }
}

TEST_CASE("unknown routes under /v1/messages answer in Anthropic's shape",
          "[server][anthropic][errors]") {
  HttpReply r = Post(Server().http_port, "/v1/messages/batches", Body());
  CHECK(r.status == 404);
  const Json e = AnthropicErrorOf(r);
  CHECK(e.at("type") == "not_found_error");
  CHECK(e.at("message") == "no route POST /v1/messages/batches");
  // A body over httplib's limit (8 MiB) is refused before it is parsed.
  HttpReply big = Post(Server().http_port, kMessagesPath, std::string(9u << 20, ' '));
  CHECK(big.status == 413);
  CHECK(AnthropicErrorOf(big).at("type") == "request_too_large");
  // The OpenAI routes keep theirs.
  HttpReply o = Post(Server().http_port, "/v1/nothing", Body());
  CHECK(o.status == 404);
  CHECK(ErrorOf(o).at("type") == "invalid_request_error");
}

// textgen_requests_total{method, code}, 0 when not counted yet.
double Requests(const Exposition& e, const std::string& method, const std::string& code) {
  for (const Sample& s : e.All("textgen_requests_total")) {
    if (s.labels.at("method") == method && s.labels.at("code") == code) return s.value;
  }
  return 0;
}

TEST_CASE("requests are counted in textgen_requests_total by route", "[server][anthropic]") {
  HttpServer& s = Server();
  const Exposition before = ScrapeMetrics(s.metrics_port);
  Create(Body({{"max_tokens", 4}}));
  CHECK(Post(s.http_port, kMessagesPath, Json{{"model", kModel}}).status == 400);
  CHECK(
      Post(s.http_port, kCountTokensPath, Json{{"model", kModel}, {"messages", UserMessages("hi")}})
          .status == 200);
  // A request is counted once its response is written, which can be just after the client has
  // read it: wait (bounded) for the message to be counted.
  const double ok_before = Requests(before, kMessagesPath, "OK");
  const Exposition e = WaitForMetrics(s.metrics_port, 5, [&](const Exposition& x) {
    return Requests(x, kMessagesPath, "OK") >= ok_before + 1;
  });
  CHECK(Requests(e, kMessagesPath, "OK") == ok_before + 1);
  CHECK(Requests(e, kMessagesPath, "INVALID_ARGUMENT") ==
        Requests(before, kMessagesPath, "INVALID_ARGUMENT") + 1);
  CHECK(Requests(e, kCountTokensPath, "OK") == Requests(before, kCountTokensPath, "OK") + 1);
}

// Sends `bytes` on a new connection to 127.0.0.1:port; what the server writes until it closes
// the connection (or 10 s pass).
std::string Exchange(int port, const std::string& bytes) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  REQUIRE(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
          static_cast<ssize_t>(bytes.size()));
  std::string in;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    char buf[4096];
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    in.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return in;
}

TEST_CASE("with API keys the routes take x-api-key or a Bearer token",
          "[server][anthropic][auth]") {
  const std::string keys = ScratchDir() + "/keys";
  const std::string key = "anthropic-test-key-0123456789";
  WriteFile(keys, key + " alice\n");
  std::unique_ptr<HttpServer> s = StartHttpServer(
      {"--api-keys-file", keys, "--chat-template", TemplatePath("Qwen-Qwen2.5-7B-Instruct")});
  auto post = [&](const httplib::Headers& headers, const std::string& path) {
    httplib::Client client("127.0.0.1", s->http_port);
    client.set_read_timeout(std::chrono::seconds(60));
    Json body = path == kMessagesPath ? Body({{"max_tokens", 2}})
                                      : Json{{"model", kModel}, {"messages", UserMessages("hi")}};
    return ToReply(client.Post(path.c_str(), headers, body.dump(), "application/json"));
  };
  for (const std::string path : {kMessagesPath, kCountTokensPath}) {
    INFO(path);
    for (const httplib::Headers& h :
         {httplib::Headers{}, httplib::Headers{{"x-api-key", "wrong-key-but-long-enough"}},
          httplib::Headers{{"x-api-key", key + "x"}},
          httplib::Headers{{"Authorization", "Bearer wrong-key-but-long-enough"}},
          httplib::Headers{{"Authorization", key}}}) {
      HttpReply r = post(h, path);
      CHECK(r.status == 401);
      CHECK(AnthropicErrorOf(r).at("type") == "authentication_error");
    }
    HttpReply missing = post({}, path);
    CHECK_THAT(missing.body, Catch::Contains("x-api-key: KEY"));
    CHECK(post({{"x-api-key", key}, {"anthropic-version", "2023-06-01"}}, path).status == 200);
    CHECK(post({{"Authorization", "Bearer " + key}}, path).status == 200);
  }
  // Unknown paths under /v1/messages are refused before routing, in Anthropic's shape.
  HttpReply unknown = post({}, "/v1/messages/batches");
  CHECK(unknown.status == 401);
  CHECK(AnthropicErrorOf(unknown).at("type") == "authentication_error");

  // A refused request's body is never read: the server closes the connection after the 401
  // instead of parsing that body as the next request (keep-alive clients reuse connections).
  const std::string body = Body({{"max_tokens", 2}}).dump();
  for (const std::string& path :
       std::vector<std::string>{kMessagesPath, kCountTokensPath, "/v1/chat/completions"}) {
    INFO(path);
    const std::string request = "POST " + path +
                                " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                "Content-Length: " +
                                std::to_string(body.size()) + "\r\n";
    const std::string replies =
        Exchange(s->http_port, request + "x-api-key: wrong-key-but-long-enough\r\n\r\n" + body +
                                   request + "x-api-key: " + key + "\r\n\r\n" + body);
    CHECK(replies.starts_with("HTTP/1.1 401 "));
    CHECK_THAT(replies, Catch::Contains("Connection: close"));
    CHECK(replies.find("HTTP/1.1 ", 1) == std::string::npos);
  }
}

}  // namespace anthropic_messages_test
}  // namespace textgen::testing
