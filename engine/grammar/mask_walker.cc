#include "engine/grammar/mask_walker.h"

#include <algorithm>
#include <limits>
#include <utility>

namespace textgen::grammar_internal {
namespace {

// DFA states kept before the walker forgets all but the current path's.
constexpr size_t kMaxStates = 8192;  // ~1 KiB each (the transition table)

bool Empty(const ByteSet& s) { return (s[0] | s[1] | s[2] | s[3]) == 0; }

}  // namespace

MaskWalker::MaskWalker(const CompiledGrammar& compiled)
    : compiled_(compiled),
      vocab_(*compiled.vocab()),
      expander_(compiled.grammar(), compiled.limits().max_stack_depth) {}

int32_t MaskWalker::Intern(std::vector<Stack> stacks, bool end_ok, const ByteSet& follow) {
  std::vector<uint64_t>& key = key_scratch_;
  key.clear();
  key.push_back(static_cast<uint64_t>(bottom_) | (end_ok ? 2 : 0));
  key.insert(key.end(), follow.begin(), follow.end());
  for (const Stack& s : stacks) {
    key.push_back(s.size());
    key.insert(key.end(), s.begin(), s.end());
  }
  auto [it, inserted] = ids_.try_emplace(key, static_cast<int32_t>(states_.size()));
  if (!inserted) return it->second;
  State st;
  st.stacks = std::move(stacks);
  st.end_ok = end_ok;
  st.follow = follow;
  st.terminal = st.stacks.empty() && Empty(follow);
  st.next.reset(new int32_t[256]);
  std::fill(st.next.get(), st.next.get() + 256, -1);
  states_.push_back(std::move(st));
  return it->second;
}

int32_t MaskWalker::Transition(int32_t s, uint8_t b) {
  int32_t cached = states_[s].next[b];
  if (cached >= 0) return cached;
  ExpandResult r;
  expander_.Step(states_[s].stacks, b, bottom_, &r);
  std::vector<Stack>& stacks = r.stacks;
  stacks.erase(
      std::remove_if(stacks.begin(), stacks.end(), [](const Stack& x) { return x.empty(); }),
      stacks.end());
  Canonicalize(&stacks);
  int32_t id = Intern(std::move(stacks), r.complete || r.exited, r.exit_follow);
  states_[s].next[b] = id;
  return id;
}

void MaskWalker::Shrink(std::vector<int32_t>* path, int32_t depth) {
  std::vector<State> keep;
  for (int32_t d = 0; d <= depth; ++d) keep.push_back(std::move(states_[(*path)[d]]));
  states_.clear();
  ids_.clear();
  for (int32_t d = 0; d <= depth; ++d) {
    (*path)[d] = Intern(std::move(keep[d].stacks), keep[d].end_ok, keep[d].follow);
  }
}

std::unique_ptr<MaskEntry> MaskWalker::Run(const Stack& frames, bool whole, int32_t max_len,
                                           const std::vector<int32_t>* list,
                                           const std::vector<int32_t>* list_lcp) {
  bottom_ = whole ? Bottom::kWhole : Bottom::kUnknown;
  if (states_.size() > kMaxStates) {
    states_.clear();
    ids_.clear();
  }
  const int32_t n = list != nullptr ? static_cast<int32_t>(list->size()) : vocab_.num_sorted();
  auto index = [&](int32_t i) { return list != nullptr ? (*list)[i] : i; };
  auto lcp = [&](int32_t i) { return list != nullptr ? (*list_lcp)[i] : vocab_.lcp(i); };
  const int32_t path_len = std::min(vocab_.max_token_bytes(), max_len) + 1;
  std::vector<int32_t> st(path_len + 1);   // DFA state after d bytes of the current token
  std::vector<uint8_t> unc(path_len + 1);  // some path went on into the unknown frames
  st[0] = Intern({frames}, false, ByteSet{});
  unc[0] = 0;
  int32_t valid = 0;  // st[0..valid] hold for the current token's prefix

  std::vector<int32_t> accepted;
  auto entry = std::make_unique<MaskEntry>();
  for (int32_t i = 0; i < n;) {
    const int32_t t = index(i);
    const std::string_view bytes = vocab_.sorted_bytes(t);
    const int32_t len = static_cast<int32_t>(bytes.size());
    valid = std::min(valid, lcp(i));
    if (len > max_len) {
      ++i;
      continue;
    }
    int32_t d = valid;
    while (d < len && !states_[st[d]].terminal) {
      if (states_.size() > 2 * kMaxStates) Shrink(&st, d);
      const uint8_t b = static_cast<uint8_t>(bytes[d]);
      const int32_t from = st[d];
      st[d + 1] = Transition(from, b);
      unc[d + 1] = unc[d] | (ByteSetHas(states_[from].follow, b) ? 1 : 0);
      ++d;
    }
    valid = d;
    if (d == len) {
      const State& s = states_[st[d]];
      if (!s.stacks.empty() || s.end_ok) {
        accepted.push_back(vocab_.sorted_ids()[t]);
      } else if (unc[d]) {
        entry->uncertain.push_back(t);
      }
      ++i;
      continue;
    }
    // Terminal after d < len bytes: this token and every later one sharing those d bytes (and
    // longer than them) are uncertain if the path went into the unknown frames, else rejected.
    const bool uncertain = unc[d] != 0;
    ++i;
    if (uncertain) entry->uncertain.push_back(t);
    while (i < n && lcp(i) >= d) {
      const int32_t u = index(i);
      const int32_t ulen = static_cast<int32_t>(vocab_.sorted_bytes(u).size());
      if (ulen == d) break;  // ends exactly at the terminal state: classified normally
      if (uncertain && ulen <= max_len) entry->uncertain.push_back(u);
      ++i;
    }
  }
  // Dense bitset when that is smaller than the id list.
  const int32_t vocab_size = vocab_.size();
  if (static_cast<int64_t>(accepted.size()) * 32 > vocab_size) {
    entry->bits.assign((static_cast<size_t>(vocab_size) + 63) / 64, 0);
    for (int32_t id : accepted) entry->bits[id >> 6] |= uint64_t{1} << (id & 63);
  } else {
    std::sort(accepted.begin(), accepted.end());
    entry->ids = std::move(accepted);
  }
  return entry;
}

}  // namespace textgen::grammar_internal
