// A small Prometheus metrics registry: counters, gauges and fixed-bucket histograms in labelled
// families, rendered in the text exposition format 0.0.4. No gRPC, no HTTP: the server feeds it
// and an HTTP endpoint serves Render().
//
// Thread safety: every method may be called from any thread. Counter, Gauge and Histogram
// references stay valid for the registry's lifetime, so hot paths look a child up once and keep
// it; Increment / Set are atomic, Observe takes the histogram's own mutex.
#ifndef TEXTGEN_SERVER_METRICS_H_
#define TEXTGEN_SERVER_METRICS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace textgen::server {

class Counter {
 public:
  // `delta` < 0 is ignored (a counter only goes up).
  void Increment(double delta = 1);
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

class Gauge {
 public:
  void Set(double value) { value_.store(value, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

class Histogram {
 public:
  // `bounds`: the buckets' upper bounds, strictly increasing (the registry checks); +Inf is
  // implicit.
  explicit Histogram(std::vector<double> bounds);
  void Observe(double value);

  struct Snapshot {
    std::vector<double> bounds;
    std::vector<uint64_t> cumulative;  // [bounds.size() + 1]: le=bound..., then +Inf
    double sum = 0;
    uint64_t count = 0;
  };
  Snapshot Read() const;

 private:
  const std::vector<double> bounds_;
  mutable absl::Mutex mu_;
  std::vector<uint64_t> counts_ ABSL_GUARDED_BY(mu_);  // per bucket, not cumulative
  double sum_ ABSL_GUARDED_BY(mu_) = 0;
};

// Exponential bucket bounds: start, start*factor, ... (count of them).
std::vector<double> ExponentialBuckets(double start, double factor, int count);

class MetricsRegistry {
 public:
  enum class Type { kCounter, kGauge, kHistogram };

  // A named family with fixed label names; children are created on first use of a label-value
  // combination.
  class Family {
   public:
    // The child with these label values (one per label name; missing ones are empty, extra
    // ones dropped). Only the accessor of the family's type is rendered; the others
    // return objects that never appear in the output (a programming error, not a crash).
    server::Counter& CounterAt(const std::vector<std::string>& values = {});
    server::Gauge& GaugeAt(const std::vector<std::string>& values = {});
    server::Histogram& HistogramAt(const std::vector<std::string>& values = {});

   private:
    friend class MetricsRegistry;
    struct Child {
      std::unique_ptr<server::Counter> counter;
      std::unique_ptr<server::Gauge> gauge;
      std::unique_ptr<server::Histogram> histogram;
    };
    Child& Get(const std::vector<std::string>& values) ABSL_LOCKS_EXCLUDED(mu_);

    std::string name_;
    std::string help_;
    Type type_ = Type::kCounter;
    std::vector<std::string> label_names_;
    std::vector<double> bounds_;
    mutable absl::Mutex mu_;
    std::map<std::vector<std::string>, Child> children_ ABSL_GUARDED_BY(mu_);
  };

  // Registers a family. InvalidArgument for a bad metric or label name (Prometheus' grammar;
  // "le" is reserved for histograms), bounds not strictly increasing, or a name already taken.
  absl::StatusOr<Family*> AddCounter(std::string name, std::string help,
                                     std::vector<std::string> label_names = {});
  absl::StatusOr<Family*> AddGauge(std::string name, std::string help,
                                   std::vector<std::string> label_names = {});
  absl::StatusOr<Family*> AddHistogram(std::string name, std::string help,
                                       std::vector<double> bounds,
                                       std::vector<std::string> label_names = {});

  // Runs before every Render (e.g. to set gauges from the engine's stats at scrape time).
  void AddCollector(std::function<void()> collector);

  // The text format 0.0.4: per family "# HELP", "# TYPE", then its samples, families and
  // children in a stable (sorted) order.
  std::string Render() const;

 private:
  absl::StatusOr<Family*> Add(std::string name, std::string help, Type type,
                              std::vector<std::string> label_names, std::vector<double> bounds);

  mutable absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<Family>> families_ ABSL_GUARDED_BY(mu_);
  std::vector<std::function<void()>> collectors_ ABSL_GUARDED_BY(mu_);
};

// Escapes a label value for the text format: backslash, double quote and newline.
std::string EscapeLabelValue(std::string_view value);
// A sample value as the text format writes it: integers without a fraction, +Inf, -Inf, NaN.
std::string FormatSampleValue(double value);

}  // namespace textgen::server

#endif  // TEXTGEN_SERVER_METRICS_H_
