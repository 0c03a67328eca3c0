// Sessions on a shared store (SessionJournal::shared(), as several servers on one Redis): any
// engine continues any session with the tokens one engine alone would have given, a stale copy
// is replaced before a turn, deletions and owners hold across engines, and an unreachable store
// leaves each engine serving what it holds.
#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <vector>

#include "engine/scheduler/engine.h"
#include "tests/engine/scheduler/engine_test_util.h"
#include "tests/engine/scheduler/fake_shared_store.h"
#include "tests/test_util.h"

namespace textgen {
namespace engine_shared_session_test {

using testing::CollectingSink;
using testing::FakeSharedJournal;
using testing::MakeJournaledEngine;
using testing::RunToAnswer;
using testing::SharedRecords;

EngineRequest Turn(const std::string& session, const std::string& text, bool sampled,
                   const std::string& owner = "alice") {
  EngineRequest r;
  r.prompt_text = text;
  r.session_id = session;
  r.session_owner = owner;
  r.decoding.max_new_tokens = 10;
  r.decoding.ignore_eos = true;
  if (sampled) {
    r.decoding.method = DecodingMethod::kSample;
    r.decoding.sampling.temperature = 0.9f;
    r.decoding.sampling.seed = 99;
  }
  return r;
}

const std::vector<std::string> kTurns = {"Once upon a time", " The dog", " Then", " At last"};

TEST_CASE("a session that moves between engines on one store gives one engine's tokens",
          "[engine][shared]") {
  for (bool sampled : {false, true}) {
    INFO("sampled " << sampled);
    // One engine alone, no store.
    std::vector<std::vector<int32_t>> alone;
    {
      auto e = MakeJournaledEngine(nullptr);
      auto id = e->CreateSession("", "alice");
      REQUIRE(id.ok());
      for (const std::string& t : kTurns) alone.push_back(RunToAnswer(*e, Turn(*id, t, sampled)));
    }
    auto store = std::make_shared<SharedRecords>();
    auto ja = std::make_shared<FakeSharedJournal>(store);
    auto jb = std::make_shared<FakeSharedJournal>(store);
    auto a = MakeJournaledEngine(ja);
    auto b = MakeJournaledEngine(jb);
    auto id = a->CreateSession("", "alice");
    REQUIRE(id.ok());
    // A, B, A, B: each engine's copy is a turn behind when the session comes back to it.
    Engine* engines[] = {a.get(), b.get(), a.get(), b.get()};
    for (size_t i = 0; i < kTurns.size(); ++i) {
      INFO("turn " << i);
      CHECK(RunToAnswer(*engines[i], Turn(*id, kTurns[i], sampled)) == alone[i]);
    }
    auto on_a = a->GetSessionAttachment(*id, "alice");
    REQUIRE(on_a.ok());
    CHECK(on_a->version == kTurns.size());
    // Nobody else sees it on either engine.
    CHECK(absl::IsNotFound(b->GetSessionAttachment(*id, "mallory").status()));
    CHECK(absl::IsNotFound(
        a->Submit(Turn(*id, " x", false, "mallory"), std::make_shared<CollectingSink>()).status()));
  }
}

TEST_CASE("a session deleted on one engine is gone on the others", "[engine][shared]") {
  auto store = std::make_shared<SharedRecords>();
  auto ja = std::make_shared<FakeSharedJournal>(store);
  auto jb = std::make_shared<FakeSharedJournal>(store);
  auto a = MakeJournaledEngine(ja);
  auto b = MakeJournaledEngine(jb);
  auto id = a->CreateSession("", "alice");
  REQUIRE(id.ok());
  RunToAnswer(*a, Turn(*id, kTurns[0], false));
  REQUIRE(ja->WaitWritten());
  // B deletes a session it never held.
  REQUIRE(b->DeleteSession(*id, "alice").ok());
  CHECK(absl::IsNotFound(a->GetSessionAttachment(*id, "alice").status()));
  CHECK(absl::IsNotFound(
      a->Submit(Turn(*id, kTurns[1], false), std::make_shared<CollectingSink>()).status()));
  CHECK(!store->Get(*id).has_value());
  // Its id is taken on every engine while it lives.
  auto other = a->CreateSession(std::string(32, 'c'), "bob");
  REQUIRE(other.ok());
  REQUIRE(ja->WaitWritten());
  CHECK(absl::IsAlreadyExists(b->CreateSession(std::string(32, 'c'), "alice").status()));
}

TEST_CASE("an engine's local expiry leaves the shared record, the store's expiry ends it",
          "[engine][shared]") {
  auto store = std::make_shared<SharedRecords>();
  auto journal = std::make_shared<FakeSharedJournal>(store);
  auto a = MakeJournaledEngine(journal, absl::Milliseconds(300));
  auto id = a->CreateSession("", "alice");
  REQUIRE(id.ok());
  RunToAnswer(*a, Turn(*id, kTurns[0], false));
  REQUIRE(journal->WaitWritten());
  // Past the TTL the engine lets its copy go (the loop expires sessions every second), but
  // another server may be using the session: the record stays and comes back on the next turn.
  auto until = absl::Now() + absl::Seconds(5);
  while (a->Stats().sessions > 0 && absl::Now() < until) absl::SleepFor(absl::Milliseconds(50));
  REQUIRE(a->Stats().sessions == 0);
  REQUIRE(store->Get(*id).has_value());
  RunToAnswer(*a, Turn(*id, kTurns[1], false));
  CHECK(a->GetSessionAttachment(*id, "alice")->version == 2);
  // The store's own expiry (Redis's TTL) ends it everywhere.
  REQUIRE(journal->WaitWritten());
  store->Expire(*id);
  CHECK(absl::IsNotFound(a->GetSessionAttachment(*id, "alice").status()));
}

TEST_CASE("an unreachable shared store leaves each engine serving what it holds",
          "[engine][shared]") {
  auto store = std::make_shared<SharedRecords>();
  auto ja = std::make_shared<FakeSharedJournal>(store);
  auto jb = std::make_shared<FakeSharedJournal>(store);
  auto a = MakeJournaledEngine(ja);
  auto b = MakeJournaledEngine(jb);
  store->SetReachable(false);
  // Created and continued while the store is away: not confirmed, so kept although the store
  // has no record of it.
  auto id = a->CreateSession("", "alice");
  REQUIRE(id.ok());
  std::vector<int32_t> first = RunToAnswer(*a, Turn(*id, kTurns[0], false));
  CHECK(ja->degraded());
  CHECK(a->GetSessionAttachment(*id, "alice")->version == 1);
  // B cannot know of it.
  CHECK(absl::IsNotFound(b->GetSessionAttachment(*id, "alice").status()));
  // Back: the pending writes land and B continues the conversation.
  store->SetReachable(true);
  REQUIRE(ja->WaitWritten());
  CHECK(!ja->degraded());
  auto on_b = b->GetSessionAttachment(*id, "alice");
  REQUIRE(on_b.ok());
  CHECK(on_b->version == 1);
  auto alone = MakeJournaledEngine(nullptr);
  auto lone = alone->CreateSession("", "alice");
  REQUIRE(lone.ok());
  RunToAnswer(*alone, Turn(*lone, kTurns[0], false));
  CHECK(RunToAnswer(*b, Turn(*id, kTurns[1], false)) ==
        RunToAnswer(*alone, Turn(*lone, kTurns[1], false)));
}

}  // namespace engine_shared_session_test
}  // namespace textgen
