// Sessions with a journal (EngineOptions::session_journal): what is written when, that a turn's
// OnDone waits for its record, and that an engine restored from the records continues each
// conversation with the tokens it would have given without the restart.
#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "engine/scheduler/engine.h"
#include "tests/engine/scheduler/engine_test_util.h"
#include "tests/engine/scheduler/fake_session_journal.h"
#include "tests/test_util.h"

namespace textgen {
namespace engine_durable_session_test {

using testing::CollectingSink;
using testing::FakeSessionJournal;
using testing::MakeJournaledEngine;
using testing::RunToAnswer;

EngineRequest Turn(const std::string& session, const std::string& text, bool sampled) {
  EngineRequest r;
  r.prompt_text = text;
  r.session_id = session;
  r.session_owner = "alice";
  r.decoding.max_new_tokens = 10;
  r.decoding.ignore_eos = true;
  if (sampled) {
    r.decoding.method = DecodingMethod::kSample;
    r.decoding.sampling.temperature = 0.9f;
    r.decoding.sampling.seed = 1234;
  }
  r.session_attachment = [](const GenerationResult& g) { return "after:" + g.hypotheses[0].text; };
  return r;
}

TEST_CASE("a session turn's OnDone waits until its record is written", "[engine][durable]") {
  auto journal = std::make_shared<FakeSessionJournal>();
  auto e = MakeJournaledEngine(journal);
  auto id = e->CreateSession("", "alice");
  REQUIRE(id.ok());
  REQUIRE(journal->WaitForChanges(1));  // the creation
  journal->Hold(true);
  auto sink = std::make_shared<CollectingSink>();
  REQUIRE(e->Submit(Turn(*id, "Once upon a time", false), sink).ok());
  REQUIRE(journal->WaitForChanges(2));
  // The record is there, with the whole conversation, but the client has not heard yet.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK(sink->done_calls() == 0);
  std::optional<SessionRecord> r = journal->Latest(*id);
  REQUIRE(r.has_value());
  CHECK(r->version == 1);
  CHECK(r->owner == "alice");
  CHECK(r->attachment.rfind("after:", 0) == 0);
  journal->Hold(false);
  const auto& res = sink->Wait();
  REQUIRE(res.ok());
  // prompt (BOS + text) then the answer
  const std::vector<int32_t>& answer = res->hypotheses[0].ids;
  REQUIRE(r->tokens.size() > answer.size());
  CHECK(std::vector<int32_t>(r->tokens.end() - answer.size(), r->tokens.end()) == answer);
}

TEST_CASE("cancelled and failed turns write nothing, a deletion is written before it returns",
          "[engine][durable]") {
  auto journal = std::make_shared<FakeSessionJournal>();
  auto e = MakeJournaledEngine(journal);
  auto id = e->CreateSession("", "alice");
  REQUIRE(id.ok());
  RunToAnswer(*e, Turn(*id, "Once upon a time", false));
  REQUIRE(journal->WaitForChanges(2));
  // A turn that does not fit the context fails before it runs.
  EngineRequest too_long = Turn(*id, "the end", false);
  too_long.decoding.max_new_tokens = 1 << 20;
  CHECK(!e->Submit(std::move(too_long), std::make_shared<CollectingSink>()).ok());
  // A cancelled turn.
  EngineRequest endless = Turn(*id, " and then", false);
  endless.decoding.max_new_tokens = 400;
  auto sink = std::make_shared<CollectingSink>();
  auto req = e->Submit(std::move(endless), sink);
  REQUIRE(req.ok());
  e->Cancel(*req);
  sink->Wait();
  CHECK(journal->changes().size() == 2);
  REQUIRE(e->DeleteSession(*id, "alice").ok());
  // Returned: the removal is recorded already (and was answered).
  std::vector<FakeSessionJournal::Change> changes = journal->changes();
  REQUIRE(changes.size() == 3);
  CHECK(changes.back().id == *id);
  CHECK(!changes.back().record.has_value());
}

TEST_CASE("a restored session continues with the tokens it would have given", "[engine][durable]") {
  for (bool sampled : {false, true}) {
    INFO("sampled " << sampled);
    auto first = std::make_shared<FakeSessionJournal>();
    std::string id;
    std::vector<int32_t> third;
    {
      auto e = MakeJournaledEngine(first);
      auto created = e->CreateSession("", "alice");
      REQUIRE(created.ok());
      id = *created;
      RunToAnswer(*e, Turn(id, "Once upon a time", sampled));
      RunToAnswer(*e, Turn(id, " The dog", sampled));
      third = RunToAnswer(*e, Turn(id, " Then", sampled));
    }
    // The records as they were after the second turn: a restart there.
    std::vector<FakeSessionJournal::Change> changes = first->changes();
    REQUIRE(changes.size() == 4);  // creation and three turns
    REQUIRE(changes[2].record.has_value());
    SessionRecord after_two = *changes[2].record;
    CHECK(after_two.version == 2);
    SessionRecord stale = after_two;  // unused for longer than the TTL
    stale.id = std::string(32, 'a');
    stale.last_used = absl::Now() - absl::Hours(1);
    SessionRecord foreign = after_two;  // another model's tokens
    foreign.id = std::string(32, 'b');
    foreign.tokens.push_back(1 << 30);
    auto second =
        std::make_shared<FakeSessionJournal>(std::vector<SessionRecord>{after_two, stale, foreign});
    auto e = MakeJournaledEngine(second);
    CHECK(e->Stats().sessions == 1);
    // Only the owner sees it; its attachment and version came back.
    CHECK(absl::IsNotFound(e->GetSessionAttachment(id, "mallory").status()));
    auto held = e->GetSessionAttachment(id, "alice");
    REQUIRE(held.ok());
    CHECK(held->version == 2);
    CHECK(held->attachment == after_two.attachment);
    CHECK(RunToAnswer(*e, Turn(id, " Then", sampled)) == third);
    // The expired and the foreign records were removed from the journal.
    CHECK(!second->Latest(stale.id).has_value());
    CHECK(!second->Latest(foreign.id).has_value());
    int removals = 0;
    for (const auto& c : second->changes()) removals += c.record.has_value() ? 0 : 1;
    CHECK(removals == 2);
  }
}

TEST_CASE("an expired session's record is removed", "[engine][durable]") {
  auto journal = std::make_shared<FakeSessionJournal>();
  auto e = MakeJournaledEngine(journal, absl::Milliseconds(200));
  auto id = e->CreateSession("", "alice");
  REQUIRE(id.ok());
  // The scheduler looks for expired sessions at least once a second.
  REQUIRE(journal->WaitForChanges(2));
  std::vector<FakeSessionJournal::Change> changes = journal->changes();
  CHECK(changes[1].id == *id);
  CHECK(!changes[1].record.has_value());
}

}  // namespace engine_durable_session_test
}  // namespace textgen
