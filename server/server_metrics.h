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
  // textgen_state_store_degraded: read at every scrape (unset: 0).
  void SetStateStoreSource(std::function<bool()> degraded);
  // What routers in front of a fleet read to pick a replica (the Kubernetes Gateway API
  // Inference Extension's endpoint picker, vLLM's production-stack router), under vLLM's
  // names beside ours, once the model is loaded: vllm:num_requests_waiting and
  // vllm:num_requests_running (our queue and admitted requests), vllm:kv_cache_usage_perc (a
  // fraction, 0..1, of the KV pool's blocks in use; prefix-cached blocks count as free, as
  // vLLM's do), and vllm:cache_config_info (value 1, the pool's shape in its labels).
  void SetRouterInfo(const std::string& model_name, int block_size, int num_blocks,
                     std::string_view cache_dtype, bool prefix_caching);

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
  Gauge* state_degraded_ = nullptr;
  // vLLM's names (SetRouterInfo): families at start, the model's series once it is known.
  MetricsRegistry::Family* vllm_waiting_family_ = nullptr;
  MetricsRegistry::Family* vllm_running_family_ = nullptr;
  MetricsRegistry::Family* vllm_kv_usage_family_ = nullptr;
  MetricsRegistry::Family* vllm_cache_config_ = nullptr;
  Gauge* vllm_waiting_ ABSL_GUARDED_BY(source_mu_) = nullptr;
  Gauge* vllm_running_ ABSL_GUARDED_BY(source_mu_) = nullptr;
  Gauge* vllm_kv_usage_ ABSL_GUARDED_BY(source_mu_) = nullptr;
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
  std::function<bool()> state_degraded_source_ ABSL_GUARDED_BY(source_mu_);
};

}  // namespace textgen::server

#endif  // TEXTGEN_SERVER_SERVER_METRICS_H_
