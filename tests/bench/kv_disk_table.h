// textgen-bench --kv-disk: the KV disk tier (EngineOptions::kv_disk_gib) through the engine in
// process: a long prompt's time to first token recomputed, warm (prefix cache in memory), and
// after a restart from the disk tier; and decode speed with the tier on and nothing to spill.
#ifndef TEXTGEN_TESTS_BENCH_KV_DISK_TABLE_H_
#define TEXTGEN_TESTS_BENCH_KV_DISK_TABLE_H_

#include "tests/bench/bench_options.h"

namespace textgen::bench {

// For o.prefix_model (--kv-disk-model), best of o.repeats, a seeded random prompt of
// o.kv_disk_tokens tokens, 8 new tokens:
//  - recompute: a fresh engine (tier on, empty directory) prefills the whole prompt;
//  - warm: the same engine again (whole blocks from the prefix cache in memory);
//  - restart, page cache warm: that engine shut down (its cached blocks written), a new engine
//    on the same directory (the files still in the OS page cache, as after a quick restart);
//  - restart, page cache dropped: the same after posix_fadvise(DONTNEED) on every file, so
//    they are read from the device.
// Then decode: a 128-token prompt and 256 new tokens, tier on (nothing to spill) and off,
// alternating, best of o.repeats each: ms per generated token after the first.
void PrintKvDiskTable(const BenchOptions& o);

}  // namespace textgen::bench

#endif  // TEXTGEN_TESTS_BENCH_KV_DISK_TABLE_H_
