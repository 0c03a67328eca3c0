// Every refusal of the OpenAI-compatible HTTP API: the status, OpenAI's error shape, and the
// field named in `param` and in the message. Nothing is silently ignored.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "tests/server/openai_test_util.h"

namespace textgen::testing {
namespace openai_errors_test {

struct ErrorCase {
  std::string path;
  std::string body;  // raw, so that invalid JSON can be sent
  int status;
  std::string param;    // "" = null
  std::string message;  // a part of the message
};

void CheckError(const ErrorCase& c) {
  HttpReply r = Post(SharedHttpServer().http_port, c.path, c.body);
  INFO(c.path << " " << c.body << " -> " << r.status << " " << r.body);
  CHECK(r.status == c.status);
  CHECK(r.content_type == "application/json");
  const Json e = ErrorOf(r);
  if (c.param.empty()) {
    CHECK(e.at("param").is_null());
  } else {
    CHECK(e.at("param") == c.param);
  }
  CHECK_THAT(e.at("message").get<std::string>(), Catch::Contains(c.message));
  CHECK(e.at("type") == (c.status == 404 || c.status == 400 ? "invalid_request_error"
                                                            : e.at("type").get<std::string>()));
}

constexpr char kC[] = "/v1/completions";
constexpr char kChat[] = "/v1/chat/completions";

// A valid completions body with `extra` merged in.
std::string Body(const Json& extra) {
  Json b = {{"prompt", "Once upon a time"}, {"max_tokens", 4}};
  b.update(extra);
  return b.dump();
}

std::string ChatBody(const Json& extra) {
  Json b = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 4}};
  b.update(extra);
  return b.dump();
}

// A tool call as an assistant message carries it; `arguments` as given.
Json Call(const Json& arguments) {
  return {{"id", "call_1"},
          {"type", "function"},
          {"function", {{"name", "f"}, {"arguments", arguments}}}};
}

// A chat body whose second message is an assistant turn with these tool_calls.
std::string AssistantCalls(const Json& tool_calls) {
  return ChatBody({{"messages",
                    {{{"role", "user"}, {"content", "hi"}},
                     {{"role", "assistant"}, {"content", nullptr}, {"tool_calls", tool_calls}},
                     {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "42"}}}}});
}

TEST_CASE("malformed bodies are 400 saying why", "[server][openai][errors]") {
  for (const ErrorCase& c : std::vector<ErrorCase>{
           {kC, "{\"prompt\": ", 400, "", "not valid JSON"},
           {kC, "", 400, "", "not valid JSON"},
           {kChat, "[1, 2]", 400, "", "must be a JSON object, got an array"},
           {kC, "{}", 400, "prompt", "prompt: is required"},
           {kChat, "{}", 400, "messages", "messages: is required"},
       }) {
    CheckError(c);
  }
}

