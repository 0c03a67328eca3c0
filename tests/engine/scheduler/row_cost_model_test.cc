#include "engine/scheduler/row_cost_model.h"

#include <catch2/catch.hpp>
#include <random>

namespace textgen {
namespace row_cost_model_test {

TEST_CASE("pass costs are each size's mean time over the one-row pass's", "[row_cost_model]") {
  RowCostModel m;
  CHECK(m.Costs().pass == FreeDraftCosts().pass);
  // A tile of 4 rows: 1-4 rows 10 ms, 5-8 rows 20 ms.
  std::mt19937 rng(7);
  std::normal_distribution<double> noise(0, 1e-5);
  for (int i = 0; i < 400; ++i) {
    const int rows = 1 + static_cast<int>(rng() % 8);
    m.Add(rows, (rows <= 4 ? 0.010 : 0.020) + noise(rng));
  }
  const DraftCosts c = m.Costs();
  CHECK(c.pass[0] == 1);
  CHECK(c.pass[3] == Approx(1).epsilon(0.01));
  CHECK(c.pass[4] == Approx(2).epsilon(0.01));
  CHECK(c.pass[7] == Approx(2).epsilon(0.01));
  // Sizes never seen come from the line through all passes, and never fall below smaller ones.
  CHECK(c.pass[10] >= c.pass[7]);
  for (int k = 1; k <= kMaxSpeculativeTokens; ++k) CHECK(c.pass[k] >= c.pass[k - 1]);
}

TEST_CASE("passes of one size, or prompt chunks, say nothing", "[row_cost_model]") {
  RowCostModel m;
  for (int i = 0; i < 50; ++i) m.Add(1, 0.01);
  CHECK(m.Costs().pass == FreeDraftCosts().pass);
  for (int i = 0; i < 50; ++i) m.Add(96, 0.5);  // a prompt chunk: ignored
  CHECK(m.Costs().pass == FreeDraftCosts().pass);
  m.Add(0, 1.0);
  m.Add(3, -1.0);
  CHECK(m.Costs().pass == FreeDraftCosts().pass);
}

TEST_CASE("the costs follow a change of load", "[row_cost_model]") {
  RowCostModel m;
  for (int i = 0; i < 200; ++i) m.Add(1 + i % 5, 0.010 * (1 + i % 5));  // every row alike
  CHECK(m.Costs().pass[4] == Approx(5).epsilon(0.01));
  for (int i = 0; i < 400; ++i) m.Add(1 + i % 5, 0.010 + 0.001 * (i % 5));  // rows cheap
  CHECK(m.Costs().pass[4] == Approx(1.4).epsilon(0.05));
}

TEST_CASE("a noisy measurement is capped", "[row_cost_model]") {
  RowCostModel m;
  for (int i = 0; i < 20; ++i) m.Add(1 + i % 2, i % 2 ? 1.0 : 1e-6);
  CHECK(m.Costs().pass[1] <= 5.0);
}

}  // namespace row_cost_model_test
}  // namespace textgen
