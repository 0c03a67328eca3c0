// The Redis session store's URL: what it accepts, and a clear refusal naming the problem for
// everything else.
#include "state/redis_url.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

namespace textgen::state {
namespace redis_url_test {

TEST_CASE("a Redis URL gives host, port and database, with defaults", "[state][redis]") {
  auto u = ParseRedisUrl("redis://127.0.0.1:6380/2");
  REQUIRE(u.ok());
  CHECK(u->host == "127.0.0.1");
  CHECK(u->port == 6380);
  CHECK(u->db == 2);
  CHECK(u->address() == "127.0.0.1:6380/2");

  u = ParseRedisUrl("redis://cache.internal");
  REQUIRE(u.ok());
  CHECK(u->host == "cache.internal");
  CHECK(u->port == 6379);
  CHECK(u->db == 0);

  u = ParseRedisUrl("REDIS://h:1/");  // the scheme in any case; an empty database is 0
  REQUIRE(u.ok());
  CHECK(u->address() == "h:1/0");

  u = ParseRedisUrl("redis://[::1]:7000/15");
  REQUIRE(u.ok());
  CHECK(u->host == "::1");
  CHECK(u->address() == "[::1]:7000/15");
  CHECK(ParseRedisUrl("redis://[::1]")->port == 6379);
}

TEST_CASE("a malformed Redis URL is refused, naming the problem", "[state][redis]") {
  struct Case {
    std::string url;
    std::string says;
  };
  const std::vector<Case> cases = {
      {"", "empty"},
      {"127.0.0.1:6379", "scheme must be redis://"},
      {"http://127.0.0.1:6379", "scheme must be redis://"},
      {"rediss://127.0.0.1:6379", "TLS"},
      {"unix:///run/redis.sock", "scheme must be redis://"},
      {"redis://", "no host"},
      {"redis://:6379/0", "no host"},
      {"redis://h:", "port must be a number in 1..65535"},
      {"redis://h:0", "port must be a number in 1..65535"},
      {"redis://h:65536", "port must be a number in 1..65535"},
      {"redis://h:-1", "port must be a number in 1..65535"},
      {"redis://h:63x", "port must be a number in 1..65535"},
      {"redis://h:1/x", "database"},
      {"redis://h:1/-1", "database"},
      {"redis://h:1/1/2", "database"},
      {"redis://h:1/99999999999", "database"},
      {"redis://h:1/0?timeout=1", "query"},
      {"redis://h:1#x", "query or fragment"},
      {"redis://[::1:6379", "without its ']'"},
      {"redis://[::1]x:6379", "after the IPv6"},
      {"redis://::1:6379", "IPv6 address must be in brackets"},
      {"redis://a b:1", "character"},
  };
  for (const Case& c : cases) {
    INFO(c.url);
    auto u = ParseRedisUrl(c.url);
    REQUIRE(!u.ok());
    CHECK(absl::IsInvalidArgument(u.status()));
    CHECK_THAT(std::string(u.status().message()), Catch::Contains(c.says));
    // The URL itself, quoted, so that the operator sees which value is meant.
    CHECK_THAT(std::string(u.status().message()), Catch::Contains("\"" + c.url + "\""));
  }
  // A password is refused and never repeated (messages end up in logs).
  auto u = ParseRedisUrl("redis://default:s3cret-pw@127.0.0.1:6379/0");
  REQUIRE(!u.ok());
  CHECK(absl::IsInvalidArgument(u.status()));
  CHECK_THAT(std::string(u.status().message()), Catch::Contains("password"));
  CHECK_THAT(std::string(u.status().message()), !Catch::Contains("s3cret"));
}

}  // namespace redis_url_test
}  // namespace textgen::state
