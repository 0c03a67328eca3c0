#include "engine/decoding/sampler.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <limits>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "engine/ops/simd.h"
#include "engine/ops/softmax.h"

namespace textgen {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// Masses this close to top_p (as a fraction of the total) count as reaching it: logits are
// floats, so a distribution meant as {0.5, 0.3, 0.2} sums its first two to 0.8 only up to
// ~1e-7, and an exact boundary must not be decided by that rounding.
constexpr double kTopPSlack = 1e-6;

// A 64-bit key that orders (value descending, index ascending) as plain unsigned integers, so
// selection runs on one compare of a contiguous array rather than an indirect comparator.
// `value` is not NaN.
uint64_t Key(float value, int64_t index) {
  uint32_t bits = std::bit_cast<uint32_t>(value + 0.0f);  // -0 becomes +0, an equal value
  // Flip negatives entirely and set the sign bit of positives: IEEE order becomes unsigned.
  bits = (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
  return (static_cast<uint64_t>(bits) << 32) | (0xFFFFFFFFu - static_cast<uint32_t>(index));
}

// sum of p[0, n) in double, in a fixed order (8 interleaved partial sums, then a fixed tree):
// independent chains run ~8x faster than one, and the order is part of what makes a seeded
// draw reproducible.
double Sum(const float* p, size_t n) {
  double a[8] = {};
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; ++k) a[k] += p[i + k];
  }
  for (; i < n; ++i) a[0] += p[i];
  return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}

// Keeps the entries j of ids/probs with keep(j), in their order. Branch-free: which entries
// survive a filter is unpredictable, and a mispredicted branch per token would dominate.
template <typename Pred>
void Compact(std::vector<int32_t>& ids, std::vector<float>& probs, Pred keep) {
  const bool with_probs = !probs.empty();
  size_t w = 0;
  for (size_t j = 0; j < ids.size(); ++j) {
    const bool k = keep(j);  // before the writes: w <= j, so they never clobber entry j early
    ids[w] = ids[j];
    if (with_probs) probs[w] = probs[j];
    w += k;
  }
  ids.resize(w);
  if (with_probs) probs.resize(w);
}

// Key() of a probability (>= +0): no sign to handle, so cheap enough for a pass over all ids.
inline uint64_t ProbKey(float p, size_t index) {
  return (static_cast<uint64_t>(std::bit_cast<uint32_t>(p) | 0x80000000u) << 32) |
         (0xFFFFFFFFu - static_cast<uint32_t>(index));
}

// The value a Key was made from.
float KeyFloat(uint64_t key) {
  uint32_t bits = static_cast<uint32_t>(key >> 32);
  bits = (bits & 0x80000000u) ? (bits & 0x7FFFFFFFu) : ~bits;  // undo Key's flip
  return std::bit_cast<float>(bits);
}
double KeyValue(uint64_t key) { return static_cast<double>(KeyFloat(key)); }
// The index a Key was made from.
int32_t KeyIndex(uint64_t key) {
  return static_cast<int32_t>(0xFFFFFFFFu - static_cast<uint32_t>(key & 0xFFFFFFFFu));
}

// Number of best keys that top-p keeps: the smallest m whose mass reaches `target` (keys of
// non-negative values). A quickselect that splits on mass instead of rank, so O(n) expected.
// On return keys[0..m) hold the kept keys and keys[m-1] is the smallest of them. If the keys'
// total (summed in this order) falls short of target, all are kept.
size_t TopPCount(std::vector<uint64_t>& keys, double target) {
  // Invariant: keys[0, lo) are kept and beat everything after them, their mass `acc` is below
  // target, keys[hi, n) are dropped, and the answer m is in (lo, hi].
  size_t lo = 0;
  size_t hi = keys.size();
  double acc = 0;
  while (hi - lo > 1) {
    const uint64_t a = keys[lo];
    const uint64_t b = keys[lo + (hi - lo) / 2];
    const uint64_t c = keys[hi - 1];
    const uint64_t pivot = std::max(std::min(a, b), std::min(std::max(a, b), c));  // median
    auto first = keys.begin() + lo;
    auto mid = std::partition(first, keys.begin() + hi, [&](uint64_t k) { return k > pivot; });
    std::iter_swap(mid, std::find(mid, keys.begin() + hi, pivot));  // keys are unique
    double upper = 0;
    for (auto it = first; it != mid; ++it) upper += KeyValue(*it);
    const size_t p = mid - keys.begin();
    if (acc + upper >= target) {
      hi = p;  // p > lo: an empty upper part has mass 0 and acc < target
    } else if (acc + upper + KeyValue(pivot) >= target) {
      return p + 1;
    } else {
      acc += upper + KeyValue(pivot);
      lo = p + 1;
    }
  }
  return hi;
}

