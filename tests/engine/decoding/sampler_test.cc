#include "engine/decoding/sampler.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace textgen {
namespace sampler_test {

std::vector<float> LogitsOf(const std::vector<double>& probs) {
  std::vector<float> l;
  for (double p : probs) l.push_back(static_cast<float>(std::log(p)));
  return l;
}

std::vector<double> Dist(const SamplingParams& p, const std::vector<float>& logits,
                         const std::vector<int32_t>& context = {}) {
  REQUIRE(ValidateSamplingParams(p).ok());
  return Sampler(p).Distribution(logits, context);
}

// Token ids with nonzero probability.
std::vector<int32_t> Support(const std::vector<double>& dist) {
  std::vector<int32_t> ids;
  for (size_t i = 0; i < dist.size(); ++i) {
    if (dist[i] > 0) ids.push_back(static_cast<int32_t>(i));
  }
  return ids;
}

// `want` renormalized, compared entry by entry.
void CheckDist(const std::vector<double>& got, std::vector<double> want, double tol = 1e-6) {
  REQUIRE(got.size() == want.size());
  const double total = std::accumulate(want.begin(), want.end(), 0.0);
  for (size_t i = 0; i < want.size(); ++i) {
    INFO("token " << i);
    CHECK(got[i] == Approx(want[i] / total).margin(tol));
  }
}

std::vector<double> SoftmaxRef(const std::vector<float>& logits, double t) {
  double max = -INFINITY;
  for (float l : logits) max = std::max(max, static_cast<double>(l));
  std::vector<double> p;
  double sum = 0;
  for (float l : logits) sum += std::exp((l - max) / t);
  for (float l : logits) p.push_back(std::exp((l - max) / t) / sum);
  return p;
}

std::vector<float> RandomLogits(size_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

TEST_CASE("Sampler: ValidateSamplingParams names the bad parameter", "[sampler]") {
  CHECK(ValidateSamplingParams(SamplingParams{}).ok());
  SamplingParams edge;
  edge.temperature = 0;
  edge.top_p = 1;
  edge.min_p = 0;
  edge.top_k = 0;
  edge.repetition_penalty = 0.5f;
  CHECK(ValidateSamplingParams(edge).ok());

  const float nan = std::nanf("");
  struct Bad {
    std::string name;
    SamplingParams p;
  };
  std::vector<Bad> bad;
  auto add = [&](std::string name, auto mutate) {
    SamplingParams p;
    mutate(p);
    bad.push_back({std::move(name), p});
  };
  add("temperature", [](SamplingParams& p) { p.temperature = -0.1f; });
  add("temperature", [&](SamplingParams& p) { p.temperature = nan; });
  add("temperature", [](SamplingParams& p) { p.temperature = INFINITY; });
  add("top_k", [](SamplingParams& p) { p.top_k = -1; });
  add("top_p", [](SamplingParams& p) { p.top_p = 0.0f; });
  add("top_p", [](SamplingParams& p) { p.top_p = 1.5f; });
  add("top_p", [](SamplingParams& p) { p.top_p = -0.5f; });
  add("top_p", [&](SamplingParams& p) { p.top_p = nan; });
  add("min_p", [](SamplingParams& p) { p.min_p = -0.01f; });
  add("min_p", [](SamplingParams& p) { p.min_p = 1.0f; });
  add("min_p", [&](SamplingParams& p) { p.min_p = nan; });
  add("repetition_penalty", [](SamplingParams& p) { p.repetition_penalty = 0.0f; });
  add("repetition_penalty", [](SamplingParams& p) { p.repetition_penalty = -1.0f; });
  add("repetition_penalty", [&](SamplingParams& p) { p.repetition_penalty = nan; });
  for (const Bad& b : bad) {
    const absl::Status s = ValidateSamplingParams(b.p);
    INFO(b.name << ": " << s.ToString());
    CHECK(s.code() == absl::StatusCode::kInvalidArgument);
    CHECK(s.message().find(b.name + " must be") != std::string::npos);
  }
  SamplingParams p;
  p.top_p = 1.5f;
  CHECK(ValidateSamplingParams(p).message() == "top_p must be in (0, 1] (1 = off), got 1.5");
}

TEST_CASE("Sampler: top-p keeps the smallest prefix reaching the mass", "[sampler]") {
  const std::vector<float> l = LogitsOf({0.5, 0.3, 0.2});
  SamplingParams p;
  p.top_p = 0.8f;  // 0.5 + 0.3 reaches 0.8 exactly: two tokens
  CheckDist(Dist(p, l), {0.5, 0.3, 0});
  p.top_p = 0.80001f;
  CheckDist(Dist(p, l), {0.5, 0.3, 0.2});
  p.top_p = 0.5f;  // the first token alone reaches it
  CheckDist(Dist(p, l), {1, 0, 0});
  p.top_p = 0.49f;
  CheckDist(Dist(p, l), {1, 0, 0});
  p.top_p = 0.51f;
  CheckDist(Dist(p, l), {0.5, 0.3, 0});
  p.top_p = 1e-7f;  // below the slack: still the best token
  CheckDist(Dist(p, l), {1, 0, 0});

  // Ranking is by probability, not id.
  p.top_p = 0.7f;
  CheckDist(Dist(p, LogitsOf({0.1, 0.2, 0.4, 0.3})), {0, 0, 0.4, 0.3});
  // Equal probabilities: the lower ids come first in the prefix.
  p.top_p = 0.5f;
  CheckDist(Dist(p, LogitsOf({0.25, 0.25, 0.25, 0.25})), {1, 1, 0, 0});
  p.top_p = 0.6f;
  CheckDist(Dist(p, LogitsOf({0.25, 0.25, 0.25, 0.25})), {1, 1, 1, 0});
}

TEST_CASE("Sampler: top-p on a 32000 vocabulary matches a sorted reference", "[sampler]") {
  for (float scale : {0.5f, 2.0f, 6.0f}) {
    for (float top_p : {0.1f, 0.5f, 0.9f, 0.95f, 0.999f}) {
      INFO("scale " << scale << " top_p " << top_p);
      const std::vector<float> l = RandomLogits(32000, 7 + static_cast<int>(scale), scale);
      const std::vector<double> ref = SoftmaxRef(l, 1.0);
      std::vector<int32_t> order(l.size());
      std::iota(order.begin(), order.end(), 0);
      std::sort(order.begin(), order.end(),
                [&](int32_t a, int32_t b) { return ref[a] != ref[b] ? ref[a] > ref[b] : a < b; });
      double cum = 0;
      size_t m = 0;
      while (m < order.size() && cum < top_p - 1e-6) cum += ref[order[m++]];
      std::vector<int32_t> want(order.begin(), order.begin() + m);
      std::sort(want.begin(), want.end());
      SamplingParams p;
      p.top_p = top_p;
      const std::vector<double> got = Dist(p, l);
      CHECK(Support(got) == want);
      for (int32_t id : want) REQUIRE(got[id] == Approx(ref[id] / cum).epsilon(1e-5));
      p.seed = 3;
      Sampler s(p);
      for (int i = 0; i < 50; ++i) REQUIRE(got[s.Sample(l, {})] > 0);
    }
  }
}

TEST_CASE("Sampler: top-k keeps exactly k, boundary ties to the lower ids", "[sampler]") {
  SamplingParams p;
  p.top_k = 2;
  CheckDist(Dist(p, LogitsOf({0.1, 0.4, 0.2, 0.3})), {0, 0.4, 0, 0.3});
  // Three tokens tie for second place; the lowest id of them is kept.
  const std::vector<float> tied = {1.0f, 3.0f, 2.0f, 2.0f, 2.0f};
  std::vector<double> d = Dist(p, tied);
  CHECK(Support(d) == std::vector<int32_t>{1, 2});
  p.top_k = 3;
  CHECK(Support(Dist(p, tied)) == std::vector<int32_t>{1, 2, 3});
  p.top_k = 1;
  CheckDist(Dist(p, LogitsOf({0.1, 0.4, 0.2, 0.3})), {0, 1, 0, 0});
  p.top_k = 4;  // == vocab: off
  CheckDist(Dist(p, LogitsOf({0.1, 0.4, 0.2, 0.3})), {0.1, 0.4, 0.2, 0.3});
  p.top_k = 100;
  CheckDist(Dist(p, LogitsOf({0.1, 0.4, 0.2, 0.3})), {0.1, 0.4, 0.2, 0.3});

  // Large vocabulary against a stable sort, rounded so that the boundary is usually a tie;
  // k up to 1024 and beyond take different selection paths.
  std::vector<float> l = RandomLogits(32000, 3, 3.0f);
  for (float& x : l) x = std::round(x * 8) / 8;
  for (int k : {1, 40, 1000, 1024, 1025, 5000, 31999}) {
    std::vector<int32_t> order(l.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return l[a] > l[b]; });
    std::vector<int32_t> want(order.begin(), order.begin() + k);
    std::sort(want.begin(), want.end());
    p.top_k = k;
    CHECK(Support(Dist(p, l)) == want);
  }
}

TEST_CASE("Sampler: min-p drops tokens below min_p * p_max", "[sampler]") {
  const std::vector<float> l = LogitsOf({0.25, 0.5, 0.15, 0.1});
  SamplingParams p;
  p.min_p = 0.25f;  // floor 0.125
  CheckDist(Dist(p, l), {0.25, 0.5, 0.15, 0});
  p.min_p = 0.35f;  // floor 0.175
  CheckDist(Dist(p, l), {0.25, 0.5, 0, 0});
  p.min_p = 0.9f;
  CheckDist(Dist(p, l), {0, 1, 0, 0});
  p.min_p = 0.1f;  // floor 0.05: nothing dropped
  CheckDist(Dist(p, l), {0.25, 0.5, 0.15, 0.1});
}

TEST_CASE("Sampler: filters compose in the documented order", "[sampler]") {
  const std::vector<float> l = LogitsOf({0.05, 0.3, 0.1, 0.2, 0.15, 0.12, 0.08});
  SamplingParams p;
  p.top_k = 5;     // drops 0.05 and 0.08; the rest has mass 0.87
  p.top_p = 0.6f;  // of the top-k distribution: 0.3 + 0.2 + 0.15 = 0.65 / 0.87 = 0.747 >= 0.6,
                   // 0.5 / 0.87 = 0.575 < 0.6: three tokens
  CheckDist(Dist(p, l), {0, 0.3, 0, 0.2, 0.15, 0, 0});
  p.min_p = 0.6f;  // floor 0.18 of the max 0.3: drops 0.15
  CheckDist(Dist(p, l), {0, 0.3, 0, 0.2, 0, 0, 0});
  // Temperature applies before top-k/top-p: at T = 0.5, probs go as p^2.
  SamplingParams t;
  t.temperature = 0.5f;
  t.top_p = 0.75f;  // squares sum to .1858; prefixes .09 .13 .1525 -> .484 .700 .821: three
  CheckDist(Dist(t, l), {0, 0.09, 0, 0.04, 0.0225, 0, 0});
}

TEST_CASE("Sampler: temperature scaling matches softmax(logits / T)", "[sampler]") {
  const std::vector<float> l = RandomLogits(200, 11, 3.0f);
  for (float temp : {0.05f, 0.3f, 0.7f, 1.0f, 1.5f, 4.0f}) {
    INFO("T " << temp);
    SamplingParams p;
    p.temperature = temp;
    const std::vector<double> got = Dist(p, l);
    const std::vector<double> ref = SoftmaxRef(l, temp);
    for (size_t i = 0; i < l.size(); ++i) REQUIRE(got[i] == Approx(ref[i]).margin(1e-6));
  }
}

TEST_CASE("Sampler: temperature 0 is argmax with ties to the lowest id", "[sampler]") {
  SamplingParams p;
  p.temperature = 0;
  Sampler s(p);
  const std::vector<float> l = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f};
  for (int i = 0; i < 10; ++i) CHECK(s.Sample(l, {}) == 1);
  CheckDist(s.Distribution(l, {}), {0, 1, 0, 0, 0});
  // Other filters are irrelevant when greedy.
  p.top_k = 3;
  p.top_p = 0.1f;
  CHECK(Sampler(p).Sample(l, {}) == 1);
}

