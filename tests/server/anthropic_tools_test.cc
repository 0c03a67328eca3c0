// Anthropic's Messages API with tools and thinking, end to end on a random-weight model with
// Qwen3's vocabulary: a forced tool call (tool_choice tool / any) is a tool_use block whose
// input the tool's schema accepts; tool_use and tool_result blocks render as the OpenAI route's
// tool_calls and tool messages; thinking {enabled, budget_tokens} gives a budgeted thinking
// block first (DeepSeek-R1's template, whose prompt opens the block), and disabled none.
#include <algorithm>
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "tests/server/anthropic_test_util.h"

namespace textgen::testing {
namespace anthropic_tools_test {

constexpr char kModel[] = "anthropic-qwen3.gguf";

HttpServer& QwenServer() {
  // Prefix cache off: the two APIs' answers to one prompt are compared (see SharedHttpServer).
  static std::unique_ptr<HttpServer> server =
      StartHttpServer({"--chat-template", TemplatePath("Qwen-Qwen3-0.6B"), "--prefix-cache", "off"},
                      Qwen3VocabModel());
  return *server;
}

HttpServer& ThinkingServer() {
  static std::unique_ptr<HttpServer> server =
      StartHttpServer({"--chat-template", TemplatePath("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B"),
                       "--prefix-cache", "off"},
                      Qwen3VocabModel());
  return *server;
}

const Json kWeatherSchema = {{"type", "object"},
                             {"properties",
                              {{"city", {{"type", "string"}, {"enum", {"Paris", "Tokyo", "Lima"}}}},
                               {"days", {{"type", "integer"}, {"minimum", 1}, {"maximum", 7}}}}},
                             {"required", {"city", "days"}},
                             {"additionalProperties", false}};

const Json kTools = {{{"name", "get_weather"},
                      {"description", "The forecast for a city"},
                      {"input_schema", kWeatherSchema}},
                     {{"name", "get_time"},
                      {"description", "The time in a zone"},
                      {"input_schema",
                       {{"type", "object"},
                        {"properties", {{"zone", {{"type", "string"}, {"enum", {"UTC", "CET"}}}}}},
                        {"required", {"zone"}},
                        {"additionalProperties", false}}}}};

// Whether `input` is valid under the tool's schema (the two schemas above, checked by hand).
void CheckInput(const std::string& tool, const Json& input) {
  INFO(tool << " " << input.dump());
  REQUIRE(input.is_object());
  if (tool == "get_weather") {
    CHECK(input.size() == 2);
    const std::vector<std::string> cities = {"Paris", "Tokyo", "Lima"};
    REQUIRE(input.at("city").is_string());
    CHECK(std::find(cities.begin(), cities.end(), input["city"].get<std::string>()) !=
          cities.end());
    REQUIRE(input.at("days").is_number_integer());
    CHECK(input["days"].get<int>() >= 1);
    CHECK(input["days"].get<int>() <= 7);
  } else {
    REQUIRE(tool == "get_time");
    CHECK(input.size() == 1);
    CHECK((input.at("zone") == "UTC" || input.at("zone") == "CET"));
  }
}

Json Post200(HttpServer& s, const std::string& path, const Json& body) {
  HttpReply r = Post(s.http_port, path, body);
  INFO(path << " " << body.dump() << " -> " << r.body);
  REQUIRE(r.status == 200);
  return r.json;
}

Json Streamed(HttpServer& s, Json body) {
  body["stream"] = true;
  HttpReply r = Post(s.http_port, kMessagesPath, body);
  INFO(r.body);
  REQUIRE(r.status == 200);
  return ReassembleMessage(ParseAnthropicSse(r.body));
}

Json ToolBody(const Json& tool_choice) {
  return {{"model", kModel},
          {"max_tokens", 200},
          {"temperature", 0},
          {"thinking", {{"type", "disabled"}}},
          {"tools", kTools},
          {"tool_choice", tool_choice},
          {"messages", {{{"role", "user"}, {"content", "What is the weather in Paris?"}}}}};
}

TEST_CASE("a forced tool call is a tool_use block whose input the schema accepts",
          "[server][anthropic][tools]") {
  for (const Json& choice :
       {Json{{"type", "tool"}, {"name", "get_weather"}},
        Json{{"type", "tool"}, {"name", "get_time"}, {"disable_parallel_tool_use", true}},
        Json{{"type", "any"}, {"disable_parallel_tool_use", true}}}) {
    INFO(choice.dump());
    const Json body = ToolBody(choice);
    const Json m = Post200(QwenServer(), kMessagesPath, body);
    CHECK(m.at("stop_reason") == "tool_use");
    REQUIRE(m.at("content").size() == 1);
    const Json& call = m["content"][0];
    CHECK(call.at("type") == "tool_use");
    CHECK_FALSE(call.at("id").get<std::string>().empty());
    if (choice.contains("name")) CHECK(call.at("name") == choice["name"]);
    CheckInput(call.at("name"), call.at("input"));
    // The stream's partial_json deltas make the same input.
    Json streamed = Streamed(QwenServer(), body);
    REQUIRE(streamed.at("content").size() == 1);
    CHECK(streamed["content"][0].at("id") != call.at("id"));  // ids are fresh per response
    streamed["content"][0]["id"] = call["id"];
    streamed["id"] = m["id"];
    CHECK(streamed == m);
  }
}

// kTools in OpenAI's shape.
Json OpenAiTools() {
  Json tools = Json::array();
  for (const Json& t : kTools) {
    tools.push_back({{"type", "function"},
                     {"function",
                      {{"name", t["name"]},
                       {"description", t["description"]},
                       {"parameters", t["input_schema"]}}}});
  }
  return tools;
}

// One conversation with a call and its result, in both APIs' shapes.
Json AnthropicConversation(bool is_error) {
  return {{{"role", "user"}, {"content", "What is the weather in Paris?"}},
          {{"role", "assistant"},
           {"content",
            {{{"type", "thinking"}, {"thinking", "The user wants a forecast."}, {"signature", "s"}},
             {{"type", "text"}, {"text", "Let me check."}},
             {{"type", "tool_use"},
              {"id", "toolu_01"},
              {"name", "get_weather"},
              {"input", {{"city", "Paris"}, {"days", 2}}}}}}},
          {{"role", "user"},
           {"content",
            {{{"type", "tool_result"},
              {"tool_use_id", "toolu_01"},
              {"is_error", is_error},
              {"content", {{{"type", "text"}, {"text", "Sunny, 24 C"}}}}},
             {{"type", "text"}, {"text", "Thanks! And tomorrow?"}}}}}};
}

Json OpenAiConversation() {
  return {{{"role", "user"}, {"content", "What is the weather in Paris?"}},
          {{"role", "assistant"},
           {"content", "Let me check."},
           {"reasoning_content", "The user wants a forecast."},
           {"tool_calls",
            {{{"id", "toolu_01"},
              {"type", "function"},
              {"function",
               {{"name", "get_weather"}, {"arguments", {{"city", "Paris"}, {"days", 2}}}}}}}}},
          {{"role", "tool"},
           {"tool_call_id", "toolu_01"},
           {"name", "get_weather"},
           {"content", "Sunny, 24 C"}},
          {{"role", "user"}, {"content", "Thanks! And tomorrow?"}}};
}

TEST_CASE("tool_use and tool_result blocks are the OpenAI route's tool calls and tool messages",
          "[server][anthropic][tools]") {
  HttpServer& s = QwenServer();
  const Json m = Post200(s, kMessagesPath,
                         {{"model", kModel},
                          {"max_tokens", 24},
                          {"temperature", 0},
                          {"thinking", {{"type", "disabled"}}},
                          {"tools", kTools},
                          {"messages", AnthropicConversation(false)}});
  const Json o = Post200(s, "/v1/chat/completions",
                         {{"max_tokens", 24},
                          {"temperature", 0},
                          {"chat_template_kwargs", {{"enable_thinking", false}}},
                          {"reasoning_budget", 0},
                          {"tools", OpenAiTools()},
                          {"messages", OpenAiConversation()}});
  CHECK(m["usage"]["input_tokens"] == o["usage"]["prompt_tokens"]);
  CHECK(m["usage"]["output_tokens"] == o["usage"]["completion_tokens"]);
  const Json& message = o["choices"][0]["message"];
  std::string text;
  Json calls = Json::array();
  for (const Json& b : m.at("content")) {
    CHECK(b.at("type") != "thinking");
    if (b.at("type") == "text") text += b.at("text").get<std::string>();
    if (b.at("type") == "tool_use") calls.push_back({b["name"], b["input"]});
  }
  CHECK(text == (message.at("content").is_null() ? "" : message["content"].get<std::string>()));
  Json openai_calls = Json::array();
  for (const Json& c : message.value("tool_calls", Json::array())) {
    openai_calls.push_back(
        {c["function"]["name"], Json::parse(c["function"]["arguments"].get<std::string>())});
  }
  CHECK(calls == openai_calls);
  CHECK(m.at("stop_reason") == (calls.empty() ? "max_tokens" : "tool_use"));

  // count_tokens renders the same prompt; an error result tells the model so, in its text.
  Json count = {{"model", kModel},
                {"thinking", {{"type", "disabled"}}},
                {"tools", kTools},
                {"messages", AnthropicConversation(false)}};
  CHECK(Post200(s, kCountTokensPath, count).at("input_tokens") == m["usage"]["input_tokens"]);
  count["messages"] = AnthropicConversation(true);
  CHECK(Post200(s, kCountTokensPath, count).at("input_tokens").get<int>() >
        m["usage"]["input_tokens"].get<int>());
}

TEST_CASE("an assistant turn of tool_use blocks alone renders with Qwen3's template",
          "[server][anthropic][tools]") {
  // Qwen3's template concatenates the assistant's content: it must be a string, not null.
  HttpServer& s = QwenServer();
  const Json call = {{"type", "tool_use"},
                     {"id", "toolu_07"},
                     {"name", "get_weather"},
                     {"input", {{"city", "Lima"}, {"days", 1}}}};
  const Json messages = {
      {{"role", "user"}, {"content", "Weather in Lima?"}},
      {{"role", "assistant"}, {"content", {call}}},
      {{"role", "user"},
       {"content", {{{"type", "tool_result"}, {"tool_use_id", "toolu_07"}, {"content", "Fog"}}}}}};
  const Json count = Post200(s, kCountTokensPath,
                             {{"model", kModel},
                              {"thinking", {{"type", "disabled"}}},
                              {"tools", kTools},
                              {"messages", messages}});
  const Json o =
      Post200(s, "/v1/chat/completions",
              {{"max_tokens", 1},
               {"chat_template_kwargs", {{"enable_thinking", false}}},
               {"reasoning_budget", 0},
               {"tools", OpenAiTools()},
               {"messages",
                {{{"role", "user"}, {"content", "Weather in Lima?"}},
                 {{"role", "assistant"},
                  {"content", ""},
                  {"tool_calls",
                   {{{"id", "toolu_07"},
                     {"type", "function"},
                     {"function", {{"name", "get_weather"}, {"arguments", call["input"]}}}}}}},
                 {{"role", "tool"},
                  {"tool_call_id", "toolu_07"},
                  {"name", "get_weather"},
                  {"content", "Fog"}}}}});
  CHECK(count.at("input_tokens") == o["usage"]["prompt_tokens"]);
}

// The number of tokens `text` encodes to (the served tokenizer, over gRPC).
int TokenCount(HttpServer& s, const std::string& text) {
  auto stub = NewStub(*s.process);
  grpc::ClientContext ctx;
  v1::TokenizeRequest req;
  req.set_text(text);
  v1::TokenizeResponse resp;
  REQUIRE(stub->Tokenize(&ctx, req, &resp).ok());
  return resp.ids_size();
}

TEST_CASE("thinking enabled gives a budgeted thinking block first, then the text",
          "[server][anthropic][thinking]") {
  HttpServer& s = ThinkingServer();
  Json body = {{"model", kModel},
               {"max_tokens", 40},
               {"temperature", 0},
               {"thinking", {{"type", "enabled"}, {"budget_tokens", 8}}},
               {"messages", {{{"role", "user"}, {"content", "Why is the sky blue?"}}}}};
  const Json m = Post200(s, kMessagesPath, body);
  const Json& content = m.at("content");
  INFO(m.dump());
  REQUIRE(content.size() >= 1);
  CHECK(content[0].at("type") == "thinking");
  CHECK(content[0].at("signature") == "");
  const std::string thinking = content[0].at("thinking");
  CHECK_FALSE(thinking.empty());
  // At most 8 tokens (the text is trimmed and read back: give or take a token at the seams).
  CHECK(TokenCount(s, thinking) <= 9);
  for (size_t i = 1; i < content.size(); ++i) CHECK(content[i].at("type") == "text");
  CHECK(m.at("stop_reason") != "tool_use");
  Json streamed = Streamed(s, body);
  streamed["id"] = m["id"];
  CHECK(streamed == m);

  // Disabled: the template closes the block and the budget is 0, so nothing is thought.
  body["thinking"] = {{"type", "disabled"}};
  const Json off = Post200(s, kMessagesPath, body);
  for (const Json& b : off.at("content")) CHECK(b.at("type") == "text");
  // Counted with the same switch: the prompts differ by the closed block.
  auto count = [&](const Json& thinking_field) {
    Json c = {{"model", kModel}, {"messages", body["messages"]}, {"thinking", thinking_field}};
    return Post200(s, kCountTokensPath, c).at("input_tokens").get<int>();
  };
  CHECK(count({{"type", "disabled"}}) == off["usage"]["input_tokens"]);
  CHECK(count({{"type", "enabled"}, {"budget_tokens", 8}}) == m["usage"]["input_tokens"]);
  CHECK(count({{"type", "disabled"}}) > count({{"type", "adaptive"}}));
}

}  // namespace anthropic_tools_test
}  // namespace textgen::testing
