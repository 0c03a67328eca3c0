#include "engine/grammar/mask_cache.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "engine/grammar/mask_walker.h"

namespace textgen::grammar_internal {
namespace {

using EdgeKind = Grammar::EdgeKind;

constexpr int kKeyFrames = 2;  // top frames a key holds

// Sets the tokens of `uncertain` (sorted-order indices) that `stack` accepts whole.
void CheckUncertain(const CompiledGrammar& compiled, const Stack& stack,
                    const std::vector<int32_t>& uncertain, TokenBitmask* mask) {
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
      Canonicalize(&r.stacks);
      levels[d + 1] = std::move(r.stacks);
      ++d;
    }
    valid = d;
    prev = bytes;
    if (d == len && !levels[len].empty()) mask->Set(id);
  }
}

void OrEntry(const MaskEntry& e, TokenBitmask* mask) {
  if (!e.bits.empty()) {
    absl::Span<uint64_t> w = mask->words();
    for (size_t i = 0; i < w.size(); ++i) w[i] |= e.bits[i];
  } else {
    for (int32_t id : e.ids) mask->Set(id);
  }
}

}  // namespace

MaskCache::MaskCache(const CompiledGrammar& compiled) : compiled_(compiled) {
  const GrammarVocab* vocab = compiled.vocab();
  if (vocab == nullptr) return;
  std::string_view prev;
  for (int32_t i = 0; i < vocab->num_sorted(); ++i) {
    std::string_view b = vocab->sorted_bytes(i);
    if (static_cast<int32_t>(b.size()) <= kClampBytes) continue;
    size_t l = 0;
    while (l < prev.size() && l < b.size() && prev[l] == b[l]) ++l;
    long_tokens_.push_back(i);
    long_lcp_.push_back(static_cast<int32_t>(l));
    prev = b;
  }
}

MaskCache::~MaskCache() = default;

bool MaskCache::NeedsClamp(const Stack& stack) const {
  const auto& nodes = compiled_.grammar().nodes();
  const size_t first = stack.size() > kKeyFrames ? stack.size() - kKeyFrames : 0;
  for (size_t i = first; i + 1 < stack.size(); ++i) {
    Frame f = Frame::Unpack(stack[i]);
    if (nodes[f.node].rep_rule < 0) continue;
    if (f.rem_min > kClampBytes || (f.rem_max > kClampBytes && f.rem_max != Frame::kInf)) {
      return true;
    }
  }
  return false;
}

std::vector<uint64_t> MaskCache::MakeKey(const Stack& stack, Part part) const {
  const auto& nodes = compiled_.grammar().nodes();
  const size_t first = stack.size() > kKeyFrames ? stack.size() - kKeyFrames : 0;
  std::vector<uint64_t> key;
  key.reserve(2 + kKeyFrames);
  key.push_back(static_cast<uint64_t>(part));
  key.push_back(first == 0 ? 1 : 0);  // the whole stack
  for (size_t i = first; i < stack.size(); ++i) {
    Frame f = Frame::Unpack(stack[i]);
    if (part == Part::kShort && nodes[f.node].rep_rule >= 0) {
      // "More than any short token can use": exact for tokens of <= kClampBytes bytes.
      if (f.rem_min > kClampBytes) f.rem_min = Frame::kSticky;
      if (f.rem_max > kClampBytes) f.rem_max = Frame::kInf;
    }
    key.push_back(f.Pack());
  }
  return key;
}

const MaskEntry* MaskCache::Get(const Stack& stack, Part part) {
  std::vector<uint64_t> key = MakeKey(stack, part);
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
  Stack frames(key.begin() + 2, key.end());
  if (walker_ == nullptr) walker_ = std::make_unique<MaskWalker>(compiled_);
  switch (part) {
    case Part::kAll:
      return walker_->Run(frames, whole, std::numeric_limits<int32_t>::max(), nullptr, nullptr);
    case Part::kShort:
      return walker_->Run(frames, whole, kClampBytes, nullptr, nullptr);
    case Part::kLong:
      return walker_->Run(frames, whole, std::numeric_limits<int32_t>::max(), &long_tokens_,
                          &long_lcp_);
  }
  return nullptr;
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
    if (cache.NeedsClamp(stack)) {
      for (MaskCache::Part part : {MaskCache::Part::kShort, MaskCache::Part::kLong}) {
        const MaskEntry* e = cache.Get(stack, part);
        OrEntry(*e, mask);
        CheckUncertain(compiled, stack, e->uncertain, mask);
      }
    } else {
      const MaskEntry* e = cache.Get(stack, MaskCache::Part::kAll);
      OrEntry(*e, mask);
      CheckUncertain(compiled, stack, e->uncertain, mask);
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