TEST_CASE("unknown and unsupported fields are refused by name", "[server][openai][errors]") {
  for (const ErrorCase& c : std::vector<ErrorCase>{
           {kC, Body({{"temprature", 0.5}}), 400, "temprature", "unknown field"},
           {kC, Body({{"messages", Json::array()}}), 400, "messages", "unknown field"},
           {kChat, ChatBody({{"prompt", "x"}}), 400, "prompt", "unknown field"},
           {kChat, ChatBody({{"tools", {{{"type", "function"}}}}}), 400, "tools",
            "tools[0].function: must be an object"},
           {kChat, ChatBody({{"tool_choice", "auto"}}), 400, "tool_choice", "needs tools"},
           {kChat, AssistantCalls(5), 400, "messages[1].tool_calls", "expected an array"},
           {kChat, AssistantCalls(Json::array({{{"type", "function"}}})), 400,
            "messages[1].tool_calls[0].function", "is required"},
           {kChat,
            AssistantCalls(Json::array({{{"type", "custom"}, {"function", {{"name", "f"}}}}})), 400,
            "messages[1].tool_calls[0].type", "must be \"function\""},
           {kChat, AssistantCalls(Json::array({Call("{\"a\": ")})), 400,
            "messages[1].tool_calls[0].function.arguments", "is not a JSON object's text"},
           {kChat, AssistantCalls(Json::array({Call("[1]")})), 400,
            "messages[1].tool_calls[0].function.arguments", "is not a JSON object's text"},
           {kChat, AssistantCalls(Json::array({Call(7)})), 400,
            "messages[1].tool_calls[0].function.arguments",
            "expected a string (a JSON object's text), got an integer"},
           {kChat,
            ChatBody({{"messages",
                       {{{"role", "user"},
                         {"content", "hi"},
                         {"tool_calls", Json::array({Call("{}")})}}}}}),
            400, "messages[0].tool_calls", "only assistant messages"},
           {kChat, ChatBody({{"response_format", {{"type", "xml"}}}}), 400, "response_format.type",
            "must be text, json_object, json_schema"},
           {kChat, ChatBody({{"response_format", {{"type", "json_schema"}}}}), 400,
            "response_format.json_schema", "is required"},
           {kChat, ChatBody({{"response_format", {{"type", "text"}}}, {"guided_regex", "a+"}}), 400,
            "guided_regex", "cannot be combined with response_format"},
           {kChat, ChatBody({{"reasoning_format", "loud"}}), 400, "reasoning_format",
            "must be separate or raw"},
           {kC, Body({{"logit_bias", {{"50256", -100}}}}), 400, "logit_bias", "not supported"},
           {kC, Body({{"presence_penalty", 0.5}}), 400, "presence_penalty", "not supported"},
           {kC, Body({{"frequency_penalty", -1}}), 400, "frequency_penalty", "not supported"},
           {kC, Body({{"echo", true}}), 400, "echo", "not supported"},
           {kC, Body({{"suffix", "end"}}), 400, "suffix", "not supported"},
           {kChat, ChatBody({{"audio", {{"voice", "alloy"}}}}), 400, "audio", "not supported"},
       }) {
    CheckError(c);
  }
}

TEST_CASE("no-op values of unsupported fields and user are accepted", "[server][openai][errors]") {
  const Json ok = {
      {"presence_penalty", 0}, {"frequency_penalty", 0}, {"logit_bias", Json::object()},
      {"user", "someone"},     {"echo", false},          {"seed", nullptr},
      {"temperature", 0}};
  HttpReply r = Post(SharedHttpServer().http_port, kC, Body(ok));
  INFO(r.body);
  CHECK(r.status == 200);
}

