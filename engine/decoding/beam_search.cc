#include "engine/decoding/beam_search.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"

namespace textgen {
namespace {

// A continuation of running beam `beam` by `token`, ranked by the cumulative logprob it would
// have. Ties: lower beam index, then lower token id (the spec's total order).
struct Candidate {
  double cum;
  double logprob;
  int32_t beam;
  int32_t token;
};

bool Better(const Candidate& a, const Candidate& b) {
  if (a.cum != b.cum) return a.cum > b.cum;
  if (a.beam != b.beam) return a.beam < b.beam;
  return a.token < b.token;
}

// Appends to `out` the best k continuations of one beam under Better, in no particular order.
// A bounded heap whose front is the worst kept candidate: one comparison for most of a 128k
// vocabulary. The ranking key is cum + logprob (not logprob alone) so that rounding ties in the
// sum break by token id exactly as the global order does.
void SelectRow(const double* row, int vocab, int32_t beam, double cum, int k,
               std::vector<Candidate>* out) {
  const size_t base = out->size();
  auto heap_begin = [&] { return out->begin() + static_cast<std::ptrdiff_t>(base); };
  // NaN would break the strict weak ordering; rank it as impossible.
  auto clean = [](double lp) {
    return std::isnan(lp) ? -std::numeric_limits<double>::infinity() : lp;
  };
  const int fill = std::min(k, vocab);
  for (int32_t t = 0; t < fill; ++t) {
    const double lp = clean(row[t]);
    out->push_back({cum + lp, lp, beam, t});
  }
  std::make_heap(heap_begin(), out->end(), Better);
  double threshold = (*out)[base].cum;
  for (int32_t t = fill; t < vocab; ++t) {
    const double c = cum + row[t];
    // Tokens are scanned in increasing id, so an equal sum never beats a kept same-beam
    // candidate: strict > is the exact tie rule (and rejects NaN).
    if (!(c > threshold)) continue;
    std::pop_heap(heap_begin(), out->end(), Better);
    out->back() = {c, row[t], beam, t};
    std::push_heap(heap_begin(), out->end(), Better);
    threshold = (*out)[base].cum;
  }
}

}  // namespace

std::string_view EarlyStoppingName(EarlyStopping e) {
  switch (e) {
    case EarlyStopping::kHeuristic:
      return "heuristic";
    case EarlyStopping::kEarly:
      return "early";
    case EarlyStopping::kNever:
      return "never";
  }
  return "unknown";
}

absl::Status ValidateBeamSearchOptions(const BeamSearchOptions& o) {
  if (o.num_beams < 1 || o.num_beams > kMaxBeams) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_beams must be in [1, ", kMaxBeams, "], got ", o.num_beams));
  }
  if (o.num_return_sequences < 1 || o.num_return_sequences > o.num_beams) {
    return absl::InvalidArgumentError(absl::StrCat("num_return_sequences must be in [1, num_beams=",
                                                   o.num_beams, "], got ", o.num_return_sequences));
  }
  if (o.max_new_tokens < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_new_tokens must be >= 1, got ", o.max_new_tokens));
  }
  if (o.eos_id < -1) {
    return absl::InvalidArgumentError(absl::StrCat("eos_id must be >= -1, got ", o.eos_id));
  }
  for (int32_t id : o.eog_ids) {
    if (id < 0) return absl::InvalidArgumentError(absl::StrCat("eog_ids must be >= 0, got ", id));
  }
  // Bounded so that a score, cum_logprob / len^length_penalty, stays finite for any length
  // (-3e38 made it -inf); HF and vLLM use values around 0.5..2.
  if (!(std::fabs(o.length_penalty) <= kMaxLengthPenalty)) {
    return absl::InvalidArgumentError(absl::StrCat("length_penalty must be in [",
                                                   -kMaxLengthPenalty, ", ", kMaxLengthPenalty,
                                                   "], got ", o.length_penalty));
  }
  switch (o.early_stopping) {
    case EarlyStopping::kHeuristic:
    case EarlyStopping::kEarly:
    case EarlyStopping::kNever:
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("early_stopping must be heuristic, early or never, got ",
                       static_cast<int>(o.early_stopping)));
  }
  return absl::OkStatus();
}

BeamSearch::BeamSearch(const BeamSearchOptions& options)
    : options_(options), alpha_(static_cast<double>(options.length_penalty)) {
  assert(ValidateBeamSearchOptions(options).ok());
  nodes_.push_back({/*parent=*/0, /*jump=*/0, /*depth=*/0, /*token=*/-1, /*logprob=*/0});
  // Rule 1: the prompt's single distribution, i.e. running scores [0, -inf, ...].
  running_.push_back({/*node=*/0, /*cum=*/0});
  ids_cache_.resize(1);
  ids_cached_.assign(1, false);
}

int BeamSearch::num_live() const { return static_cast<int>(running_.size()); }

