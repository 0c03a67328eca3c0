#include "state/redis_connection.h"

#include <hiredis/hiredis.h>
#include <pthread.h>
#include <signal.h>
#include <sys/time.h>

#include <cerrno>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace textgen::state {
namespace {

// hiredis writes with write(2): to a socket the server closed, that raises SIGPIPE, which ends
// a process that has not ignored it. SIGPIPE from a write goes to the writing thread, so it is
// blocked on this thread for the duration of the call, and one that became pending meanwhile is
// taken before the old mask returns.
class SigpipeBlock {
 public:
  SigpipeBlock() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    sigset_t pending;
    sigemptyset(&pending);
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  }
  ~SigpipeBlock() {
    if (!was_pending_) {
      sigset_t pending;
      sigemptyset(&pending);
      sigpending(&pending);
      if (sigismember(&pending, SIGPIPE) == 1) {
        const timespec zero{};
        const int saved = errno;
        while (sigtimedwait(&pipe_, nullptr, &zero) < 0 && errno == EINTR) {
        }
        errno = saved;
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  SigpipeBlock(const SigpipeBlock&) = delete;
  SigpipeBlock& operator=(const SigpipeBlock&) = delete;

 private:
  sigset_t pipe_;
  sigset_t old_;
  bool was_pending_ = false;
};

timeval TimeoutOf(absl::Duration d) {
  if (d < absl::Milliseconds(1)) d = absl::Milliseconds(1);
  return absl::ToTimeval(d);
}

// The text of an error reply ("" for any other reply).
std::string ErrorText(const redisReply* r) {
  if (r == nullptr || r->type != REDIS_REPLY_ERROR) return "";
  return std::string(r->str, r->len);
}

}  // namespace

void RedisConnection::ReplyFree::operator()(redisReply* r) const { freeReplyObject(r); }

absl::StatusOr<std::unique_ptr<RedisConnection>> RedisConnection::Connect(const RedisUrl& url,
                                                                          absl::Duration timeout) {
  SigpipeBlock block;
  const std::string address = url.address();
  redisContext* c = redisConnectWithTimeout(url.host.c_str(), url.port, TimeoutOf(timeout));
  if (c == nullptr) {
    return absl::UnavailableError(absl::StrCat("redis ", address, ": out of memory"));
  }
  std::unique_ptr<RedisConnection> conn(new RedisConnection(c, address));
  if (c->err != 0) return conn->Failed();
  if (redisSetTimeout(c, TimeoutOf(timeout)) != REDIS_OK) return conn->Failed();
  // SELECT even for database 0: it is also the first round trip, which tells a server that
  // answers from one that only accepted the connection (hung, or still loading).
  const std::string db = absl::StrCat(url.db);
  absl::StatusOr<Reply> reply = conn->Command({"SELECT", db});
  if (!reply.ok()) return reply.status();
  const std::string error = ErrorText(reply->get());
  if (absl::StartsWith(error, "LOADING") || absl::StartsWith(error, "BUSY")) {
    return absl::UnavailableError(absl::StrCat("redis ", address, ": ", error));
  }
  if (!error.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("redis ", address, " refused SELECT ", db, ": ", error));
  }
  return conn;
}

RedisConnection::~RedisConnection() { redisFree(c_); }

absl::Status RedisConnection::Failed() {
  broken_ = true;
  std::string why = c_->errstr[0] != '\0' ? c_->errstr : "connection failed";
  if (c_->err == REDIS_ERR_IO &&
      (why == "Resource temporarily unavailable" || absl::StrContains(why, "timed out"))) {
    why = "no answer in time";
    timed_out_ = true;
  }
  if (c_->err == REDIS_ERR_EOF) why = "the server closed the connection";
  return absl::UnavailableError(absl::StrCat("redis ", address_, ": ", why));
}

absl::StatusOr<RedisConnection::Reply> RedisConnection::Command(
    const std::vector<std::string_view>& args) {
  if (absl::Status st = Append(args); !st.ok()) return st;
  return Read();
}

absl::Status RedisConnection::Append(const std::vector<std::string_view>& args) {
  if (broken_) return absl::UnavailableError(absl::StrCat("redis ", address_, ": disconnected"));
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  argv.reserve(args.size());
  lens.reserve(args.size());
  for (std::string_view a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  if (redisAppendCommandArgv(c_, static_cast<int>(args.size()), argv.data(), lens.data()) !=
      REDIS_OK) {
    return Failed();
  }
  return absl::OkStatus();
}

absl::StatusOr<RedisConnection::Reply> RedisConnection::Read() {
  if (broken_) return absl::UnavailableError(absl::StrCat("redis ", address_, ": disconnected"));
  SigpipeBlock block;
  void* raw = nullptr;
  if (redisGetReply(c_, &raw) != REDIS_OK || raw == nullptr) {
    if (raw != nullptr) freeReplyObject(raw);
    return Failed();
  }
  return Reply(static_cast<redisReply*>(raw));
}

}  // namespace textgen::state