TEST_CASE("Sampler: repetition penalty matches HF and counts each token once", "[sampler]") {
  std::vector<float> l = {2.0f, -2.0f, 0.5f, -0.5f, 1.0f, 0.0f};
  // Token 0 three times, out-of-range ids ignored.
  const std::vector<int32_t> context = {0, 1, 0, 0, 3, 99, -1, 5};
  ApplyRepetitionPenalty(2.0f, context, absl::MakeSpan(l));
  CHECK(l == std::vector<float>{1.0f, -4.0f, 0.5f, -1.0f, 1.0f, 0.0f});
  std::vector<float> same = {2.0f, -2.0f};
  ApplyRepetitionPenalty(1.0f, std::vector<int32_t>{0, 1}, absl::MakeSpan(same));
  CHECK(same == std::vector<float>{2.0f, -2.0f});
  // A penalty below 1 encourages repetition, by the same formula.
  std::vector<float> enc = {2.0f, -2.0f};
  ApplyRepetitionPenalty(0.5f, std::vector<int32_t>{0, 1}, absl::MakeSpan(enc));
  CHECK(enc == std::vector<float>{4.0f, -1.0f});

  // The sampler applies it first, to a copy.
  SamplingParams p;
  p.repetition_penalty = 4.0f;
  p.temperature = 0;
  const std::vector<float> raw = {3.0f, 2.0f, 1.0f};
  CHECK(Sampler(p).Sample(raw, std::vector<int32_t>{0, 0}) == 1);  // 3/4 < 2
  CHECK(Sampler(p).Sample(raw, {}) == 0);
  CHECK(raw == std::vector<float>{3.0f, 2.0f, 1.0f});
  p.temperature = 1.0f;
  CheckDist(Sampler(p).Distribution(raw, std::vector<int32_t>{0, 0}),
            SoftmaxRef({0.75f, 2.0f, 1.0f}, 1.0));
}