int32_t BeamSearch::AddNode(int32_t parent, int32_t token, double logprob) {
  const Node& p = nodes_[parent];
  const Node& pj = nodes_[p.jump];
  const Node& pjj = nodes_[pj.jump];
  const int32_t jump = (p.depth - pj.depth == pj.depth - pjj.depth) ? pj.jump : parent;
  nodes_.push_back({parent, jump, p.depth + 1, token, logprob});
  return static_cast<int32_t>(nodes_.size() - 1);
}

int32_t BeamSearch::Ancestor(int32_t u, int32_t depth) const {
  while (nodes_[u].depth > depth) {
    u = nodes_[nodes_[u].jump].depth >= depth ? nodes_[u].jump : nodes_[u].parent;
  }
  return u;
}

int32_t BeamSearch::Lca(int32_t u, int32_t v) const {
  if (nodes_[u].depth < nodes_[v].depth) std::swap(u, v);
  u = Ancestor(u, nodes_[v].depth);
  // At equal depths the jump targets have equal depths too, so jumping both stays in step.
  while (u != v) {
    if (nodes_[u].jump != nodes_[v].jump) {
      u = nodes_[u].jump;
      v = nodes_[v].jump;
    } else {
      u = nodes_[u].parent;
      v = nodes_[v].parent;
    }
  }
  return u;
}

void BeamSearch::PathIds(int32_t node, int start, std::vector<int32_t>* ids) const {
  const int depth = nodes_[node].depth;
  ids->assign(static_cast<size_t>(std::max(0, depth - start)), 0);
  for (int d = depth; d > start; --d) {
    (*ids)[static_cast<size_t>(d - start - 1)] = nodes_[node].token;
    node = nodes_[node].parent;
  }
}

double BeamSearch::Normalize(double cum, int len) const {
  return cum / std::pow(static_cast<double>(len), alpha_);
}

void BeamSearch::Offer(int32_t node, double cum, double score, bool eos, bool stopped) {
  const FinishedHyp h{node, cum, score, next_seq_++, eos, stopped};
  if (static_cast<int>(finished_.size()) < options_.num_beams) {
    finished_.push_back(h);
    return;
  }
  // The worst kept hypothesis is the last in rank order: lowest score, latest offered among
  // equals. The newcomer is the latest offered, so it must be strictly better to displace it;
  // the kept set is then always the top num_beams of everything offered under the rank order.
  size_t worst = 0;
  for (size_t i = 1; i < finished_.size(); ++i) {
    const FinishedHyp& a = finished_[i];
    const FinishedHyp& w = finished_[worst];
    if (a.score < w.score || (a.score == w.score && a.seq > w.seq)) worst = i;
  }
  if (score > finished_[worst].score) finished_[worst] = h;
}

bool BeamSearch::IsDone() const {
  if (static_cast<int>(finished_.size()) < options_.num_beams) return false;
  if (options_.early_stopping == EarlyStopping::kEarly) return true;
  double worst = finished_[0].score;
  for (const FinishedHyp& f : finished_) worst = std::min(worst, f.score);
  // Running beams are kept in rank order, so beam 0 has the best cumulative logprob.
  const double best_cum = running_[0].cum;
  // NEVER with α > 0: a running beam's normalised score can only rise towards
  // cum / max_new_tokens^α (logprobs are <= 0 and the denominator grows); with α <= 0 longer is
  // never better, so the current length bounds it as in HEURISTIC.
  const int len = (options_.early_stopping == EarlyStopping::kNever && alpha_ > 0)
                      ? options_.max_new_tokens
                      : steps_;
  return Normalize(best_cum, len) <= worst;
}

