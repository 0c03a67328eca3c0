// The metrics registry on its own: values, the text format, registration errors, threads.
#include "server/metrics.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <string>
#include <thread>
#include <vector>

namespace textgen::server {
namespace metrics_test {

TEST_CASE("counters render with HELP, TYPE and escaped labels", "[server][metrics]") {
  MetricsRegistry r;
  auto family = r.AddCounter("t_requests_total", "Requests.\nBy code \\ method.", {"code"});
  REQUIRE(family.ok());
  (*family)->CounterAt({"OK"}).Increment();
  (*family)->CounterAt({"OK"}).Increment(2);
  (*family)->CounterAt({"OK"}).Increment(-5);  // ignored: counters only go up
  (*family)->CounterAt({"a\"b\\c\nd"}).Increment(0.5);
  CHECK((*family)->CounterAt({"OK"}).value() == 3);
  const std::string text = r.Render();
  CHECK(text ==
        "# HELP t_requests_total Requests.\\nBy code \\\\ method.\n"
        "# TYPE t_requests_total counter\n"
        "t_requests_total{code=\"OK\"} 3\n"
        "t_requests_total{code=\"a\\\"b\\\\c\\nd\"} 0.5\n");
}

TEST_CASE("histogram buckets are cumulative with le inclusive", "[server][metrics]") {
  MetricsRegistry r;
  auto family = r.AddHistogram("t_latency_seconds", "Latency.", {1, 2, 5});
  REQUIRE(family.ok());
  Histogram& h = (*family)->HistogramAt();
  for (double v : {0.5, 1.0, 2.0, 100.0}) h.Observe(v);
  const Histogram::Snapshot s = h.Read();
  CHECK(s.cumulative == std::vector<uint64_t>{2, 3, 3, 4});
  CHECK(s.count == 4);
  CHECK(s.sum == 103.5);
  CHECK(r.Render() ==
        "# HELP t_latency_seconds Latency.\n"
        "# TYPE t_latency_seconds histogram\n"
        "t_latency_seconds_bucket{le=\"1\"} 2\n"
        "t_latency_seconds_bucket{le=\"2\"} 3\n"
        "t_latency_seconds_bucket{le=\"5\"} 3\n"
        "t_latency_seconds_bucket{le=\"+Inf\"} 4\n"
        "t_latency_seconds_sum 103.5\n"
        "t_latency_seconds_count 4\n");
}

TEST_CASE("gauges are set by collectors at render time", "[server][metrics]") {
  MetricsRegistry r;
  auto family = r.AddGauge("t_kv_blocks", "Blocks.", {"state"});
  REQUIRE(family.ok());
  int scrapes = 0;
  r.AddCollector([&] {
    ++scrapes;
    (*family)->GaugeAt({"used"}).Set(scrapes * 10);
  });
  CHECK_THAT(r.Render(), Catch::Contains("t_kv_blocks{state=\"used\"} 10\n"));
  CHECK_THAT(r.Render(), Catch::Contains("t_kv_blocks{state=\"used\"} 20\n"));
}

TEST_CASE("registration rejects bad names, duplicates and bad buckets", "[server][metrics]") {
  MetricsRegistry r;
  CHECK(r.AddCounter("ok_total", "x").ok());
  CHECK(absl::IsInvalidArgument(r.AddCounter("ok_total", "again").status()));
  CHECK(absl::IsInvalidArgument(r.AddGauge("1bad", "x").status()));
  CHECK(absl::IsInvalidArgument(r.AddGauge("bad-name", "x").status()));
  CHECK(absl::IsInvalidArgument(r.AddGauge("g", "x", {"bad label"}).status()));
  CHECK(absl::IsInvalidArgument(r.AddGauge("g2", "x", {"__reserved"}).status()));
  CHECK(absl::IsInvalidArgument(r.AddHistogram("h", "x", {1, 2}, {"le"}).status()));
  CHECK(absl::IsInvalidArgument(r.AddHistogram("h", "x", {2, 1}).status()));
  CHECK(absl::IsInvalidArgument(r.AddHistogram("h", "x", {}).status()));
  CHECK(r.AddHistogram("h", "x", {1, 2}).ok());
  CHECK(r.AddGauge("ns:g", "x", {"a_b"}).ok());
}

TEST_CASE("sample values: integers plain, fractions shortest, infinities named",
          "[server][metrics]") {
  CHECK(FormatSampleValue(3) == "3");
  CHECK(FormatSampleValue(-2) == "-2");
  CHECK(FormatSampleValue(0.5) == "0.5");
  CHECK(FormatSampleValue(0.1) == "0.1");
  CHECK(FormatSampleValue(0.00025) == "0.00025");
  CHECK(std::stod(FormatSampleValue(1e-9)) == 1e-9);
  CHECK(FormatSampleValue(std::numeric_limits<double>::infinity()) == "+Inf");
  CHECK(FormatSampleValue(-std::numeric_limits<double>::infinity()) == "-Inf");
  CHECK(FormatSampleValue(std::nan("")) == "NaN");
  CHECK(EscapeLabelValue("plain") == "plain");
}

TEST_CASE("counters and histograms add up under concurrent updates", "[server][metrics]") {
  MetricsRegistry r;
  auto c = r.AddCounter("t_total", "x", {"t"});
  auto h = r.AddHistogram("t_seconds", "x", ExponentialBuckets(1, 2, 4));
  REQUIRE(c.ok());
  REQUIRE(h.ok());
  constexpr int kThreads = 4, kEach = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        (*c)->CounterAt({"shared"}).Increment();
        (*h)->HistogramAt().Observe(i % 10);
        if (i % 1000 == 0) r.Render();  // scrapes meanwhile
      }
      (*c)->CounterAt({std::to_string(t)}).Increment();
    });
  }
  for (auto& t : threads) t.join();
  CHECK((*c)->CounterAt({"shared"}).value() == kThreads * kEach);
  const Histogram::Snapshot s = (*h)->HistogramAt().Read();
  CHECK(s.count == static_cast<uint64_t>(kThreads * kEach));
  // Bounds 1, 2, 4, 8: values 0..9 each a tenth of the time.
  CHECK(s.cumulative[0] == s.count * 2 / 10);
  CHECK(s.cumulative[3] == s.count * 9 / 10);
  CHECK(ExponentialBuckets(0.5, 2, 3) == std::vector<double>{0.5, 1, 2});
}

}  // namespace metrics_test
}  // namespace textgen::server