// The smallest Key(probs[j], j) that top-p keeps (probs in [0, 1], unnormalized, target > 0);
// 0 (keep all) if their mass never reaches target. A histogram over the float bits (1/8 of an
// octave per bucket) finds the bucket where the mass crosses target in one pass, and only that
// bucket is selected from: a sort or even a quickselect over the whole vocabulary costs
// several times more, since top-p without top-k sees all of it.
uint64_t TopPBoundary(const std::vector<float>& probs, double target, std::vector<uint64_t>& keys) {
  constexpr int kBuckets = 1024;  // bits >> 20 of a float in [0, 1] is at most 0x3F8
  auto bucket = [](float p) {
    return std::min<uint32_t>(std::bit_cast<uint32_t>(p) >> 20, kBuckets - 1);
  };
  std::array<double, kBuckets> mass{};
  const size_t n = probs.size();
  for (const float p : probs) mass[bucket(p)] += p;
  double acc = 0;
  int b = kBuckets - 1;
  for (; b >= 0; --b) {
    if (acc + mass[b] >= target) break;
    acc += mass[b];
  }
  if (b < 0) return 0;
  keys.clear();
  for (size_t j = 0; j < n; ++j) {
    if (bucket(probs[j]) == static_cast<uint32_t>(b)) {
      keys.push_back(ProbKey(probs[j], j));
    }
  }
  const size_t m = TopPCount(keys, target - acc);
  return keys[m - 1];
}

// Selects the k best Key(logits[ids[j]], ids[j]), 1 <= k < ids.size(). Returns true with
// keys = exactly those k (in heap order), or false with keys[k - 1] = the k-th best.
bool SelectTopK(const std::vector<float>& logits, const std::vector<int32_t>& ids, size_t k,
                std::vector<uint64_t>& keys) {
  const size_t n = ids.size();
  if (k > 1024) {
    keys.resize(n);
    for (size_t j = 0; j < n; ++j) keys[j] = Key(logits[ids[j]], ids[j]);
    std::nth_element(keys.begin(), keys.begin() + (k - 1), keys.end(), std::greater<uint64_t>());
    return false;
  }
  // A min-heap of the best k so far: nearly every logit loses to the heap's smallest on one
  // float compare, so this is one cheap pass where nth_element would shuffle the whole row.
  keys.resize(k);
  for (size_t j = 0; j < k; ++j) keys[j] = Key(logits[ids[j]], ids[j]);
  std::make_heap(keys.begin(), keys.end(), std::greater<uint64_t>());
  float floor = KeyFloat(keys.front());
  for (size_t j = k; j < n; ++j) {
    const float x = logits[ids[j]];
    if (x < floor) continue;
    const uint64_t key = Key(x, ids[j]);
    if (key <= keys.front()) continue;
    std::pop_heap(keys.begin(), keys.end(), std::greater<uint64_t>());
    keys.back() = key;
    std::push_heap(keys.begin(), keys.end(), std::greater<uint64_t>());
    floor = KeyFloat(keys.front());
  }
  return true;
}

}  // namespace

absl::Status ValidateSamplingParams(const SamplingParams& p) {
  // Written as !(in range) so NaNs fail every check.
  if (!(p.temperature >= 0.0f && std::isfinite(p.temperature))) {
    return absl::InvalidArgumentError(
        absl::StrCat("temperature must be finite and >= 0 (0 = greedy), got ", p.temperature));
  }
  if (p.top_k < 0) {
    return absl::InvalidArgumentError(absl::StrCat("top_k must be >= 0 (0 = off), got ", p.top_k));
  }
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) {
    return absl::InvalidArgumentError(
        absl::StrCat("top_p must be in (0, 1] (1 = off), got ", p.top_p));
  }
  if (!(p.min_p >= 0.0f && p.min_p < 1.0f)) {
    return absl::InvalidArgumentError(
        absl::StrCat("min_p must be in [0, 1) (0 = off), got ", p.min_p));
  }
  if (!(p.repetition_penalty > 0.0f && std::isfinite(p.repetition_penalty))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "repetition_penalty must be finite and > 0 (1 = off), got ", p.repetition_penalty));
  }
  return absl::OkStatus();
}

