#include "engine/scheduler/engine.h"

#include <algorithm>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/util/status_macros.h"
#include "spdlog/spdlog.h"

namespace textgen {

KvType AutoKvType(ops::LinearCompute compute) {
  return compute == ops::LinearCompute::kBf16 ? KvType::kBf16 : KvType::kF32;
}

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(const EngineOptions& options) {
  if (options.max_step_tokens < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_step_tokens must be >= 1, got ", options.max_step_tokens));
  }
  auto e = std::unique_ptr<Engine>(new Engine());
  e->options_ = options;
  TG_ASSIGN_OR_RETURN(e->model_, Model::Load(options.model_path, options.model));
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
  // One tiny pass before serving: the first forward pays one-time costs (oneDNN kernel
  // generation, faulting in the weights) that would otherwise land on the first client's
  // time to first token.
  {
    BlockTable warm;
    const int32_t token = std::max<int32_t>(0, e->model_->tokenizer().bos_id());
    ForwardSeq fs{absl::MakeConstSpan(&token, 1), &warm, 0, false};
    std::vector<float> logits;
    absl::Status st = e->model_->llama().Forward(*e->cache_, absl::MakeSpan(&fs, 1), &logits);
    e->cache_->Free(warm);
    TG_RETURN_IF_ERROR(st);
  }
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

int Engine::BlocksToStart(int prompt_tokens, const DecodingOptions& d) const {
  const int bs = cache_->block_size();
  // The prompt's blocks are shared by all beams; each beam may copy the partial last block.
  const int beams = d.method == DecodingMethod::kBeam ? d.beam.num_beams : 1;
  return (prompt_tokens + bs) / bs + beams;
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

namespace {

bool IsSessionId(const std::string& id) {
  if (id.size() != 32) return false;
  for (char ch : id) {
    if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'))) return false;
  }
  return true;
}

std::string RandomSessionId() {
  // 128 bits from the OS entropy source: ids must not be guessable.
  std::random_device rd;
  std::string id;
  for (int i = 0; i < 4; ++i) id += absl::StrFormat("%08x", rd());
  return id;
}

}  // namespace

absl::StatusOr<std::string> Engine::CreateSession(const std::string& requested_id,
                                                  const std::string& owner) {
  if (!requested_id.empty() && !IsSessionId(requested_id)) {
    return absl::InvalidArgumentError(
        "session_id must be 32 lowercase hex characters (128 random bits)");
  }
  absl::MutexLock lock(&mu_);
  if (static_cast<int>(sessions_.size()) >= options_.max_sessions) {
    return absl::ResourceExhaustedError(
        absl::StrCat("session limit reached (", options_.max_sessions, ")"));
  }
  std::string id = requested_id.empty() ? RandomSessionId() : requested_id;
  if (sessions_.contains(id)) {
    return absl::AlreadyExistsError(absl::StrCat("session ", id, " already exists"));
  }
  auto session = std::make_shared<SessionState>();
  session->id = id;
  session->owner = owner;
  session->last_used = absl::Now();
  sessions_[id] = std::move(session);
  return id;
}

absl::Status Engine::DeleteSession(const std::string& id, const std::string& owner) {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end() || it->second->owner != owner)
    return absl::NotFoundError(absl::StrCat("unknown session ", id));
  it->second->deleted = true;
  retired_.push_back(std::move(it->second));
  sessions_.erase(it);
  return absl::OkStatus();
}

absl::StatusOr<SessionAttachment> Engine::GetSessionAttachment(const std::string& id,
                                                               const std::string& owner) const {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end() || it->second->owner != owner)
    return absl::NotFoundError(absl::StrCat("unknown session ", id));
  return SessionAttachment{it->second->attachment, it->second->version};
}

absl::Status Engine::CheckSessionVersion(const SessionState& s,
                                         std::optional<uint64_t> version) const {
  if (!version.has_value() || *version == s.version) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("session ", s.id, " changed (another turn ended) since this turn was built"));
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
  std::shared_ptr<SessionState> session;
  std::vector<int32_t> prompt;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return absl::UnavailableError("the engine is shutting down");
    if (!request.session_id.empty()) {
      auto it = sessions_.find(request.session_id);
      if (it == sessions_.end() || it->second->owner != request.session_owner) {
        return absl::NotFoundError(absl::StrCat("unknown or expired session ", request.session_id));
      }
      if (it->second->busy) {
        return absl::FailedPreconditionError(
            absl::StrCat("session ", request.session_id, " already has a request running"));
      }
      session = it->second;
      TG_RETURN_IF_ERROR(CheckSessionVersion(*session, request.session_version));
      if (request.session_prompt == SessionPrompt::kAppend) prompt = session->tokens;
    }
  }
  if (request.prompt_text.has_value()) {
    // BOS starts a document: only on a conversation's first turn, unless asked explicitly.
    const bool bos = request.add_bos.value_or(tok.add_bos() && prompt.empty());
    std::vector<int32_t> ids = tok.Encode(*request.prompt_text, bos);
    prompt.insert(prompt.end(), ids.begin(), ids.end());
  } else {
    prompt.insert(prompt.end(), request.prompt_ids.begin(), request.prompt_ids.end());
  }
  if (session != nullptr && request.decoding.context_overflow == ContextOverflow::kSlide) {
    return absl::InvalidArgumentError(
        "context_overflow: slide is not supported within a session yet");
  }
  TG_RETURN_IF_ERROR(
      ValidateDecodingOptions(request.decoding, c.n_ctx, static_cast<int>(prompt.size())));
  if (BlocksToStart(static_cast<int>(prompt.size()), request.decoding) >
      cache_->num_total_blocks()) {
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
  if (session != nullptr) {
    // Re-check under the same lock that claims it: another request may have raced us.
    if (session->deleted) {
      return absl::NotFoundError(absl::StrCat("unknown or expired session ", session->id));
    }
    if (session->busy) {
      return absl::FailedPreconditionError(
          absl::StrCat("session ", session->id, " already has a request running"));
    }
    TG_RETURN_IF_ERROR(CheckSessionVersion(*session, request.session_version));
    session->busy = true;
    session->last_used = absl::Now();
  }
  const uint64_t id = next_id_++;
  // What of the session's K/V can serve this prompt: the tokens both start with (all of the
  // session's when appending, unless a turn ended in between, which the version check catches
  // for callers that care).
  int shared_prefix = 0;
  if (session != nullptr) {
    const size_t n = std::min(prompt.size(), session->tokens.size());
    while (static_cast<size_t>(shared_prefix) < n &&
           prompt[shared_prefix] == session->tokens[shared_prefix]) {
      ++shared_prefix;
    }
  }
  queue_.push_back(Pending{id, std::move(prompt), std::move(request.decoding), std::move(session),
                           std::move(sink), shared_prefix, std::move(request.session_attachment)});
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
  s.active_sequences = active_sequences_;
  s.sessions = static_cast<int>(sessions_.size());
  s.steps = steps_;
  return s;
}

