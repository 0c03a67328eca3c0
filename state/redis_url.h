// The address of a Redis server as the session store's URL gives it: redis://HOST[:PORT][/DB].
#ifndef TEXTGEN_STATE_REDIS_URL_H_
#define TEXTGEN_STATE_REDIS_URL_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace textgen::state {

struct RedisUrl {
  std::string host;  // a name or an IP address (IPv6 without its brackets)
  int port = 6379;
  int db = 0;  // the logical database, SELECTed on every connection

  // "HOST:PORT/DB" (IPv6 in brackets), for logs and messages.
  std::string address() const;
};

// Parses redis://HOST[:PORT][/DB]: the port defaults to 6379, the database to 0. InvalidArgument
// naming the problem for anything else: another scheme (rediss:// and unix:// are not
// supported), a missing host, a port outside 1..65535, a database that is not a number, a
// password or user (user:password@: not supported; the message never repeats it), a query or a
// fragment.
absl::StatusOr<RedisUrl> ParseRedisUrl(absl::string_view url);

}  // namespace textgen::state

#endif  // TEXTGEN_STATE_REDIS_URL_H_
