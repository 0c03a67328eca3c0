#include "engine/scheduler/engine.h"

#include <algorithm>
#include <functional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/util/file_identity.h"
#include "engine/util/status_macros.h"
#include "spdlog/spdlog.h"

namespace textgen {

KvType AutoKvType(ops::LinearCompute compute) {
  return compute == ops::LinearCompute::kBf16 ? KvType::kBf16 : KvType::kF32;
}

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(const EngineOptions& options) {
  if (options.step_token_budget < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("step_token_budget must be >= 1, got ", options.step_token_budget));
  }
  if (options.idle_step_tokens < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("idle_step_tokens must be >= 1, got ", options.idle_step_tokens));
  }
  auto e = std::unique_ptr<Engine>(new Engine());
  e->options_ = options;
  TG_ASSIGN_OR_RETURN(e->model_, Model::Load(options.model_path, options.model));
  e->sessions_ = std::make_unique<SessionStore>(options.max_sessions, options.session_ttl,
                                                options.session_journal.get());
  if (options.session_journal != nullptr) {
    TG_ASSIGN_OR_RETURN(std::vector<SessionRecord> records, options.session_journal->LoadAll());
    const size_t stored = records.size();
    const SessionStore::RestoreCounts n =
        e->sessions_->Restore(std::move(records), e->model_->config().n_vocab, absl::Now());
    spdlog::info("sessions: {} restored of {} stored ({} expired, {} dropped)", n.restored, stored,
                 n.expired, n.dropped);
  }
  const ModelConfig& c = e->model_->config();
  KvCacheOptions kv;
  kv.n_layers = c.n_layers;
  kv.n_kv_heads = c.n_kv_heads;
  kv.head_dim = c.head_dim;
  kv.block_size = options.kv_block_size;
  kv.type = options.kv_type.value_or(AutoKvType(options.model.llama.linear.compute));
  if (options.kv_blocks > 0) {
    kv.num_blocks = options.kv_blocks;
  } else {
    TG_ASSIGN_OR_RETURN(kv.num_blocks,
                        kv.NumBlocksForByteBudget(static_cast<size_t>(options.kv_cache_mib) << 20));
  }
  TG_ASSIGN_OR_RETURN(e->cache_, KvCache::Create(kv));
  if (options.prefix_cache) {
    // Everything besides the tokens that decides a block's K/V.
    e->cache_->EnablePrefixCache(std::hash<std::string>{}(
        absl::StrCat(options.model_path, "|", std::string(KvTypeName(kv.type)), "|",
                     static_cast<int>(options.model.llama.linear.compute), "|", kv.block_size)));
  }
  e->OpenDiskTier(kv);
  if (options.kv_prefault.value_or(options.prefix_cache)) {
    TG_RETURN_IF_ERROR(e->cache_->pool().Prefault());
  }
  if (!options.draft_model_path.empty()) {
    TG_ASSIGN_OR_RETURN(
        e->draft_, DraftModel::Load(options.draft_model_path, options.model, *e->model_, kv.type,
                                    options.draft_kv_cache_mib));
  }
  // One tiny pass before serving: the first forward pays one-time costs (oneDNN kernel
  // generation, faulting in the weights) that would otherwise land on the first client's
  // time to first token.
  {
    BlockTable warm;
    const int32_t token = std::max<int32_t>(0, e->model_->tokenizer().bos_id());
    ForwardSeq fs{absl::MakeConstSpan(&token, 1), &warm, 0, false};
    std::vector<float> logits;
    absl::Status st = e->model_->lm().Forward(*e->cache_, absl::MakeSpan(&fs, 1), &logits);
    e->cache_->Free(warm);
    TG_RETURN_IF_ERROR(st);
  }
  {
    absl::MutexLock lock(&e->mu_);
    e->SnapshotCache();
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
  if (disk_ != nullptr) {
    // Everything still cached goes to disk, so that a restart on the same directory finds it.
    const int spilled = cache_->SpillIdleToDisk();
    disk_->Flush();
    cache_->SetDiskStore(nullptr);
    const KvDiskStats d = disk_->stats();
    spdlog::info("KV disk tier: wrote {} cached blocks at shutdown; {} files, {} MiB in {}",
                 spilled, d.files, d.bytes_on_disk >> 20, disk_->dir());
  }
}

