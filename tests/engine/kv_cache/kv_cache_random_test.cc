// Randomized invariant test of KvCache against a shadow model: random create / append / fork /
// free / truncate / drop-front / write operations, with the pool's bookkeeping and every live
// sequence's token data checked after each one.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/kv_cache/kv_cache.h"

namespace textgen {
namespace kv_cache_random_test {

constexpr int kLayers = 2;
constexpr int kHeads = 2;
constexpr int kDim = 2;
constexpr int kBs = 4;
constexpr int kBlocks = 24;
constexpr int kMaxSeqs = 10;

// Unique per (tag, layer, K/V, head, dim); exact in float while tag < 2^19.
float Pattern(int tag, int layer, int kv, int head, int d) {
  return static_cast<float>(tag * 32 + ((layer * 2 + kv) * kHeads + head) * kDim + d);
}

// How often the interesting paths ran, to make sure the random mix reaches them.
struct Coverage {
  int appends = 0;
  int exhausted = 0;
  int copy_on_write = 0;
  int forks = 0;
  int truncates = 0;
  int drops = 0;
  int overwrites = 0;
  int64_t checked_slots = 0;
};

struct Seq {
  BlockTable table;
  std::vector<int> tags;  // shadow: the tag written at each logical slot
};

class Harness {
 public:
  Harness(uint32_t seed, Coverage& cov) : rng_(seed), cov_(cov) {
    cache_ = std::move(KvCache::Create({.n_layers = kLayers,
                                        .n_kv_heads = kHeads,
                                        .head_dim = kDim,
                                        .block_size = kBs,
                                        .num_blocks = kBlocks}))
                 .value();
  }

  int Rand(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }

  // Runs one random operation; returns "" or a description of what went wrong.
  std::string Step() {
    const int op = Rand(0, 9);
    if (op == 0 || seqs_.empty()) {
      if (seqs_.size() < kMaxSeqs) seqs_.emplace_back();
      return "";
    }
    Seq& s = seqs_[Rand(0, static_cast<int>(seqs_.size()) - 1)];
    switch (op) {
      case 1:
      case 2:
      case 3:
        return Append(s, Rand(0, 9));
      case 4:
        if (seqs_.size() < kMaxSeqs) {
          Seq child{cache_->Fork(s.table), s.tags};
          seqs_.push_back(std::move(child));
          ++cov_.forks;
        }
        return "";
      case 5: {
        const size_t i = &s - seqs_.data();
        cache_->Free(seqs_[i].table);
        if (Rand(0, 3) == 0) cache_->Free(seqs_[i].table);  // idempotent
        seqs_.erase(seqs_.begin() + i);
        return "";
      }
      case 6: {
        const int n = Rand(0, s.table.num_tokens);
        cov_.truncates += n < s.table.num_tokens;
        cache_->Truncate(s.table, n);
        s.tags.resize(n);
        return "";
      }
      case 7: {
        const int nb = s.table.num_blocks();
        const int keep = Rand(0, nb);
        const int drop = Rand(0, nb - keep);
        cache_->DropFront(s.table, drop, keep);
        cov_.drops += drop > 0;
        const int begin = std::min<int>(keep * kBs, s.tags.size());
        const int end = std::min<int>((keep + drop) * kBs, s.tags.size());
        s.tags.erase(s.tags.begin() + begin, s.tags.begin() + end);
        return "";
      }
      default: {
        // Overwrite an existing slot, which is only legal in a block this sequence owns alone.
        if (s.table.num_tokens == 0) return "";
        const int slot = Rand(0, s.table.num_tokens - 1);
        if (cache_->pool().RefCount(s.table.BlockOf(slot, kBs)) != 1) return "";
        Write(s, slot, next_tag_++);
        ++cov_.overwrites;
        return "";
      }
    }
  }