void ApplyRepetitionPenalty(float penalty, absl::Span<const int32_t> context,
                            absl::Span<float> logits) {
  if (penalty == 1.0f || context.empty()) return;
  const size_t vocab = logits.size();
  // A bitmap (4 KB for 32000 ids) dedups in O(context + vocab/64) without sorting the context.
  std::vector<uint64_t> seen((vocab + 63) / 64, 0);
  for (const int32_t id : context) {
    if (id < 0 || static_cast<size_t>(id) >= vocab) continue;
    uint64_t& word = seen[id / 64];
    const uint64_t bit = uint64_t{1} << (id % 64);
    if (word & bit) continue;
    word |= bit;
    float& l = logits[id];
    l = l > 0.0f ? l / penalty : l * penalty;
  }
}

double UniformDouble(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

Sampler::Sampler(const SamplingParams& params) : params_(params) {
  uint64_t seed;
  if (params.seed.has_value()) {
    seed = *params.seed;
  } else {
    std::random_device rd;
    seed = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  }
  rng_.seed(seed);
}

int32_t Sampler::Filter(absl::Span<const float> logits, absl::Span<const int32_t> context,
                        Scratch& s) const {
  const int64_t vocab = static_cast<int64_t>(logits.size());
  s.logits.assign(logits.begin(), logits.end());
  ApplyRepetitionPenalty(params_.repetition_penalty, context, absl::MakeSpan(s.logits));
  auto argmax = [&] { return static_cast<int32_t>(ops::ArgMax(s.logits.data(), vocab)); };
  if (params_.temperature == 0.0f) return argmax();

  // Candidates are the finite logits, kept in id order; every later filter preserves that
  // order, which makes the draw independent of how the selection algorithms permute things.
  size_t n = 0;
  float max = -kInf;
  bool has_pos_inf = false;
  // x * x is finite for every logit iff all are (and |x| < 1.8e19): one vectorized pass
  // selects the common case, where every id is a candidate.
  if (std::isfinite(ops::simd::Dot(s.logits.data(), s.logits.data(), vocab))) {
    n = static_cast<size_t>(vocab);
    s.ids.resize(n);
    std::iota(s.ids.begin(), s.ids.end(), 0);
    max = ops::simd::Max(s.logits.data(), vocab);
  } else {
    s.ids.resize(vocab);
    for (int64_t i = 0; i < vocab; ++i) {
      const float x = s.logits[i];
      s.ids[n] = static_cast<int32_t>(i);
      n += (x > -kInf) & (x < kInf);  // NaN fails both
      has_pos_inf |= (x == kInf);
      max = x > max ? x : max;
    }
  }
  s.ids.resize(n);
  if (n == 0 || has_pos_inf) return argmax();

  s.probs.clear();  // Compact() leaves probs alone while empty
  const size_t k = static_cast<size_t>(params_.top_k);
  if (k > 0 && k < n) {
    // Exactly k survive: the keys are unique, so the k-th largest splits them cleanly and
    // boundary ties go to the lower ids.
    if (SelectTopK(s.logits, s.ids, k, s.keys)) {
      // s.keys holds exactly the k best: take their ids instead of filtering the whole row.
      s.ids.resize(k);
      for (size_t j = 0; j < k; ++j) s.ids[j] = KeyIndex(s.keys[j]);
      std::sort(s.ids.begin(), s.ids.end());
    } else {
      const uint64_t kth = s.keys[k - 1];
      const float kth_value = KeyFloat(kth);
      Compact(s.ids, s.probs, [&](size_t j) {
        const float x = s.logits[s.ids[j]];
        return x > kth_value || (x == kth_value && Key(x, s.ids[j]) >= kth);
      });
    }
    n = s.ids.size();
  }

  // Softmax of logits / T, unnormalized: the max token gets exactly exp(0) = 1. Shifting
  // before dividing keeps a tiny T from overflowing (the shifted values are <= 0).
  // Multiplying by 1/T (within an ulp of dividing) runs several times faster than a scalar
  // divide per token; a T so small that 1/T overflows keeps the division.
  const float t = params_.temperature;
  const float inv_t = 1.0f / t;
  const bool use_inv = std::isfinite(inv_t);
  s.probs.resize(n);
  const bool dense = n == static_cast<size_t>(vocab);  // ids are 0..vocab-1: no gather
  for (size_t j = 0; j < n; ++j) {
    const float x = s.logits[dense ? j : s.ids[j]] - max;
    s.probs[j] = use_inv ? x * inv_t : x / t;
  }
  const double total = ops::simd::ExpShiftSum(s.probs.data(), static_cast<int64_t>(n), 0.0f);

  // min-p runs before top-p here though the contract orders it after: both keep a prefix of
  // the same ranking, so the result is the shorter prefix either way, and min-p is one cheap
  // pass that usually shrinks what top-p must select from. Top-p still measures its mass
  // against the total before min-p, as the contract order implies.
  if (params_.min_p > 0.0f) {
    const double floor = static_cast<double>(params_.min_p);  // min_p * p_max, p_max = 1
    Compact(s.ids, s.probs, [&](size_t j) { return static_cast<double>(s.probs[j]) >= floor; });
  }
  if (params_.top_p < 1.0f) {
    const double target = (static_cast<double>(params_.top_p) - kTopPSlack) * total;
    double left = total;
    if (params_.min_p > 0.0f) {
      left = Sum(s.probs.data(), s.probs.size());
    }
    if (target <= 0) {
      // Only the best token (max logit, lowest id) is kept.
      const int64_t best = std::max_element(s.probs.begin(), s.probs.end()) - s.probs.begin();
      const int32_t id = s.ids[best];
      s.ids.assign(1, id);
      s.probs.assign(1, 1.0f);
    } else if (left >= target) {
      // Otherwise min-p already cut inside the top-p prefix and everything left stays.
      const uint64_t last = TopPBoundary(s.probs, target, s.keys);
      std::vector<float>& probs = s.probs;
      Compact(s.ids, s.probs, [&](size_t j) { return ProbKey(probs[j], j) >= last; });
    }
  }
  return -1;
}

int32_t Sampler::Sample(absl::Span<const float> logits, absl::Span<const int32_t> context) {
  const int32_t decided = Filter(logits, context, scratch_);
  if (params_.temperature == 0.0f) return decided;
  const double u = UniformDouble(rng_);
  if (decided >= 0) return decided;
  const std::vector<int32_t>& ids = scratch_.ids;
  const std::vector<float>& probs = scratch_.probs;
  const size_t n = ids.size();
  // Inverse CDF in candidate order, by blocks: whole blocks are skipped on their sums, and
  // only the block where the cumulative mass passes u * total is walked token by token.
  const double target = u * Sum(probs.data(), n);
  constexpr size_t kBlock = 64;
  double cum = 0;
  for (size_t b = 0; b < n; b += kBlock) {
    const size_t len = std::min(kBlock, n - b);
    const double block = Sum(probs.data() + b, len);
    if (!(cum + block > target)) {
      cum += block;
      continue;
    }
    size_t last_positive = b;
    for (size_t j = b; j < b + len; ++j) {
      if (probs[j] <= 0.0f) continue;  // underflowed to 0: never drawn
      cum += probs[j];
      if (target < cum) return ids[j];
      last_positive = j;
    }
    return ids[last_positive];  // the block's sum and its running sum differ in rounding
  }
  // u * total rounded up to (or past) the sum of the blocks: the last token that can be drawn.
  for (size_t j = n; j-- > 0;) {
    if (probs[j] > 0.0f) return ids[j];
  }
  return ids[0];
}

std::vector<double> Sampler::Distribution(absl::Span<const float> logits,
                                          absl::Span<const int32_t> context) const {
  Scratch s;
  std::vector<double> dist(logits.size(), 0.0);
  const int32_t decided = Filter(logits, context, s);
  if (decided >= 0) {
    dist[decided] = 1.0;
    return dist;
  }
  const double total = Sum(s.probs.data(), s.probs.size());
  for (size_t j = 0; j < s.ids.size(); ++j) dist[s.ids[j]] = s.probs[j] / total;
  return dist;
}

}  // namespace textgen