TEST_CASE("Sampler: non-finite logits", "[sampler]") {
  SamplingParams p;
  p.seed = 1;
  Sampler s(p);
  const float inf = INFINITY;
  const float nan = std::nanf("");
  // NaN and -inf are never drawn.
  const std::vector<float> l = {-inf, nan, 0.0f, 0.0f};
  for (int i = 0; i < 200; ++i) {
    const int32_t t = s.Sample(l, {});
    REQUIRE((t == 2 || t == 3));
  }
  CheckDist(s.Distribution(l, {}), {0, 0, 0.5, 0.5});
  // Nothing finite, or a +inf: the argmax.
  CHECK(s.Sample(std::vector<float>{-inf, -inf, -inf}, {}) == 0);
  CHECK(s.Sample(std::vector<float>{1.0f, inf, 2.0f, inf}, {}) == 1);
  // A very small temperature does not overflow.
  p.temperature = 1e-30f;
  CheckDist(Sampler(p).Distribution(std::vector<float>{1.0f, 3.0f, 2.0f}, {}), {0, 1, 0});
}

std::vector<int32_t> Draws(Sampler& s, const std::vector<float>& l, int n) {
  std::vector<int32_t> out;
  std::vector<int32_t> context;
  for (int i = 0; i < n; ++i) out.push_back(s.Sample(l, context));
  return out;
}

