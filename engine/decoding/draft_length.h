// How many tokens a request drafts for its next verification pass (adaptive K). Drafts pay off
// only when the tokens they save are worth more than the rows they add: a pass with k drafts
// yields E(k) = 1 + a + a^2 + ... + a^k tokens on average (a: the chance that a draft is
// accepted, given the ones before it were) and costs C(k) one-row passes (measured by the
// scheduler on this model and CPU: RowCostModel), plus k times what drafting one token costs
// (measured here: nothing for prompt lookup, a draft model's pass for a draft model). The
// next k is the one in [0, max] with the most tokens per cost, E(k) / C(k). The acceptance is
// this request's own: a decayed count of accepted drafts over drafts tried up to the first
// rejection, starting from an optimistic prior so that a request tries drafting at all. While
// drafting does not pay, the request probes with one draft after kProbeInterval choices, so a
// text that starts repeating itself is noticed; each probe that changes nothing doubles the
// wait (up to kMaxProbeInterval), because a probe is not free: a draft model first catches up
// on the text since its last draft. No probe at all when drafting could not pay even if every
// draft were accepted.
#ifndef TEXTGEN_ENGINE_DECODING_DRAFT_LENGTH_H_
#define TEXTGEN_ENGINE_DECODING_DRAFT_LENGTH_H_

#include <array>

#include "engine/decoding/speculation_options.h"

namespace textgen {

// What passes cost on this model and CPU (the scheduler's RowCostModel).
struct DraftCosts {
  // pass[k]: a pass of a sequence's last token and k drafts, in passes of the last token alone
  // (pass[0] = 1).
  std::array<double, kMaxSpeculativeTokens + 1> pass;
  // A one-row pass's seconds (0: not measured yet): drafting time is weighed against it.
  double one_row_seconds = 0;

  bool operator==(const DraftCosts&) const = default;
};
// Every row free: draft as many tokens as a source has.
DraftCosts FreeDraftCosts();

// Not thread-safe; one per request.
class DraftLength {
 public:
  static constexpr int kProbeInterval = 16;
  static constexpr int kMaxProbeInterval = 256;

  // `max_tokens`: the request's K (SpeculationOptions::max_draft_tokens). `adaptive` false:
  // always `max_tokens` (the fixed-K behaviour).
  DraftLength(int max_tokens, bool adaptive);

  // The drafts to ask for before the next pass, given what passes cost (see above).
  int Next(const DraftCosts& costs);
  // A verification pass kept `accepted` of `drafted` (> 0) drafts.
  void Verified(int drafted, int accepted);
  // A choice made without drafts (none proposed, or Next gave 0).
  void ChoseWithoutDrafts();
  // Drafting `tokens` (> 0) took `seconds`.
  void Drafted(int tokens, double seconds);

  // The estimated acceptance a, in (0, 1).
  double acceptance() const;
  // The k in [0, max_tokens] that maximizes E(k) / (costs.pass[k] + k * draft_cost) for
  // acceptance a, where draft_cost is a drafted token's cost in one-row passes.
  static int Best(double a, const DraftCosts& costs, int max_tokens, double draft_cost = 0);

 private:
  const int max_tokens_;
  const bool adaptive_;
  // Decayed sums: drafts accepted, and drafts tried (accepted + the first rejected one).
  double accepted_;
  double tried_;
  int since_draft_ = 0;  // choices since the last verification pass
  int probe_interval_ = kProbeInterval;
  // Decayed drafting time and drafted tokens.
  double draft_seconds_ = 0;
  double draft_tokens_ = 0;
};

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_DECODING_DRAFT_LENGTH_H_
