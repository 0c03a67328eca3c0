#include "engine/grammar/mask_walker.h"

#include <algorithm>
#include <limits>
#include <utility>

namespace textgen::grammar_internal {
namespace {

// DFA states kept before the walker forgets all but the current path's (~1 KiB each).
constexpr size_t kMaxStates = 8192;

bool Empty(const ByteSet& s) { return (s[0] | s[1] | s[2] | s[3]) == 0; }

}  // namespace

MaskWalker::MaskWalker(const CompiledGrammar& compiled)
    : compiled_(compiled),
      vocab_(*compiled.vocab()),
      expander_(compiled.grammar(), compiled.limits().max_stack_depth) {}

void MaskWalker::Clear() {
  stacks_.clear();
  flags_.clear();
  follow_.clear();
  next_.clear();
  ids_.clear();
}

int32_t MaskWalker::Intern(std::vector<Stack> stacks, bool end_ok, const ByteSet& follow) {
  std::vector<uint64_t>& key = key_scratch_;
  key.clear();
  key.push_back(static_cast<uint64_t>(bottom_) | (end_ok ? 2 : 0));
  key.insert(key.end(), follow.begin(), follow.end());
  for (const Stack& s : stacks) {
    key.push_back(s.size());
    key.insert(key.end(), s.begin(), s.end());
  }
  auto [it, inserted] = ids_.try_emplace(key, static_cast<int32_t>(stacks_.size()));
  if (!inserted) return it->second;
  uint8_t flags = 0;
  if (stacks.empty() && Empty(follow)) flags |= kTerminal;
  if (!Empty(follow)) flags |= kFollow;
  if (!stacks.empty() || end_ok) flags |= kAlive;
  if (end_ok) flags |= kEndOk;
  stacks_.push_back(std::move(stacks));
  flags_.push_back(flags);
  follow_.push_back(follow);
  next_.resize(next_.size() + 256, -1);
  return it->second;
}

int32_t MaskWalker::Transition(int32_t s, uint8_t b) {
  int32_t cached = next_[static_cast<size_t>(s) * 256 + b];
  if (cached >= 0) return cached >> 4;
  ExpandResult r;
  expander_.Step(stacks_[s], b, bottom_, &r);
  std::vector<Stack>& stacks = r.stacks;
  stacks.erase(
      std::remove_if(stacks.begin(), stacks.end(), [](const Stack& x) { return x.empty(); }),
      stacks.end());
  Canonicalize(&stacks, compiled_.limits().max_stacks);
  int32_t id = Intern(std::move(stacks), r.complete || r.exited, r.exit_follow);
  next_[static_cast<size_t>(s) * 256 + b] = (id << 4) | flags_[id];  // see Run
  return id;
}

void MaskWalker::Shrink(std::vector<int32_t>* path, int32_t depth) {
  struct Saved {
    std::vector<Stack> stacks;
    bool end_ok;
    ByteSet follow;
  };
  std::vector<Saved> keep;
  for (int32_t d = 0; d <= depth; ++d) {
    int32_t s = (*path)[d] >> 4 & kIdMask;
    keep.push_back(Saved{stacks_[s], (flags_[s] & kEndOk) != 0, follow_[s]});
  }
  Clear();
  for (int32_t d = 0; d <= depth; ++d) {
    int32_t id = Intern(std::move(keep[d].stacks), keep[d].end_ok, keep[d].follow);
    (*path)[d] = (id << 4) | flags_[id] | ((*path)[d] & kUnc);
  }
}

std::unique_ptr<MaskEntry> MaskWalker::Run(const Stack& frames, bool whole, const TokenList& list) {
  bottom_ = whole ? Bottom::kWhole : Bottom::kUnknown;
  if (stacks_.size() > kMaxStates) Clear();
  const int32_t n = list.size;
  const int32_t* index = list.index;
  const int32_t* lcp = list.lcp;
  const int32_t* next_smaller = list.next_smaller;
  const std::vector<int32_t>& sorted_ids = vocab_.sorted_ids();
  const int32_t path_len = std::min(vocab_.max_token_bytes(), list.max_len) + 1;
  // st[d]: the DFA state after d bytes of the current token (packed as in next_), plus kUnc if
  // some path went on into the unknown frames.
  std::vector<int32_t> st(path_len + 1);
  const int32_t start = Intern({frames}, false, ByteSet{});
  st[0] = (start << 4) | flags_[start];
  int32_t valid = 0;  // st[0..valid] hold for the current token's prefix

  const int32_t vocab_size = vocab_.size();
  std::vector<uint64_t> bits((static_cast<size_t>(vocab_size) + 63) / 64, 0);
  int64_t num_accepted = 0;
  auto entry = std::make_unique<MaskEntry>();
  // Raw pointers into the DFA tables (re-read after a transition grows them): byte stores to
  // `unc` could alias anything, so the compiler would reload vectors' data pointers each step.
  const int32_t* next = next_.data();
  const char* data = vocab_.sorted_data();
  const uint32_t* offsets = vocab_.sorted_offsets();
  for (int32_t i = 0; i < n;) {
    const int32_t t = index != nullptr ? index[i] : i;
    const char* bytes = data + offsets[t];
    const int32_t len = static_cast<int32_t>(offsets[t + 1] - offsets[t]);
    valid = std::min(valid, lcp[i]);
    if (len > list.max_len || len < list.min_len) {
      ++i;
      continue;
    }
    int32_t d = valid;
    // st[d] packs the state id (<< 4), its flags, and kUnc: the transition table stores targets
    // packed the same way, so a step is one load (no dependent load of the target's flags).
    while (d < len && !(st[d] & kTerminal)) {
      const uint8_t b = static_cast<uint8_t>(bytes[d]);
      const int32_t cur = st[d];
      const int32_t from = cur >> 4 & kIdMask;
      const int32_t to = next[static_cast<size_t>(from) * 256 + b];
      if (to < 0) {
        if (stacks_.size() > 2 * kMaxStates) {
          Shrink(&st, d);
        } else {
          Transition(from, b);
        }
        next = next_.data();
        continue;
      }
      int32_t unc = cur & kUnc;
      if ((cur & kFollow) && ByteSetHas(follow_[from], b)) unc = kUnc;
      st[d + 1] = to | unc;
      ++d;
    }
    valid = d;
    if (d == len) {
      if (st[d] & kAlive) {
        const int32_t id = sorted_ids[t];
        bits[id >> 6] |= uint64_t{1} << (id & 63);
        ++num_accepted;
      } else if (st[d] & kUnc) {
        entry->uncertain.push_back(t);
      }
      ++i;
      continue;
    }
    // Nothing goes on after d < len bytes: this token and every later one sharing those bytes
    // are uncertain if a path went into the unknown frames, else rejected (skipped in jumps).
    if (st[d] & kUnc) {
      entry->uncertain.push_back(t);
      for (++i; i < n && lcp[i] >= d; ++i) {
        const int32_t u = index != nullptr ? index[i] : i;
        const int32_t ulen = static_cast<int32_t>(offsets[u + 1] - offsets[u]);
        if (ulen >= list.min_len && ulen <= list.max_len) entry->uncertain.push_back(u);
      }
    } else {
      ++i;
      while (i < n && lcp[i] >= d) i = next_smaller[i];
    }
  }
  // Dense bitset when that is smaller than the id list.
  if (num_accepted * 32 > vocab_size) {
    entry->bits = std::move(bits);
  } else {
    for (size_t w = 0; w < bits.size(); ++w) {
      for (uint64_t x = bits[w]; x != 0; x &= x - 1) {
        entry->ids.push_back(static_cast<int32_t>(w * 64 + __builtin_ctzll(x)));
      }
    }
  }
  return entry;
}

}  // namespace textgen::grammar_internal
