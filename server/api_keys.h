// The API keys a server accepts (--api-keys-file) and the principal each one stands for.
// The file holds one key per line, optionally followed by whitespace and a name:
//   4f3c9a...e1  alice
//   0b77d2...9c  alice        <- a second key for the same principal (e.g. during a rotation)
//   91aa0c...42
// Blank lines and lines starting with '#' are ignored. A key without a name stands for the
// principal "key-LINE" (its line number): keys are never used as names, so a principal can be
// logged. Sessions belong to principals, so two keys with the same name share their sessions.
#ifndef TEXTGEN_SERVER_API_KEYS_H_
#define TEXTGEN_SERVER_API_KEYS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace textgen::server {

class ApiKeys {
 public:
  // No keys: Authenticate lets everyone in as the principal "".
  ApiKeys() = default;

  // Reads `path`. InvalidArgument (naming the file and line, never the key) for a key shorter
  // than kMinKeyLength, with characters outside printable ASCII, given twice, or for a file
  // without keys; NotFound if it cannot be read.
  static absl::StatusOr<ApiKeys> Load(const std::string& path);
  // The same from the file's text (`source` names it in errors).
  static absl::StatusOr<ApiKeys> Parse(absl::string_view text, const std::string& source);

  bool enabled() const { return !keys_.empty(); }
  size_t size() const { return keys_.size(); }

  // The principal of the key in an "authorization" value ("Bearer KEY", the scheme in any
  // case), or Unauthenticated saying what was wrong (missing, not Bearer, unknown key) without
  // repeating what was sent. Every key is compared in full whatever matches (constant time in
  // the key's content). OK with "" when there are no keys.
  absl::StatusOr<std::string> Authenticate(absl::string_view authorization) const;

  // Keys shorter than this are refused at load: a key must not be guessable.
  static constexpr size_t kMinKeyLength = 16;

 private:
  struct Key {
    std::string secret;
    std::string principal;
  };
  std::vector<Key> keys_;
};

}  // namespace textgen::server

#endif  // TEXTGEN_SERVER_API_KEYS_H_