TEST_CASE("wrong types and out-of-range values name the field", "[server][openai][errors]") {
  for (const ErrorCase& c : std::vector<ErrorCase>{
           {kC, Body({{"max_tokens", "10"}}), 400, "max_tokens", "got a string"},
           {kC, Body({{"max_tokens", 0}}), 400, "max_tokens", "[1, 4096]"},
           {kC, Body({{"max_tokens", 2.5}}), 400, "max_tokens", "integer"},
           {kC, Body({{"max_tokens", 100000}}), 400, "max_tokens", "got 100000"},
           {kChat, ChatBody({{"max_completion_tokens", 5}}), 400, "max_completion_tokens",
            "differs from max_tokens"},
           {kC, Body({{"temperature", 2.5}}), 400, "temperature", "[0, 2]"},
           {kC, Body({{"temperature", "hot"}}), 400, "temperature", "got a string"},
           {kC, Body({{"top_p", 0}}), 400, "top_p", "(0, 1]"},
           {kC, Body({{"top_p", 1.5}}), 400, "top_p", "(0, 1]"},
           {kC, Body({{"n", 0}}), 400, "n", "[1, 8]"},
           {kC, Body({{"n", 9}}), 400, "n", "[1, 8]"},
           {kC, Body({{"stop", 5}}), 400, "stop", "a string or an array of strings"},
           {kC, Body({{"stop", {"a", 1}}}), 400, "stop[1]", "expected a string"},
           {kC, Body({{"stop", {""}}}), 400, "stop[0]", "must not be empty"},
           {kC, Body({{"seed", "x"}}), 400, "seed", "integer"},
           {kC, Body({{"logprobs", 21}}), 400, "logprobs", "[0, 20]"},
           {kC, Body({{"logprobs", true}}), 400, "logprobs", "integer"},
           {kChat, ChatBody({{"logprobs", 2}}), 400, "logprobs", "expected a boolean"},
           {kChat, ChatBody({{"top_logprobs", 2}}), 400, "top_logprobs", "needs logprobs"},
           {kChat, ChatBody({{"logprobs", true}, {"top_logprobs", 21}}), 400, "top_logprobs",
            "[0, 20]"},
           {kC, Body({{"stream", "yes"}}), 400, "stream", "expected a boolean"},
           {kC, Body({{"stream_options", {{"include_usage", true}}}}), 400, "stream_options",
            "only allowed with stream"},
           {kC, Body({{"stream", true}, {"stream_options", {{"include_usage", 1}}}}), 400,
            "stream_options.include_usage", "expected a boolean"},
           {kC, Body({{"stream", true}, {"stream_options", {{"continuous", true}}}}), 400,
            "stream_options.continuous", "unknown field"},
           {kC, Body({{"model", 3}}), 400, "model", "expected a string"},
           {kC, Body({{"min_p", 1}}), 400, "min_p", "[0, 1)"},
           {kC, Body({{"repetition_penalty", 0}}), 400, "repetition_penalty", "(0, 10]"},
           {kC, Body({{"early_stopping", "sometimes"}}), 400, "early_stopping", "never"},
           {kC, Body({{"speculative", "yes"}}), 400, "speculative", "expected a boolean"},
           {kChat, ChatBody({{"prediction", "text"}}), 400, "prediction",
            R"(must be {"type": "content")"},
           {kChat, ChatBody({{"prediction", {{"type", "image"}, {"content", "x"}}}}), 400,
            "prediction", R"(must be {"type": "content")"},
           {kChat, ChatBody({{"prediction", {{"type", "content"}}}}), 400, "prediction",
            R"(must be {"type": "content")"},
           {kChat, ChatBody({{"prediction", {{"type", "content"}, {"content", 5}}}}), 400,
            "prediction.content", "expected a string or an array of text parts"},
       }) {
    CheckError(c);
  }
}

TEST_CASE("fields without effect under the chosen method are refused", "[server][openai][errors]") {
  for (const ErrorCase& c : std::vector<ErrorCase>{
           {kC, Body({{"temperature", 0}, {"top_p", 0.5}}), 400, "top_p",
            "no effect with temperature 0"},
           {kC, Body({{"temperature", 0}, {"top_k", 40}}), 400, "top_k",
            "no effect with temperature 0"},
           {kC, Body({{"temperature", 0}, {"min_p", 0.1}}), 400, "min_p",
            "no effect with temperature 0"},
           {kC, Body({{"length_penalty", 0.5}}), 400, "length_penalty", "needs use_beam_search"},
           {kC, Body({{"early_stopping", true}}), 400, "early_stopping", "needs use_beam_search"},
           {kC, Body({{"best_of", 3}}), 400, "best_of", "must equal n"},
           {kC, Body({{"use_beam_search", true}, {"temperature", 0.7}}), 400, "temperature",
            "with use_beam_search"},
           {kC, Body({{"use_beam_search", true}, {"top_p", 0.9}}), 400, "top_p",
            "with use_beam_search"},
           {kC, Body({{"use_beam_search", true}, {"best_of", 2}, {"n", 3}}), 400, "n",
            "at most best_of"},
           {kC, Body({{"use_beam_search", true}, {"best_of", 2}, {"logprobs", 2}}), 400, "logprobs",
            "not reported with use_beam_search"},
       }) {
    CheckError(c);
  }
}