std::vector<BeamChoice> BeamSearch::Step(absl::Span<const double* const> rows, int vocab,
                                         const TerminalFn& terminal) {
  assert(!done_ && "BeamSearch::Step after done()");
  assert(static_cast<int>(rows.size()) == num_live());
  assert(vocab >= 1);
  const int beams = options_.num_beams;
  const int k = std::min(2 * beams, vocab);

  // Rule 2: top 2B over live beams × vocabulary — the top 2B of the union lie within each
  // row's own top 2B, so a bounded per-row selection and a small merge suffice.
  std::vector<Candidate> cands;
  cands.reserve(static_cast<size_t>(k) * rows.size());
  for (size_t b = 0; b < rows.size(); ++b) {
    SelectRow(rows[b], vocab, static_cast<int32_t>(b), running_[b].cum, k, &cands);
  }
  const size_t top = std::min(cands.size(), static_cast<size_t>(2 * beams));
  std::partial_sort(cands.begin(), cands.begin() + static_cast<std::ptrdiff_t>(top), cands.end(),
                    Better);

  const bool has_eos = !options_.ignore_eos && (options_.eos_id >= 0 || !options_.eog_ids.empty());
  const int new_len = steps_ + 1;
  std::vector<Running> next;
  std::vector<BeamChoice> choices;
  for (size_t r = 0; r < top && static_cast<int>(next.size()) < beams; ++r) {
    const Candidate& c = cands[r];
    // The rest of the sorted list is impossible too.
    if (options_.drop_impossible && c.cum == -std::numeric_limits<double>::infinity()) break;
    const int32_t parent_node = running_[static_cast<size_t>(c.beam)].node;
    const bool eos = has_eos && (c.token == options_.eos_id ||
                                 std::find(options_.eog_ids.begin(), options_.eog_ids.end(),
                                           c.token) != options_.eog_ids.end());
    // A terminal candidate ends its hypothesis exactly as EOS does, so the HF rules carry over.
    const bool stopped = !eos && terminal && terminal(c.beam, c.token);
    if (eos || stopped) {
      // EOS only finishes a hypothesis from the top B; below that it is dropped (HF).
      if (static_cast<int>(r) < beams) {
        Offer(AddNode(parent_node, c.token, c.logprob), c.cum, Normalize(c.cum, new_len), eos,
              stopped);
      }
      continue;
    }
    next.push_back({AddNode(parent_node, c.token, c.logprob), c.cum});
    choices.push_back({c.beam, c.token});
  }
  running_ = std::move(next);
  steps_ = new_len;
  ids_cache_.assign(running_.size(), {});
  ids_cached_.assign(running_.size(), false);

  // Rule 3 (after the step), then rule 4 at the length limit.
  if (running_.empty() || IsDone()) {
    done_ = true;
  } else if (steps_ >= options_.max_new_tokens) {
    for (const Running& r : running_) {
      Offer(r.node, r.cum, Normalize(r.cum, options_.max_new_tokens), /*eos=*/false,
            /*stopped=*/false);
    }
    done_ = true;
  }
  if (done_) {
    running_.clear();
    ids_cache_.clear();
    ids_cached_.clear();
    return {};
  }
  return choices;
}

const std::vector<int32_t>& BeamSearch::running_ids(int beam) const {
  assert(beam >= 0 && beam < num_live());
  const size_t b = static_cast<size_t>(beam);
  if (!ids_cached_[b]) {
    PathIds(running_[b].node, 0, &ids_cache_[b]);
    ids_cached_[b] = true;
  }
  return ids_cache_[b];
}

double BeamSearch::running_cum_logprob(int beam) const {
  assert(beam >= 0 && beam < num_live());
  return running_[static_cast<size_t>(beam)].cum;
}

std::vector<int> BeamSearch::RankedFinished() const {
  std::vector<int> order(finished_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    const FinishedHyp& x = finished_[static_cast<size_t>(a)];
    const FinishedHyp& y = finished_[static_cast<size_t>(b)];
    if (x.score != y.score) return x.score > y.score;
    return x.seq < y.seq;
  });
  return order;
}

int32_t BeamSearch::CertainNode() const {
  if (done_) {
    // Only an empty vocabulary step could leave nothing finished; Step asserts vocab >= 1.
    if (finished_.empty()) return 0;
    return finished_[static_cast<size_t>(RankedFinished()[0])].node;
  }
  int32_t u = running_.empty() ? finished_.front().node : running_.front().node;
  for (const Running& r : running_) u = Lca(u, r.node);
  for (const FinishedHyp& f : finished_) u = Lca(u, f.node);
  return u;
}

int BeamSearch::CertainPrefixLength() const { return nodes_[CertainNode()].depth; }

std::vector<int32_t> BeamSearch::CertainPrefix() const { return CertainPrefixFrom(0); }

std::vector<int32_t> BeamSearch::CertainPrefixFrom(int start) const {
  std::vector<int32_t> ids;
  PathIds(CertainNode(), std::max(0, start), &ids);
  return ids;
}

BeamHypothesis BeamSearch::MakeHypothesis(const FinishedHyp& f) const {
  BeamHypothesis h;
  PathIds(f.node, 0, &h.ids);
  h.logprobs.resize(h.ids.size());
  int32_t node = f.node;
  for (size_t i = h.ids.size(); i > 0; --i) {
    h.logprobs[i - 1] = nodes_[node].logprob;
    node = nodes_[node].parent;
  }
  h.score = f.score;
  h.cum_logprob = f.cum;
  h.eos = f.eos;
  h.stopped = f.stopped;
  return h;
}

std::vector<BeamHypothesis> BeamSearch::Finished() const {
  std::vector<BeamHypothesis> out;
  for (int i : RankedFinished()) out.push_back(MakeHypothesis(finished_[static_cast<size_t>(i)]));
  return out;
}

std::vector<BeamHypothesis> BeamSearch::Results() const {
  assert(done_ && "BeamSearch::Results before done()");
  std::vector<BeamHypothesis> out = Finished();
  if (static_cast<int>(out.size()) > options_.num_return_sequences) {
    out.resize(static_cast<size_t>(options_.num_return_sequences));
  }
  return out;
}

}  // namespace textgen
