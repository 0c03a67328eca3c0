#include "engine/decoding/top_logprobs.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

namespace textgen {
namespace top_logprobs_test {

std::vector<int32_t> Ids(const std::vector<TokenLogprob>& t) {
  std::vector<int32_t> ids;
  for (const TokenLogprob& x : t) ids.push_back(x.id);
  return ids;
}

TEST_CASE("TopLogprobs: best first with their values", "[top_logprobs]") {
  const std::vector<double> lp = {-3.0, -0.5, -2.0, -1.0, -4.0};
  const std::vector<TokenLogprob> top = TopLogprobs(lp, 3);
  CHECK(Ids(top) == std::vector<int32_t>{1, 3, 2});
  REQUIRE(top.size() == 3);
  CHECK(top[0].logprob == -0.5);
  CHECK(top[1].logprob == -1.0);
  CHECK(top[2].logprob == -2.0);
  CHECK(Ids(TopLogprobs(lp, 1)) == std::vector<int32_t>{1});
}

TEST_CASE("TopLogprobs: ties go to the lower id", "[top_logprobs]") {
  const std::vector<double> lp = {-2.0, -1.0, -2.0, -1.0, -2.0, -INFINITY};
  CHECK(Ids(TopLogprobs(lp, 3)) == std::vector<int32_t>{1, 3, 0});
  CHECK(Ids(TopLogprobs(lp, 4)) == std::vector<int32_t>{1, 3, 0, 2});
  CHECK(Ids(TopLogprobs(lp, 6)) == std::vector<int32_t>{1, 3, 0, 2, 4, 5});
}

TEST_CASE("TopLogprobs: n = 0, n > vocab, NaN", "[top_logprobs]") {
  const std::vector<double> lp = {-1.0, -0.1, -2.0};
  CHECK(TopLogprobs(lp, 0).empty());
  CHECK(TopLogprobs(lp, -3).empty());
  CHECK(Ids(TopLogprobs(lp, 20)) == std::vector<int32_t>{1, 0, 2});
  CHECK(TopLogprobs(std::vector<double>{}, 5).empty());
  CHECK(Ids(TopLogprobs(std::vector<double>{NAN, -1.0, NAN}, 3)) == std::vector<int32_t>{1});
}

TEST_CASE("TopLogprobs: a 32000 vocabulary against a sort", "[top_logprobs]") {
  std::mt19937 rng(5);
  std::normal_distribution<double> d(-10.0, 3.0);
  std::vector<double> lp(32000);
  // Rounded to create plenty of ties.
  for (double& x : lp) x = std::round(d(rng) * 4) / 4;
  std::vector<int32_t> order(lp.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return lp[a] > lp[b]; });
  for (int n : {1, 5, 20}) {
    const std::vector<TokenLogprob> top = TopLogprobs(lp, n);
    CHECK(Ids(top) == std::vector<int32_t>(order.begin(), order.begin() + n));
    for (const TokenLogprob& t : top) CHECK(t.logprob == lp[t.id]);
  }
}

}  // namespace top_logprobs_test
}  // namespace textgen
