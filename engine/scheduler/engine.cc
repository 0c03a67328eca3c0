#include "engine/scheduler/engine.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/util/status_macros.h"
#include "spdlog/spdlog.h"

namespace textgen {

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(const EngineOptions& options) {
  auto e = std::unique_ptr<Engine>(new Engine());
  e->options_ = options;
  TG_ASSIGN_OR_RETURN(e->model_, Model::Load(options.model_path, options.model));
  const ModelConfig& c = e->model_->config();
  KvCacheOptions kv;
  kv.n_layers = c.n_layers;
  kv.n_kv_heads = c.n_kv_heads;
  kv.head_dim = c.head_dim;
  kv.block_size = options.kv_block_size;
  if (options.kv_blocks > 0) {
    kv.num_blocks = options.kv_blocks;
  } else {
    TG_ASSIGN_OR_RETURN(kv.num_blocks,
                        kv.NumBlocksForByteBudget(static_cast<size_t>(options.kv_cache_mib) << 20));
  }
  TG_ASSIGN_OR_RETURN(e->cache_, KvCache::Create(kv));
  {
    absl::MutexLock lock(&e->mu_);
    e->kv_free_ = e->cache_->num_free_blocks();
  }
  e->thread_ = std::thread([engine = e.get()] { engine->Loop(); });
  return e;
}

Engine::~Engine() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

int Engine::BlocksToStart(const EngineRequest& r) const {
  const int bs = cache_->block_size();
  // The prompt's blocks are shared by all beams; each beam may copy the partial last block.
  const int beams = r.decoding.method == DecodingMethod::kBeam ? r.decoding.beam.num_beams : 1;
  return (static_cast<int>(r.prompt.size()) + bs) / bs + beams;
}

absl::StatusOr<uint64_t> Engine::Submit(EngineRequest request,
                                        std::shared_ptr<GenerationSink> sink) {
  if (sink == nullptr) return absl::InvalidArgumentError("Submit: null sink");
  const ModelConfig& c = model_->config();
  TG_RETURN_IF_ERROR(
      ValidateDecodingOptions(request.decoding, c.n_ctx, static_cast<int>(request.prompt.size())));
  for (int32_t id : request.prompt) {
    if (id < 0 || id >= c.n_vocab) {
      return absl::InvalidArgumentError(absl::StrCat(
          "prompt_ids: token id ", id, " is outside the vocabulary [0, ", c.n_vocab, ")"));
    }
  }
  if (BlocksToStart(request) > cache_->num_total_blocks()) {
    return absl::ResourceExhaustedError(absl::StrCat("the KV cache (", cache_->num_total_blocks(),
                                                     " blocks of ", cache_->block_size(),
                                                     " tokens) cannot hold this request's prompt"));
  }
  absl::MutexLock lock(&mu_);
  if (stopping_) return absl::UnavailableError("the engine is shutting down");
  if (static_cast<int>(queue_.size()) >= options_.max_queued_requests) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "request queue full (", options_.max_queued_requests, " waiting); retry later"));
  }
  const uint64_t id = next_id_++;
  queue_.push_back(Pending{id, std::move(request), std::move(sink)});
  cancelled_[id] = false;
  return id;
}

void Engine::Cancel(uint64_t id) {
  absl::MutexLock lock(&mu_);
  auto it = cancelled_.find(id);
  if (it != cancelled_.end()) it->second = true;
}

EngineStats Engine::Stats() const {
  absl::MutexLock lock(&mu_);
  EngineStats s;
  s.kv_blocks_total = cache_->num_total_blocks();
  s.kv_blocks_free = kv_free_;
  s.queued = static_cast<int>(queue_.size());
  s.active = active_count_;
  s.steps = steps_;
  return s;
}

void Engine::Loop() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      // Sleep until there is work or a stop; nothing to do while idle.
      auto has_work = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || !queue_.empty() || !active_.empty();
      };
      mu_.Await(absl::Condition(&has_work));
      if (stopping_) break;
    }
    Admit();
    Step();
  }
  // Shutdown: everything in flight ends as cancelled.
  std::deque<Pending> queued;
  {
    absl::MutexLock lock(&mu_);
    queued.swap(queue_);
  }
  for (Pending& p : queued) p.sink->OnDone(absl::CancelledError("the engine shut down"));
  for (Active& a : active_) {
    a.generation->Abort();
    a.sink->OnDone(a.generation->TakeResult());
  }
  active_.clear();
}

