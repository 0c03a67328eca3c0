// Checks tests/support/tsan_absl_sync.cc in TSan builds (ctest support/tsan_absl_sync_*):
// accesses ordered only by Debian's uninstrumented absl::Mutex / absl::Notification must not be
// reported (`guarded`), and a real race beside them must still be (`race`). Without the first,
// every mutex-guarded field would be a false report; without the second, the shim would hide
// real races.
#include <cstdio>
#include <cstring>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"

namespace {

absl::Mutex mu;
int guarded_counter = 0;  // only under mu
int racy_counter = 0;     // written by both threads without a lock in `race` mode

// Both threads bump the guarded counter, then (race mode) the racy one; the main thread then
// waits for the worker's Notification and reads the worker's plain write.
int Run(bool race) {
  int worker_result = 0;
  absl::Notification done;
  std::thread worker([&] {
    for (int i = 0; i < 1000; ++i) {
      absl::MutexLock lock(&mu);
      ++guarded_counter;
    }
    if (race) ++racy_counter;
    worker_result = 42;  // published by done.Notify()
    done.Notify();
  });
  for (int i = 0; i < 1000; ++i) {
    absl::MutexLock lock(&mu);
    ++guarded_counter;
  }
  if (race) ++racy_counter;
  done.WaitForNotification();
  const int seen = worker_result;
  worker.join();
  absl::MutexLock lock(&mu);
  return guarded_counter == 2000 && seen == 42 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2 || (std::strcmp(argv[1], "guarded") != 0 && std::strcmp(argv[1], "race") != 0)) {
    std::fprintf(stderr, "usage: %s guarded|race\n", argv[0]);
    return 2;
  }
  return Run(std::strcmp(argv[1], "race") == 0);
}