void Engine::Loop() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      // Sleep until there is work or a stop; wake now and then to expire idle sessions.
      auto has_work = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || !queue_.empty() || !active_.empty() || !retired_.empty();
      };
      mu_.AwaitWithTimeout(absl::Condition(&has_work), absl::Seconds(1));
      if (stopping_) break;
    }
    CollectSessions();
    Admit();
    if (!active_.empty()) Step();
  }
  // Shutdown: everything in flight ends as cancelled; sessions' blocks are freed.
  std::deque<Pending> queued;
  {
    absl::MutexLock lock(&mu_);
    queued.swap(queue_);
  }
  for (Pending& p : queued) p.sink->OnDone(absl::CancelledError("the engine shut down"));
  for (Active& a : active_) {
    a.generation->Abort();
    absl::StatusOr<GenerationResult> r = a.generation->TakeResult();
    ReturnSession(a, r);
    a.sink->OnDone(std::move(r));
  }
  active_.clear();
  std::vector<std::shared_ptr<SessionState>> all;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [id, session] : sessions_) all.push_back(session);
    for (auto& session : retired_) all.push_back(session);
    retired_.clear();
  }
  for (auto& session : all) cache_->Free(session->table);
}

void Engine::CollectSessions() {
  std::vector<std::shared_ptr<SessionState>> gone;
  {
    absl::MutexLock lock(&mu_);
    gone.swap(retired_);
    const absl::Time now = absl::Now();
    for (auto it = sessions_.begin(); it != sessions_.end();) {
      auto current = it++;
      SessionState& s = *current->second;
      if (!s.busy && now - s.last_used > options_.session_ttl) {
        s.deleted = true;
        gone.push_back(std::move(current->second));
        sessions_.erase(current);
      }
    }
  }
  // A busy deleted session still lends its table to a running request; Complete frees it.
  for (auto& session : gone) cache_->Free(session->table);
  if (!gone.empty()) {
    absl::MutexLock lock(&mu_);
    kv_free_ = cache_->num_free_blocks();
  }
}

