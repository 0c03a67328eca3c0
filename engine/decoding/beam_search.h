// Model-agnostic core of beam search with Hugging Face `generate` semantics (BeamSearchScorer:
// top-2B candidates per step, EOS hypotheses only from the top B, length-normalised finished
// scores, early_stopping False / True / "never"). The caller owns the model and the KV caches;
// BeamSearch only decides which beams continue with which token.
//
// Driver loop:
//   BeamSearch bs(options);                    // one live beam: the prompt
//   while (!bs.done()) {
//     rows[i] = log-softmax of beam i's next-token logits, i < bs.num_live()
//     for (BeamChoice c : bs.Step(rows, vocab[, terminal]))  // fork c.parent's cache, feed c.token
//     stream the growth of bs.CertainPrefix()
//   }
//   bs.Results();
#ifndef TEXTGEN_ENGINE_DECODING_BEAM_SEARCH_H_
#define TEXTGEN_ENGINE_DECODING_BEAM_SEARCH_H_

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace textgen {

// HF `early_stopping`: kHeuristic = False, kEarly = True, kNever = "never".
enum class EarlyStopping { kHeuristic, kEarly, kNever };
std::string_view EarlyStoppingName(EarlyStopping e);  // "heuristic", "early", "never"

struct BeamSearchOptions {
  int num_beams = 1;
  float length_penalty = 1.0f;  // α: finished score = cum_logprob / generated_len^α
  EarlyStopping early_stopping = EarlyStopping::kHeuristic;
  int num_return_sequences = 1;
  int max_new_tokens = 16;
  int32_t eos_id = -1;  // -1: no EOS token
  // Further end-of-generation ids (EOT, EOM, ...; Tokenizer::eog_ids), each finishing a
  // hypothesis as EOS does.
  std::vector<int32_t> eog_ids;
  bool ignore_eos = false;  // EOS and the EOG ids are ordinary tokens
  // Candidates whose logprob is -inf (tokens an output constraint forbade) are never chosen,
  // even when fewer than 2B others are left. Off, as Hugging Face does: such a candidate can
  // become a (hopeless) running beam.
  bool drop_impossible = false;
};

// InvalidArgument naming the parameter and its range, e.g. "num_beams must be in [1, 16], got 0",
// "num_return_sequences must be in [1, num_beams=4], got 5", "max_new_tokens must be >= 1, got 0",
// "eos_id must be >= -1, got -2", "length_penalty must be in [-10, 10], got nan".
absl::Status ValidateBeamSearchOptions(const BeamSearchOptions& o);

inline constexpr int kMaxBeams = 16;
inline constexpr float kMaxLengthPenalty = 10;

struct BeamHypothesis {
  std::vector<int32_t> ids;      // generated tokens (EOS included when it ended so)
  std::vector<double> logprobs;  // natural-log probability of each generated token
  double score = 0;              // cum_logprob / ids.size()^α (the ranking key)
  double cum_logprob = 0;        // sum of logprobs
  bool eos = false;              // finish reason: true = eos, false = length (or stopped)
  bool stopped = false;          // ended on a token the terminal predicate flagged (see Step)
};

// Whether continuing running beam `beam` with `token` ends that hypothesis (e.g. the token
// completes a stop sequence). Evaluated only for the top-2B candidates the step walks, so it
// may be moderately expensive.
using TerminalFn = std::function<bool(int beam, int32_t token)>;

// Which running beam of the previous step each new running beam continues, and with what token.
struct BeamChoice {
  int parent;
  int32_t token;
};

class BeamSearch {
 public:
  explicit BeamSearch(const BeamSearchOptions& options);  // options must be valid

  // Running beams the caller must run next: 1 at start, 0 once done().
  int num_live() const;

  // One step: rows[i] = log-softmax [vocab] for running beam i (rows.size() == num_live()).
  // Returns the new running beams in rank order (best cumulative logprob first); parent indexes
  // the previous running beams, several may share a parent (the caller forks KV caches), and
  // beams not chosen as a parent are dropped. Updates the finished set and applies the stopping
  // rules; when this step finishes the request, returns {} (nothing left to run) and done()
  // becomes true. Must not be called once done().
  //
  // `terminal` (optional) marks candidates that end their hypothesis the way EOS does: a
  // terminal candidate of rank < num_beams among the step's top 2B is offered to the finished
  // set with score cum / len^α (len counting the terminal token) and `stopped` set; one of rank
  // >= num_beams is dropped; neither ever becomes a running beam. An EOS candidate is EOS
  // whatever `terminal` says (it is not asked).
  std::vector<BeamChoice> Step(absl::Span<const double* const> rows, int vocab,
                               const TerminalFn& terminal = nullptr);

  bool done() const { return done_; }
  int steps() const { return steps_; }  // tokens generated so far by running beams

  // Generated ids / cumulative logprob of running beam `beam` < num_live(). running_ids is
  // materialised lazily from the history tree (O(len) on the first call per beam per step);
  // the reference stays valid until the next Step. Not safe to call concurrently.
  const std::vector<int32_t>& running_ids(int beam) const;
  double running_cum_logprob(int beam) const;

  // Tokens certain to begin the final best hypothesis: the longest common prefix of all running
  // beams and all kept finished hypotheses (once done: the best hypothesis' ids).
  //
  // Monotone (each call's result is a prefix of every later call's and of Results()[0].ids):
  // every member of the next step's set {running beams} ∪ {kept finished} extends a member of
  // this step's set — a new running beam extends its parent running beam, a newly finished
  // hypothesis is a running beam plus EOS or a terminal token (or, at max_new_tokens, the
  // running beam itself), and
  // a kept finished hypothesis stays unchanged. So today's LCP is a common prefix of tomorrow's
  // set, hence a prefix of tomorrow's LCP; dropping a beam or evicting a finished hypothesis
  // only removes members, which can only lengthen the LCP. Once done, the best hypothesis is a
  // member of the final set, so it extends that set's LCP too.
  std::vector<int32_t> CertainPrefix() const;
  int CertainPrefixLength() const;
  // CertainPrefix() from position `start` on (empty if start >= length): O(new tokens), for
  // drivers that stream only the growth.
  std::vector<int32_t> CertainPrefixFrom(int start) const;

  // After done(): min(num_return_sequences, finished count) hypotheses, best score first (ties:
  // earlier offered first). The finished count is < num_return_sequences only when the vocab is
  // so small that beams ran out (every top candidate was EOS).
  std::vector<BeamHypothesis> Results() const;

  // Kept finished hypotheses so far, in the order of Results() (for tests and debugging).
  std::vector<BeamHypothesis> Finished() const;

 private:
  // A node of the history tree: one generated token. Node 0 is the root (the prompt). The jump
  // pointer is the skew-binary ancestor link (jump[u] = jump[jump[p]] when p's two jumps span
  // equal depths, else p), which gives O(log depth) level-ancestor and LCA queries.
  struct Node {
    int32_t parent;
    int32_t jump;
    int32_t depth;
    int32_t token;
    double logprob;
  };
  struct Running {
    int32_t node;
    double cum;
  };
  struct FinishedHyp {
    int32_t node;
    double cum;
    double score;
    int64_t seq;  // offer order: among equal scores the earlier offered ranks higher
    bool eos;
    bool stopped;
  };

  int32_t AddNode(int32_t parent, int32_t token, double logprob);
  int32_t Ancestor(int32_t u, int32_t depth) const;
  int32_t Lca(int32_t u, int32_t v) const;
  int32_t CertainNode() const;
  void PathIds(int32_t node, int start, std::vector<int32_t>* ids) const;
  double Normalize(double cum, int len) const;
  void Offer(int32_t node, double cum, double score, bool eos, bool stopped);
  // Indices of finished_ in rank order (score desc, then seq asc).
  std::vector<int> RankedFinished() const;
  BeamHypothesis MakeHypothesis(const FinishedHyp& f) const;
  bool IsDone() const;

  BeamSearchOptions options_;
  double alpha_;
  std::vector<Node> nodes_;
  std::vector<Running> running_;
  std::vector<FinishedHyp> finished_;  // at most num_beams, unordered
  int64_t next_seq_ = 0;
  int steps_ = 0;
  bool done_ = false;
  mutable std::vector<std::vector<int32_t>> ids_cache_;  // per running beam, see running_ids
  mutable std::vector<bool> ids_cached_;
};

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_DECODING_BEAM_SEARCH_H_
