#include "server/api_keys.h"

#include <fstream>
#include <sstream>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace textgen::server {
namespace {

// Whether a equals b, looking at every byte of `presented` whatever differs, so the time taken
// tells nothing about how much of a key was right (only, at most, its length).
bool ConstantTimeEquals(absl::string_view presented, absl::string_view key) {
  unsigned char diff = presented.size() == key.size() ? 0 : 1;
  for (size_t i = 0; i < presented.size(); ++i) {
    const unsigned char k = key.empty() ? 0 : static_cast<unsigned char>(key[i % key.size()]);
    diff |= static_cast<unsigned char>(presented[i]) ^ k;
  }
  return diff == 0;
}

bool PrintableAscii(absl::string_view s) {
  for (char c : s) {
    if (c <= ' ' || c > '~') return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<ApiKeys> ApiKeys::Load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("--api-keys-file: cannot read ", path));
  std::stringstream text;
  text << in.rdbuf();
  return Parse(text.str(), path);
}

absl::StatusOr<ApiKeys> ApiKeys::Parse(absl::string_view text, const std::string& source) {
  ApiKeys keys;
  absl::flat_hash_set<std::string> seen;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line.front() == '#') continue;
    std::vector<absl::string_view> fields =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    const std::string where = absl::StrCat("--api-keys-file ", source, " line ", line_no);
    if (fields.size() > 2) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": expected KEY [NAME], got ", fields.size(), " fields"));
    }
    if (fields[0].size() < kMinKeyLength || !PrintableAscii(fields[0])) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": a key must be at least ",
                                                     kMinKeyLength,
                                                     " printable ASCII characters (e.g. "
                                                     "openssl rand -hex 32)"));
    }
    if (!seen.insert(std::string(fields[0])).second) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": this key is listed twice"));
    }
    std::string principal =
        fields.size() == 2 ? std::string(fields[1]) : absl::StrCat("key-", line_no);
    keys.keys_.push_back(Key{std::string(fields[0]), std::move(principal)});
  }
  if (keys.keys_.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--api-keys-file ", source,
                                                   " holds no key (an empty file would lock "
                                                   "everyone out)"));
  }
  return keys;
}

absl::StatusOr<std::string> ApiKeys::Authenticate(absl::string_view authorization) const {
  if (keys_.empty()) return std::string();
  authorization = absl::StripAsciiWhitespace(authorization);
  if (authorization.empty()) {
    return absl::UnauthenticatedError(
        "missing API key: send the header \"authorization: Bearer KEY\"");
  }
  constexpr absl::string_view kScheme = "bearer ";
  if (authorization.size() <= kScheme.size() ||
      !absl::StartsWithIgnoreCase(authorization, kScheme)) {
    return absl::UnauthenticatedError(
        "the authorization header must be \"Bearer KEY\" (an API key)");
  }
  const absl::string_view presented =
      absl::StripLeadingAsciiWhitespace(authorization.substr(kScheme.size()));
  const std::string* principal = nullptr;
  for (const Key& key : keys_) {
    // No early exit: every key is compared whatever matched before.
    if (ConstantTimeEquals(presented, key.secret)) principal = &key.principal;
  }
  if (principal == nullptr) return absl::UnauthenticatedError("invalid API key");
  return *principal;
}

}  // namespace textgen::server
