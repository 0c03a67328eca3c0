// Tells a stream cancelled by the server's shutdown from one its client cancelled: gRPC reports
// both the same way (OnCancel), and a stream still running when the shutdown's grace ends is
// cancelled by the server, while its client sees UNAVAILABLE. Logs and metrics must say so
// rather than "cancelled by the client".
#ifndef TEXTGEN_SERVER_SHUTDOWN_CLOCK_H_
#define TEXTGEN_SERVER_SHUTDOWN_CLOCK_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <limits>

namespace textgen::server {

// Thread-safe.
class ShutdownClock {
 public:
  // The server will cancel every call still running at `cancel_at`.
  void Start(std::chrono::system_clock::time_point cancel_at) {
    cancel_at_ns_.store(
        std::chrono::duration_cast<std::chrono::nanoseconds>(cancel_at.time_since_epoch()).count());
  }
  // Whether a cancel seen at `now` is the shutdown's. gRPC's timer and this clock disagree by a
  // few ms, so the last 100 ms before `cancel_at` count as the shutdown's too.
  bool IsShutdownCancel(std::chrono::system_clock::time_point now) const {
    const int64_t at = cancel_at_ns_.load();
    if (at == kNever) return false;
    const int64_t now_ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count();
    return now_ns + 100'000'000 >= at;
  }

 private:
  static constexpr int64_t kNever = std::numeric_limits<int64_t>::max();
  std::atomic<int64_t> cancel_at_ns_{kNever};
};

}  // namespace textgen::server

#endif  // TEXTGEN_SERVER_SHUTDOWN_CLOCK_H_
