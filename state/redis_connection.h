// One blocking connection to a Redis server (hiredis) with a timeout on the connect and on each
// read and write: commands one at a time or pipelined. The session journal keeps two, one for
// its writer thread and one for Get.
#ifndef TEXTGEN_STATE_REDIS_CONNECTION_H_
#define TEXTGEN_STATE_REDIS_CONNECTION_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "state/redis_url.h"

struct redisContext;
struct redisReply;

namespace textgen::state {

// Not thread-safe: one owner at a time. Never raises SIGPIPE (a write to a server that went
// away fails with Unavailable instead), whatever the process does with the signal.
class RedisConnection {
 public:
  struct ReplyFree {
    void operator()(redisReply* r) const;
  };
  using Reply = std::unique_ptr<redisReply, ReplyFree>;

  // Connects and SELECTs url.db. Unavailable when the server cannot be reached or does not
  // answer within `timeout` (down, hung, not started yet); FailedPrecondition when it answers
  // and refuses (no such database, a password is required), which waiting will not cure.
  static absl::StatusOr<std::unique_ptr<RedisConnection>> Connect(const RedisUrl& url,
                                                                  absl::Duration timeout);
  ~RedisConnection();
  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;

  // Sends one command (arguments binary-safe) and reads its reply. An error reply is a reply
  // (type REDIS_REPLY_ERROR) for the caller to judge; Unavailable means the connection failed
  // (timeout, closed, a protocol error) and is broken() from then on.
  absl::StatusOr<Reply> Command(const std::vector<std::string_view>& args);
  // Pipelining: Append buffers commands, Read sends what is buffered and returns the replies in
  // order, one per call. Append fails (Unavailable) only once broken().
  absl::Status Append(const std::vector<std::string_view>& args);
  absl::StatusOr<Reply> Read();

  bool broken() const { return broken_; }
  // Broken because the server did not answer in time (rather than closing the connection, as
  // one restarted, or one that drops idle clients, does): trying again would wait again.
  bool timed_out() const { return timed_out_; }

 private:
  RedisConnection(redisContext* c, std::string address) : c_(c), address_(std::move(address)) {}
  absl::Status Failed();  // marks the connection broken; Unavailable naming the cause

  redisContext* c_;
  const std::string address_;
  bool broken_ = false;
  bool timed_out_ = false;
};

}  // namespace textgen::state

#endif  // TEXTGEN_STATE_REDIS_CONNECTION_H_
