// Chat: conversations rendered with a chat template (--chat-template), with and without a
// session; a session's turn reuses the KV of the token prefix shared with its previous turn and
// answers exactly as the whole conversation sent at once (the test servers compute in f32).
#include <catch2/catch.hpp>
#include <cstdlib>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "tests/server/server_test_util.h"

namespace textgen::testing {
namespace chat_test {

// A real model's template (ChatML), from ../shared/chat-templates.
std::string QwenTemplate() {
  return ChatTemplatesDir() + "/templates/Qwen-Qwen2.5-7B-Instruct.jinja";
}

// ChatML that rewrites earlier turns, as Qwen3's template drops earlier <think> blocks: every
// assistant message but the last shows as a placeholder. Refuses tool messages and reads the
// enable_thinking keyword argument.
constexpr char kRewritingTemplate[] = R"({%- for m in messages -%}
{%- if m.role == 'tool' -%}{{ raise_exception('this template takes no tool messages') }}{%- endif -%}
<|im_start|>{{ m.role }}
{% if m.role == 'assistant' and not loop.last %}(an earlier answer){% else %}{{ m.content }}{% endif %}<|im_end|>
{% endfor -%}
{%- if add_generation_prompt -%}
<|im_start|>assistant
{% if enable_thinking is defined and enable_thinking is false %}(no thinking)
{% endif -%}
{%- endif -%})";

std::string WriteTemplate(const std::string& source) {
  const std::string path = ScratchDir() + "/template.jinja";
  WriteFile(path, source);
  return path;
}

std::unique_ptr<ServerProcess> StartChatServer(const std::string& template_path) {
  ServerProcessOptions o;
  o.extra_args = {"--chat-template", template_path};
  return std::make_unique<ServerProcess>(o);
}

v1::ChatMessage Message(const std::string& role, const std::string& content) {
  v1::ChatMessage m;
  m.set_role(role);
  m.set_content(content);
  return m;
}

v1::ChatRequest Request(const std::vector<v1::ChatMessage>& messages,
                        const std::string& session = "") {
  v1::ChatRequest req;
  for (const auto& m : messages) *req.add_messages() = m;
  req.set_session_id(session);
  req.set_max_new_tokens(16);
  return req;
}

std::string NewSession(v1::TextGeneration::Stub& stub) {
  grpc::ClientContext ctx;
  v1::Session session;
  REQUIRE(stub.CreateSession(&ctx, v1::CreateSessionRequest(), &session).ok());
  return session.session_id();
}

TEST_CASE("Chat renders the conversation with the template and streams the answer",
          "[server][chat]") {
  auto server = StartChatServer(QwenTemplate());
  auto stub = NewStub(*server);
  StreamResult chat = RunChat(
      *stub, Request({Message("system", "You tell stories."), Message("user", "A dog story.")}));
  INFO(chat.status.error_message());
  REQUIRE(chat.status.ok());
  REQUIRE(!chat.ids.empty());
  CHECK(chat.last.usage().cached_tokens() == 0);

  // What Qwen2.5's template renders for this conversation, generated as text: the same prompt
  // (no BOS: the template writes none) and so the same answer.
  v1::GenerateRequest plain;
  plain.set_prompt(
      "<|im_start|>system\nYou tell stories.<|im_end|>\n<|im_start|>user\nA dog "
      "story.<|im_end|>\n<|im_start|>assistant\n");
  plain.set_add_bos(false);
  plain.set_max_new_tokens(16);
  StreamResult gen = RunGenerate(*stub, plain);
  REQUIRE(gen.status.ok());
  CHECK(chat.last.usage().prompt_tokens() == gen.last.usage().prompt_tokens());
  CHECK(chat.ids == gen.ids);
  CHECK(chat.text == gen.text);
}

struct Turns {
  std::vector<uint32_t> cached;  // per turn
  uint32_t first_prompt = 0;     // prompt tokens of the first turn
};

// Runs three session turns (one new user message each) and then the whole conversation at once
// without a session; returns each turn's cached_tokens. The third turn must answer as the whole
// (the stateless Chat request shares the session's published blocks through the prefix cache).
Turns ThreeTurns(v1::TextGeneration::Stub& stub) {
  const std::string id = NewSession(stub);
  const std::vector<std::string> users = {"Tell me a story.", "Make it about a cat.",
                                          "How does it end?"};
  std::vector<v1::ChatMessage> whole = {Message("system", "You tell stories.")};
  Turns turns;
  StreamResult last;
  for (size_t t = 0; t < users.size(); ++t) {
    std::vector<v1::ChatMessage> turn;
    if (t == 0) turn.push_back(whole[0]);
    turn.push_back(Message("user", users[t]));
    whole.push_back(turn.back());
    last = RunChat(stub, Request(turn, id));
    INFO("turn " << t + 1 << ": " << last.status.error_message());
    REQUIRE(last.status.ok());
    turns.cached.push_back(last.last.usage().cached_tokens());
    if (t == 0) turns.first_prompt = last.last.usage().prompt_tokens();
    if (t + 1 < users.size()) whole.push_back(Message("assistant", last.text));
  }
  StreamResult at_once = RunChat(stub, Request(whole));
  REQUIRE(at_once.status.ok());
  // Without a session, the prefix cache serves it from the blocks the session published: all
  // but the last prompt token (which must run), the partly used block's rows copied.
  CHECK(at_once.last.usage().cached_tokens() == at_once.last.usage().prompt_tokens() - 1);
  CHECK(at_once.last.usage().prompt_tokens() == last.last.usage().prompt_tokens());
  CHECK(at_once.ids == last.ids);
  CHECK(at_once.text == last.text);
  return turns;
}

TEST_CASE("a Chat session's turns reuse the earlier turns' KV and answer as the whole",
          "[server][chat][session]") {
  auto server = StartChatServer(QwenTemplate());
  auto stub = NewStub(*server);
  const Turns turns = ThreeTurns(*stub);
  CHECK(turns.cached[0] == 0);
  // The first turn's prompt and (most of) its answer.
  CHECK(turns.cached[1] > turns.first_prompt);
  CHECK(turns.cached[2] > turns.cached[1]);  // the conversation grows and is reused
}

TEST_CASE("a template that rewrites earlier turns reuses less, and answers as the whole",
          "[server][chat][session]") {
  auto plain_server = StartChatServer(QwenTemplate());
  auto plain_stub = NewStub(*plain_server);
  const Turns plain = ThreeTurns(*plain_stub);

  auto rewriting_server = StartChatServer(WriteTemplate(kRewritingTemplate));
  auto stub = NewStub(*rewriting_server);
  const Turns rewritten = ThreeTurns(*stub);
  // The previous answer is rendered differently on the next turn: the prefix shared with what
  // the session holds ends where that answer began.
  CHECK(rewritten.cached[1] > 0);
  CHECK(rewritten.cached[1] <= rewritten.first_prompt);
  CHECK(rewritten.cached[2] > rewritten.cached[1]);
  CHECK(rewritten.cached[1] < plain.cached[1]);
  CHECK(rewritten.cached[2] < plain.cached[2]);
}

TEST_CASE("template keyword arguments reach the template as JSON values", "[server][chat]") {
  auto server = StartChatServer(WriteTemplate(kRewritingTemplate));
  auto stub = NewStub(*server);
  v1::ChatRequest req = Request({Message("user", "Hi.")});
  StreamResult without = RunChat(*stub, req);
  REQUIRE(without.status.ok());
  (*req.mutable_template_kwargs()->mutable_fields())["enable_thinking"].set_bool_value(false);
  StreamResult with = RunChat(*stub, req);
  INFO(with.status.error_message());
  REQUIRE(with.status.ok());
  // "(no thinking)\n" was rendered: more prompt tokens.
  CHECK(with.last.usage().prompt_tokens() > without.last.usage().prompt_tokens());
  (*req.mutable_template_kwargs()->mutable_fields())["enable_thinking"].set_bool_value(true);
  StreamResult thinking = RunChat(*stub, req);
  REQUIRE(thinking.status.ok());
  CHECK(thinking.last.usage().prompt_tokens() == without.last.usage().prompt_tokens());
  // A kwarg the server sets itself is refused. (Here rather than with the other bad inputs:
  // scripts/test-tsan.sh cannot run the tests that fill a Struct, and runs those.)
  (*req.mutable_template_kwargs()->mutable_fields())["messages"].set_string_value("x");
  StreamResult reserved = RunChat(*stub, req);
  CHECK(reserved.status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK_THAT(reserved.status.error_message(), Catch::Contains("template_kwargs"));
  CHECK(reserved.messages.empty());
}

TEST_CASE("each bad Chat input gets its status", "[server][chat][errors]") {
  auto server = StartChatServer(WriteTemplate(kRewritingTemplate));
  auto stub = NewStub(*server);
  struct BadCase {
    std::string name;
    std::function<void(v1::ChatRequest*)> edit;
    grpc::StatusCode code;
    std::string message_part;
  };
  const std::vector<BadCase> cases = {
      {"no messages", [](auto* r) { r->clear_messages(); }, grpc::StatusCode::INVALID_ARGUMENT,
       "messages: at least one message"},
      {"unknown role", [](auto* r) { *r->add_messages() = Message("robot", "beep"); },
       grpc::StatusCode::INVALID_ARGUMENT, "messages[1].role: unknown role \"robot\""},
      {"the template raises", [](auto* r) { *r->add_messages() = Message("tool", "42"); },
       grpc::StatusCode::INVALID_ARGUMENT, "this template takes no tool messages"},
      {"a field of another method",
       [](auto* r) {
         r->set_method(v1::GREEDY);
         r->set_temperature(0.7f);
       },
       grpc::StatusCode::INVALID_ARGUMENT, "temperature applies only to method SAMPLE"},
      {"unknown session", [](auto* r) { r->set_session_id("0123456789abcdef0123456789abcdef"); },
       grpc::StatusCode::NOT_FOUND, "session"},
  };
  for (const BadCase& c : cases) {
    INFO(c.name);
    v1::ChatRequest req = Request({Message("user", "Hi.")});
    c.edit(&req);
    StreamResult r = RunChat(*stub, req);
    INFO("got " << r.status.error_code() << ": " << r.status.error_message());
    CHECK(r.status.error_code() == c.code);
    CHECK_THAT(r.status.error_message(), Catch::Contains(c.message_part));
    CHECK(r.messages.empty());
  }
}

TEST_CASE("Chat without a chat template is FAILED_PRECONDITION naming --chat-template",
          "[server][chat][errors]") {
  // stories260K has no template of its own and the shared server is given none.
  auto stub = NewStub(SharedServer());
  StreamResult r = RunChat(*stub, Request({Message("user", "Hi.")}));
  CHECK(r.status.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
  CHECK_THAT(r.status.error_message(), Catch::Contains("--chat-template"));
  // Generate still serves.
  v1::GenerateRequest g;
  g.set_prompt("Once upon a time");
  g.set_max_new_tokens(4);
  CHECK(RunGenerate(*stub, g).status.ok());
}

TEST_CASE("an unusable --chat-template file stops the server at load", "[server][chat][errors]") {
  const char* bin_dir = std::getenv("TEXTGEN_BIN_DIR");
  REQUIRE(bin_dir != nullptr);
  const std::string base = std::string(bin_dir) + "/textgen-server --model " +
                           ShellQuote(ModelPath("stories260K.gguf")) +
                           " --listen 127.0.0.1:0 --chat-template ";
  CommandResult missing = RunCommand(base + "/nonexistent/template.jinja 2>&1");
  CHECK(missing.exit_code == 1);
  CHECK_THAT(missing.out, Catch::Contains("--chat-template"));
  CommandResult broken = RunCommand(base + ShellQuote(WriteTemplate("{% if %}")) + " 2>&1");
  CHECK(broken.exit_code == 1);
  CHECK_THAT(broken.out, Catch::Contains("--chat-template"));
}

}  // namespace chat_test
}  // namespace textgen::testing