void Engine::OpenDiskTier(const KvCacheOptions& kv) {
  if (options_.kv_disk_gib <= 0 || options_.state_dir.empty()) return;
  if (!cache_->prefix_cache_enabled()) {
    spdlog::warn("KV disk tier off: it needs the prefix cache (--prefix-cache on)");
    return;
  }
  absl::StatusOr<uint64_t> model_id = FileIdentity(options_.model_path);
  if (!model_id.ok()) {
    spdlog::warn("KV disk tier off: {}", model_id.status().ToString());
    return;
  }
  KvDiskOptions d;
  d.dir = options_.state_dir + "/kv";
  d.max_bytes = static_cast<int64_t>(options_.kv_disk_gib * double(int64_t{1} << 30));
  // The compute type changes K/V (matmuls in F32 or BF16); the KV type and shape are checked
  // from the header's own fields.
  const uint64_t compute = static_cast<uint64_t>(options_.model.llama.linear.compute);
  d.model_id = Checksum64(&compute, sizeof(compute), *model_id);
  d.shape = kv;
  absl::StatusOr<std::unique_ptr<KvDiskStore>> store = KvDiskStore::Open(d);
  if (!store.ok()) {
    spdlog::warn("KV disk tier off: {}", store.status().ToString());
    return;
  }
  disk_ = std::move(store).value();
  cache_->SetDiskStore(disk_.get());
  const KvDiskStats st = disk_->stats();
  spdlog::info("KV disk tier: {} ({} files, {} MiB of at most {} MiB)", d.dir, st.files,
               st.bytes_on_disk >> 20, d.max_bytes >> 20);
}

int Engine::WorstCaseBlocks(int prompt_tokens, const DecodingOptions& d) const {
  const int bs = cache_->block_size();
  const int beams = d.method == DecodingMethod::kBeam ? d.beam.num_beams : 1;
  const int n_ctx = model_->config().n_ctx;
  const int total = std::min<int64_t>(int64_t{prompt_tokens} + d.max_new_tokens, n_ctx);
  const int prompt = std::min(prompt_tokens, total);
  const int generated = std::max(0, total - prompt);
  return (prompt + bs - 1) / bs + beams * ((generated + bs - 1) / bs + 1);
}

absl::Status Engine::CheckFits(const Session* session, int held_tokens, int prompt_tokens,
                               DecodingOptions& d) const {
  const int n_ctx = model_->config().n_ctx;
  if (session != nullptr) {
    // The client may have sent two tokens: what does not fit is the conversation.
    const bool too_long =
        prompt_tokens >= n_ctx ||
        (d.context_overflow == ContextOverflow::kError && !d.stop_at_context_limit &&
         int64_t{prompt_tokens} + d.max_new_tokens > n_ctx);
    if (too_long) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the session is full: it holds ", held_tokens, " tokens of the model's ", n_ctx,
          "-token context, and with this turn the prompt is ", prompt_tokens, " tokens",
          prompt_tokens < n_ctx ? absl::StrCat(" + max_new_tokens ", d.max_new_tokens) : "",
          "; delete the session and start a new one",
          prompt_tokens < n_ctx ? " (or lower max_new_tokens)" : ""));
    }
  }
  TG_RETURN_IF_ERROR(ValidateDecodingOptions(d, n_ctx, prompt_tokens));
  const int total = cache_->num_total_blocks();
  if (WorstCaseBlocks(prompt_tokens, d) <= total) return absl::OkStatus();
  // The largest max_new_tokens whose worst case fits the whole pool (0 if none does).
  DecodingOptions probe = d;
  int lo = 0, hi = d.max_new_tokens;
  while (lo < hi) {
    probe.max_new_tokens = lo + (hi - lo + 1) / 2;
    if (WorstCaseBlocks(prompt_tokens, probe) <= total) {
      lo = probe.max_new_tokens;
    } else {
      hi = probe.max_new_tokens - 1;
    }
  }
  if (d.stop_at_context_limit && lo >= 1) {
    // The client left the length to the server: as much as the pool can ever hold.
    d.max_new_tokens = d.beam.max_new_tokens = lo;
    return absl::OkStatus();
  }
  const int beams = d.method == DecodingMethod::kBeam ? d.beam.num_beams : 1;
  return absl::ResourceExhaustedError(
      absl::StrCat("this request can never fit the KV cache: a ", prompt_tokens,
                   "-token prompt and ", "max_new_tokens ", d.max_new_tokens,
                   beams > 1 ? absl::StrCat(" for each of ", beams, " beams") : "", " may need ",
                   WorstCaseBlocks(prompt_tokens, d), " blocks of ", cache_->block_size(),
                   " tokens; the pool holds ", total,
                   lo >= 1 ? absl::StrCat(": with this prompt at most max_new_tokens ", lo, " fits")
                           : ": even this prompt does not fit; send a shorter one"));
}

