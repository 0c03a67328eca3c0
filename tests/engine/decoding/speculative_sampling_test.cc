#include "engine/decoding/speculative_sampling.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <vector>

#include "engine/decoding/sampler.h"

namespace textgen {
namespace speculative_sampling_test {

using Ids = std::vector<int32_t>;
using Row = std::vector<double>;

constexpr int kVocab = 8;
constexpr int kTrials = 200000;
// Upper 0.001 quantiles of the chi-square distribution (computed from the regularized upper
// incomplete gamma function; tables give 24.32 and 103.4): a correct sampler fails a test with
// a random seed once in a thousand, and these fixed seeds pass. A wrong residual step moves
// the statistic into the thousands (see the "has the power" test case below).
constexpr double kChi2Df7 = 24.322;
constexpr double kChi2Df63 = 103.442;

// A target and a deliberately different draft distribution, all entries positive.
const Row kP = {0.30, 0.05, 0.20, 0.10, 0.15, 0.02, 0.08, 0.10};
const Row kQ = {0.05, 0.30, 0.10, 0.20, 0.05, 0.15, 0.05, 0.10};

// Inverse CDF in id order (the draft side of the tests, independent of the code under test).
int32_t Draw(const Row& w, std::mt19937_64& rng) {
  const double u = UniformDouble(rng);
  double cum = 0;
  for (int i = 0; i < static_cast<int>(w.size()); ++i) {
    cum += w[i];
    if (u < cum) return i;
  }
  return static_cast<int32_t>(w.size()) - 1;
}

// Pearson's statistic of `counts` against `expected` probabilities (all > 0).
double ChiSquare(const std::vector<int64_t>& counts, const Row& expected) {
  int64_t n = 0;
  for (int64_t c : counts) n += c;
  double chi2 = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const double e = expected[i] * static_cast<double>(n);
    chi2 += (counts[i] - e) * (counts[i] - e) / e;
  }
  return chi2;
}

// The first emitted token of one verification of a single draft, `kTrials` times: drafts drawn
// from q (or the fixed `point_draft` when q is empty). `broken` replaces the residual draw by a
// draw from p, the classic mistake, to show that the test can tell.
std::vector<int64_t> FirstTokenCounts(const Row& q, int32_t point_draft, uint64_t seed,
                                      bool broken = false) {
  std::mt19937_64 draft_rng(seed);
  std::mt19937_64 rng(seed + 1000);
  SpeculativeSampler s;
  std::vector<int64_t> counts(kVocab, 0);
  for (int t = 0; t < kTrials; ++t) {
    const int32_t draft = q.empty() ? point_draft : Draw(q, draft_rng);
    absl::StatusOr<SpeculativeSampler::Check> c = s.CheckDraft(kP, q, draft, rng);
    REQUIRE(c.ok());
    int32_t token = c->token;
    if (broken && !c->accepted) token = Draw(kP, rng);
    ++counts[token];
  }
  return counts;
}

TEST_CASE("greedy verification keeps drafts while they equal the target's ids",
          "[speculative_sampling]") {
  auto verdict = VerifyGreedy(Ids{4, 5, 6}, Ids{4, 5, 6, 7});
  REQUIRE(verdict.ok());
  CHECK(verdict->accepted == 3);
  CHECK(verdict->next == 7);  // the bonus token
  verdict = VerifyGreedy(Ids{4, 5, 6}, Ids{4, 9, 6, 7});
  REQUIRE(verdict.ok());
  CHECK(verdict->accepted == 1);
  CHECK(verdict->next == 9);  // the target's own choice where the draft went wrong
  verdict = VerifyGreedy(Ids{4, 5, 6}, Ids{1, 5, 6, 7});
  REQUIRE(verdict.ok());
  CHECK(verdict->accepted == 0);
  CHECK(verdict->next == 1);
  verdict = VerifyGreedy(Ids{}, Ids{3});
  REQUIRE(verdict.ok());
  CHECK(verdict->accepted == 0);
  CHECK(verdict->next == 3);
}

TEST_CASE("greedy verification needs k + 1 target rows", "[speculative_sampling]") {
  CHECK(VerifyGreedy(Ids{4, 5}, Ids{4, 5}).status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(VerifyGreedy(Ids{4}, Ids{4, 5, 6}).status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(VerifyGreedy(Ids{}, Ids{}).status().code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE(
    "sampled verification: the first token is distributed as the target's, point-mass "
    "drafts",
    "[speculative_sampling]") {
  // A likely draft (p = 0.20) and an unlikely one (p = 0.02).
  for (const int32_t draft : {2, 5}) {
    INFO("draft " << draft);
    const double chi2 = ChiSquare(FirstTokenCounts({}, draft, 11 + draft), kP);
    CHECK(chi2 < kChi2Df7);
  }
}

TEST_CASE(
    "sampled verification: the first token is distributed as the target's, drafts "
    "sampled from a different distribution",
    "[speculative_sampling]") {
  CHECK(ChiSquare(FirstTokenCounts(kQ, -1, 21), kP) < kChi2Df7);
  // q == p: every draft is accepted, and the output is still p.
  CHECK(ChiSquare(FirstTokenCounts(kP, -1, 22), kP) < kChi2Df7);
}

TEST_CASE("sampled verification: the chi-square test has the power to see a wrong residual",
          "[speculative_sampling]") {
  // Drawing from p instead of max(0, p - q) at a rejection gives the draft extra mass. Each of
  // these is far beyond the critical value; the real code above stays below it.
  const double point = ChiSquare(FirstTokenCounts({}, 2, 13, /*broken=*/true), kP);
  const double full = ChiSquare(FirstTokenCounts(kQ, -1, 21, /*broken=*/true), kP);
  INFO("broken residual: chi2 " << point << " (point-mass draft), " << full << " (full q)");
  CHECK(point > 10 * kChi2Df7);
  CHECK(full > 10 * kChi2Df7);
}

// A two-token "model" over kVocab ids: row a is the distribution of the token after token a.
struct Chain {
  std::vector<Row> p;  // target [kVocab][kVocab]
  std::vector<Row> q;  // draft
};

Chain MakeChain(uint64_t seed) {
  std::mt19937_64 rng(seed);
  Chain c;
  for (auto* table : {&c.p, &c.q}) {
    for (int a = 0; a < kVocab; ++a) {
      Row row(kVocab);
      double sum = 0;
      for (double& x : row) sum += x = 0.2 + UniformDouble(rng);  // no tiny cells
      for (double& x : row) x /= sum;
      table->push_back(row);
    }
  }
  return c;
}

// Generates two tokens after token 0 by speculative steps of k drafts each (sampled from the
// draft chain, or its argmax when `point`), verifying with the target chain; returns the
// pair's counts, [first * kVocab + second].
std::vector<int64_t> PairCounts(const Chain& c, int k, bool point, uint64_t seed) {
  std::mt19937_64 draft_rng(seed);
  std::mt19937_64 rng(seed + 1000);
  SpeculativeSampler s;
  std::vector<int64_t> counts(kVocab * kVocab, 0);
  Ids drafts;
  Row p, q;
  for (int t = 0; t < kTrials; ++t) {
    Ids out;
    int32_t prev = 0;
    while (out.size() < 2) {
      drafts.clear();
      p.assign(c.p[prev].begin(), c.p[prev].end());
      q.clear();
      int32_t last = prev;
      for (int i = 0; i < k; ++i) {
        const Row& qrow = c.q[last];
        last = point
                   ? static_cast<int32_t>(std::max_element(qrow.begin(), qrow.end()) - qrow.begin())
                   : Draw(qrow, draft_rng);
        drafts.push_back(last);
        if (!point) q.insert(q.end(), qrow.begin(), qrow.end());
        p.insert(p.end(), c.p[last].begin(), c.p[last].end());
      }
      absl::StatusOr<SpeculativeVerdict> v = s.Verify(drafts, p, q, kVocab, rng);
      REQUIRE(v.ok());
      out.insert(out.end(), drafts.begin(), drafts.begin() + v->accepted);
      out.push_back(v->next);
      prev = out.back();
    }
    ++counts[out[0] * kVocab + out[1]];
  }
  return counts;
}

TEST_CASE("sampled verification: two tokens are jointly distributed as the target's",
          "[speculative_sampling]") {
  // Covers acceptance of later drafts and the bonus token: with k = 2 the second token is a
  // draft, a residual draw or a bonus token; with k = 1 it may come from the next step.
  const Chain c = MakeChain(5);
  Row expected(kVocab * kVocab);
  for (int a = 0; a < kVocab; ++a) {
    for (int b = 0; b < kVocab; ++b) expected[a * kVocab + b] = c.p[0][a] * c.p[a][b];
  }
  for (const int k : {1, 2}) {
    for (const bool point : {false, true}) {
      INFO("k " << k << (point ? ", point-mass drafts" : ", sampled drafts"));
      CHECK(ChiSquare(PairCounts(c, k, point, 31 + k), expected) < kChi2Df63);
    }
  }
}

TEST_CASE("sampled verification: seeded runs are reproducible", "[speculative_sampling]") {
  const Chain c = MakeChain(6);
  CHECK(PairCounts(c, 2, false, 77) == PairCounts(c, 2, false, 77));
  CHECK(PairCounts(c, 2, false, 77) != PairCounts(c, 2, false, 78));
  CHECK(FirstTokenCounts({}, 2, 9) == FirstTokenCounts({}, 2, 9));
}

TEST_CASE("sampled verification: certain and impossible drafts", "[speculative_sampling]") {
  SpeculativeSampler s;
  std::mt19937_64 rng(3);
  Row one_hot(kVocab, 0.0);
  one_hot[4] = 1.0;
  for (int i = 0; i < 100; ++i) {
    absl::StatusOr<SpeculativeSampler::Check> c = s.CheckDraft(one_hot, {}, 4, rng);
    REQUIRE(c.ok());
    CHECK(c->accepted);
    CHECK(c->token == 4);
    c = s.CheckDraft(one_hot, {}, 2, rng);  // p(draft) = 0: always rejected, then the argmax
    REQUIRE(c.ok());
    CHECK_FALSE(c->accepted);
    CHECK(c->token == 4);
  }
  // One-hot target rows (temperature 0) make sampled verification the greedy one.
  Row p;
  const Ids target = {4, 1, 6};
  for (int32_t id : target) {
    Row row(kVocab, 0.0);
    row[id] = 1.0;
    p.insert(p.end(), row.begin(), row.end());
  }
  for (const Ids& drafts : {Ids{4, 1}, Ids{4, 2}, Ids{0, 1}}) {
    absl::StatusOr<SpeculativeVerdict> sampled = s.Verify(drafts, p, {}, kVocab, rng);
    absl::StatusOr<SpeculativeVerdict> greedy = VerifyGreedy(drafts, target);
    REQUIRE(sampled.ok());
    REQUIRE(greedy.ok());
    CHECK(sampled->accepted == greedy->accepted);
    CHECK(sampled->next == greedy->next);
  }
}

TEST_CASE("sampled verification: bad input is refused", "[speculative_sampling]") {
  SpeculativeSampler s;
  std::mt19937_64 rng(1);
  const auto invalid = absl::StatusCode::kInvalidArgument;
  CHECK(s.CheckDraft(kP, {}, 8, rng).status().code() == invalid);   // outside the vocabulary
  CHECK(s.CheckDraft(kP, {}, -1, rng).status().code() == invalid);  // negative id
  Row q = kQ;
  q[3] = 0.0;
  q[0] += kQ[3];
  CHECK(s.CheckDraft(kP, q, 3, rng).status().code() == invalid);                // q(draft) == 0
  CHECK(s.CheckDraft(kP, Row(7, 1.0 / 7), 3, rng).status().code() == invalid);  // sizes differ
  Row unnormalized = kP;
  unnormalized[0] += 0.1;
  CHECK(s.CheckDraft(unnormalized, {}, 0, rng).status().code() == invalid);
  Row nan = kP;
  nan[1] = std::nan("");
  CHECK(s.CheckDraft(nan, {}, 0, rng).status().code() == invalid);
  Row negative = kP;
  negative[0] = -negative[0];
  negative[1] += 2 * kP[0];
  CHECK(s.CheckDraft(negative, {}, 1, rng).status().code() == invalid);
  CHECK(s.SampleRow({}, rng).status().code() == invalid);
  // Verify: k + 1 target rows, k draft rows or none.
  Row two_rows = kP;
  two_rows.insert(two_rows.end(), kP.begin(), kP.end());
  CHECK(s.Verify(Ids{1}, two_rows, {}, kVocab, rng).ok());
  CHECK(s.Verify(Ids{1}, two_rows, kQ, kVocab, rng).ok());
  CHECK(s.Verify(Ids{1, 2}, two_rows, {}, kVocab, rng).status().code() == invalid);
  CHECK(s.Verify(Ids{1}, kP, {}, kVocab, rng).status().code() == invalid);
  CHECK(s.Verify(Ids{1}, two_rows, two_rows, kVocab, rng).status().code() == invalid);
  CHECK(s.Verify(Ids{1}, two_rows, {}, 0, rng).status().code() == invalid);
  CHECK(s.Verify(Ids{1}, two_rows, {}, -8, rng).status().code() == invalid);
}

}  // namespace speculative_sampling_test
}  // namespace textgen