void Engine::Admit() {
  // Blocks already promised to admitted requests' next steps are not known exactly; admit
  // while the free pool covers the newcomer's prompt plus one block per active sequence.
  while (static_cast<int>(active_.size()) < options_.max_active_requests) {
    Pending p;
    {
      absl::MutexLock lock(&mu_);
      if (queue_.empty()) return;
      Pending& front = queue_.front();
      if (cancelled_[front.id]) {
        p = std::move(front);
        queue_.pop_front();
        cancelled_.erase(p.id);
      } else {
        int reserve = 0;
        for (const Active& a : active_) reserve += static_cast<int>(a.rows) + 1;
        if (BlocksToStart(front.request) + reserve > cache_->num_free_blocks() &&
            !active_.empty()) {
          return;  // wait for running requests to free blocks (FIFO: no overtaking)
        }
        p = std::move(front);
        queue_.pop_front();
        ++active_count_;
      }
    }
    bool was_cancelled = false;
    {
      absl::MutexLock lock(&mu_);
      was_cancelled = cancelled_.find(p.id) == cancelled_.end();
    }
    if (was_cancelled) {
      p.sink->OnDone(absl::CancelledError("cancelled before it started"));
      continue;
    }
    std::shared_ptr<GenerationSink> sink = p.sink;
    auto g = Generation::Create(model_->llama(), model_->tokenizer(), *cache_,
                                std::move(p.request.prompt), p.request.decoding,
                                [sink](const StreamDelta& d) { sink->OnDelta(d); });
    if (!g.ok()) {
      {
        absl::MutexLock lock(&mu_);
        --active_count_;
        cancelled_.erase(p.id);
      }
      sink->OnDone(g.status());
      continue;
    }
    active_.push_back(Active{p.id, std::move(g).value(), std::move(sink), 0});
  }
}

void Engine::Step() {
  seqs_.clear();
  {
    absl::MutexLock lock(&mu_);
    for (Active& a : active_) {
      if (cancelled_[a.id]) a.generation->Cancel();
    }
  }
  for (Active& a : active_) {
    const size_t before = seqs_.size();
    absl::Status st = a.generation->PrepareStep(&seqs_);
    if (!st.ok()) {
      seqs_.resize(before);
      a.generation->Abort();
      a.rows = 0;
      continue;
    }
    a.rows = seqs_.size() - before;
  }
  if (!seqs_.empty()) {
    absl::Status st = model_->llama().Forward(*cache_, absl::MakeSpan(seqs_), &logits_);
    if (!st.ok()) {
      // The pool cannot hold this step: the newest request gives way (its blocks are freed
      // and it ends with the error) so that the older ones can go on.
      spdlog::warn("step failed ({}); ending the newest request", st.ToString());
      for (auto it = active_.rbegin(); it != active_.rend(); ++it) {
        if (!it->generation->done()) {
          it->generation->Abort();
          Active victim = std::move(*it);
          active_.erase(std::next(it).base());
          {
            absl::MutexLock lock(&mu_);
            --active_count_;
            cancelled_.erase(victim.id);
            kv_free_ = cache_->num_free_blocks();
          }
          victim.sink->OnDone(st);
          break;
        }
      }
      return;
    }
    const int vocab = model_->config().n_vocab;
    size_t row = 0;
    for (Active& a : active_) {
      if (a.rows == 0) continue;
      absl::Status cs = a.generation->ConsumeStep(logits_.data() + row * vocab);
      if (!cs.ok()) a.generation->Abort();
      row += a.rows;
    }
  }
  // Finished requests leave at the step boundary.
  std::vector<Active> done;
  for (auto it = active_.begin(); it != active_.end();) {
    if (it->generation->done()) {
      done.push_back(std::move(*it));
      it = active_.erase(it);
    } else {
      ++it;
    }
  }
  {
    absl::MutexLock lock(&mu_);
    ++steps_;
    active_count_ -= static_cast<int>(done.size());
    for (const Active& a : done) cancelled_.erase(a.id);
    kv_free_ = cache_->num_free_blocks();
  }
  for (Active& a : done) a.sink->OnDone(a.generation->TakeResult());
}

}  // namespace textgen