absl::StatusOr<std::string> Engine::CreateSession(const std::string& requested_id,
                                                  const std::string& owner) {
  return sessions_->Create(requested_id, owner);
}

absl::Status Engine::DeleteSession(const std::string& id, const std::string& owner) {
  TG_RETURN_IF_ERROR(sessions_->Delete(id, owner));
  absl::MutexLock lock(&mu_);
  sessions_deleted_ = true;
  return absl::OkStatus();
}

absl::StatusOr<SessionAttachment> Engine::GetSessionAttachment(const std::string& id,
                                                               const std::string& owner) const {
  return sessions_->GetAttachment(id, owner);
}

absl::StatusOr<uint64_t> Engine::Submit(EngineRequest request,
                                        std::shared_ptr<GenerationSink> sink) {
  if (sink == nullptr) return absl::InvalidArgumentError("Submit: null sink");
  if (request.prompt_text.has_value() == !request.prompt_ids.empty()) {
    return absl::InvalidArgumentError("exactly one of prompt and prompt_ids must be given");
  }
  const ModelConfig& c = model_->config();
  const Tokenizer& tok = model_->tokenizer();
  for (int32_t id : request.prompt_ids) {
    if (id < 0 || id >= c.n_vocab) {
      return absl::InvalidArgumentError(absl::StrCat(
          "prompt_ids: token id ", id, " is outside the vocabulary [0, ", c.n_vocab, ")"));
    }
  }
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return absl::UnavailableError("the engine is shutting down");
  }
  std::shared_ptr<Session> session;
  std::vector<int32_t> held;  // the session's tokens
  uint64_t version = 0;       // the session's version they are of
  bool busy = false;          // another request holds the session now
  std::vector<int32_t> prompt;
  if (!request.session_id.empty()) {
    TG_ASSIGN_OR_RETURN(session,
                        sessions_->FindForTurn(request.session_id, request.session_owner,
                                               request.session_version, &held, &version, &busy));
    if (request.decoding.context_overflow == ContextOverflow::kSlide) {
      return absl::InvalidArgumentError(
          "context_overflow: slide is not supported within a session yet");
    }
    if (request.session_prompt == SessionPrompt::kAppend) prompt = held;
  }
  if (request.prompt_text.has_value()) {
    // BOS starts a document: only on a conversation's first turn, unless asked explicitly.
    const bool bos = request.add_bos.value_or(tok.add_bos() && prompt.empty());
    std::vector<int32_t> ids = tok.Encode(*request.prompt_text, bos);
    prompt.insert(prompt.end(), ids.begin(), ids.end());
  } else {
    prompt.insert(prompt.end(), request.prompt_ids.begin(), request.prompt_ids.end());
  }
  if (!request.prediction_text.empty()) {
    request.decoding.speculation.prediction = tok.Encode(request.prediction_text, false);
  }
  const int prompt_tokens = static_cast<int>(prompt.size());
  TG_RETURN_IF_ERROR(
      CheckFits(session.get(), static_cast<int>(held.size()), prompt_tokens, request.decoding));
  // What of the session's K/V can serve this prompt: the tokens both start with.
  int shared_prefix = 0;
  const size_t n = std::min(prompt.size(), held.size());
  while (static_cast<size_t>(shared_prefix) < n && prompt[shared_prefix] == held[shared_prefix]) {
    ++shared_prefix;
  }
  absl::MutexLock lock(&mu_);
  if (stopping_) return absl::UnavailableError("the engine is shutting down");
  if (static_cast<int>(queue_.size()) >= options_.max_queued_requests) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "request queue full (", options_.max_queued_requests, " waiting); retry later"));
  }
  const uint64_t id = next_id_++;
  Request r;
  r.id = id;
  if (session != nullptr) {
    // Claimed under the lock that queues it; at the version `held` is of, so that a turn ending
    // in between (which would make `held` stale) is caught. A busy session is claimed by the
    // scheduler once its holder lets go (ClaimAwaitedSession).
    r.session_version = version;
    if (busy && options_.session_busy_wait > absl::ZeroDuration()) {
      r.awaiting_session = true;
      r.session_deadline = absl::Now() + options_.session_busy_wait;
    } else {
      TG_RETURN_IF_ERROR(sessions_->Claim(*session, id, version));
    }
  }
  r.worst_blocks = WorstCaseBlocks(prompt_tokens, request.decoding);
  r.prompt = std::move(prompt);
  r.decoding = std::move(request.decoding);
  r.session = std::move(session);
  r.sink = std::move(sink);
  r.shared_prefix = shared_prefix;
  r.attachment = std::move(request.session_attachment);
  queue_.push_back(std::move(r));
  return id;
}

