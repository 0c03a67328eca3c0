// Sessions: a conversation's KV cache kept between Generate calls.
#include <catch2/catch.hpp>
#include <regex>

#include "tests/server/server_test_util.h"

namespace textgen::testing {
namespace session_test {

std::string CreateSession(v1::TextGeneration::Stub& stub, const std::string& requested,
                          grpc::Status* status) {
  grpc::ClientContext ctx;
  v1::CreateSessionRequest req;
  req.set_session_id(requested);
  v1::Session session;
  *status = stub.CreateSession(&ctx, req, &session);
  return session.session_id();
}

grpc::Status DeleteSession(v1::TextGeneration::Stub& stub, const std::string& id) {
  grpc::ClientContext ctx;
  v1::DeleteSessionRequest req;
  req.set_session_id(id);
  v1::DeleteSessionResponse resp;
  return stub.DeleteSession(&ctx, req, &resp);
}

std::vector<int32_t> Tokenize(v1::TextGeneration::Stub& stub, const std::string& text,
                              bool add_special) {
  grpc::ClientContext ctx;
  v1::TokenizeRequest req;
  req.set_text(text);
  req.set_add_special(add_special);
  v1::TokenizeResponse resp;
  REQUIRE(stub.Tokenize(&ctx, req, &resp).ok());
  return {resp.ids().begin(), resp.ids().end()};
}

std::vector<int32_t> BestIds(const StreamResult& r) {
  REQUIRE(r.last.hypotheses_size() > 0);
  return {r.last.hypotheses(0).ids().begin(), r.last.hypotheses(0).ids().end()};
}

TEST_CASE("a session continues the conversation from its cached KV", "[server][session]") {
  auto stub = NewStub(SharedServer());
  grpc::Status st;
  const std::string id = CreateSession(*stub, "", &st);
  REQUIRE(st.ok());
  CHECK(std::regex_match(id, std::regex("[0-9a-f]{32}")));

  v1::GenerateRequest turn1;
  turn1.set_session_id(id);
  turn1.set_prompt("Once upon a time");
  turn1.set_max_new_tokens(16);
  StreamResult r1 = RunGenerate(*stub, turn1);
  INFO(r1.status.error_message());
  REQUIRE(r1.status.ok());
  CHECK(r1.last.usage().cached_tokens() == 0);

  v1::GenerateRequest turn2 = turn1;
  turn2.set_prompt(" Then the dog ran");
  StreamResult r2 = RunGenerate(*stub, turn2);
  INFO(r2.status.error_message());
  REQUIRE(r2.status.ok());
  CHECK(r2.last.usage().cached_tokens() > 0);

  // The same conversation sent whole, without a session, gives the same answer.
  std::vector<int32_t> whole = Tokenize(*stub, turn1.prompt(), true);
  const std::vector<int32_t> answer1 = BestIds(r1);
  whole.insert(whole.end(), answer1.begin(), answer1.end());
  const std::vector<int32_t> turn2_ids = Tokenize(*stub, turn2.prompt(), false);
  whole.insert(whole.end(), turn2_ids.begin(), turn2_ids.end());
  v1::GenerateRequest plain;
  plain.mutable_prompt_ids()->Add(whole.begin(), whole.end());
  plain.set_max_new_tokens(16);
  StreamResult r3 = RunGenerate(*stub, plain);
  REQUIRE(r3.status.ok());
  CHECK(BestIds(r3) == BestIds(r2));
  // No session, but the prefix cache serves what the session published: all but the last
  // prompt token (the partly used block's rows copied).
  CHECK(static_cast<int>(r3.last.usage().cached_tokens()) == static_cast<int>(whole.size() - 1));

  CHECK(DeleteSession(*stub, id).ok());
}

TEST_CASE("one request at a time per session, and deleted sessions are gone", "[server][session]") {
  auto stub = NewStub(SharedServer());
  grpc::Status st;
  const std::string id = CreateSession(*stub, "", &st);
  REQUIRE(st.ok());

  // Slow on purpose (no cache: every step recomputes the sequence) so it is still running.
  v1::GenerateRequest slow;
  slow.set_session_id(id);
  slow.set_prompt("Once upon a time");
  slow.set_max_new_tokens(1500);
  slow.set_ignore_eos(true);
  slow.set_use_cache(false);
  grpc::ClientContext ctx;
  auto reader = stub->Generate(&ctx, slow);
  v1::GenerateResponse msg;
  REQUIRE(reader->Read(&msg));

  v1::GenerateRequest second;
  second.set_session_id(id);
  second.set_prompt("And then");
  second.set_max_new_tokens(4);
  StreamResult busy = RunGenerate(*stub, second);
  INFO(busy.status.error_message());
  CHECK(busy.status.error_code() == grpc::StatusCode::FAILED_PRECONDITION);

  ctx.TryCancel();
  while (reader->Read(&msg)) {
  }
  CHECK(reader->Finish().error_code() == grpc::StatusCode::CANCELLED);

  REQUIRE(DeleteSession(*stub, id).ok());
  StreamResult gone = RunGenerate(*stub, second);
  CHECK(gone.status.error_code() == grpc::StatusCode::NOT_FOUND);
  CHECK(DeleteSession(*stub, id).error_code() == grpc::StatusCode::NOT_FOUND);
}

TEST_CASE("a session's next turn sent right after a cancel is accepted", "[server][session]") {
  // A chat frontend's Stop, then Send: the client sees its cancel at once, the server hears of
  // it a little later. The next turn must not fail with "already has a request running".
  auto stub = NewStub(SharedServer());
  grpc::Status st;
  const std::string id = CreateSession(*stub, "", &st);
  REQUIRE(st.ok());
  int accepted = 0;
  for (int attempt = 0; attempt < 30; ++attempt) {
    v1::GenerateRequest running;
    running.set_session_id(id);
    running.set_prompt(" Once upon a time");
    running.set_max_new_tokens(200);
    running.set_ignore_eos(true);
    running.set_use_cache(false);  // slow: still running when cancelled
    grpc::ClientContext ctx;
    auto reader = stub->Generate(&ctx, running);
    v1::GenerateResponse msg;
    REQUIRE(reader->Read(&msg));
    ctx.TryCancel();
    while (reader->Read(&msg)) {
    }
    REQUIRE(reader->Finish().error_code() == grpc::StatusCode::CANCELLED);

    v1::GenerateRequest next;
    next.set_session_id(id);
    next.set_prompt(" The end.");
    next.set_max_new_tokens(2);
    StreamResult r = RunGenerate(*stub, next);
    INFO("attempt " << attempt << ": " << r.status.error_message());
    CHECK(r.status.ok());
    accepted += r.status.ok();
  }
  CHECK(accepted == 30);
  CHECK(DeleteSession(*stub, id).ok());
}

TEST_CASE("client-chosen session ids", "[server][session]") {
  auto stub = NewStub(SharedServer());
  grpc::Status st;
  for (const std::string bad :
       {"xyz", "0123456789ABCDEF0123456789ABCDEF", "0123456789abcdef0123456789abcde",
        "g123456789abcdef0123456789abcdef"}) {
    INFO(bad);
    CreateSession(*stub, bad, &st);
    CHECK(st.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  }
  const std::string chosen = "00112233445566778899aabbccddeeff";
  CHECK(CreateSession(*stub, chosen, &st) == chosen);
  REQUIRE(st.ok());
  CreateSession(*stub, chosen, &st);
  CHECK(st.error_code() == grpc::StatusCode::ALREADY_EXISTS);
  CHECK(DeleteSession(*stub, chosen).ok());
}

}  // namespace session_test
}  // namespace textgen::testing
