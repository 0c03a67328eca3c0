// API keys (--api-keys-file): every TextGeneration RPC and every /v1 route needs a valid
// "authorization: Bearer KEY"; a session belongs to the principal (the key's name) that created
// it and does not exist for anyone else; health, the chat page and /metrics stay open.
#include <catch2/catch.hpp>
#include <regex>
#include <string>

#include "tests/server/openai_test_util.h"
#include "tests/server/server_test_util.h"
#include "tests/server/tls_test_util.h"

namespace textgen::testing {
namespace auth_test {

CallMetadata Bearer(const std::string& key) { return {{"authorization", "Bearer " + key}}; }

struct KeyedServer {
  TestCerts certs = MakeTestCerts();
  std::unique_ptr<HttpServer> server;
  KeyedServer() {
    server = StartHttpServer({"--api-keys-file", certs.keys_file, "--chat-template",
                              ChatTemplatesDir() + "/templates/Qwen-Qwen2.5-7B-Instruct.jinja"});
  }
  ServerProcess& process() { return *server->process; }
};

grpc::Status ModelInfo(v1::TextGeneration::Stub& stub, const CallMetadata& metadata) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  for (const auto& [k, v] : metadata) ctx.AddMetadata(k, v);
  v1::ModelInfo info;
  return stub.GetModelInfo(&ctx, v1::GetModelInfoRequest(), &info);
}

grpc::Status CreateSession(v1::TextGeneration::Stub& stub, const std::string& key,
                           std::string* id) {
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", "Bearer " + key);
  v1::CreateSessionRequest req;
  req.set_session_id(*id);
  v1::Session session;
  grpc::Status st = stub.CreateSession(&ctx, req, &session);
  *id = session.session_id();
  return st;
}

grpc::Status DeleteSession(v1::TextGeneration::Stub& stub, const std::string& key,
                           const std::string& id) {
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", "Bearer " + key);
  v1::DeleteSessionRequest req;
  req.set_session_id(id);
  v1::DeleteSessionResponse resp;
  return stub.DeleteSession(&ctx, req, &resp);
}

v1::GenerateRequest Turn(const std::string& session) {
  v1::GenerateRequest req;
  req.set_prompt("Once upon a time");
  req.set_max_new_tokens(4);
  req.set_session_id(session);
  return req;
}

TEST_CASE("without a valid API key every TextGeneration RPC is UNAUTHENTICATED", "[server][auth]") {
  KeyedServer s;
  auto stub = NewStub(s.process());
  const std::string wrong = "wrong-key-but-long-enough-0000";
  for (const CallMetadata& md :
       {CallMetadata{}, Bearer(wrong), Bearer(""), CallMetadata{{"authorization", "Basic abc"}},
        // A prefix or an extension of a valid key is no key.
        Bearer(std::string(TestCerts::kAliceKey).substr(0, 20)),
        Bearer(std::string(TestCerts::kAliceKey) + "x")}) {
    grpc::Status st = ModelInfo(*stub, md);
    CHECK(st.error_code() == grpc::StatusCode::UNAUTHENTICATED);
    StreamResult gen = RunGenerate(*stub, Turn(""), 10000, md);
    CHECK(gen.status.error_code() == grpc::StatusCode::UNAUTHENTICATED);
  }
  CHECK(ModelInfo(*stub, Bearer("")).error_message().find("API key") != std::string::npos);
  // Each key works, the scheme in any case.
  for (const char* key :
       {TestCerts::kAliceKey, TestCerts::kAliceKey2, TestCerts::kBobKey, TestCerts::kNamelessKey}) {
    CHECK(ModelInfo(*stub, Bearer(key)).ok());
  }
  CHECK(ModelInfo(*stub, {{"authorization", std::string("bearer ") + TestCerts::kBobKey}}).ok());
  CHECK(RunGenerate(*stub, Turn(""), 10000, Bearer(TestCerts::kBobKey)).status.ok());

  // Health stays open (a documented choice: probes carry no keys).
  CHECK(CheckHealth(*s.process().channel(), "").state == HealthState::kServing);
  // No key, right or wrong, is ever logged.
  const std::string log = s.process().Log();
  CHECK_THAT(log, Catch::Contains("refused"));
  for (const std::string& key :
       {wrong, std::string(TestCerts::kAliceKey), std::string(TestCerts::kBobKey)}) {
    CHECK_THAT(log, !Catch::Contains(key));
  }
}

TEST_CASE("a session belongs to the key that created it: to another it does not exist",
          "[server][auth][session]") {
  KeyedServer s;
  auto stub = NewStub(s.process());
  std::string id;
  REQUIRE(CreateSession(*stub, TestCerts::kAliceKey, &id).ok());
  REQUIRE(RunGenerate(*stub, Turn(id), 10000, Bearer(TestCerts::kAliceKey)).status.ok());

  // Bob gets exactly what an unknown id gets: NOT_FOUND, same message (ids cannot be probed).
  const std::string unknown = "0123456789abcdef0123456789abcdef";
  StreamResult bob = RunGenerate(*stub, Turn(id), 10000, Bearer(TestCerts::kBobKey));
  StreamResult bob_unknown = RunGenerate(*stub, Turn(unknown), 10000, Bearer(TestCerts::kBobKey));
  CHECK(bob.status.error_code() == grpc::StatusCode::NOT_FOUND);
  CHECK(bob_unknown.status.error_code() == grpc::StatusCode::NOT_FOUND);
  CHECK(std::regex_replace(bob.status.error_message(), std::regex(id), "ID") ==
        std::regex_replace(bob_unknown.status.error_message(), std::regex(unknown), "ID"));
  CHECK(DeleteSession(*stub, TestCerts::kBobKey, id).error_code() == grpc::StatusCode::NOT_FOUND);
  CHECK(DeleteSession(*stub, TestCerts::kNamelessKey, id).error_code() ==
        grpc::StatusCode::NOT_FOUND);
  v1::ChatRequest chat;
  chat.set_session_id(id);
  chat.set_max_new_tokens(4);
  v1::ChatMessage* m = chat.add_messages();
  m->set_role("user");
  m->set_content("Hello");
  CHECK(RunChat(*stub, chat, 10000, Bearer(TestCerts::kBobKey)).status.error_code() ==
        grpc::StatusCode::NOT_FOUND);

  // Alice's other key is the same principal: the conversation goes on, and she deletes it.
  StreamResult again = RunGenerate(*stub, Turn(id), 10000, Bearer(TestCerts::kAliceKey2));
  INFO(again.status.error_message());
  CHECK(again.status.ok());
  CHECK(again.last.usage().cached_tokens() > 0);
  CHECK(DeleteSession(*stub, TestCerts::kAliceKey, id).ok());
}

TEST_CASE("the HTTP API answers 401 in OpenAI's error shape without a valid key",
          "[server][auth][openai]") {
  KeyedServer s;
  const int port = s.server->http_port;
  httplib::Client client("127.0.0.1", port);
  const Json completion = {{"prompt", "Once upon a time"}, {"max_tokens", 4}};
  const std::string wrong = "wrong-key-but-long-enough-0000";
  for (const std::string& header : {std::string(), "Bearer " + wrong, std::string("Basic x")}) {
    httplib::Headers headers;
    if (!header.empty()) headers.insert({"Authorization", header});
    for (const HttpReply& r :
         {ToReply(client.Get("/v1/models", headers)),
          ToReply(client.Post("/v1/completions", headers, completion.dump(), "application/json")),
          // Refused before the body is read: no 400 for a broken body, no 404 for a made-up
          // path either.
          ToReply(client.Post("/v1/chat/completions", headers, "{not json", "application/json")),
          ToReply(client.Get("/v1/no-such-route", headers))}) {
      CHECK(r.status == 401);
      Json e = ErrorOf(r);
      CHECK(e["type"] == "invalid_request_error");
      CHECK(e["code"] == "invalid_api_key");
      CHECK(e["param"].is_null());
    }
  }
  httplib::Headers alice = {{"Authorization", std::string("Bearer ") + TestCerts::kAliceKey}};
  auto models = client.Get("/v1/models", alice);
  REQUIRE(models);
  CHECK(models->status == 200);
  HttpReply done =
      ToReply(client.Post("/v1/completions", alice, completion.dump(), "application/json"));
  CHECK(done.status == 200);
  auto unauthorized = client.Get("/v1/models");
  REQUIRE(unauthorized);
  CHECK(unauthorized->get_header_value("WWW-Authenticate") == "Bearer");
  // Open by choice: the static chat page and the metrics.
  CHECK(Get(port, "/").status == 200);
  CHECK(Get(s.server->metrics_port, "/metrics").status == 200);
  CHECK_THAT(s.process().Log(), !Catch::Contains(wrong));
}

TEST_CASE("textgen-client sends --api-key or $TEXTGEN_API_KEY", "[server][auth][client]") {
  KeyedServer s;
  const std::string client = std::string(std::getenv("TEXTGEN_BIN_DIR")) + "/textgen-client";
  const std::string args = " generate --server " + s.process().address() +
                           " --prompt 'Once upon a time' --max-new-tokens 4 2>&1";
  CommandResult none = RunCommand(client + args);
  CHECK(none.exit_code == 1);
  CHECK_THAT(none.out, Catch::Contains("UNAUTHENTICATED"));
  CommandResult flag =
      RunCommand(client + " generate --api-key " + TestCerts::kBobKey + " --server " +
                 s.process().address() + " --prompt 'Once upon a time' --max-new-tokens 4 2>&1");
  CHECK(flag.exit_code == 0);
  CommandResult env =
      RunCommand(std::string("TEXTGEN_API_KEY=") + TestCerts::kAliceKey + " " + client + args);
  CHECK(env.exit_code == 0);
  // A session the client makes with one key cannot be deleted with another.
  const std::string session = client + " session --server " + s.process().address();
  CommandResult created = RunCommand(std::string("TEXTGEN_API_KEY=") + TestCerts::kAliceKey + " " +
                                     session + " --create");
  INFO(created.out);
  REQUIRE(created.exit_code == 0);
  std::smatch id;
  REQUIRE(std::regex_search(created.out, id, std::regex("[0-9a-f]{32}")));
  CommandResult bob =
      RunCommand(session + " --api-key " + TestCerts::kBobKey + " --delete " + id.str() + " 2>&1");
  CHECK(bob.exit_code == 1);
  CHECK_THAT(bob.out, Catch::Contains("NOT_FOUND"));
  CommandResult alice = RunCommand(session + " --api-key " + TestCerts::kAliceKey + " --delete " +
                                   id.str() + " 2>&1");
  CHECK(alice.exit_code == 0);
}

TEST_CASE("an unusable --api-keys-file stops the start naming it", "[server][auth]") {
  const char* bin_dir = std::getenv("TEXTGEN_BIN_DIR");
  REQUIRE(bin_dir != nullptr);
  const std::string base = std::string(bin_dir) + "/textgen-server --model " +
                           ShellQuote(ModelPath("stories260K.gguf")) +
                           " --listen 127.0.0.1:0 --api-keys-file ";
  const std::string dir = ScratchDir();
  WriteFile(dir + "/short", "tooshort alice\n");
  WriteFile(dir + "/empty", "# nothing\n\n");
  WriteFile(dir + "/twice", "the-same-key-0123456789 a\nthe-same-key-0123456789 b\n");
  for (const std::string& file :
       {dir + "/missing", dir + "/short", dir + "/empty", dir + "/twice"}) {
    CommandResult r = RunCommand(base + ShellQuote(file) + " 2>&1");
    INFO(file << ": " << r.out);
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.out, Catch::Contains("--api-keys-file"));
    CHECK_THAT(r.out, !Catch::Contains("tooshort"));
    CHECK_THAT(r.out, !Catch::Contains("the-same-key"));
  }
}

}  // namespace auth_test
}  // namespace textgen::testing