void Engine::Cancel(uint64_t id) {
  absl::MutexLock lock(&mu_);
  auto queued =
      std::find_if(queue_.begin(), queue_.end(), [id](const Request& r) { return r.id == id; });
  if (queued != queue_.end()) {
    // At once: a client that gave up must not hold a queue place (the next Submit would see
    // ResourceExhausted) or its session (FailedPrecondition) until the scheduler gets to it.
    if (queued->session != nullptr) sessions_->Release(*queued->session, id);
    left_queue_.push_back(std::move(*queued));
    queue_.erase(queued);
    return;
  }
  auto running = running_.find(id);
  if (running == running_.end()) return;
  running->second.cancel = true;
  // The session can take its next turn at once: a cancelled turn leaves the conversation as it
  // was, and the next one starts once the K/V cache comes back at the step boundary.
  if (running->second.session != nullptr) sessions_->Release(*running->second.session, id);
}

EngineStats Engine::Stats() const {
  EngineStats s;
  // Outside the lock: a syscall over the whole pool, and the pool's mapping never changes.
  s.kv_pool_resident_bytes = static_cast<int64_t>(cache_->pool().ResidentBytes());
  absl::MutexLock lock(&mu_);
  s.kv_blocks_total = cache_->num_total_blocks();
  s.kv_blocks_free = kv_free_;
  s.queued = static_cast<int>(queue_.size());
  s.active = static_cast<int>(running_.size());
  s.active_sequences = active_sequences_;
  s.sessions = sessions_->size();
  s.steps = steps_;
  s.kv_blocks_cached = kv_cached_;
  s.prefix_cache_lookups = prefix_lookups_;
  s.prefix_cache_lookup_tokens = prefix_lookup_tokens_;
  s.prefix_cache_hit_tokens = prefix_hit_tokens_;
  s.prefix_cache_evictions = prefix_evictions_;
  if (disk_ != nullptr) {
    const KvDiskStats d = disk_->stats();
    s.kv_disk_enabled = true;
    s.kv_disk_blocks_written = d.blocks_written;
    s.kv_disk_blocks_read = d.blocks_read;
    s.kv_disk_blocks_rejected = d.blocks_rejected;
    s.kv_disk_blocks_dropped = d.blocks_dropped;
    s.kv_disk_blocks_evicted = d.blocks_evicted;
    s.kv_disk_bytes = d.bytes_on_disk;
    s.kv_disk_files = d.files;
  }
  return s;
}

void Engine::SnapshotCache() {
  kv_free_ = cache_->num_free_blocks();
  kv_cached_ = cache_->num_idle_blocks();
  prefix_evictions_ = cache_->pool().evictions();
}