bool Engine::EvictIdleSession() {
  std::shared_ptr<SessionState> victim;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [id, session] : sessions_) {
      if (session->busy || session->table.empty()) continue;
      if (victim == nullptr || session->last_used < victim->last_used) victim = session;
    }
  }
  if (victim == nullptr) return false;
  // Its tokens stay; the next turn recomputes their K/V.
  cache_->Free(victim->table);
  spdlog::debug("evicted the KV blocks of idle session {}", victim->id);
  return true;
}

void Engine::ReturnSession(Active& a, const absl::StatusOr<GenerationResult>& result) {
  if (a.session == nullptr) return;
  BlockTable kept = a.generation->ReleaseCache();
  int valid = 0;  // leading tokens of the session's conversation that `kept` may hold
  bool deleted = false;
  {
    absl::MutexLock lock(&mu_);
    SessionState& s = *a.session;
    if (result.ok() && !result->hypotheses.empty()) {
      // The conversation now holds the prompt and the best answer.
      s.tokens = a.prompt;
      const auto& ids = result->hypotheses[0].ids;
      s.tokens.insert(s.tokens.end(), ids.begin(), ids.end());
      ++s.version;
      if (a.attachment) s.attachment = a.attachment(*result);
      valid = static_cast<int>(s.tokens.size());
    } else {
      // The conversation stays as it was; only the prompt tokens it shares with it are valid.
      valid = std::min(a.shared_prefix, static_cast<int>(s.tokens.size()));
    }
    deleted = s.deleted;
  }
  // `kept` holds the K/V of a prefix of the prompt and answer: the whole conversation once the
  // generation's catch-up ran, else less (cancelled, no room), which the next turn recomputes.
  if (kept.num_tokens > valid) cache_->Truncate(kept, valid);
  {
    absl::MutexLock lock(&mu_);
    SessionState& s = *a.session;
    s.busy = false;
    s.last_used = absl::Now();
    deleted = s.deleted;
    if (!deleted) s.table = std::move(kept);
  }
  if (deleted) cache_->Free(kept);
}

