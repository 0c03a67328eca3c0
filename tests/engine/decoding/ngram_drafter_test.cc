#include "engine/decoding/ngram_drafter.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <climits>
#include <random>
#include <vector>

namespace textgen {
namespace ngram_drafter_test {

using Ids = std::vector<int32_t>;

NgramDrafter Make(const Ids& history, int min_ngram = 2, int max_ngram = 4) {
  NgramDrafterOptions o;
  o.min_ngram = min_ngram;
  o.max_ngram = max_ngram;
  REQUIRE(ValidateNgramDrafterOptions(o).ok());
  NgramDrafter d(o);
  d.Append(history);
  return d;
}

struct Proposal {
  int ngram = 0;
  Ids tokens;
};

Proposal ProposeFrom(const NgramDrafter& d, int k) {
  Proposal p;
  p.ngram = d.Propose(k, p.tokens);
  return p;
}

// The definition, by scanning the whole history: the longest suffix (max_ngram down to
// min_ngram) with an earlier occurrence, its most recent one, and what followed it, copying
// over the proposal itself past the history's end.
Proposal Reference(const Ids& h, int min_ngram, int max_ngram, int k) {
  Proposal p;
  const int len = static_cast<int>(h.size());
  if (k <= 0) return p;
  for (int n = std::min(max_ngram, len - 1); n >= min_ngram; --n) {
    for (int end = len - 2; end >= n - 1; --end) {
      if (!std::equal(h.begin() + (end - n + 1), h.begin() + end + 1, h.end() - n)) continue;
      p.ngram = n;
      Ids ext = h;
      for (int j = 0; j < k; ++j) {
        const int32_t next = ext[end + 1 + j];
        ext.push_back(next);
      }
      p.tokens.assign(ext.begin() + len, ext.end());
      return p;
    }
  }
  return p;
}

TEST_CASE("n-gram drafter: proposes what followed the earlier occurrence", "[ngram_drafter]") {
  const NgramDrafter d = Make({1, 2, 3, 9, 8, 1, 2});
  const Proposal p = ProposeFrom(d, 3);
  CHECK(p.ngram == 2);
  CHECK(p.tokens == Ids{3, 9, 8});
}

TEST_CASE("n-gram drafter: nothing without a match", "[ngram_drafter]") {
  CHECK(ProposeFrom(Make({1, 2, 3, 4, 5}), 4).ngram == 0);
  CHECK(ProposeFrom(Make({1, 2, 3, 4, 5}), 4).tokens.empty());
  // Only a 1-gram matches ("2" earlier), below the default minimum of 2.
  CHECK(ProposeFrom(Make({2, 7, 1, 2}), 4).tokens.empty());
  CHECK(ProposeFrom(Make({}), 4).tokens.empty());
  CHECK(ProposeFrom(Make({5}), 4).tokens.empty());
  // The suffix itself is never its own match.
  CHECK(ProposeFrom(Make({1, 2}), 4).tokens.empty());
}

TEST_CASE("n-gram drafter: a 1-gram matches when allowed", "[ngram_drafter]") {
  const Proposal p = ProposeFrom(Make({2, 7, 1, 2}, /*min_ngram=*/1), 2);
  CHECK(p.ngram == 1);
  CHECK(p.tokens == Ids{7, 1});
}

TEST_CASE("n-gram drafter: the longest match wins over a more recent shorter one",
          "[ngram_drafter]") {
  // [5 1 2] occurred at the start (then 7); [1 2] alone more recently (then 8).
  const Ids h = {5, 1, 2, 7, 9, 9, 3, 1, 2, 8, 9, 9, 5, 1, 2};
  const Proposal longest = ProposeFrom(Make(h), 1);
  CHECK(longest.ngram == 3);
  CHECK(longest.tokens == Ids{7});
  // Capped at 2-grams, the most recent [1 2] wins.
  const Proposal shorter = ProposeFrom(Make(h, 2, 2), 1);
  CHECK(shorter.ngram == 2);
  CHECK(shorter.tokens == Ids{8});
}

TEST_CASE("n-gram drafter: the most recent occurrence wins", "[ngram_drafter]") {
  const Proposal p = ProposeFrom(Make({1, 2, 3, 1, 2, 4, 6, 1, 2}), 2);
  CHECK(p.ngram == 2);
  CHECK(p.tokens == Ids{4, 6});
}

TEST_CASE("n-gram drafter: at most k tokens and exactly k on a match", "[ngram_drafter]") {
  const NgramDrafter d = Make({1, 2, 3, 4, 5, 6, 1, 2});
  CHECK(ProposeFrom(d, 0).tokens.empty());
  CHECK(ProposeFrom(d, 0).ngram == 0);
  CHECK(ProposeFrom(d, -3).tokens.empty());
  CHECK(ProposeFrom(d, 1).tokens == Ids{3});
  CHECK(ProposeFrom(d, 4).tokens == Ids{3, 4, 5, 6});
  // Past the history the copy continues over its own proposal: 3 4 5 6 1 2 3 4.
  CHECK(ProposeFrom(d, 8).tokens == Ids{3, 4, 5, 6, 1, 2, 3, 4});
  CHECK(ProposeFrom(d, INT_MAX).tokens.size() == kMaxDraftTokens);
}

TEST_CASE("n-gram drafter: a loop is assumed to go on", "[ngram_drafter]") {
  CHECK(ProposeFrom(Make({1, 2, 1, 2, 1, 2}), 5).tokens == Ids{1, 2, 1, 2, 1});
  const Proposal p = ProposeFrom(Make({7, 7, 7}), 4);
  CHECK(p.ngram == 2);
  CHECK(p.tokens == Ids{7, 7, 7, 7});
}

TEST_CASE("n-gram drafter: truncation restores the older occurrences", "[ngram_drafter]") {
  NgramDrafter d = Make({1, 2, 3, 1, 2, 4, 1, 2});
  CHECK(ProposeFrom(d, 1).tokens == Ids{4});
  REQUIRE(d.Truncate(3).ok());  // [1 2 3]: the later [1 2] is gone from the index
  CHECK(d.size() == 3);
  CHECK(d.history().size() == 3);
  d.Append(Ids{1, 2});
  CHECK(ProposeFrom(d, 1).tokens == Ids{3});
  REQUIRE(d.Truncate(1).ok());  // [1]: no 2-gram is left
  d.Append(2);
  CHECK(ProposeFrom(d, 4).tokens.empty());
  REQUIRE(d.Truncate(d.size()).ok());  // a no-op
  CHECK(d.size() == 2);
}

TEST_CASE("n-gram drafter: bad truncation lengths change nothing", "[ngram_drafter]") {
  NgramDrafter d = Make({1, 2, 3, 1, 2});
  CHECK(d.Truncate(6).code() == absl::StatusCode::kInvalidArgument);
  CHECK(d.Truncate(-1).code() == absl::StatusCode::kInvalidArgument);
  CHECK(d.size() == 5);
  CHECK(ProposeFrom(d, 1).tokens == Ids{3});
}

TEST_CASE("n-gram drafter: reset forgets everything", "[ngram_drafter]") {
  NgramDrafter d = Make({1, 2, 3, 1, 2});
  d.Reset();
  CHECK(d.size() == 0);
  d.Append(Ids{1, 2});
  CHECK(ProposeFrom(d, 2).tokens.empty());
  d.Append(Ids{5, 1, 2});
  CHECK(ProposeFrom(d, 2).tokens == Ids{5, 1});
}

TEST_CASE("n-gram drafter: options are validated", "[ngram_drafter]") {
  NgramDrafterOptions o;
  CHECK(ValidateNgramDrafterOptions(o).ok());
  o.min_ngram = 0;
  CHECK(ValidateNgramDrafterOptions(o).code() == absl::StatusCode::kInvalidArgument);
  o.min_ngram = 5;
  o.max_ngram = 4;
  CHECK(ValidateNgramDrafterOptions(o).code() == absl::StatusCode::kInvalidArgument);
  o.min_ngram = 1;
  o.max_ngram = kMaxNgram + 1;
  CHECK(ValidateNgramDrafterOptions(o).code() == absl::StatusCode::kInvalidArgument);
  o.max_ngram = kMaxNgram;
  CHECK(ValidateNgramDrafterOptions(o).ok());
}

TEST_CASE("n-gram drafter: random appends and truncations match a full scan", "[ngram_drafter]") {
  // A small alphabet makes matches of every length common; truncations of up to 6 tokens are
  // what rejected drafts cause, the occasional deep one a session rolled back.
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    std::mt19937_64 rng(seed);
    const int min_ngram = 1 + static_cast<int>(seed % 3);
    const int max_ngram = min_ngram + static_cast<int>(seed % 4);
    NgramDrafter d = Make({}, min_ngram, max_ngram);
    Ids h;
    for (int step = 0; step < 600; ++step) {
      INFO("seed " << seed << " step " << step);
      const int action = static_cast<int>(rng() % 10);
      if (action < 7 || h.empty()) {
        const auto t = static_cast<int32_t>(rng() % 4);
        d.Append(t);
        h.push_back(t);
      } else {
        const int cut = action == 9
                            ? static_cast<int>(rng() % (h.size() + 1))
                            : std::max(0, static_cast<int>(h.size()) - static_cast<int>(rng() % 7));
        REQUIRE(d.Truncate(cut).ok());
        h.resize(cut);
      }
      REQUIRE(d.size() == static_cast<int>(h.size()));
      const int k = static_cast<int>(rng() % 6);
      const Proposal got = ProposeFrom(d, k);
      const Proposal want = Reference(h, min_ngram, max_ngram, k);
      REQUIRE(got.ngram == want.ngram);
      REQUIRE(got.tokens == want.tokens);
    }
  }
}

TEST_CASE("n-gram drafter: a long history proposes without rescanning", "[ngram_drafter]") {
  // 32k tokens of a 1000-token pattern: every proposal continues the pattern.
  NgramDrafter d = Make({});
  Ids pattern(1000);
  std::mt19937_64 rng(7);
  for (int32_t& t : pattern) t = static_cast<int32_t>(rng() % 32000);
  std::vector<int32_t> out;
  for (int i = 0; i < 32000; ++i) {
    d.Append(pattern[i % pattern.size()]);
    if (i >= static_cast<int>(pattern.size()) + 4) {
      REQUIRE(d.Propose(4, out) == 4);  // the longest n-gram matched
      REQUIRE(out.size() == 4);
      for (int j = 0; j < 4; ++j) REQUIRE(out[j] == pattern[(i + 1 + j) % pattern.size()]);
    }
  }
}

}  // namespace ngram_drafter_test
}  // namespace textgen