void Engine::Loop() {
  while (true) {
    std::vector<Request> cancelled;
    {
      absl::MutexLock lock(&mu_);
      // Sleep until there is work or a stop; wake now and then to expire idle sessions.
      auto has_work = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || !queue_.empty() || !active_.empty() || !left_queue_.empty() ||
               sessions_deleted_ || !committed_.empty();
      };
      mu_.AwaitWithTimeout(absl::Condition(&has_work), absl::Seconds(1));
      if (stopping_) break;
      sessions_deleted_ = false;
      cancelled.swap(left_queue_);
    }
    for (Request& r : cancelled) RetireUnstarted(r);
    DeliverCommitted();
    CollectSessions();
    Admit();
    if (!active_.empty()) Step();
  }
  // Shutdown: everything in flight ends as cancelled; sessions' blocks are freed.
  std::deque<Request> queued;
  std::vector<Request> cancelled;
  {
    absl::MutexLock lock(&mu_);
    queued.swap(queue_);
    cancelled.swap(left_queue_);
  }
  for (Request& r : cancelled) RetireUnstarted(r);
  for (Request& r : queued) Retire(r, absl::CancelledError("the engine shut down"));
  for (Request& a : active_) {
    a.generation->Abort();
    Retire(a, a.generation->TakeResult());
  }
  active_.clear();
  // Turns being written still get their OnDone (the journal always answers).
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      auto answered = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return awaiting_commit_.empty() || !committed_.empty();
      };
      mu_.Await(absl::Condition(&answered));
      if (awaiting_commit_.empty()) break;
    }
    DeliverCommitted();
  }
  for (auto& session : sessions_->TakeAll()) cache_->Free(session->table);
}

void Engine::DeliverCommitted() {
  std::vector<AwaitingCommit> ready;
  {
    absl::MutexLock lock(&mu_);
    for (uint64_t id : committed_) {
      auto it = awaiting_commit_.find(id);
      if (it == awaiting_commit_.end()) continue;
      ready.push_back(std::move(it->second));
      awaiting_commit_.erase(it);
    }
    committed_.clear();
  }
  for (AwaitingCommit& a : ready) a.sink->OnDone(std::move(a.result));
}

void Engine::RetireUnstarted(Request& r) {
  absl::Status why =
      r.refusal.ok() ? absl::CancelledError("cancelled before it started") : std::move(r.refusal);
  Retire(r, std::move(why));
}

void Engine::Retire(Request& r, absl::StatusOr<GenerationResult> result) {
  bool journaled = false;
  if (r.generation != nullptr) {
    journaled = ReturnSession(r, result);
    r.generation.reset();  // frees its blocks before kv_free_ is read
  } else if (r.session != nullptr) {
    sessions_->Release(*r.session, r.id);
  }
  // Settled before the client hears of it, so that what it sees next (e.g. Stats) already
  // reflects the end of its request.
  {
    absl::MutexLock lock(&mu_);
    running_.erase(r.id);
    SnapshotCache();
    if (journaled) {
      // The client hears of the turn once it is durable: a crash before then loses a turn the
      // client saw fail, never one it saw end.
      awaiting_commit_[r.id] = AwaitingCommit{std::move(r.sink), std::move(result)};
      return;
    }
  }
  r.sink->OnDone(std::move(result));
}

bool Engine::ReturnSession(Request& a, const absl::StatusOr<GenerationResult>& result) {
  if (a.session == nullptr) return false;
  Session& s = *a.session;
  BlockTable kept = a.generation->ReleaseCache();
  // Runs on the journal's thread, maybe before Retire records the request (it is delivered by
  // this thread, after Retire, either way).
  auto written = [this, id = a.id](const absl::Status&) {
    absl::MutexLock lock(&mu_);
    committed_.push_back(id);
  };
  const SessionStore::TurnEnd end =
      sessions_->EndTurn(s, a.id, a.prompt, a.shared_prefix, result, a.attachment, written);
  // `kept` holds the K/V of a prefix of the prompt and answer: the whole conversation once the
  // generation's catch-up ran, else less (cancelled, no room), which the next turn recomputes.
  if (kept.num_tokens > end.valid_tokens) cache_->Truncate(kept, end.valid_tokens);
  s.lent = false;
  // A session deleted after EndTurn is collected later by this thread, table and all.
  if (end.deleted) {
    cache_->Free(kept);
  } else {
    s.table = std::move(kept);
  }
  return end.journaled;
}