  std::string Append(Seq& s, int n) {
    const int free_before = cache_->num_free_blocks();
    // Shadow computation of the blocks needed, including copy-on-write.
    const int old_tokens = s.table.num_tokens;
    int expect_needed = (old_tokens + n + kBs - 1) / kBs - s.table.num_blocks();
    if (n > 0 && old_tokens % kBs != 0 && cache_->pool().RefCount(s.table.blocks.back()) > 1) {
      ++expect_needed;
    }
    if (cache_->BlocksNeeded(s.table, n) != expect_needed) return "BlocksNeeded mismatch";
    if (cache_->CanAppend(s.table, n) != (expect_needed <= free_before)) return "CanAppend";
    const std::vector<int32_t> blocks_before = s.table.blocks;
    const std::vector<int> refs_before = RefCounts();
    const std::vector<int32_t> free_list_before(cache_->pool().free_blocks().begin(),
                                                cache_->pool().free_blocks().end());
    const absl::Status status = cache_->Append(s.table, n);
    if (expect_needed > free_before) {
      ++cov_.exhausted;
      if (!absl::IsResourceExhausted(status)) return "expected ResourceExhausted";
      if (status.message().find("KV cache pool exhausted") == std::string::npos) {
        return "unclear exhaustion message: " + status.ToString();
      }
      if (s.table.blocks != blocks_before || s.table.num_tokens != old_tokens ||
          RefCounts() != refs_before ||
          !std::equal(free_list_before.begin(), free_list_before.end(),
                      cache_->pool().free_blocks().begin(), cache_->pool().free_blocks().end())) {
        return "failed Append changed state";
      }
      return "";
    }
    if (!status.ok()) return "Append failed: " + status.ToString();
    ++cov_.appends;
    if (n > 0 && old_tokens % kBs != 0 &&
        s.table.blocks[old_tokens / kBs] != blocks_before.back()) {
      ++cov_.copy_on_write;
    }
    if (s.table.num_tokens != old_tokens + n) return "num_tokens not advanced";
    if (cache_->num_free_blocks() != free_before - expect_needed) return "wrong blocks taken";
    for (int slot = old_tokens; slot < old_tokens + n; ++slot) {
      // The copy-on-write guarantee: new slots are never in a shared block.
      if (cache_->pool().RefCount(s.table.BlockOf(slot, kBs)) != 1) {
        return absl::StrCat("appended slot ", slot, " is in a shared block");
      }
      s.tags.push_back(-1);
      Write(s, slot, next_tag_++);
    }
    return "";
  }

  void Write(Seq& s, int slot, int tag) {
    for (int l = 0; l < kLayers; ++l) {
      for (int h = 0; h < kHeads; ++h) {
        float* k = cache_->KeySlot(s.table, l, h, slot);
        float* v = cache_->ValueSlot(s.table, l, h, slot);
        for (int d = 0; d < kDim; ++d) {
          k[d] = Pattern(tag, l, 0, h, d);
          v[d] = Pattern(tag, l, 1, h, d);
        }
      }
    }
    s.tags[slot] = tag;
  }

  std::vector<int> RefCounts() const {
    std::vector<int> r(kBlocks);
    for (int b = 0; b < kBlocks; ++b) r[b] = cache_->pool().RefCount(b);
    return r;
  }

