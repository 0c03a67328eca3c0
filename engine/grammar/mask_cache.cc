#include "engine/grammar/mask_cache.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "engine/grammar/grammar_vocab.h"
#include "engine/grammar/mask_walker.h"

namespace textgen::grammar_internal {
namespace {

using EdgeKind = Grammar::EdgeKind;

constexpr int kKeyFrames = 2;  // top frames a key holds

// Sets the tokens of `uncertain` (sorted-order indices) that `stack` accepts whole.
void CheckUncertain(const CompiledGrammar& compiled, const Stack& stack,
                    const std::vector<int32_t>& uncertain, int32_t max_len, TokenBitmask* mask) {
  if (uncertain.empty()) return;
  const GrammarVocab& vocab = *compiled.vocab();
  Expander ex(compiled.grammar(), compiled.limits().max_stack_depth);
  std::vector<std::vector<Stack>> levels(vocab.max_token_bytes() + 1);
  levels[0].push_back(stack);
  std::string_view prev;
  int32_t valid = 0;
  for (int32_t u : uncertain) {
    const int32_t id = vocab.sorted_ids()[u];
    if (mask->Test(id)) continue;
    const std::string_view bytes = vocab.sorted_bytes(u);
    if (static_cast<int32_t>(bytes.size()) > max_len) continue;
    int32_t common = 0;
    while (common < valid && common < static_cast<int32_t>(bytes.size()) &&
           prev[common] == bytes[common]) {
      ++common;
    }
    int32_t d = common;
    const int32_t len = static_cast<int32_t>(bytes.size());
    while (d < len && !levels[d].empty()) {
      ExpandResult r;
      ex.Step(levels[d], static_cast<uint8_t>(bytes[d]), Bottom::kWhole, &r);
      Canonicalize(&r.stacks, compiled.limits().max_stacks);
      levels[d + 1] = std::move(r.stacks);
      ++d;
    }
    valid = d;
    prev = bytes;
    if (d == len && !levels[len].empty()) mask->Set(id);
  }
}

// ORs the entry's accepted tokens into `mask`; only those of at most `max_len` bytes when
// max_len <= kLongTokenBytes.
void OrEntry(const MaskEntry& e, const GrammarVocab& vocab, int32_t max_len, TokenBitmask* mask) {
  const bool filter = max_len < GrammarVocab::kLongTokenBytes;
  absl::Span<uint64_t> w = mask->words();
  if (!e.bits.empty()) {
    if (filter) {
      const std::vector<uint64_t>& keep = vocab.tokens_up_to(max_len);
      for (size_t i = 0; i < w.size(); ++i) w[i] |= e.bits[i] & keep[i];
    } else {
      for (size_t i = 0; i < w.size(); ++i) w[i] |= e.bits[i];
    }
  } else {
    for (int32_t id : e.ids) {
      if (!filter || vocab.token_length(id) <= max_len) mask->Set(id);
    }
  }
}

}  // namespace

MaskCache::MaskCache(const CompiledGrammar& compiled) : compiled_(compiled) {}

MaskCache::~MaskCache() = default;

MaskCache::Plan MaskCache::MakePlan(const Stack& stack) const {
  // The top frame waits for input, so only the frame below it can be a repeat frame.
  if (stack.size() < 2) return {};
  const Frame f = Frame::Unpack(stack[stack.size() - 2]);
  if (compiled_.grammar().nodes()[f.node].rep_rule < 0) return {};
  if (f.rem_max == Frame::kInf && f.rem_min <= kClampBytes) return {};  // counts do not vary
  Plan plan;
  plan.split = true;
  plan.threshold =
      f.rem_max == Frame::kInf ? kClampBytes : std::min<int32_t>(f.rem_max, kClampBytes);
  return plan;
}

std::vector<uint64_t> MaskCache::MakeKey(const Stack& stack, Part part, int32_t threshold) const {
  const auto& nodes = compiled_.grammar().nodes();
  const size_t first = stack.size() > kKeyFrames ? stack.size() - kKeyFrames : 0;
  std::vector<uint64_t> key;
  key.reserve(3 + kKeyFrames);
  key.push_back(static_cast<uint64_t>(part));
  key.push_back(first == 0 ? 1 : 0);  // the whole stack
  key.push_back(part == Part::kLong ? static_cast<uint64_t>(threshold) : 0);
  for (size_t i = first; i < stack.size(); ++i) {
    Frame f = Frame::Unpack(stack[i]);
    if (part == Part::kShort && nodes[f.node].rep_rule >= 0) {
      // Exact for tokens of at most min(rem_max, kClampBytes) bytes, which are all it serves.
      if (f.rem_min > kClampBytes) f.rem_min = Frame::kSticky;
      f.rem_max = Frame::kInf;
    }
    key.push_back(f.Pack());
  }
  return key;
}

const MaskEntry* MaskCache::Get(const Stack& stack, Part part, int32_t threshold) {
  std::vector<uint64_t> key = MakeKey(stack, part, threshold);
  {
    std::shared_lock<std::shared_mutex> lock(mu_);
    auto it = entries_.find(key);
    if (it != entries_.end()) {
      hits_.fetch_add(1, std::memory_order_relaxed);
      return it->second.get();
    }
  }
  std::lock_guard<std::mutex> compute_lock(compute_mu_);
  {
    std::shared_lock<std::shared_mutex> lock(mu_);
    auto it = entries_.find(key);
    if (it != entries_.end()) {
      hits_.fetch_add(1, std::memory_order_relaxed);
      return it->second.get();
    }
  }
  misses_.fetch_add(1, std::memory_order_relaxed);
  std::unique_ptr<MaskEntry> entry = Compute(key);
  const MaskEntry* result = entry.get();
  std::unique_lock<std::shared_mutex> lock(mu_);
  bytes_ += entry->Bytes();
  entries_.emplace(std::move(key), std::move(entry));
  return result;
}

std::unique_ptr<MaskEntry> MaskCache::Compute(const std::vector<uint64_t>& key) {
  const Part part = static_cast<Part>(key[0]);
  const bool whole = key[1] != 0;
  const int32_t threshold = static_cast<int32_t>(key[2]);
  Stack frames(key.begin() + 3, key.end());
  if (walker_ == nullptr) walker_ = std::make_unique<MaskWalker>(compiled_);
  const GrammarVocab& vocab = *compiled_.vocab();
  TokenList list;
  list.lcp = vocab.lcp_array().data();
  list.size = vocab.num_sorted();
  list.max_len = std::numeric_limits<int32_t>::max();
  if (part == Part::kShort) list.max_len = kClampBytes;
  if (part == Part::kLong) {
    list.min_len = threshold + 1;
    if (threshold == kClampBytes) {  // the precomputed list of long tokens
      list.index = vocab.long_tokens().data();
      list.lcp = vocab.long_lcp().data();
      list.next_smaller = vocab.long_next_smaller().data();
      list.size = static_cast<int32_t>(vocab.long_tokens().size());
    }
  }
  if (list.next_smaller == nullptr) list.next_smaller = vocab.next_smaller_array().data();
  return walker_->Run(frames, whole, list);
}

CompiledGrammar::CacheStats MaskCache::stats() const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  CompiledGrammar::CacheStats s;
  s.entries = static_cast<int64_t>(entries_.size());
  s.bytes = bytes_;
  s.hits = hits_.load(std::memory_order_relaxed);
  s.misses = misses_.load(std::memory_order_relaxed);
  return s;
}