void Engine::CollectSessions() {
  // A deleted session whose table is lent to a running request: ReturnSession frees it.
  std::vector<std::shared_ptr<Session>> gone = sessions_->TakeGone(absl::Now());
  for (auto& session : gone) cache_->Free(session->table);
  if (!gone.empty()) {
    absl::MutexLock lock(&mu_);
    SnapshotCache();
  }
}

bool Engine::EvictIdleSession() {
  std::shared_ptr<Session> victim = sessions_->EvictionCandidate();
  if (victim == nullptr) return false;
  // Its tokens stay; the next turn recomputes their K/V.
  cache_->Free(victim->table);
  spdlog::debug("evicted the KV blocks of idle session {}...", victim->id.substr(0, 8));
  return true;
}

void Engine::Admit() {
  while (static_cast<int>(active_.size()) < options_.max_active_requests) {
    std::optional<Request> r;
    {
      absl::MutexLock lock(&mu_);
      r = TakeStartable();
    }
    if (!r.has_value()) return;
    Start(*std::move(r));
  }
}

std::optional<Engine::Request> Engine::TakeStartable() {
  // Admit only what can run to its end: every running request keeps room for the most blocks it
  // may still take (its remaining prompt chunks, max_new_tokens per beam). Why: over-committing
  // the pool would end a running stream with RESOURCE_EXHAUSTED when decode growth runs out of
  // blocks (seen at 16 streams of 128+128 tokens in a 256 MiB pool). The cost is less
  // concurrency when clients ask for long max_new_tokens.
  int reserve = 0;
  for (const Request& a : active_) {
    reserve += std::max(0, a.worst_blocks - a.generation->blocks_in_use());
  }
  const absl::Time now = absl::Now();
  for (size_t i = 0; i < queue_.size(); ++i) {
    Request& q = queue_[i];
    const bool claimed = ClaimAwaitedSession(q, now);
    if (!q.refusal.ok()) {
      left_queue_.push_back(std::move(q));
      queue_.erase(queue_.begin() + static_cast<std::ptrdiff_t>(i--));
      continue;
    }
    if (claimed && CanStart(q, reserve)) {
      for (size_t j = 0; j < i; ++j) ++queue_[j].overtaken;
      Request r = std::move(q);
      queue_.erase(queue_.begin() + static_cast<std::ptrdiff_t>(i));
      running_[r.id] = Running{r.session, false};
      return r;
    }
    // A request that must wait does not hold back those behind it that fit now (a 4-token
    // request behind one waiting for half the pool), but only so often: then all wait for it,
    // so that it cannot starve.
    if (q.overtaken >= options_.max_overtakes) return std::nullopt;
  }
  return std::nullopt;
}

bool Engine::ClaimAwaitedSession(Request& q, absl::Time now) {
  if (!q.awaiting_session) return true;
  absl::Status claimed = sessions_->Claim(*q.session, q.id, q.session_version);
  if (claimed.ok()) {
    q.awaiting_session = false;
    return true;
  }
  // Still held and within the wait: stay queued. Otherwise (the holder ended with an answer,
  // the session was deleted, or the wait ran out) the turn is refused as Submit would have.
  if (sessions_->Held(*q.session) && now < q.session_deadline) return false;
  q.refusal = claimed;
  return false;
}

bool Engine::CanStart(Request& q, int reserve) {
  Session* s = q.session.get();
  // A cancelled turn still has the session's K/V; it comes back at the step boundary.
  if (s != nullptr && s->lent) return false;
  // A session's K/V beyond the prefix the prompt shares with it is stale: drop it now (a partly
  // used last block is kept; Append copies it first if it is shared).
  if (s != nullptr && s->table.num_tokens > q.shared_prefix) {
    cache_->Truncate(s->table, q.shared_prefix);
  }
  const int held = s != nullptr ? s->table.num_blocks() : 0;
  // Prompt blocks other requests hold already cost no free block (idle cached ones do: they
  // are counted as free).
  const int shared =
      s == nullptr ? cache_->PeekPrefix(MatchablePrompt(q), PrefixMatchLimit(q)).live : 0;
  const int need = std::max(0, q.worst_blocks - held - shared);
  // Evict only what would let it start: an idle session's cache is worth keeping otherwise.
  if (need + reserve > cache_->num_free_blocks() + sessions_->EvictableBlocks()) {
    return active_.empty();
  }
  while (need + reserve > cache_->num_free_blocks()) {
    if (EvictIdleSession()) continue;
    // With nothing running this is all the room there will be (and Submit checked that the
    // request fits the whole pool).
    return active_.empty();
  }
  return true;
}

