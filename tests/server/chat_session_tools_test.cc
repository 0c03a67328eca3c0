// A gRPC Chat session with tools: a forced call's turn is kept in the session as an assistant
// message with tool_calls (rendered back through the template), the tool's result follows as a
// role "tool" message, and the next turn reuses the conversation's KV.
#include <catch2/catch.hpp>
#include <string>

#include "nlohmann/json.hpp"
#include "tests/server/server_test_util.h"

namespace textgen::testing {
namespace chat_session_tools_test {

ServerProcess& Server() {
  static std::unique_ptr<ServerProcess> server = [] {
    ServerProcessOptions o;
    o.model = QwenVocabModel();
    o.extra_args = {"--chat-template", ChatTemplatesDir() + "/templates/Qwen-Qwen3-0.6B.jinja"};
    return std::make_unique<ServerProcess>(o);
  }();
  return *server;
}

void AddTool(v1::ChatRequest* req) {
  v1::Tool* t = req->add_tools();
  t->set_name("get_weather");
  t->set_description("The weather in a city");
  auto& fields = *t->mutable_parameters()->mutable_fields();
  fields["type"].set_string_value("object");
  auto& props = *fields["properties"].mutable_struct_value()->mutable_fields();
  auto& city = *props["city"].mutable_struct_value()->mutable_fields();
  city["type"].set_string_value("string");
  city["maxLength"].set_number_value(10);
  fields["required"].mutable_list_value()->add_values()->set_string_value("city");
  fields["additionalProperties"].set_bool_value(false);
}

TEST_CASE("a session keeps a turn's tool calls and continues after the tool's result",
          "[server][session][tools]") {
  auto stub = NewStub(Server());
  grpc::ClientContext ctx;
  v1::CreateSessionRequest create;
  v1::Session session;
  REQUIRE(stub->CreateSession(&ctx, create, &session).ok());

  v1::ChatRequest turn1;
  turn1.set_session_id(session.session_id());
  v1::ChatMessage* m = turn1.add_messages();
  m->set_role("user");
  m->set_content("Weather in Paris?");
  AddTool(&turn1);
  turn1.mutable_tool_choice()->set_mode(v1::ToolChoice::FUNCTION);
  turn1.mutable_tool_choice()->set_function_name("get_weather");
  turn1.set_max_new_tokens(200);
  (*turn1.mutable_template_kwargs()->mutable_fields())["enable_thinking"].set_bool_value(false);
  StreamResult r1 = RunChat(*stub, turn1);
  INFO(r1.status.error_message());
  REQUIRE(r1.status.ok());
  REQUIRE(r1.last.hypotheses(0).tool_calls_size() == 1);
  const v1::ToolCall& call = r1.last.hypotheses(0).tool_calls(0);
  CHECK(call.name() == "get_weather");
  const nlohmann::json args = nlohmann::json::parse(call.arguments(), nullptr, false);
  REQUIRE(args.is_object());
  CHECK(args["city"].is_string());
  CHECK(r1.last.finish_reason() == v1::TOOL_CALLS);

  // The tool's answer; the template renders the session's assistant tool call before it.
  v1::ChatRequest turn2;
  turn2.set_session_id(session.session_id());
  v1::ChatMessage* result = turn2.add_messages();
  result->set_role("tool");
  result->set_tool_call_id(call.id());
  result->set_content("{\"temperature\": 21}");
  AddTool(&turn2);
  turn2.set_max_new_tokens(8);
  (*turn2.mutable_template_kwargs()->mutable_fields())["enable_thinking"].set_bool_value(false);
  StreamResult r2 = RunChat(*stub, turn2);
  INFO(r2.status.error_message());
  REQUIRE(r2.status.ok());
  // The conversation's KV is reused up to turn 1's generation prompt: Qwen3's template renders
  // an earlier assistant turn without the empty `<think>\n\n</think>\n\n` (4 tokens) that
  // turn 1's prompt ended with, so the re-rendered history differs from there on.
  CHECK(r2.last.usage().cached_tokens() >= r1.last.usage().prompt_tokens() - 4);
  CHECK(r2.last.usage().prompt_tokens() > r1.last.usage().prompt_tokens());
}

}  // namespace chat_session_tools_test
}  // namespace textgen::testing
