// Checks server/happens_before.h in TSan builds (ctest tsan/server/happens_before_*): a write
// ordered before a read only by a relaxed atomic flag (which TSan, rightly, does not count as
// synchronization: it stands in for gRPC's uninstrumented completion machinery) must not be
// reported once HappensBefore states the order (`ordered`), and must be without it
// (`unordered`). Without the first, GenerateReactor's OnCancel -> OnDone edge would be a no-op
// (e.g. a TSan build that the header does not detect); without the second, the first proves
// nothing.
#include <atomic>
#include <cstdio>
#include <cstring>
#include <thread>

#include "server/happens_before.h"

namespace {

// Written by the writer thread, read by the main thread. A global: as a local of Run (inlined into
// main at -O2) GCC 12's TSan did not report the `unordered` race.
int payload = 0;

int Run(bool annotate) {
  textgen::server::HappensBefore edge;
  std::atomic<bool> published{false};
  std::thread writer([&] {
    payload = 42;
    if (annotate) edge.Release();
    published.store(true, std::memory_order_relaxed);
  });
  while (!published.load(std::memory_order_relaxed)) std::this_thread::yield();
  if (annotate) edge.Acquire();
  const int seen = payload;
  writer.join();
  return seen == 42 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2 ||
      (std::strcmp(argv[1], "ordered") != 0 && std::strcmp(argv[1], "unordered") != 0)) {
    std::fprintf(stderr, "usage: %s ordered|unordered\n", argv[0]);
    return 2;
  }
  return Run(std::strcmp(argv[1], "ordered") == 0);
}
