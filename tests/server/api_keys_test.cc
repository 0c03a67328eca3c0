// ApiKeys: the keys file's format and what Authenticate accepts.
#include "server/api_keys.h"

#include <catch2/catch.hpp>
#include <string>

namespace textgen::server {
namespace api_keys_test {

constexpr char kFile[] =
    "# comment\n"
    "\n"
    "  aaaaaaaaaaaaaaaaaaaa   alice  \n"
    "bbbbbbbbbbbbbbbbbbbb\talice\n"
    "cccccccccccccccccccc\n";

TEST_CASE("API keys map to their principals, a key without a name to its line", "[server][auth]") {
  auto keys = ApiKeys::Parse(kFile, "test");
  REQUIRE(keys.ok());
  CHECK(keys->enabled());
  CHECK(keys->size() == 3);
  CHECK(*keys->Authenticate("Bearer aaaaaaaaaaaaaaaaaaaa") == "alice");
  CHECK(*keys->Authenticate("bearer bbbbbbbbbbbbbbbbbbbb") == "alice");
  CHECK(*keys->Authenticate("BEARER  cccccccccccccccccccc ") == "key-5");
  for (const char* bad :
       {"", "Bearer", "Bearer ", "Basic aaaaaaaaaaaaaaaaaaaa", "aaaaaaaaaaaaaaaaaaaa",
        "Bearer aaaaaaaaaaaaaaaaaaa", "Bearer aaaaaaaaaaaaaaaaaaaaa", "Bearer alice"}) {
    auto who = keys->Authenticate(bad);
    INFO(bad);
    CHECK(absl::IsUnauthenticated(who.status()));
    CHECK(std::string(who.status().message()).find("aaaa") == std::string::npos);
  }
  // No keys: everyone is the one principal "".
  CHECK(*ApiKeys().Authenticate("") == "");
}

TEST_CASE("a keys file with short, repeated or no keys is refused without showing them",
          "[server][auth]") {
  for (const char* text :
       {"short alice\n", "# only a comment\n", "dddddddddddddddddddd a\ndddddddddddddddddddd b\n",
        "dddddddddddddddddddd a b\n",
        "ddddddddddddddd\x01"
        "ddd\n"}) {
    auto keys = ApiKeys::Parse(text, "test");
    INFO(text);
    CHECK(absl::IsInvalidArgument(keys.status()));
    CHECK_THAT(std::string(keys.status().message()), Catch::Contains("--api-keys-file test"));
    CHECK(std::string(keys.status().message()).find("ddddd") == std::string::npos);
    CHECK(std::string(keys.status().message()).find("short") == std::string::npos);
  }
}

}  // namespace api_keys_test
}  // namespace textgen::server