TEST_CASE("Sampler: seeded draws are reproducible and independent", "[sampler]") {
  const std::vector<float> l = RandomLogits(1000, 5, 2.0f);
  SamplingParams p;
  p.top_k = 50;
  p.top_p = 0.9f;
  p.seed = 1234;
  Sampler a(p);
  Sampler b(p);
  const std::vector<int32_t> ra = Draws(a, l, 1000);
  CHECK(Draws(b, l, 1000) == ra);
  CHECK(std::set<int32_t>(ra.begin(), ra.end()).size() > 10);  // really random

  p.seed = 1235;
  Sampler c(p);
  CHECK(Draws(c, l, 1000) != ra);

  // Interleaving two requests with the same seed changes neither.
  p.seed = 1234;
  Sampler x(p);
  Sampler y(p);
  std::vector<int32_t> rx;
  std::vector<int32_t> ry;
  for (int i = 0; i < 1000; ++i) {
    rx.push_back(x.Sample(l, {}));
    ry.push_back(y.Sample(l, {}));
  }
  CHECK(rx == ra);
  CHECK(ry == ra);

  // Unseeded samplers differ from each other (with overwhelming probability).
  p.seed.reset();
  Sampler u1(p);
  Sampler u2(p);
  CHECK(Draws(u1, l, 200) != Draws(u2, l, 200));
}

