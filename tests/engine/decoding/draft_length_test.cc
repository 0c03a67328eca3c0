#include "engine/decoding/draft_length.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

namespace textgen {
namespace draft_length_test {

// Passes whose every row costs r one-row passes more.
DraftCosts Linear(double r) {
  DraftCosts c;
  for (int k = 0; k <= kMaxSpeculativeTokens; ++k) c.pass[k] = 1 + r * k;
  return c;
}

// Tokens per cost for k drafts, computed directly: the reference Best must maximize.
double Rate(double a, const DraftCosts& c, int k) {
  double tokens = 0;
  for (int i = 0; i <= k; ++i) tokens += std::pow(a, i);
  return tokens / c.pass[k];
}

TEST_CASE("the best draft length maximizes tokens per cost", "[draft_length]") {
  for (double a : {0.05, 0.3, 0.5, 0.7, 0.9, 0.99}) {
    for (double r : {0.0, 0.05, 0.2, 0.5, 0.7, 1.0, 2.0}) {
      const DraftCosts c = Linear(r);
      const int k = DraftLength::Best(a, c, 8);
      INFO("a " << a << " r " << r << " k " << k);
      // Best ignores gains below a part in 1e9 (ties go to fewer drafts).
      for (int j = 0; j <= 8; ++j) CHECK(Rate(a, c, k) >= Rate(a, c, j) * (1 - 1e-8));
    }
  }
  // Free rows: draft all; a row as dear as a pass: never; a draft pays only if accepted
  // more often than its row costs.
  CHECK(DraftLength::Best(0.3, FreeDraftCosts(), 4) == 4);
  CHECK(DraftLength::Best(0.99, Linear(1.0), 4) == 0);
  CHECK(DraftLength::Best(0.6, Linear(0.7), 4) == 0);
  CHECK(DraftLength::Best(0.8, Linear(0.7), 4) == 1);
  CHECK(DraftLength::Best(0.9, Linear(0.2), 16) > 4);
  // A tile of 4 rows: 1-3 drafts nearly free, a 4th doubles the pass.
  DraftCosts tile = FreeDraftCosts();
  tile.pass[1] = 1.05, tile.pass[2] = 1.1, tile.pass[3] = 1.15, tile.pass[4] = 2.1;
  CHECK(DraftLength::Best(0.7, tile, 4) == 3);
}

TEST_CASE("a dear drafter drafts less", "[draft_length]") {
  // Free verification rows: a draft model as dear as the target never pays; a tenth of it does.
  CHECK(DraftLength::Best(0.8, FreeDraftCosts(), 4, 1.0) == 0);
  CHECK(DraftLength::Best(0.8, FreeDraftCosts(), 4, 0.1) == 4);
  // Measured: drafting 4 tokens took 4 one-row passes' time.
  DraftCosts c = FreeDraftCosts();
  c.one_row_seconds = 0.001;
  DraftLength d(4, true);
  for (int i = 0; i < 30; ++i) d.Verified(4, 3);
  CHECK(d.Next(c) == 4);
  for (int i = 0; i < 30; ++i) d.Drafted(4, 0.004);
  CHECK(d.Next(c) == 0);
  // Nor does it probe: not even accepted drafts would pay.
  for (int i = 0; i < 100; ++i) {
    CHECK(d.Next(c) == 0);
    d.ChoseWithoutDrafts();
  }
}

TEST_CASE("the draft length follows the acceptance", "[draft_length]") {
  DraftLength d(4, true);
  const DraftCosts c = Linear(0.3);
  CHECK(d.Next(c) > 0);  // the optimistic prior tries drafting
  for (int i = 0; i < 30; ++i) d.Verified(4, 0);
  CHECK(d.acceptance() < 0.2);
  CHECK(d.Next(c) == 0);
  for (int i = 0; i < 30; ++i) d.Verified(4, 4);
  CHECK(d.acceptance() > 0.9);
  CHECK(d.Next(c) == 4);
}

TEST_CASE("a request that stopped drafting probes again, less and less often", "[draft_length]") {
  DraftLength d(4, true);
  for (int i = 0; i < 30; ++i) d.Verified(4, 0);
  std::vector<int> probes;  // the choices at which it probed
  for (int i = 0; i < 1000; ++i) {
    const int k = d.Next(Linear(0.5));
    if (k > 0) {
      CHECK(k == 1);
      probes.push_back(i);
      d.Verified(1, 0);
    } else {
      d.ChoseWithoutDrafts();
    }
  }
  // Waits of 16, 32, 64, 128, 256, 256, ... choices (each probe is a choice too).
  REQUIRE(probes.size() >= 5);
  CHECK(probes[0] == 16);
  CHECK(probes[1] - probes[0] == 33);
  CHECK(probes[2] - probes[1] == 65);
  CHECK(probes[4] - probes[3] == 257);
  // A probe that pays brings drafting back, and the short wait with it.
  for (int i = 0; i < 30; ++i) d.Verified(4, 4);
  CHECK(d.Next(Linear(0.5)) > 0);
}

TEST_CASE("without adaptation the draft length is fixed", "[draft_length]") {
  DraftLength d(3, false);
  for (int i = 0; i < 30; ++i) d.Verified(3, 0);
  CHECK(d.Next(Linear(4.0)) == 3);
  DraftLength none(0, true);
  CHECK(none.Next(FreeDraftCosts()) == 0);
}

}  // namespace draft_length_test
}  // namespace textgen
