#include "tests/support/redis_server.h"

#include <hiredis/hiredis.h>
#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <thread>

#include "tests/support/server_process.h"
#include "tests/test_util.h"

namespace textgen::testing {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Whether a server on 127.0.0.1:port answers PING within a short timeout.
bool Pings(int port, std::string* why) {
  const timeval timeout{0, 200 * 1000};
  redisContext* c = redisConnectWithTimeout("127.0.0.1", port, timeout);
  if (c == nullptr) {
    *why = "out of memory";
    return false;
  }
  bool ok = false;
  if (c->err == 0 && redisSetTimeout(c, timeout) == REDIS_OK) {
    auto* reply = static_cast<redisReply*>(redisCommand(c, "PING"));
    ok = reply != nullptr && reply->type == REDIS_REPLY_STATUS &&
         std::string(reply->str, reply->len) == "PONG";
    if (reply != nullptr) freeReplyObject(reply);
  }
  if (!ok) *why = c->err != 0 ? c->errstr : "no PONG";
  redisFree(c);
  return ok;
}

}  // namespace

std::unique_ptr<RedisServer> RedisServer::Start() {
  // Fail, not skip: the session store's tests would otherwise pass with nothing checked.
  if (::access(kRedisServerPath, X_OK) != 0) {
    FAIL(kRedisServerPath << " not found: install Debian's redis-server (scripts/install-deps.sh) "
                             "to run the Redis session store's tests");
  }
  std::unique_ptr<RedisServer> s(new RedisServer());
  s->dir_ = ScratchDir();
  std::string why;
  // A port picked free can be taken before redis binds it; a few tries make that moot.
  for (int attempt = 0; attempt < 3; ++attempt) {
    s->port_ = PickFreePort();
    if (s->Launch(&why)) return s;
  }
  FAIL("redis-server did not start: " << why << "\n--- its log ---\n" << s->Log());
  return nullptr;
}

RedisServer::~RedisServer() { Kill(); }

std::string RedisServer::url(int db) const {
  return "redis://127.0.0.1:" + std::to_string(port_) + "/" + std::to_string(db);
}

bool RedisServer::Launch(std::string* why) {
  const std::string port = std::to_string(port_);
  child_.Start({kRedisServerPath, "--port", port, "--bind", "127.0.0.1", "--save", "",
                "--appendonly", "no", "--dir", dir_, "--daemonize", "no", "--logfile", ""},
               {}, dir_ + "/redis.log");
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (Clock::now() < deadline) {
    if (!child_.Running()) {
      *why = "exited with code " + std::to_string(child_.exit_code());
      return false;
    }
    if (Pings(port_, why)) return true;
    std::this_thread::sleep_for(milliseconds(20));
  }
  *why = "no PONG on port " + port + " within 10 s (" + *why + ")";
  child_.Stop(SIGKILL, milliseconds(5000));
  return false;
}

void RedisServer::Kill() {
  // A stopped process dies of SIGKILL too.
  child_.Stop(SIGKILL, milliseconds(5000));
}

void RedisServer::Restart() {
  Kill();
  std::string why;
  if (!Launch(&why)) {
    FAIL("redis-server did not restart on port " << port_ << ": " << why << "\n--- its log ---\n"
                                                 << Log());
  }
}

void RedisServer::Pause() {
  REQUIRE(child_.Running());
  ::kill(child_.pid(), SIGSTOP);
}

void RedisServer::Resume() {
  // Never kill() a pid of -1 (every process) or one reaped and perhaps reused.
  if (child_.pid() > 0 && child_.Running()) ::kill(child_.pid(), SIGCONT);
}

std::string RedisServer::Log() const {
  std::error_code ec;
  return std::filesystem::exists(dir_ + "/redis.log", ec) ? ReadFile(dir_ + "/redis.log") : "";
}

}  // namespace textgen::testing
