// textgen-server's metrics on a MetricsRegistry: what the RPC handlers count and observe, and the
// gauges read from the engine's stats at scrape time. Thread-safe (see MetricsRegistry).
#ifndef TEXTGEN_SERVER_SERVER_METRICS_H_
#define TEXTGEN_SERVER_SERVER_METRICS_H_

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "engine/scheduler/engine.h"
#include "server/metrics.h"

namespace textgen::server {

class ServerMetrics {
 public:
  // Registers every metric (fixed names: registration cannot fail).
  ServerMetrics();

  // One finished RPC: `method` as the proto names it ("Generate"), `code` as gRPC names the
  // final status ("OK", "DEADLINE_EXCEEDED", ...).
  void CountRequest(std::string_view method, std::string_view code);
  // One request the engine finished (any finish reason, cancelled included).
  void CountGeneration(const GenerationStats& stats);
  void ObserveTimeToFirstToken(double seconds) { ttft_->Observe(seconds); }
  void ObserveInterTokenLatency(double seconds) { itl_->Observe(seconds); }
  // textgen_model_info{model="FILE",name="NAME"} 1, once the model is loaded.
  void SetModel(const std::string& file, const std::string& name);
  void SetServing(bool serving) { serving_->Set(serving ? 1 : 0); }
  // Read at every scrape; nullopt (no engine yet, or gone) leaves the engine gauges at 0.
  void SetStatsSource(std::function<std::optional<EngineStats>()> source);

  // The text exposition of everything above.
  std::string Render() const { return registry_.Render(); }

 private:
  void Collect();

  MetricsRegistry registry_;
  MetricsRegistry::Family* requests_ = nullptr;
  MetricsRegistry::Family* model_info_ = nullptr;
  Counter* prompt_tokens_ = nullptr;
  Counter* cached_tokens_ = nullptr;
  Counter* generated_tokens_ = nullptr;
  Counter* drafted_tokens_ = nullptr;
  Counter* accepted_tokens_ = nullptr;
  Histogram* ttft_ = nullptr;
  Histogram* itl_ = nullptr;
  Gauge* serving_ = nullptr;
  Gauge* queue_depth_ = nullptr;
  Gauge* active_ = nullptr;
  Gauge* active_sequences_ = nullptr;
  Gauge* sessions_ = nullptr;
  Gauge* kv_used_ = nullptr;
  Gauge* kv_free_ = nullptr;
  Gauge* kv_cached_ = nullptr;
  Gauge* kv_resident_ = nullptr;
  // Engine counters, brought up to the engine's totals at each scrape.
  Counter* prefix_lookups_ = nullptr;
  Counter* prefix_lookup_tokens_ = nullptr;
  Counter* prefix_hit_tokens_ = nullptr;
  Counter* prefix_evictions_ = nullptr;
  Counter* kv_disk_written_ = nullptr;
  Counter* kv_disk_read_ = nullptr;
  Counter* kv_disk_rejected_ = nullptr;
  Counter* kv_disk_dropped_ = nullptr;
  Counter* kv_disk_evicted_ = nullptr;
  Gauge* kv_disk_bytes_ = nullptr;
  Gauge* kv_disk_files_ = nullptr;

  absl::Mutex source_mu_;
  std::function<std::optional<EngineStats>()> source_ ABSL_GUARDED_BY(source_mu_);
};

}  // namespace textgen::server

#endif  // TEXTGEN_SERVER_SERVER_METRICS_H_
