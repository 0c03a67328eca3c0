#include "state/redis_url.h"

#include <cstdint>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace textgen::state {
namespace {

constexpr absl::string_view kScheme = "redis://";

absl::Status Bad(absl::string_view url, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat("Redis URL \"", std::string(url),
                                                 "\": ", std::string(problem),
                                                 " (expected redis://HOST[:PORT][/DB])"));
}

bool AllDigits(absl::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

}  // namespace

std::string RedisUrl::address() const {
  const bool v6 = host.find(':') != std::string::npos;
  return absl::StrCat(v6 ? "[" : "", host, v6 ? "]" : "", ":", port, "/", db);
}

absl::StatusOr<RedisUrl> ParseRedisUrl(absl::string_view url) {
  if (url.find('@') != absl::string_view::npos) {
    // Not echoed: what precedes the '@' may be a password.
    return absl::InvalidArgumentError(
        "Redis URL: a user or password (user:password@) is not supported (expected "
        "redis://HOST[:PORT][/DB])");
  }
  if (url.empty()) return Bad(url, "empty");
  if (!absl::StartsWithIgnoreCase(url, kScheme)) {
    if (absl::StartsWithIgnoreCase(url, "rediss://")) {
      return Bad(url, "TLS (rediss://) is not supported");
    }
    return Bad(url, "the scheme must be redis://");
  }
  absl::string_view rest = url.substr(kScheme.size());
  if (rest.find_first_of("?#") != absl::string_view::npos) {
    return Bad(url, "a query or fragment is not supported");
  }
  absl::string_view hostport = rest, db;
  bool has_db = false;
  if (const size_t slash = rest.find('/'); slash != absl::string_view::npos) {
    hostport = rest.substr(0, slash);
    db = rest.substr(slash + 1);
    has_db = true;
  }
  RedisUrl out;
  absl::string_view port;
  bool has_port = false;
  if (absl::StartsWith(hostport, "[")) {
    const size_t close = hostport.find(']');
    if (close == absl::string_view::npos) return Bad(url, "an IPv6 address without its ']'");
    out.host = std::string(hostport.substr(1, close - 1));
    absl::string_view after = hostport.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') return Bad(url, "text after the IPv6 address's ']'");
      port = after.substr(1);
      has_port = true;
    }
  } else {
    const size_t colon = hostport.find(':');
    out.host = std::string(hostport.substr(0, colon));
    if (colon != absl::string_view::npos) {
      port = hostport.substr(colon + 1);
      has_port = true;
      if (port.find(':') != absl::string_view::npos) {
        return Bad(url, "an IPv6 address must be in brackets ([::1]:6379)");
      }
    }
  }
  if (out.host.empty()) return Bad(url, "no host");
  for (char c : out.host) {
    if (absl::ascii_isspace(static_cast<unsigned char>(c)) || c == '/' || c == '[' || c == ']') {
      return Bad(url, "the host has a character hosts do not have");
    }
  }
  if (has_port) {
    int p = 0;
    if (!AllDigits(port) || !absl::SimpleAtoi(port, &p) || p < 1 || p > 65535) {
      return Bad(url, "the port must be a number in 1..65535");
    }
    out.port = p;
  }
  if (has_db && !db.empty()) {
    int n = 0;
    if (!AllDigits(db) || !absl::SimpleAtoi(db, &n)) {
      return Bad(url, "the database (after '/') must be a number from 0");
    }
    out.db = n;
  }
  return out;
}

}  // namespace textgen::state
