// The engine facade: a loaded model, one KV cache, and a scheduler thread that advances every
// active request in one batched forward pass per step (continuous batching: requests join and
// leave at step boundaries). Free of gRPC: the server adapts GenerationSink to its streams.
#ifndef TEXTGEN_ENGINE_SCHEDULER_ENGINE_H_
#define TEXTGEN_ENGINE_SCHEDULER_ENGINE_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "engine/decoding/generation.h"
#include "engine/kv_cache/kv_cache.h"
#include "engine/model/model.h"
#include "engine/scheduler/draft_model.h"
#include "engine/scheduler/row_cost_model.h"
#include "engine/scheduler/session_journal.h"
#include "engine/scheduler/session_store.h"

namespace textgen {

// What one scheduler step ran: one forward pass over every active request's share.
struct StepReport {
  struct Request {
    uint64_t id = 0;        // as Submit returned it
    int decode_tokens = 0;  // one per running sequence (live beam)
    int prompt_tokens = 0;  // its prefill chunk (or cache-off recompute, or session catch-up)
  };
  int64_t step = 0;  // EngineStats::steps once this step is counted
  int decode_tokens = 0;
  int prompt_tokens = 0;
  std::vector<Request> requests;  // those that ran tokens, oldest first
};

// The KV cache element type for matmuls of `compute` when none is asked for: BF16 with kBf16
// (speed already chosen over exactness; half the KV bytes per step), F32 with kF32 (parity
// with other engines, whose F32 references the parity tests compare against). textgen-run
// applies the same rule.
KvType AutoKvType(ops::LinearCompute compute);

struct EngineOptions {
  std::string model_path;
  ModelOptions model;
  // Element type of the KV cache; unset: AutoKvType(model.llama.linear.compute).
  std::optional<KvType> kv_type;
  int kv_block_size = 16;
  // Pool size: kv_blocks if > 0, else as many blocks as fit in kv_cache_mib.
  int kv_blocks = 0;
  int64_t kv_cache_mib = 1024;  // mapped lazily: pages are touched only as blocks are used
  // Speculative decoding's draft model (DraftSource::kDraftModel): a small model with the
  // target's vocabulary, loaded with the target's model options, and its KV pool (KV type as
  // the target's). Empty: none (requests that ask for it get n-gram drafts).
  std::string draft_model_path;
  int64_t draft_kv_cache_mib = 256;
  // Speculative decoding runs drafts only in steps with at most this many decoding streams:
  // each draft is one more row, and on a CPU rows are not free (4 drafts cost 2.5-3.8x a
  // one-row pass on an AVX2 EPYC), so with many streams the step is better spent on them.
  int max_speculative_streams = 4;
  // Requests waiting for admission; Submit beyond this fails with ResourceExhausted at once.
  int max_queued_requests = 64;
  // Requests advanced together per step.
  int max_active_requests = 64;
  // The most tokens one forward pass runs while any stream is decoding (>= 1). Each step runs
  // first every decoding sequence's next token (always, even beyond this budget), then prompt
  // chunks of the requests still prefilling, oldest first, each taking what remains: a long
  // prompt is prefilled over several steps instead of stalling every running stream for one
  // long pass. The default keeps a step with 16 streams near 1.5x a decode-only step on the
  // CPUs we measured (docs/performance.md, "Streams under load").
  int step_token_budget = 96;
  // The budget of a step in which no stream decodes (>= step_token_budget is used): nobody
  // waits on such a step but the prompts themselves, so they run in larger chunks (fewer passes
  // over the weights) and a lone request's time to first token stays what it was.
  int idle_step_tokens = 512;
  // A queued request that cannot start yet (its worst case does not fit the KV pool beside the
  // running requests' reservations, or its session's cache is still with a cancelled turn) lets
  // later requests that can start now go first, but is overtaken at most this many times: then
  // the queue waits for it (the running requests end within their max_new_tokens, so it
  // starts). 0: strict FIFO.
  int max_overtakes = 16;
  // A turn for a session that another request holds waits in the queue up to this long for it:
  // a client that cancels a turn sees its cancel at once, but the server hears of it a little
  // later (a network hop, a gRPC callback), and the next turn it sends at once must not be
  // refused for that. If the holder was cancelled (or failed) the waiting turn starts; if it
  // ended with an answer, or still runs after this long, the turn fails with
  // FailedPrecondition as before: one turn at a time. 0: refuse at once.
  absl::Duration session_busy_wait = absl::Seconds(2);
  // Conversations kept at once; CreateSession beyond it fails with ResourceExhausted.
  int max_sessions = 1024;
  // A session unused this long is deleted (its blocks freed).
  absl::Duration session_ttl = absl::Minutes(10);
  // Where sessions outlive the process (null: memory only). Create restores the sessions it
  // holds (their KV recomputed on their next turn); a turn that ends with an answer is written
  // before its sink's OnDone, which waits for the write (the decode loop does not).
  std::shared_ptr<SessionJournal> session_journal;
  // Automatic prefix caching: full KV blocks stay published under their token prefix (until
  // the pool needs them, least recently used first), and a request whose prompt starts with a
  // published chain shares those blocks instead of prefilling them again. Off: every prompt is
  // computed in full (sessions still reuse their own conversation).
  bool prefix_cache = true;
  // Commit the whole KV pool's memory at start (BlockPool::Prefault). Unset: with the prefix
  // cache, which fills the whole pool in time anyway (freed blocks stay cached), so the pages'
  // first touches move from requests' steps to start-up; without it the pool stays lazily
  // touched (resident memory follows the peak working set).
  std::optional<bool> kv_prefault;
  // The server's state directory (empty: none). The KV disk tier keeps its files in
  // state_dir/kv.
  std::string state_dir;
  // The KV disk tier's cap in GiB (0: off; needs state_dir and the prefix cache): full blocks
  // the pool evicts from the prefix cache (idle sessions' blocks among them, once their session
  // is evicted), and at shutdown every cached block, are written there (least recently used
  // file first out beyond the cap); a prompt whose prefix misses in memory reads matching
  // blocks back instead of recomputing them. See docs/deployment.md.
  double kv_disk_gib = 0;
  // Optional: called on the scheduler thread after every forward pass, after the requests'
  // OnDelta and before their OnDone (metrics, tests). Must return quickly; may call Cancel and
  // Stats.
  std::function<void(const StepReport&)> step_observer;
};

// Receives one request's stream. Called on the scheduler thread: must return quickly and never
// block on the engine (queue the data and hand it to another thread, as the gRPC reactor does).
class GenerationSink {
 public:
  virtual ~GenerationSink() = default;
  virtual void OnDelta(const StreamDelta& delta) = 0;
  // Exactly once, after the last OnDelta. Cancelled requests end with a result whose
  // finish_reason is kCancelled (or CancelledError if they never started).
  virtual void OnDone(absl::StatusOr<GenerationResult> result) = 0;
};

// With a session: what EngineRequest's prompt holds.
enum class SessionPrompt {
  // The new turn only: appended to the session's tokens.
  kAppend,
  // The whole conversation, replacing the session's tokens: the K/V of the longest token prefix
  // it shares with them is reused and the rest recomputed (a caller that re-renders a
  // conversation may change earlier turns: then less is reused, never a wrong prompt).
  kWhole,
};

struct EngineRequest {
  // Exactly one of prompt_ids / prompt_text (InvalidArgument otherwise).
  std::vector<int32_t> prompt_ids;
  std::optional<std::string> prompt_text;
  // prompt_text only. Unset: the model's default on a conversation's first turn (or without a
  // session), never on later turns (BOS starts a document, not a message).
  std::optional<bool> add_bos;
  // Continue this session: the prompt is appended to its tokens; the generated answer (the best
  // hypothesis) becomes part of it. NotFound if unknown or expired, FailedPrecondition if the
  // conversation and this turn no longer fit the context (the message says how full it is).
  // While another request holds the session the turn waits (EngineOptions::session_busy_wait);
  // if that turn ends with an answer or outlasts the wait, this one ends with
  // FailedPrecondition (through the sink: Submit has queued it).
  // A turn that fails or is cancelled leaves the conversation as it was.
  std::string session_id;
  // The principal continuing the session: a session answers only to the owner that created it
  // (anyone else gets the same NotFound as for an unknown id, so ids cannot be probed).
  std::string session_owner;
  SessionPrompt session_prompt = SessionPrompt::kAppend;
  // Predicted Outputs: text the answer is expected to repeat, tokenized (no BOS, special-token
  // text taken as text) into decoding.speculation.prediction. Never changes the output.
  std::string prediction_text;
  // With session_id: FailedPrecondition unless the session is still at this version (see
  // SessionAttachment), i.e. no turn ended since the caller read it.
  std::optional<uint64_t> session_version;
  // With session_id: called on the scheduler thread when the turn ends with an answer (the
  // session's tokens then hold it); the string returned replaces the session's attachment.
  // Must return quickly. Unset: the attachment stays as it is.
  std::function<std::string(const GenerationResult&)> session_attachment;
  DecodingOptions decoding;
};

struct EngineStats {
  int kv_blocks_total = 0;
  int kv_blocks_free = 0;
  int queued = 0;
  int active = 0;
  // Sequences the running requests ran in the latest step: each live beam counts, a request
  // still waiting for prompt budget does not. 0 when idle.
  int active_sequences = 0;
  int sessions = 0;
  int64_t steps = 0;
  // Prefix cache: blocks kept only for later prompts (counted in kv_blocks_free, since they are
  // given up on demand); requests that looked a prefix up, their prompt tokens, the tokens
  // served from published blocks, and idle blocks given up for new ones.
  int kv_blocks_cached = 0;
  // Bytes of the KV pool in memory: its pages are faulted in as blocks are first used, and
  // stay (with the prefix cache on, freed blocks stay cached, so new ones keep coming from
  // untouched pages until the whole pool has been used once).
  int64_t kv_pool_resident_bytes = 0;
  int64_t prefix_cache_lookups = 0;
  int64_t prefix_cache_lookup_tokens = 0;
  int64_t prefix_cache_hit_tokens = 0;
  int64_t prefix_cache_evictions = 0;
  // The KV disk tier (all 0 when off): see KvDiskStats.
  bool kv_disk_enabled = false;
  int64_t kv_disk_blocks_written = 0;
  int64_t kv_disk_blocks_read = 0;
  int64_t kv_disk_blocks_rejected = 0;
  int64_t kv_disk_blocks_dropped = 0;
  int64_t kv_disk_blocks_evicted = 0;
  int64_t kv_disk_bytes = 0;
  int64_t kv_disk_files = 0;
};

// Thread-safe: Submit, Cancel and Stats may be called from any thread.
class Engine {
 public:
  // Validates the options (InvalidArgument naming the field), loads the model, allocates the
  // KV pool, starts the scheduler thread.
  static absl::StatusOr<std::unique_ptr<Engine>> Create(const EngineOptions& options);
  // Stops the scheduler; requests still queued or running end with OnDone (cancelled).
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Validates the request (InvalidArgument naming the field), then queues it. ResourceExhausted
  // at once when the queue is full or when the request's worst case (its prompt and
  // max_new_tokens for every beam, capped by the context) could never fit the whole KV pool:
  // the message says what would fit. The one exception: a request whose max_new_tokens was left
  // to the server (stop_at_context_limit) gets at most what the pool can hold. Returns the
  // request id for Cancel.
  absl::StatusOr<uint64_t> Submit(EngineRequest request, std::shared_ptr<GenerationSink> sink);
  // A queued request leaves the queue at once, and its session (if any) can take the next turn
  // at once; a running one stops at the next step boundary (its blocks are freed then), its
  // session free at once. The sink's OnDone follows on the scheduler thread. Unknown or
  // finished ids are ignored.
  void Cancel(uint64_t id);