void FillMask(const CompiledGrammar& compiled, const MatcherState& state, TokenBitmask* mask) {
  mask->Clear();
  if (state.eog) return;
  const Grammar& g = compiled.grammar();
  const GrammarVocab& vocab = *compiled.vocab();
  MaskCache& cache = compiled.mask_cache();
  bool any_not_token = false;
  for (const Stack& stack : state.stacks) {
    if (stack.empty()) continue;
    const MaskCache::Plan plan = cache.MakePlan(stack);
    if (plan.split) {
      const MaskEntry* e = cache.Get(stack, MaskCache::Part::kShort, 0);
      OrEntry(*e, vocab, plan.threshold, mask);
      CheckUncertain(compiled, stack, e->uncertain, plan.threshold, mask);
      const MaskEntry* l = cache.Get(stack, MaskCache::Part::kLong, plan.threshold);
      OrEntry(*l, vocab, std::numeric_limits<int32_t>::max(), mask);
      CheckUncertain(compiled, stack, l->uncertain, std::numeric_limits<int32_t>::max(), mask);
    } else {
      const MaskEntry* e = cache.Get(stack, MaskCache::Part::kAll, 0);
      OrEntry(*e, vocab, std::numeric_limits<int32_t>::max(), mask);
      CheckUncertain(compiled, stack, e->uncertain, std::numeric_limits<int32_t>::max(), mask);
    }
    if (!g.has_token_edges()) continue;
    const Grammar::Node& node = g.nodes()[Frame::Unpack(stack.back()).node];
    for (uint32_t i = node.edge_begin; i < node.edge_end; ++i) {
      const Grammar::Edge& e = g.edges()[i];
      if (e.kind == EdgeKind::kToken) mask->Set(compiled.token_ids()[e.arg]);
      if (e.kind == EdgeKind::kNotToken) any_not_token = true;
    }
  }
  if (any_not_token) {
    // !<[x]>: any token but x (and never EOG). Elements excluding different ids on different
    // stacks together allow every id.
    std::vector<int32_t> excluded;
    for (const Stack& stack : state.stacks) {
      if (stack.empty()) continue;
      const Grammar::Node& node = g.nodes()[Frame::Unpack(stack.back()).node];
      for (uint32_t i = node.edge_begin; i < node.edge_end; ++i) {
        const Grammar::Edge& e = g.edges()[i];
        if (e.kind == EdgeKind::kNotToken) excluded.push_back(compiled.token_ids()[e.arg]);
      }
    }
    std::sort(excluded.begin(), excluded.end());
    excluded.erase(std::unique(excluded.begin(), excluded.end()), excluded.end());
    TokenBitmask others(vocab.size());
    others.SetAll();
    if (excluded.size() == 1) others.Reset(excluded[0]);
    for (int32_t id : vocab.eog_ids()) others.Reset(id);
    absl::Span<uint64_t> w = mask->words();
    absl::Span<const uint64_t> o = others.words();
    for (size_t i = 0; i < w.size(); ++i) w[i] |= o[i];
  }
  if (!state.stacks.empty() && state.stacks.front().empty()) {
    for (int32_t id : vocab.eog_ids()) mask->Set(id);
  }
}

}  // namespace textgen::grammar_internal
