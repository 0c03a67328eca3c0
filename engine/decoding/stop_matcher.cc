#include "engine/decoding/stop_matcher.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace textgen {
namespace {

// Structural UTF-8 check (lead/continuation bytes, no overlongs, surrogates or > U+10FFFF).
bool IsValidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    size_t len;
    uint32_t cp;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + len > s.size()) return false;
    for (size_t k = 1; k < len; ++k) {
      const unsigned char cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

}  // namespace

absl::Status ValidateStops(const std::vector<std::string>& stops) {
  if (stops.size() > kMaxStops) {
    return absl::InvalidArgumentError(
        absl::StrCat("stop must have at most ", kMaxStops, " entries, got ", stops.size()));
  }
  for (size_t i = 0; i < stops.size(); ++i) {
    if (stops[i].size() > kMaxStopBytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "stop[", i, "] must be at most ", kMaxStopBytes, " bytes, got ", stops[i].size()));
    }
    if (!IsValidUtf8(stops[i])) {
      return absl::InvalidArgumentError(absl::StrCat("stop[", i, "] is not valid UTF-8"));
    }
  }
  return absl::OkStatus();
}

StopMatcher::StopMatcher(std::vector<std::string> stops) {
  for (std::string& s : stops) {
    if (!s.empty()) stops_.push_back(std::move(s));
  }
}

std::string StopMatcher::Push(std::string_view text) {
  if (stopped_) return "";
  pending_.append(text);
  // pending_ held no complete stop before this push, so any match ends in the new text; a
  // plain find per stop gives each stop's earliest (hence earliest-ending) occurrence.
  size_t best_end = std::string::npos;
  size_t best_start = 0;
  const std::string* best = nullptr;
  for (const std::string& stop : stops_) {
    const size_t pos = pending_.find(stop);
    if (pos == std::string::npos) continue;
    const size_t end = pos + stop.size();
    if (best == nullptr || end < best_end || (end == best_end && pos < best_start)) {
      best = &stop;
      best_end = end;
      best_start = pos;
    }
  }
  if (best != nullptr) {
    stopped_ = true;
    matched_ = *best;
    std::string out = pending_.substr(0, best_start);
    pending_.clear();
    return out;
  }
  // Hold back the longest suffix that is a proper prefix of some stop: the earliest place a
  // stop could still begin. Anything shorter could emit the start of a stop; anything longer
  // would delay text that can no longer be part of one.
  size_t hold = 0;
  for (const std::string& stop : stops_) {
    const size_t max_len = std::min(stop.size() - 1, pending_.size());
    for (size_t len = max_len; len > hold; --len) {
      if (std::string_view(pending_).substr(pending_.size() - len) ==
          std::string_view(stop).substr(0, len)) {
        hold = len;
        break;
      }
    }
  }
  std::string out = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return out;
}

std::string StopMatcher::Flush() {
  if (stopped_) return "";
  return std::exchange(pending_, std::string());
}

}  // namespace textgen