void Engine::DropCancelledQueued() {
  std::vector<Pending> dropped;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = queue_.begin(); it != queue_.end();) {
      if (cancelled_[it->id]) {
        cancelled_.erase(it->id);
        if (it->session != nullptr) it->session->busy = false;
        dropped.push_back(std::move(*it));
        it = queue_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (Pending& p : dropped) p.sink->OnDone(absl::CancelledError("cancelled before it started"));
}

void Engine::Admit() {
  DropCancelledQueued();
  while (static_cast<int>(active_.size()) < options_.max_active_requests) {
    Pending p;
    bool cancelled = false;
    {
      absl::MutexLock lock(&mu_);
      if (queue_.empty()) return;
      Pending& front = queue_.front();
      cancelled = cancelled_[front.id];
      if (!cancelled) {
        // Admit only what can run to its end: every running request keeps room for the most
        // blocks it may still take (its remaining prompt chunks, max_new_tokens per beam), and
        // the newcomer needs its own worst case beyond the session blocks it already holds. Why:
        // over-committing the pool would end a running stream with RESOURCE_EXHAUSTED when
        // decode growth runs out of blocks (seen at 16 streams of 128+128 tokens in a 256 MiB
        // pool). The cost is less concurrency when clients ask for long max_new_tokens.
        int reserve = 0;
        for (const Active& a : active_) {
          reserve += std::max(0, a.worst_blocks - a.generation->blocks_in_use());
        }
        // A session's K/V beyond the prefix the prompt shares with it is stale: drop it now
        // (a partly used last block is kept; Append copies it first if it is shared).
        if (front.session != nullptr && front.session->table.num_tokens > front.shared_prefix) {
          cache_->Truncate(front.session->table, front.shared_prefix);
        }
        const int held = front.session != nullptr ? front.session->table.num_blocks() : 0;
        const int need = std::max(
            0, WorstCaseBlocks(static_cast<int>(front.prompt.size()), front.decoding) - held);
        if (need + reserve > cache_->num_free_blocks() && !active_.empty()) {
          mu_.Unlock();
          const bool evicted = EvictIdleSession();
          mu_.Lock();
          if (evicted) continue;
          return;  // wait for running requests to free blocks (FIFO: no overtaking)
        }
      }
      p = std::move(queue_.front());
      queue_.pop_front();
      if (cancelled) {
        cancelled_.erase(p.id);
      } else {
        ++active_count_;
      }
    }
    if (cancelled) {
      if (p.session != nullptr) {
        absl::MutexLock lock(&mu_);
        p.session->busy = false;
      }
      p.sink->OnDone(absl::CancelledError("cancelled before it started"));
      continue;
    }
    std::shared_ptr<GenerationSink> sink = p.sink;
    BlockTable* cached = p.session != nullptr ? &p.session->table : nullptr;
    auto g = Generation::Create(
        model_->llama(), model_->tokenizer(), *cache_, p.prompt, p.decoding,
        [sink](const StreamDelta& d) { sink->OnDelta(d); }, cached);
    if (!g.ok()) {
      {
        absl::MutexLock lock(&mu_);
        --active_count_;
        cancelled_.erase(p.id);
        if (p.session != nullptr) p.session->busy = false;
      }
      sink->OnDone(g.status());
      continue;
    }
    if (p.session != nullptr) (*g)->KeepCacheForNextTurn();
    Active a;
    a.id = p.id;
    a.generation = std::move(g).value();
    a.session = std::move(p.session);
    a.prompt = std::move(p.prompt);
    a.sink = std::move(sink);
    a.worst_blocks = WorstCaseBlocks(static_cast<int>(a.prompt.size()), p.decoding);
    a.shared_prefix = p.shared_prefix;
    a.attachment = std::move(p.attachment);
    active_.push_back(std::move(a));
  }
}

int Engine::Prepare(Active& a, int max_prompt_tokens) {
  const size_t before = seqs_.size();
  a.first_seq = before;
  a.seqs = 0;
  absl::Status st = a.generation->PrepareStep(&seqs_, max_prompt_tokens);
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
    for (Active& a : active_) {
      if (cancelled_[a.id]) a.generation->Cancel();
    }
  }
  // Decode tokens first: one per running sequence, always. Then prompt chunks, oldest request
  // first (active_ is in admission order), each taking what remains of the budget, so a prompt
  // may start in the step in which an older one finishes.
  std::vector<Active*> prefilling;
  int decode_tokens = 0;
  for (Active& a : active_) {
    a.seqs = 0;
    a.decode_tokens = a.prompt_tokens = 0;
    if (a.generation->prefilling()) {
      prefilling.push_back(&a);
      continue;
    }
    a.decode_tokens = Prepare(a, 0);
    decode_tokens += a.decode_tokens;
  }
  int budget = std::max(0, options_.max_step_tokens - decode_tokens);
  int prompt_tokens = 0;
  for (Active* a : prefilling) {
    a->prompt_tokens = Prepare(*a, budget);
    budget -= a->prompt_tokens;
    prompt_tokens += a->prompt_tokens;
  }
  StepReport report;
  if (!seqs_.empty()) {
    absl::Status st = model_->llama().Forward(*cache_, absl::MakeSpan(seqs_), &logits_);
    if (!st.ok()) {
      // Forward changed nothing. Make room: first idle sessions' blocks, else the newest
      // request gives way (it ends with the error) so that the older ones can go on.
      if (st.code() == absl::StatusCode::kResourceExhausted && EvictIdleSession()) return;
      spdlog::warn("step failed ({}); ending the newest request", st.ToString());
      for (auto it = active_.rbegin(); it != active_.rend(); ++it) {
        if (!it->generation->done()) {
          it->generation->Abort();
          Active victim = std::move(*it);
          active_.erase(std::next(it).base());
          ReturnSession(victim, st);
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
    // Sequences without logits (prompt chunks that do not end a prompt) have no row.
    row_of_seq_.resize(seqs_.size());
    size_t rows = 0;
    for (size_t k = 0; k < seqs_.size(); ++k) {
      row_of_seq_[k] = rows;
      if (seqs_[k].logits) rows += seqs_[k].all_logits ? seqs_[k].tokens.size() : 1;
    }
    const int vocab = model_->config().n_vocab;
    for (Active& a : active_) {
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
  std::vector<Active> done;
  for (auto it = active_.begin(); it != active_.end();) {
    if (it->generation->done()) {
      done.push_back(std::move(*it));
      it = active_.erase(it);
    } else {
      ++it;
    }
  }
  // Settle sessions and counters before telling the clients, so that what they see next
  // (e.g. Stats) already reflects the end of their request.
  std::vector<absl::StatusOr<GenerationResult>> results;
  for (Active& a : done) {
    results.push_back(a.generation->TakeResult());
    ReturnSession(a, results.back());
  }
  int sequences = 0;
  for (const Active& a : active_) sequences += a.seqs;
  {
    absl::MutexLock lock(&mu_);
    report.step = ++steps_;
    active_count_ -= static_cast<int>(done.size());
    active_sequences_ = sequences;
    for (const Active& a : done) cancelled_.erase(a.id);
    kv_free_ = cache_->num_free_blocks();
  }
  if (options_.step_observer && !seqs_.empty()) options_.step_observer(report);
  for (size_t i = 0; i < done.size(); ++i) done[i].sink->OnDone(std::move(results[i]));
}

}  // namespace textgen