int Engine::PrefixMatchLimit(const Request& r) const {
  if (!cache_->prefix_cache_enabled() || r.prompt.empty()) return 0;
  return PrefixShareableBlocks(r.decoding, cache_->block_size());
}

absl::Span<const int32_t> Engine::MatchablePrompt(const Request& r) {
  if (r.prompt.empty()) return {};
  return absl::MakeConstSpan(r.prompt).first(r.prompt.size() - 1);
}

void Engine::Start(Request r) {
  std::shared_ptr<GenerationSink> sink = r.sink;
  const int limit = PrefixMatchLimit(r);
  // A leaf is only worth copying if it beats what the session holds.
  BlockTable matched = cache_->MatchPrefix(MatchablePrompt(r), limit,
                                           r.session != nullptr ? r.session->table.num_tokens : 0);
  int hit_tokens = matched.num_tokens;
  BlockTable* cached = &matched;
  // A session's own cache goes first; the prefix cache serves it when it holds more (the
  // session's blocks were evicted, or another conversation shares more of this prompt).
  if (r.session != nullptr) {
    BlockTable& own = r.session->table;
    if (matched.num_tokens > own.num_tokens) {
      cache_->Free(own);
      own = std::move(matched);
    } else {
      cache_->Free(matched);
      hit_tokens = 0;
    }
    cached = &own;
  }
  auto g = Generation::Create(
      model_->lm(), model_->tokenizer(), *cache_, r.prompt, r.decoding,
      [sink](const StreamDelta& d) { sink->OnDelta(d); }, cached);
  if (limit > 0) {
    absl::MutexLock lock(&mu_);
    ++prefix_lookups_;
    prefix_lookup_tokens_ += static_cast<int64_t>(r.prompt.size());
    if (g.ok()) prefix_hit_tokens_ += hit_tokens;
  }
  if (!g.ok()) {
    // What it did not take: the prefix match, or (a session's) blocks beyond the tokens it
    // shares with the conversation.
    if (r.session == nullptr) {
      cache_->Free(matched);
    } else if (cached->num_tokens > r.shared_prefix) {
      cache_->Truncate(*cached, r.shared_prefix);
    }
    Retire(r, g.status());
    return;
  }
  if (r.session != nullptr) {
    (*g)->KeepCacheForNextTurn();
    r.session->lent = true;
  }
  if (draft_ != nullptr) (*g)->SetDraftModel(&draft_->model->lm(), draft_->cache.get());
  r.generation = std::move(g).value();
  active_.push_back(std::move(r));
}

int Engine::Prepare(Request& a, int max_prompt_tokens, int max_draft_tokens) {
  const size_t before = seqs_.size();
  a.first_seq = before;
  a.seqs = 0;
  absl::Status st = a.generation->PrepareStep(&seqs_, max_prompt_tokens, max_draft_tokens);
  if (!st.ok()) {
    seqs_.resize(before);
    a.generation->Abort();
    return 0;
  }
  a.seqs = seqs_.size() - before;
  int tokens = 0;
  for (size_t k = before; k < seqs_.size(); ++k) tokens += static_cast<int>(seqs_[k].tokens.size());
  return tokens;
}