  // A new conversation. `requested_id` empty: a fresh unguessable id (128 random bits as 32
  // lowercase hex characters). Otherwise that id, which must have the same form
  // (InvalidArgument) and be unused (AlreadyExists). ResourceExhausted at max_sessions.
  // `owner` (the principal creating it; "" when the server has no authentication) is the only
  // one the session answers to below and in Submit.
  absl::StatusOr<std::string> CreateSession(const std::string& requested_id = "",
                                            const std::string& owner = "");
  // Frees the session's tokens and KV blocks at once (after its running request, if any).
  // NotFound if unknown or owned by another principal.
  absl::Status DeleteSession(const std::string& id, const std::string& owner = "");
  // The session's attachment and version (a copy). NotFound if unknown, expired or owned by
  // another principal.
  absl::StatusOr<SessionAttachment> GetSessionAttachment(const std::string& id,
                                                         const std::string& owner = "") const;

  const Model& model() const { return *model_; }
  // The KV cache's element type (as chosen at Create).
  KvType kv_type() const { return cache_->options().type; }
  EngineStats Stats() const;

 private:
  // One request from Submit to its end: queued (no generation yet), then running.
  struct Request {
    uint64_t id = 0;
    std::vector<int32_t> prompt;  // the whole conversation for session requests
    DecodingOptions decoding;
    std::shared_ptr<Session> session;
    std::shared_ptr<GenerationSink> sink;
    // Sessions: how many leading prompt tokens equal the session's tokens (the most K/V that
    // may be reused), and the attachment callback.
    int shared_prefix = 0;
    std::function<std::string(const GenerationResult&)> attachment;
    int worst_blocks = 0;  // WorstCaseBlocks: the most it may ever hold
    // Queued for a session another request holds: claim it at this version by the deadline.
    bool awaiting_session = false;
    uint64_t session_version = 0;
    absl::Time session_deadline;
    // Why it left the queue without starting (a cancel when OK).
    absl::Status refusal;
    int overtaken = 0;  // queued: later requests started before it
    // Running (scheduler thread).
    std::unique_ptr<Generation> generation;
    // This step's share: sequences seqs_[first_seq, first_seq + seqs) and their tokens.
    size_t first_seq = 0;
    size_t seqs = 0;
    int decode_tokens = 0;
    int prompt_tokens = 0;
  };
  // What Cancel needs to know of a running request.
  struct Running {
    std::shared_ptr<Session> session;
    bool cancel = false;
  };

