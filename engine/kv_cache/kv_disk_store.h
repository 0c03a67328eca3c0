// The KV cache's disk level: blocks (full ones, and partly filled leaves) that leave memory are
// kept as files under a directory, up to a byte cap (least recently used file first out), and
// read back instead of recomputed.
#ifndef TEXTGEN_ENGINE_KV_CACHE_KV_DISK_STORE_H_
#define TEXTGEN_ENGINE_KV_CACHE_KV_DISK_STORE_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "engine/kv_cache/kv_cache_options.h"

namespace textgen {

// The version of the file layout and of the payload's meaning (the pool's block layout: K tiles
// transposed, see KvCache::StoreKv). Bump it when either changes: older files are then rejected.
inline constexpr uint32_t kKvDiskLayoutVersion = 1;

struct KvDiskOptions {
  std::string dir;        // created if missing (one level)
  int64_t max_bytes = 0;  // cap on the files' total size (> 0)
  uint64_t model_id = 0;  // the model file's identity and whatever else decides K/V
  KvCacheOptions shape;   // n_layers, n_kv_heads, head_dim, block_size, type
  // Copies waiting for the writer; Enqueue beyond it drops the block (it is recomputed if ever
  // needed) rather than hold up the scheduler or grow without bound.
  size_t max_pending_bytes = size_t{256} << 20;
  // Written into the files' headers; a file is read only if it holds kKvDiskLayoutVersion.
  // Tests write other versions.
  uint32_t layout_version = kKvDiskLayoutVersion;
};

struct KvDiskStats {
  int64_t blocks_written = 0;
  int64_t blocks_read = 0;
  int64_t blocks_rejected = 0;  // torn, corrupt, other model / layout: deleted, recomputed
  int64_t blocks_dropped = 0;   // not written: the writer's queue was full, or a write failed
  int64_t blocks_evicted = 0;   // files deleted for the byte cap
  int64_t bytes_on_disk = 0;
  int64_t files = 0;
};

// One file per block, named by the hash of the block's whole token chain (every token from the
// sequence's start to the block's end), and of nothing else, so that a file another model or
// layout wrote for the same tokens is found, rejected (deleted) and replaced:
//   DIR/<16 hex digits>.kvb
// It holds a header (magic, layout version, KV type, model id, shape, the chain's token count,
// payload size, payload checksum, header checksum), the chain's token ids, then the block's
// payload (BlockPool's bytes of the block, without padding). A file is used only if the header
// checksum, magic, version, model id, shape, size, token chain and payload checksum all agree;
// a file that fails any of these (torn, corrupted, another model or layout) is deleted and
// counted as rejected. A hash collision (another chain's file) is a plain miss.
//
// Writes go through a thread of their own: Enqueue copies nothing but what it is given (the
// caller hands over a copy of the block) and the writer writes a temporary file and renames it,
// so a crash leaves either no file or a whole one (a torn one, e.g. after a power loss, is
// caught by the checks above). Files are not fsynced: the tier is a cache.
//
// Thread-safe.
class KvDiskStore {
 public:
  // Creates the directory if needed, removes leftover temporary files, indexes the files there
  // (oldest modification first out; not read until used) and trims them to the cap, and starts
  // the writer. InvalidArgument for bad options; the errno's status naming the directory if it
  // cannot be created or listed.
  static absl::StatusOr<std::unique_ptr<KvDiskStore>> Open(const KvDiskOptions& options);
  // Writes what is queued, then stops the writer.
  ~KvDiskStore();
  KvDiskStore(const KvDiskStore&) = delete;
  KvDiskStore& operator=(const KvDiskStore&) = delete;

  // The key of a chain's first block's parent; ChainKey extends a key by one block's tokens.
  uint64_t RootKey() const { return root_; }
  static uint64_t ChainKey(uint64_t parent, absl::Span<const int32_t> block_tokens);
  // Bytes of one block's payload.
  size_t payload_bytes() const { return payload_bytes_; }

  // Whether a file (or a queued write) for `key` exists. Cheap: no I/O.
  bool Contains(uint64_t key) const;
  // Queues the block named `key`, holding the last block_size tokens of `chain`, for writing;
  // `payload` is payload_bytes() bytes, copied. False (nothing queued) if it is on disk already
  // (it becomes the most recently used) or queued, or, when `wait` is false, if the queue is
  // full (counted as dropped). With `wait` the call blocks until there is room (shutdown).
  bool Enqueue(uint64_t key, absl::Span<const int32_t> chain, const std::byte* payload,
               bool wait = false);
  // Reads the block named `key` whose chain is `chain` into `dst` (payload_bytes()), from its
  // queued copy if it is not written yet. NotFound if none (or another chain's); DataLoss if the
  // file was rejected (and deleted). `dst` holds garbage on failure.
  absl::Status Read(uint64_t key, absl::Span<const int32_t> chain, std::byte* dst);
  // Blocks until every queued block is written (or dropped).
  void Flush();
  KvDiskStats stats() const;
  const std::string& dir() const { return options_.dir; }
  int64_t max_bytes() const { return options_.max_bytes; }

 private:
  struct Job {
    uint64_t key = 0;
    std::vector<int32_t> chain;
    std::vector<std::byte> payload;
  };
  struct FileEntry {
    int64_t bytes = 0;
    std::list<uint64_t>::iterator lru;  // position in lru_ (front: oldest)
  };

  explicit KvDiskStore(const KvDiskOptions& options);
  absl::Status Scan();
  void WriterLoop();
  absl::Status WriteFile(const Job& job, int64_t* bytes) const;
  std::string PathOf(uint64_t key) const;
  std::vector<std::byte> Header(const Job& job) const;
  // Under mu_: forgets `key`'s file and deletes it.
  void DropFile(uint64_t key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Under mu_: deletes the oldest files until the total fits the cap, sparing `keep`.
  void TrimLocked(uint64_t keep) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Touch(uint64_t key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const KvDiskOptions options_;
  const size_t payload_bytes_;
  const uint64_t root_;

  mutable absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, FileEntry> files_ ABSL_GUARDED_BY(mu_);
  std::list<uint64_t> lru_ ABSL_GUARDED_BY(mu_);
  // Queued (and the one being written), by key: Read serves a block from here before its file
  // exists, so that a block evicted just now and needed again is not recomputed.
  absl::flat_hash_map<uint64_t, std::shared_ptr<const Job>> pending_ ABSL_GUARDED_BY(mu_);
  std::deque<std::shared_ptr<const Job>> jobs_ ABSL_GUARDED_BY(mu_);
  size_t pending_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;  // the writer holds a job outside jobs_
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool warned_write_ ABSL_GUARDED_BY(mu_) = false;
  KvDiskStats stats_ ABSL_GUARDED_BY(mu_);
  std::thread writer_;
};

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_KV_CACHE_KV_DISK_STORE_H_