void Engine::Step() {
  seqs_.clear();
  {
    absl::MutexLock lock(&mu_);
    for (Request& a : active_) {
      auto it = running_.find(a.id);
      if (it != running_.end() && it->second.cancel) a.generation->Cancel();
    }
  }
  // Decode tokens first: one per running sequence, always. Then prompt chunks, oldest request
  // first (active_ is in admission order), each taking what remains of the budget, so a prompt
  // may start in the step in which an older one finishes. A step without decode tokens stalls
  // no stream, so it takes the larger idle budget.
  std::vector<Request*> prefilling;
  int decoding = 0;
  for (const Request& a : active_) decoding += a.generation->prefilling() ? 0 : 1;
  // Drafts cost a row each: worth it while few streams share the step (see EngineOptions).
  const int max_draft_tokens = decoding <= options_.max_speculative_streams ? kUnlimitedTokens : 0;
  int decode_tokens = 0;
  const DraftCosts draft_costs = row_cost_.Costs();
  for (Request& a : active_) {
    a.generation->SetDraftCosts(draft_costs);
    a.seqs = 0;
    a.decode_tokens = a.prompt_tokens = 0;
    if (a.generation->prefilling()) {
      prefilling.push_back(&a);
      continue;
    }
    a.decode_tokens = Prepare(a, 0, max_draft_tokens);
    decode_tokens += a.decode_tokens;
  }
  const int step_tokens = decode_tokens == 0
                              ? std::max(options_.step_token_budget, options_.idle_step_tokens)
                              : options_.step_token_budget;
  int budget = std::max(0, step_tokens - decode_tokens);
  int prompt_tokens = 0;
  for (Request* a : prefilling) {
    a->prompt_tokens = Prepare(*a, budget, max_draft_tokens);
    budget -= a->prompt_tokens;
    prompt_tokens += a->prompt_tokens;
  }
  StepReport report;
  if (!seqs_.empty()) {
    const absl::Time pass_start = absl::Now();
    absl::Status st = model_->lm().Forward(*cache_, absl::MakeSpan(seqs_), &logits_);
    if (st.ok()) {
      row_cost_.Add(decode_tokens + prompt_tokens, absl::ToDoubleSeconds(absl::Now() - pass_start));
    }
    if (!st.ok()) {
      // Forward changed nothing. Make room: first idle sessions' blocks, else the newest
      // request gives way (it ends with the error) so that the older ones can go on.
      if (st.code() == absl::StatusCode::kResourceExhausted && EvictIdleSession()) return;
      spdlog::warn("step failed ({}); ending the newest request", st.ToString());
      for (auto it = active_.rbegin(); it != active_.rend(); ++it) {
        if (!it->generation->done()) {
          it->generation->Abort();
          Request victim = std::move(*it);
          active_.erase(std::next(it).base());
          Retire(victim, st);
          break;
        }
      }
      return;
    }
    // Sequences without logits (prompt chunks that do not end a prompt) have no row.
    row_of_seq_.resize(seqs_.size());
    size_t rows = 0;
    for (size_t k = 0; k < seqs_.size(); ++k) {
      row_of_seq_[k] = rows;
      if (seqs_[k].logits) rows += seqs_[k].all_logits ? seqs_[k].tokens.size() : 1;
    }
    const int vocab = model_->config().n_vocab;
    for (Request& a : active_) {
      if (a.seqs == 0) continue;
      absl::Status cs =
          a.generation->ConsumeStep(logits_.data() + row_of_seq_[a.first_seq] * vocab);
      if (!cs.ok()) a.generation->Abort();
      report.requests.push_back({a.id, a.decode_tokens, a.prompt_tokens});
    }
    report.decode_tokens = decode_tokens;
    report.prompt_tokens = prompt_tokens;
  }
  // Finished requests leave at the step boundary.
  std::vector<Request> done;
  for (auto it = active_.begin(); it != active_.end();) {
    if (it->generation->done()) {
      done.push_back(std::move(*it));
      it = active_.erase(it);
    } else {
      ++it;
    }
  }
  int sequences = 0;
  for (const Request& a : active_) sequences += static_cast<int>(a.seqs);
  {
    absl::MutexLock lock(&mu_);
    report.step = ++steps_;
    active_sequences_ = sequences;
    SnapshotCache();
  }
  if (options_.step_observer && !seqs_.empty()) options_.step_observer(report);
  for (Request& a : done) Retire(a, a.generation->TakeResult());
}

}  // namespace textgen