  Engine() = default;
  // Submit's checks of a request's size against the context (a session's: FailedPrecondition
  // saying how full it is) and the KV pool (see Submit).
  absl::Status CheckFits(const Session* session, int held_tokens, int prompt_tokens,
                         DecodingOptions& d) const;
  void Loop();
  // Moves queued requests that can start into the active set (see max_overtakes).
  void Admit();
  // Under mu_: takes the first queued request that can start now, or nullopt.
  std::optional<Request> TakeStartable() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Under mu_: whether queued `q` holds its session (or has none), claiming it if it was waiting
  // for it. False while it waits; a turn that can no longer claim it gets its refusal.
  bool ClaimAwaitedSession(Request& q, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether `q` can start beside the running requests' reservations; evicts idle sessions'
  // blocks to make room. Drops the stale part of its session's cache.
  bool CanStart(Request& q, int reserve);
  void Start(Request r);
  // The most leading prompt blocks `r` may take from the prefix cache (0 when off); see
  // MatchablePrompt for the tokens.
  int PrefixMatchLimit(const Request& r) const;
  // The prompt tokens a prefix match may cover: all but the last, which must run to give
  // logits.
  static absl::Span<const int32_t> MatchablePrompt(const Request& r);
  // Under mu_: copies the cache's counts for Stats.
  void SnapshotCache() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Step();
  // Appends a's sequences for this step (at most max_prompt_tokens prompt tokens); returns how
  // many tokens they hold. A request that fails to prepare is aborted and adds nothing.
  int Prepare(Request& a, int max_prompt_tokens, int max_draft_tokens);
  // The most blocks a request can hold before it ends: its prompt, and max_new_tokens (capped
  // by the context) for each beam with a partial-block copy each.
  int WorstCaseBlocks(int prompt_tokens, const DecodingOptions& d) const;
  // The one place a request ends, whatever the path (finished, failed, cancelled queued or
  // running, shutdown): hands its session back, drops its bookkeeping, then tells its sink.
  // Scheduler thread.
  void Retire(Request& r, absl::StatusOr<GenerationResult> result);
  // Retire for a request that left the queue without starting: cancelled, or its refusal.
  void RetireUnstarted(Request& r);
  // Hands a finished request's conversation and KV cache back to its session. True if its turn
  // went to the journal: its OnDone then waits for the write (DeliverCommitted).
  bool ReturnSession(Request& a, const absl::StatusOr<GenerationResult>& result);
  // Scheduler thread: the OnDone of requests whose turn the journal has written (or failed to).
  void DeliverCommitted();
  // Scheduler thread: frees blocks of deleted and expired sessions.
  void CollectSessions();
  // Scheduler thread: frees the least recently used idle session's blocks (its tokens stay and
  // are recomputed on its next turn). False if there is none.
  bool EvictIdleSession();
  // Opens the KV disk tier if the options ask for it; a failure is logged and the engine runs
  // without it.
  void OpenDiskTier(const KvCacheOptions& kv);

  std::unique_ptr<Model> model_;
  std::unique_ptr<KvDiskStore> disk_;  // null without the KV disk tier; outlives cache_
  std::unique_ptr<KvCache> cache_;
  std::unique_ptr<DraftModel> draft_;  // null without --draft-model
  EngineOptions options_;
  std::unique_ptr<SessionStore> sessions_;

  // Locked before sessions_' own mutex when both are held.
  mutable absl::Mutex mu_;
  std::deque<Request> queue_ ABSL_GUARDED_BY(mu_);
  // Requests that left the queue without starting (cancelled, or refused their session), for
  // the scheduler to retire.
  std::vector<Request> left_queue_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, Running> running_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool sessions_deleted_ ABSL_GUARDED_BY(mu_) = false;  // wakes the scheduler to free them
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  int active_sequences_ ABSL_GUARDED_BY(mu_) = 0;
  int kv_free_ ABSL_GUARDED_BY(mu_) = 0;
  int kv_cached_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t prefix_evictions_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t steps_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t prefix_lookups_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t prefix_lookup_tokens_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t prefix_hit_tokens_ ABSL_GUARDED_BY(mu_) = 0;
  // Finished requests whose turn the journal is writing: their OnDone waits for it.
  struct AwaitingCommit {
    std::shared_ptr<GenerationSink> sink;
    absl::StatusOr<GenerationResult> result;
  };
  absl::flat_hash_map<uint64_t, AwaitingCommit> awaiting_commit_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t> committed_ ABSL_GUARDED_BY(mu_);  // written: deliver their OnDone

  // Scheduler thread only.
  std::vector<Request> active_;
  std::vector<ForwardSeq> seqs_;
  RowCostModel row_cost_;  // passes' time against their rows: what a draft row costs
  std::vector<float> logits_;
  std::vector<size_t> row_of_seq_;  // [seqs_.size()] index of a sequence's first logits row
  std::thread thread_;
};

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_SCHEDULER_ENGINE_H_
