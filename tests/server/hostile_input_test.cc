// What a hostile client sends, and what it gets (issue 15 rows 4, 6, 7, 9): invalid UTF-8 and
// malformed protobuf are INVALID_ARGUMENT naming the field, session ids are checked before use
// and never echoed or logged in full, chosen session ids must look random, logs escape what
// clients send, and listen addresses out of range stop the start.
#include <grpcpp/generic/generic_stub.h>

#include <catch2/catch.hpp>
#include <random>
#include <string>

#include "absl/strings/str_format.h"
#include "tests/server/openai_test_util.h"
#include "tests/server/server_test_util.h"

namespace textgen::testing {
namespace hostile_input_test {

const std::string kBadUtf8 = "Once \xff\xfe upon";

grpc::Status Tokenize(v1::TextGeneration::Stub& stub, const std::string& text) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::TokenizeRequest req;
  req.set_text(text);
  v1::TokenizeResponse resp;
  return stub.Tokenize(&ctx, req, &resp);
}

grpc::Status CreateSession(v1::TextGeneration::Stub& stub, const std::string& requested,
                           std::string* id = nullptr) {
  grpc::ClientContext ctx;
  v1::CreateSessionRequest req;
  req.set_session_id(requested);
  v1::Session session;
  grpc::Status st = stub.CreateSession(&ctx, req, &session);
  if (id != nullptr) *id = session.session_id();
  return st;
}

grpc::Status DeleteSession(v1::TextGeneration::Stub& stub, const std::string& id) {
  grpc::ClientContext ctx;
  v1::DeleteSessionRequest req;
  req.set_session_id(id);
  v1::DeleteSessionResponse resp;
  return stub.DeleteSession(&ctx, req, &resp);
}

// A unary call with arbitrary bytes as the request.
grpc::Status RawUnary(grpc::Channel& channel, const std::string& method, const std::string& bytes) {
  std::shared_ptr<grpc::Channel> borrowed(&channel, [](grpc::Channel*) {});
  grpc::GenericStub stub(borrowed);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::Slice slice(bytes);
  grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer response;
  grpc::CompletionQueue cq;
  auto call = stub.PrepareUnaryCall(&ctx, method, request, &cq);
  call->StartCall();
  grpc::Status status;
  call->Finish(&response, &status, reinterpret_cast<void*>(1));
  void* tag = nullptr;
  bool ok = false;
  REQUIRE(cq.Next(&tag, &ok));
  return status;
}

void CheckNames(const grpc::Status& st, const std::string& field) {
  INFO(st.error_code() << " " << st.error_message());
  CHECK(st.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(st.error_message().rfind(field + ":", 0) == 0);
}

TEST_CASE("invalid UTF-8 is INVALID_ARGUMENT naming the field", "[server][errors][utf8]") {
  auto stub = NewStub(SharedServer());
  v1::GenerateRequest prompt;
  prompt.set_prompt(kBadUtf8);
  CheckNames(RunGenerate(*stub, prompt).status, "prompt");

  v1::GenerateRequest stop;
  stop.set_prompt("Once upon a time");
  stop.add_stop("fine");
  stop.add_stop(kBadUtf8);
  CheckNames(RunGenerate(*stub, stop).status, "stop[1]");

  v1::GenerateRequest session;
  session.set_prompt("Once upon a time");
  session.set_session_id("0123456789abcdef0123456789abcd\xff\xff");
  CheckNames(RunGenerate(*stub, session).status, "session_id");

  v1::ChatRequest chat;
  chat.add_messages()->set_content("hello");
  v1::ChatMessage* bad = chat.add_messages();
  bad->set_role("user");
  bad->set_content(kBadUtf8);
  CheckNames(RunChat(*stub, chat).status, "messages[1].content");

  CheckNames(Tokenize(*stub, kBadUtf8), "text");
  CheckNames(DeleteSession(*stub, "\xc3"), "session_id");
  // The server still serves.
  CHECK(Tokenize(*stub, "Once upon a time").ok());
}

TEST_CASE("a malformed protobuf request is INVALID_ARGUMENT saying so", "[server][errors]") {
  grpc::Channel& channel = *SharedServer().channel();
  // Field 1 (text) claims 100 bytes and has 2; then a truncated varint.
  for (const std::string& bytes : {std::string("\x0a\x64hi", 4), std::string("\x08\xff", 2)}) {
    grpc::Status st = RawUnary(channel, "/textgen.v1.TextGeneration/Tokenize", bytes);
    INFO(st.error_message());
    CHECK(st.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK_THAT(st.error_message(), Catch::Contains("malformed protobuf"));
    CHECK_THAT(st.error_message(), Catch::Contains("textgen.v1.TokenizeRequest"));
  }
  // Well-formed bytes still work through the same path.
  v1::TokenizeRequest ok;
  ok.set_text("Once");
  CHECK(RawUnary(channel, "/textgen.v1.TextGeneration/Tokenize", ok.SerializeAsString()).ok());
}

TEST_CASE("session ids are checked before use and never echoed or logged raw",
          "[server][errors][session]") {
  ServerProcess server;
  auto stub = NewStub(server);
  const std::string huge(1 << 20, 'a');
  const std::string forged = "x\n[2020-01-01 00:00:00.000] [info] forged line";
  for (const std::string& id : {huge, forged, std::string(32, 'A'), std::string(31, 'a')}) {
    v1::GenerateRequest req;
    req.set_prompt("Once upon a time");
    req.set_session_id(id);
    grpc::Status gen = RunGenerate(*stub, req).status;
    grpc::Status del = DeleteSession(*stub, id);
    grpc::Status create = CreateSession(*stub, id);
    for (const grpc::Status& st : {gen, del, create}) {
      CheckNames(st, "session_id");
      CHECK(st.error_message().size() < 200);
      CHECK(st.error_message().find("aaaaaaaaaaaaaaaa") == std::string::npos);
      CHECK(st.error_message().find("forged") == std::string::npos);
    }
  }
  const std::string log = server.Log();
  CHECK(log.find("aaaaaaaaaaaaaaaa") == std::string::npos);
  CHECK(log.find("\n[2020-01-01") == std::string::npos);
  CHECK(log.find("forged") == std::string::npos);
}

TEST_CASE("chosen session ids must look random and ids are logged only in part",
          "[server][session]") {
  ServerProcess server;
  auto stub = NewStub(server);
  for (const std::string& weak : {std::string(32, '0'), std::string(32, 'f'),
                                  std::string("0123456") + std::string(25, '0')}) {
    grpc::Status st = CreateSession(*stub, weak);
    CheckNames(st, "session_id");
    CHECK_THAT(st.error_message(), Catch::Contains("random"));
  }
  // 128 random bits pass (a false refusal has odds near 1e-8 per id).
  std::mt19937_64 rng(15);
  for (int i = 0; i < 200; ++i) {
    const std::string id = absl::StrFormat("%016x%016x", rng(), rng());
    REQUIRE(CreateSession(*stub, id).ok());
    REQUIRE(DeleteSession(*stub, id).ok());
  }
  std::string id;
  REQUIRE(CreateSession(*stub, "", &id).ok());
  v1::GenerateRequest turn;
  turn.set_prompt("Once upon a time");
  turn.set_max_new_tokens(4);
  turn.set_session_id(id);
  REQUIRE(RunGenerate(*stub, turn).status.ok());
  REQUIRE(DeleteSession(*stub, id).ok());
  const std::string log = server.Log();
  CHECK_THAT(log, Catch::Contains(id.substr(0, 8) + "..."));
  CHECK_THAT(log, !Catch::Contains(id));
}

TEST_CASE("the HTTP API's log escapes what clients send", "[server][openai][errors]") {
  HttpServer& s = SharedHttpServer();
  HttpReply r =
      Post(s.http_port, "/v1/completions",
           Json{{"model", "x\n[2020-01-01 00:00:00.000] [info] forged"}, {"prompt", "Once"}});
  CHECK(r.status == 404);
  const std::string log = s.process->Log();
  CHECK_THAT(log, Catch::Contains("x\\n[2020-01-01"));
  CHECK(log.find("\n[2020-01-01") == std::string::npos);
}

TEST_CASE("a listen address with a port out of range exits 2 naming the flag",
          "[server][lifecycle]") {
  const char* bin_dir = std::getenv("TEXTGEN_BIN_DIR");
  REQUIRE(bin_dir != nullptr);
  const std::string server = std::string(bin_dir) + "/textgen-server";
  for (const char* flag : {"--listen", "--http-listen", "--metrics-listen"}) {
    for (const char* address : {"127.0.0.1:99999", "127.0.0.1:-1", "127.0.0.1", ":80"}) {
      CommandResult r = RunCommand(server + " " + flag + " " + address + " 2>&1");
      INFO(flag << " " << address << ": " << r.out);
      CHECK(r.exit_code == 2);
      CHECK_THAT(r.out, Catch::Contains(std::string(flag) + " must be HOST:PORT"));
    }
  }
  CommandResult env = RunCommand("TEXTGEN_LISTEN=127.0.0.1:99999 " + server + " 2>&1");
  CHECK(env.exit_code == 2);
  CHECK_THAT(env.out, Catch::Contains("TEXTGEN_LISTEN must be HOST:PORT"));
}

}  // namespace hostile_input_test
}  // namespace textgen::testing
