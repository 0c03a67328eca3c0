// The KV disk tier in the engine (EngineOptions::state_dir, kv_disk_gib): a prompt served from
// blocks read back from disk gives bit for bit what the same prompt gives from blocks in memory,
// and the same tokens as recomputing; damaged files are rejected and recomputed; an evicted
// session's blocks reach the disk and serve its next turn.
#include <catch2/catch.hpp>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "engine/scheduler/engine.h"
#include "tests/engine/scheduler/engine_test_util.h"
#include "tests/test_util.h"

namespace textgen {
namespace engine_kv_disk_test {

namespace fs = std::filesystem;
using testing::CheckSame;
using testing::CollectingSink;

std::string FreshDir(const std::string& name) {
  const std::string dir = testing::ScratchDir() + "/engine_kv_disk_test/" + name;
  fs::remove_all(dir);
  return dir;
}

std::unique_ptr<Engine> MakeEngine(const std::string& state_dir, int kv_blocks = 256) {
  EngineOptions o;
  o.model_path = testing::ModelPath("stories260K.gguf");
  o.kv_blocks = kv_blocks;
  o.model.llama.linear.compute = ops::LinearCompute::kF32;
  o.state_dir = state_dir;
  o.kv_disk_gib = state_dir.empty() ? 0 : 1;
  auto e = Engine::Create(o);
  REQUIRE(e.ok());
  return std::move(e).value();
}

DecodingOptions Greedy() {
  DecodingOptions d;
  d.max_new_tokens = 16;
  d.ignore_eos = true;
  return d;
}

GenerationResult Run(Engine& e, std::vector<int32_t> prompt, const std::string& session = "") {
  EngineRequest r;
  r.prompt_ids = std::move(prompt);
  r.decoding = Greedy();
  r.session_id = session;
  auto sink = std::make_shared<CollectingSink>();
  REQUIRE(e.Submit(std::move(r), sink).ok());
  INFO(sink->Wait().status().ToString());
  REQUIRE(sink->Wait().ok());
  return *sink->Wait();
}

void CheckBitExact(const GenerationResult& a, const GenerationResult& b) {
  REQUIRE(a.hypotheses.size() == b.hypotheses.size());
  for (size_t i = 0; i < a.hypotheses.size(); ++i) {
    CHECK(a.hypotheses[i].ids == b.hypotheses[i].ids);
    CHECK(a.hypotheses[i].logprobs == b.hypotheses[i].logprobs);
  }
}

void FlipLastByteOfEveryFile(const std::string& dir) {
  for (const auto& f : fs::directory_iterator(dir)) {
    std::string bytes = testing::ReadFile(f.path().string());
    bytes.back() ^= 0x01;
    testing::WriteFile(f.path().string(), bytes);
  }
}

TEST_CASE("a prompt served from the disk tier after a restart equals the warm and recomputed runs",
          "[engine][kv_disk]") {
  const std::string dir = FreshDir("restart");
  std::vector<int32_t> prompt;
  GenerationResult warm, recomputed;
  {
    auto off = MakeEngine("");
    prompt = testing::LongPrompt(*off, 300);
    recomputed = Run(*off, prompt);
  }
  {
    auto a = MakeEngine(dir);
    Run(*a, prompt);
    warm = Run(*a, prompt);  // from the prefix cache in memory
    CHECK(warm.stats.cached_tokens == static_cast<int>(prompt.size()) - 1);
    CHECK(a->Stats().kv_disk_blocks_written == 0);  // nothing left memory yet
  }                                                 // shutdown: the cached blocks go to disk
  REQUIRE(fs::exists(dir + "/kv"));
  {
    auto b = MakeEngine(dir);
    EngineStats s = b->Stats();
    CHECK(s.kv_disk_enabled);
    CHECK(s.kv_disk_files >= static_cast<int64_t>(prompt.size()) / 16);
    const GenerationResult disk = Run(*b, prompt);
    s = b->Stats();
    // Every whole block of the prompt but the last token's (the leaf, a partial block, stays in
    // memory only): read from disk.
    CHECK(s.kv_disk_blocks_read == static_cast<int64_t>(prompt.size() - 1) / 16);
    CHECK(s.kv_disk_blocks_rejected == 0);
    CHECK(disk.stats.cached_tokens == static_cast<int>((prompt.size() - 1) / 16 * 16));
    CheckSame(disk, recomputed);
    // The same split of the work as the warm run (whole blocks cached, then the rest computed)
    // would give the same bits only from the same bytes; the warm run also had the leaf's rows,
    // so compare against a warm run with exactly the disk's blocks: the one that follows here.
    const GenerationResult again = Run(*b, prompt);
    CHECK(b->Stats().kv_disk_blocks_read == s.kv_disk_blocks_read);  // now in memory
    CheckBitExact(again, warm);
  }
  {
    // Damaged: every file's payload. Each lookup rejects the chain's first file and recomputes.
    FlipLastByteOfEveryFile(dir + "/kv");
    auto c = MakeEngine(dir);
    const GenerationResult redo = Run(*c, prompt);
    const EngineStats s = c->Stats();
    CHECK(s.kv_disk_blocks_rejected == 1);
    CHECK(s.kv_disk_blocks_read == 0);
    CHECK(redo.stats.cached_tokens == 0);
    CheckBitExact(redo, recomputed);
  }
}

TEST_CASE("the disk tier reads back exactly the bytes a computed prefix holds",
          "[engine][kv_disk]") {
  // Two engines on one directory would share files; here one writes, then another reads: a
  // prompt whose whole blocks come from disk and the rest is computed gives the bits the same
  // engine gives with those blocks computed in memory by another request.
  const std::string dir = FreshDir("exact");
  std::vector<int32_t> base, longer;
  GenerationResult in_memory;
  {
    auto a = MakeEngine(dir);
    base = testing::LongPrompt(*a, 160);  // 10 whole blocks
    longer = testing::LongPrompt(*a, 230);
    Run(*a, base);
    in_memory = Run(*a, longer);  // 10 blocks from memory, 70 tokens computed
    CHECK(in_memory.stats.cached_tokens == 160);
  }
  // Only the first prompt's blocks on disk, so that the split is the same.
  const std::string only = FreshDir("exact_only");
  {
    auto a = MakeEngine(only);
    Run(*a, base);
  }
  auto b = MakeEngine(only);
  const GenerationResult from_disk = Run(*b, longer);
  CHECK(from_disk.stats.cached_tokens == 160);
  CHECK(b->Stats().kv_disk_blocks_read == 10);
  CheckBitExact(from_disk, in_memory);
}

TEST_CASE("an evicted idle session's blocks go to disk and serve its next turn",
          "[engine][kv_disk]") {
  // 34 blocks: the session's 300-token turn holds 20; a 480-token request then needs 32, so
  // the session's blocks are evicted and, cached, most of them given up to the pool: written
  // to disk.
  auto run_turns = [](const std::string& dir, EngineStats* stats) {
    auto e = MakeEngine(dir, 34);
    auto session = e->CreateSession();
    REQUIRE(session.ok());
    const std::vector<int32_t> turn1 = testing::LongPrompt(*e, 300, 1);
    Run(*e, turn1, *session);
    std::vector<int32_t> big;
    for (int32_t i = 0; big.size() < 480; ++i) big.push_back(100 + i % 200);
    Run(*e, big);
    const std::vector<int32_t> more = e->model().tokenizer().Encode(" Then what?", false);
    GenerationResult turn2 = Run(*e, more, *session);
    *stats = e->Stats();
    return turn2;
  };
  EngineStats off_stats, on_stats;
  const GenerationResult want = run_turns("", &off_stats);
  const GenerationResult got = run_turns(FreshDir("session"), &on_stats);
  INFO("written " << on_stats.kv_disk_blocks_written << " dropped "
                  << on_stats.kv_disk_blocks_dropped << " files " << on_stats.kv_disk_files
                  << " evictions " << on_stats.prefix_cache_evictions << " off evictions "
                  << off_stats.prefix_cache_evictions);
  CHECK(on_stats.kv_disk_blocks_written >= 12);
  CHECK(on_stats.kv_disk_blocks_read >= 12);
  CHECK(on_stats.kv_disk_blocks_rejected == 0);
  CHECK(got.stats.cached_tokens > want.stats.cached_tokens);
  CheckSame(got, want);
}

TEST_CASE("the disk tier is off without a state directory or a size, and says why it cannot open",
          "[engine][kv_disk]") {
  auto none = MakeEngine("");
  CHECK_FALSE(none->Stats().kv_disk_enabled);
  // A state directory that cannot be created: the engine runs without the tier.
  const std::string file = FreshDir("not_a_dir");
  fs::create_directories(fs::path(file).parent_path());
  testing::WriteFile(file, "x");
  auto blocked = MakeEngine(file);
  CHECK_FALSE(blocked->Stats().kv_disk_enabled);
  Run(*blocked, testing::LongPrompt(*blocked, 40));
}

}  // namespace engine_kv_disk_test
}  // namespace textgen
