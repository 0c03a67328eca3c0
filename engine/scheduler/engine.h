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
  // Requests waiting for admission; Submit beyond this fails with ResourceExhausted at once.
  int max_queued_requests = 64;
  // Requests advanced together per step.
  int max_active_requests = 64;
  // The most tokens one forward pass runs (>= 1). Each step runs first every decoding
  // sequence's next token (always, even beyond this budget), then prompt chunks of the requests
  // still prefilling, oldest first, each taking what remains: a long prompt is prefilled over
  // several steps instead of stalling every other stream for one long pass.
  int max_step_tokens = 512;
  // Conversations kept at once; CreateSession beyond it fails with ResourceExhausted.
  int max_sessions = 1024;
  // A session unused this long is deleted (its blocks freed).
  absl::Duration session_ttl = absl::Minutes(10);
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
  // session already has a request running.
  std::string session_id;
  // The principal continuing the session: a session answers only to the owner that created it
  // (anyone else gets the same NotFound as for an unknown id, so ids cannot be probed).
  std::string session_owner;
  SessionPrompt session_prompt = SessionPrompt::kAppend;
  // With session_id: FailedPrecondition unless the session is still at this version (see
  // SessionAttachment), i.e. no turn ended since the caller read it.
  std::optional<uint64_t> session_version;
  // With session_id: called on the scheduler thread when the turn ends with an answer (the
  // session's tokens then hold it); the string returned replaces the session's attachment.
  // Must return quickly. Unset: the attachment stays as it is.
  std::function<std::string(const GenerationResult&)> session_attachment;
  DecodingOptions decoding;
};

// What a caller keeps with a session besides its tokens (e.g. a chat's messages), opaque to the
// engine, and the session's version: it grows by one whenever a turn ends with an answer.
struct SessionAttachment {
  std::string attachment;
  uint64_t version = 0;
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
  // at once when the queue is full or the request could never fit the KV pool. Returns the
  // request id for Cancel.
  absl::StatusOr<uint64_t> Submit(EngineRequest request, std::shared_ptr<GenerationSink> sink);
  // Stops the request at the next step boundary (its blocks are freed then). Unknown or
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
  // A conversation. `tokens`, `busy`, `attachment` and `version` are guarded by mu_; `table`
  // (the KV of tokens[0, table.num_tokens)) belongs to the scheduler thread.
  struct SessionState {
    std::string id;
    std::string owner;  // the principal that created it
    std::vector<int32_t> tokens;
    std::string attachment;
    uint64_t version = 0;
    BlockTable table;
    bool busy = false;
    bool deleted = false;
    absl::Time last_used;
  };
  struct Pending {
    uint64_t id;
    std::vector<int32_t> prompt;  // the whole conversation for session requests
    DecodingOptions decoding;
    std::shared_ptr<SessionState> session;
    std::shared_ptr<GenerationSink> sink;
    // Sessions: how many leading prompt tokens equal the session's tokens (the most K/V that
    // may be reused), and the attachment callback.
    int shared_prefix = 0;
    std::function<std::string(const GenerationResult&)> attachment;
  };
  struct Active {
    uint64_t id;
    std::unique_ptr<Generation> generation;
    std::shared_ptr<SessionState> session;
    std::vector<int32_t> prompt;
    std::shared_ptr<GenerationSink> sink;
    // This step's share: sequences seqs_[first_seq, first_seq + seqs) and their tokens.
    size_t first_seq = 0;
    size_t seqs = 0;
    int decode_tokens = 0;
    int prompt_tokens = 0;
    int worst_blocks = 0;   // WorstCaseBlocks at admission: the most it may ever hold
    int shared_prefix = 0;  // as Pending's
    std::function<std::string(const GenerationResult&)> attachment;
  };

  Engine() = default;
  void Loop();
  // Ends queued requests whose cancel was asked, wherever they wait in the queue: a client that
  // gave up must not hold a queue place (and cause ResourceExhausted) until a slot frees.
  void DropCancelledQueued();
  // Moves queued requests into the active set while the pool can hold their prompts.
  void Admit();
  void Step();
  // Appends a's sequences for this step (at most max_prompt_tokens prompt tokens); returns how
  // many tokens they hold. A request that fails to prepare is aborted and adds nothing.
  int Prepare(Active& a, int max_prompt_tokens);
  // Blocks a request needs to start: its prompt for every beam it may fork into.
  int BlocksToStart(int prompt_tokens, const DecodingOptions& d) const;
  // The most blocks a request can hold before it ends: its prompt, and max_new_tokens (capped
  // by the context) for each beam with a partial-block copy each.
  int WorstCaseBlocks(int prompt_tokens, const DecodingOptions& d) const;
  // FailedPrecondition naming the session if `version` is set and differs from its own.
  absl::Status CheckSessionVersion(const SessionState& s, std::optional<uint64_t> version) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Hands a finished request's conversation and KV cache back to its session, if any.
  void ReturnSession(Active& a, const absl::StatusOr<GenerationResult>& result);
  // Scheduler thread: frees blocks of deleted and expired sessions.
  void CollectSessions();
  // Scheduler thread: frees the least recently used idle session's blocks (its tokens stay and
  // are recomputed on its next turn). False if there is none.
  bool EvictIdleSession();

  std::unique_ptr<Model> model_;
  std::unique_ptr<KvCache> cache_;
  EngineOptions options_;

  mutable absl::Mutex mu_;
  std::deque<Pending> queue_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, bool> cancelled_ ABSL_GUARDED_BY(mu_);  // id -> cancel asked
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  int active_count_ ABSL_GUARDED_BY(mu_) = 0;
  int active_sequences_ ABSL_GUARDED_BY(mu_) = 0;
  int kv_free_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t steps_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<std::string, std::shared_ptr<SessionState>> sessions_ ABSL_GUARDED_BY(mu_);
  // Sessions removed from sessions_ whose blocks the scheduler has yet to free.
  std::vector<std::shared_ptr<SessionState>> retired_ ABSL_GUARDED_BY(mu_);

  // Scheduler thread only.
  std::vector<Active> active_;
  std::vector<ForwardSeq> seqs_;
  std::vector<float> logits_;
  std::vector<size_t> row_of_seq_;  // [seqs_.size()] index of a sequence's first logits row
  std::thread thread_;
};

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_SCHEDULER_ENGINE_H_