TEST_CASE("prompts and messages of the wrong shape are refused", "[server][openai][errors]") {
  for (const ErrorCase& c : std::vector<ErrorCase>{
           {kC, Body({{"prompt", Json::array({"a", "b"})}}), 400, "prompt",
            "one prompt per request"},
           {kC, Body({{"prompt", Json::array()}}), 400, "prompt", "non-empty array of token ids"},
           {kC, Body({{"prompt", {1, -2}}}), 400, "prompt", "integers >= 0"},
           {kC, Body({{"prompt", {1, 999999}}}), 400, "", "999999"},
           {kC, Body({{"prompt", Json::object()}}), 400, "prompt", "expected a string"},
           {kChat, ChatBody({{"messages", Json::array()}}), 400, "messages", "non-empty array"},
           {kChat, ChatBody({{"messages", "hi"}}), 400, "messages", "non-empty array"},
           {kChat, ChatBody({{"messages", {1}}}), 400, "messages[0]", "expected an object"},
           {kChat, ChatBody({{"messages", {{{"content", "hi"}}}}}), 400, "messages[0].role",
            "is required"},
           {kChat, ChatBody({{"messages", {{{"role", "robot"}, {"content", "hi"}}}}}), 400,
            "messages[0].role", "\"robot\""},
           {kChat, ChatBody({{"messages", {{{"role", "user"}}}}}), 400, "messages[0].content",
            "is required"},
           {kChat, ChatBody({{"messages", {{{"role", "user"}, {"content", 5}}}}}), 400,
            "messages[0].content", "got an integer"},
           {kChat,
            ChatBody({{"messages",
                       {{{"role", "user"},
                         {"content", {{{"type", "image_url"}, {"image_url", "x"}}}}}}}}),
            400, "messages[0].content[0].type", "only text parts"},
       }) {
    CheckError(c);
  }
}

TEST_CASE("an unknown model is 404 naming the served one", "[server][openai][errors]") {
  CheckError({kC, Body({{"model", "gpt-4o"}}), 404, "model", "serves \"stories260K.gguf\""});
}

TEST_CASE("a prompt and max_tokens beyond the context are 400 naming the field",
          "[server][openai][errors]") {
  std::string prompt;
  for (int i = 0; i < 450; ++i) prompt += " Once upon a time";  // 1,801 tokens of 2,048
  CheckError({kC, Json{{"prompt", prompt}, {"max_tokens", 300}}.dump(), 400, "max_tokens",
              "exceeds the model's context of 2048 tokens"});
  CheckError({kC, Json{{"prompt", prompt + prompt}, {"max_tokens", 1}}.dump(), 400, "prompt",
              "the model's context holds 2048"});
}

TEST_CASE("chat completions without a chat template say what to do", "[server][openai][errors]") {
  // stories260K has no chat template and the shared server is started without one.
  HttpReply r = Post(SharedHttpServer().http_port, kChat, ChatBody(Json::object()));
  INFO(r.body);
  CHECK(r.status == 400);
  CHECK_THAT(ErrorOf(r).at("message").get<std::string>(), Catch::Contains("--chat-template"));
}

TEST_CASE("unknown routes, methods and oversized bodies get JSON errors",
          "[server][openai][errors]") {
  HttpServer& s = SharedHttpServer();
  HttpReply r = Get(s.http_port, "/v1/embeddings");
  CHECK(r.status == 404);
  CHECK_THAT(ErrorOf(r).at("message").get<std::string>(), Catch::Contains("/v1/embeddings"));
  r = Get(s.http_port, "/v1/completions");
  CHECK(r.status == 404);
  ErrorOf(r);
  r = Post(s.http_port, kC, std::string(9u << 20, ' '));
  CHECK(r.status == 413);
  ErrorOf(r);
}

}  // namespace openai_errors_test
}  // namespace textgen::testing