  // Every invariant of the pool and the shadow model; "" if all hold.
  std::string Check() {
    std::vector<int> refs(kBlocks, 0);  // tables referencing each block
    for (size_t i = 0; i < seqs_.size(); ++i) {
      const Seq& s = seqs_[i];
      if (s.table.num_blocks() != (s.table.num_tokens + kBs - 1) / kBs) {
        return absl::StrCat("seq ", i, ": ", s.table.num_blocks(), " blocks for ",
                            s.table.num_tokens, " tokens");
      }
      if (static_cast<int>(s.tags.size()) != s.table.num_tokens) {
        return absl::StrCat("seq ", i, ": shadow has ", s.tags.size(), " tokens, table ",
                            s.table.num_tokens);
      }
      for (int32_t b : s.table.blocks) {
        if (b < 0 || b >= kBlocks) return absl::StrCat("seq ", i, ": bad block id ", b);
        ++refs[b];
      }
    }
    int live = 0;
    for (int b = 0; b < kBlocks; ++b) {
      if (cache_->pool().RefCount(b) != refs[b]) {
        return absl::StrCat("block ", b, ": refcount ", cache_->pool().RefCount(b), " but ",
                            refs[b], " tables reference it");
      }
      live += refs[b] > 0;
    }
    std::vector<int> on_free_list(kBlocks, 0);
    for (int32_t b : cache_->pool().free_blocks()) {
      if (b < 0 || b >= kBlocks) return absl::StrCat("bad id on free list ", b);
      if (++on_free_list[b] > 1) return absl::StrCat("block ", b, " on free list twice");
      if (refs[b] != 0) return absl::StrCat("live block ", b, " on free list");
    }
    if (cache_->num_free_blocks() + live != kBlocks) {
      return absl::StrCat("leak: ", cache_->num_free_blocks(), " free + ", live,
                          " live != ", kBlocks);
    }
    for (size_t i = 0; i < seqs_.size(); ++i) {
      const Seq& s = seqs_[i];
      cov_.checked_slots += s.table.num_tokens;
      for (int slot = 0; slot < s.table.num_tokens; ++slot) {
        for (int l = 0; l < kLayers; ++l) {
          for (int h = 0; h < kHeads; ++h) {
            const float* k = cache_->KeySlot(s.table, l, h, slot);
            const float* v = cache_->ValueSlot(s.table, l, h, slot);
            for (int d = 0; d < kDim; ++d) {
              if (k[d] != Pattern(s.tags[slot], l, 0, h, d) ||
                  v[d] != Pattern(s.tags[slot], l, 1, h, d)) {
                return absl::StrCat("seq ", i, " slot ", slot, " layer ", l, " head ", h,
                                    ": data corrupted (expected tag ", s.tags[slot], ")");
              }
            }
          }
        }
      }
    }
    return "";
  }

  // Frees everything and checks the pool is whole again: every block allocatable exactly once.
  std::string Teardown() {
    for (Seq& s : seqs_) cache_->Free(s.table);
    seqs_.clear();
    if (cache_->num_free_blocks() != kBlocks) return "blocks leaked at teardown";
    std::vector<int> seen(kBlocks, 0);
    for (int i = 0; i < kBlocks; ++i) {
      absl::StatusOr<int32_t> b = cache_->pool().Allocate();
      if (!b.ok()) return "could not allocate every block";
      if (++seen[*b] > 1) return "block handed out twice";
    }
    if (cache_->pool().Allocate().ok()) return "allocated past the pool size";
    return "";
  }

  const std::vector<Seq>& seqs() const { return seqs_; }

 private:
  std::mt19937 rng_;
  Coverage& cov_;
  std::unique_ptr<KvCache> cache_;
  std::vector<Seq> seqs_;
  int next_tag_ = 0;
};

TEST_CASE("KvCache: randomized operations keep every invariant", "[kv_cache][random]") {
  constexpr int kSeeds = 50;
  constexpr int kOps = 2000;
  int max_live_seqs = 0;
  Coverage cov;
  for (uint32_t seed = 1; seed <= kSeeds; ++seed) {
    Harness h(seed, cov);
    for (int op = 0; op < kOps; ++op) {
      std::string err = h.Step();
      if (err.empty()) err = h.Check();
      if (!err.empty()) {
        FAIL("seed " << seed << " op " << op << ": " << err);
      }
      max_live_seqs = std::max<int>(max_live_seqs, h.seqs().size());
    }
    const std::string err = h.Teardown();
    if (!err.empty()) FAIL("seed " << seed << " teardown: " << err);
  }
  INFO("appends " << cov.appends << ", exhausted " << cov.exhausted << ", copy-on-write "
                  << cov.copy_on_write << ", forks " << cov.forks << ", truncates " << cov.truncates
                  << ", drops " << cov.drops << ", overwrites " << cov.overwrites
                  << ", slots checked " << cov.checked_slots);
  CHECK(max_live_seqs == kMaxSeqs);
  // Each path must be well exercised, not just reached once.
  CHECK(cov.exhausted > 1000);
  CHECK(cov.copy_on_write > 1000);
  CHECK(cov.forks > 1000);
  CHECK(cov.truncates > 1000);
  CHECK(cov.drops > 1000);
  CHECK(cov.overwrites > 1000);
}

}  // namespace kv_cache_random_test
}  // namespace textgen