TEST_CASE("Sampler: the random stream is the documented one", "[sampler]") {
  // Pins the draw to mt19937_64 and the 53-bit conversion, which are fully specified, so a
  // seed means the same thing with any standard library.
  std::mt19937_64 rng(42);
  std::mt19937_64 ref(42);
  for (int i = 0; i < 100; ++i) {
    const double u = UniformDouble(rng);
    REQUIRE(u == static_cast<double>(ref() >> 11) / 9007199254740992.0);
    REQUIRE((u >= 0 && u < 1));
  }
  // Inverse-CDF in id order: with two equal tokens the draw picks token 0 iff u < 0.5.
  SamplingParams p;
  p.seed = 42;
  Sampler s(p);
  std::mt19937_64 mirror(42);
  for (int i = 0; i < 100; ++i) {
    const int32_t want = UniformDouble(mirror) < 0.5 ? 0 : 1;
    REQUIRE(s.Sample(std::vector<float>{0.0f, 0.0f}, {}) == want);
  }
}

// Pearson's chi-square of `counts` against `probs` (zero-probability cells must be empty and
// are left out).
double ChiSquare(const std::vector<int>& counts, const std::vector<double>& probs, int n,
                 int* cells) {
  double chi = 0;
  *cells = 0;
  for (size_t i = 0; i < probs.size(); ++i) {
    if (probs[i] == 0) {
      CHECK(counts[i] == 0);
      continue;
    }
    ++*cells;
    const double e = probs[i] * n;
    chi += (counts[i] - e) * (counts[i] - e) / e;
  }
  return chi;
}

TEST_CASE("Sampler: draws fit the filtered distribution (chi-square)", "[sampler]") {
  // Chi-square quantiles for df = 1..9: upper at p = 0.999 (too far from the target) and lower
  // at p = 0.001 (too close to be random).
  const double kUpper[] = {0,      10.828, 13.816, 16.266, 18.467,
                           20.515, 22.458, 24.322, 26.124, 27.877};
  const double kLower[] = {0,      1.571e-6, 0.002001, 0.02430, 0.09080,
                           0.2102, 0.3811,   0.5985,   0.8571,  1.152};
  // Ids deliberately out of probability order.
  const std::vector<double> base = {0.06, 0.2, 0.01, 0.3, 0.08, 0.1, 0.03, 0.15, 0.05, 0.02};
  const std::vector<float> l = LogitsOf(base);
  struct Case {
    std::string name;
    SamplingParams params;
    std::vector<double> want;  // unnormalized, by hand
  };
  std::vector<Case> cases;
  auto add = [&](std::string name, auto mutate, std::vector<double> want) {
    SamplingParams p;
    mutate(p);
    cases.push_back({std::move(name), p, std::move(want)});
  };
  add(
      "plain", [](SamplingParams&) {}, base);
  add("top_k 5", [](SamplingParams& p) { p.top_k = 5; },
      {0, 0.2, 0, 0.3, 0.08, 0.1, 0, 0.15, 0, 0});
  add("top_p 0.7", [](SamplingParams& p) { p.top_p = 0.7f; },  // .3 .2 .15 .1 = .75
      {0, 0.2, 0, 0.3, 0, 0.1, 0, 0.15, 0, 0});
  add("min_p 0.25", [](SamplingParams& p) { p.min_p = 0.25f; },  // floor 0.075
      {0, 0.2, 0, 0.3, 0.08, 0.1, 0, 0.15, 0, 0});
  add("T 0.5, top_k 6, top_p 0.9",
      [](SamplingParams& p) {
        p.temperature = 0.5f;
        p.top_k = 6;
        p.top_p = 0.9f;
      },
      // Squares of the top 6: .09 .04 .0225 .01 .0064 .0036, sum .1725; prefix masses .522
      // .754 .884 .942: four tokens.
      {0, 0.04, 0, 0.09, 0, 0.01, 0, 0.0225, 0, 0});
  uint64_t seed = 2024;
  for (const Case& c : cases) {
    INFO(c.name);
    SamplingParams p = c.params;
    p.seed = seed++;
    Sampler s(p);
    CheckDist(s.Distribution(l, {}), c.want);
    std::vector<double> want = c.want;
    const double total = std::accumulate(want.begin(), want.end(), 0.0);
    for (double& w : want) w /= total;
    constexpr int kDraws = 100000;
    std::vector<int> counts(base.size(), 0);
    for (int i = 0; i < kDraws; ++i) ++counts[s.Sample(l, {})];
    int cells = 0;
    const double chi = ChiSquare(counts, want, kDraws, &cells);
    const int df = cells - 1;
    INFO("chi-square " << chi << " df " << df);
    CHECK(chi < kUpper[df]);
    CHECK(chi > kLower[df]);
  }
}

}  // namespace sampler_test
}  // namespace textgen
