#include "engine/kv_cache/kv_disk_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/util/file_identity.h"
#include "engine/util/mix64.h"
#include "spdlog/spdlog.h"

namespace textgen {
namespace {

constexpr char kMagic[8] = {'T', 'G', 'K', 'V', 'B', 'L', 'K', '\n'};
constexpr const char* kSuffix = ".kvb";

// The file's first bytes. Native byte order (x86-64 only builds).
struct FileHeader {
  char magic[8];
  uint32_t version;
  uint32_t kv_type;  // KvType's value
  uint64_t model_id;
  uint32_t n_layers;
  uint32_t n_kv_heads;
  uint32_t head_dim;
  uint32_t block_size;
  uint32_t n_tokens;  // the chain: every token from the sequence's start to the block's end
  uint32_t reserved;
  uint64_t payload_bytes;
  uint64_t payload_checksum;
  uint64_t header_checksum;  // of the bytes above, then the tokens
};
static_assert(sizeof(FileHeader) == 72);
constexpr size_t kChecked = offsetof(FileHeader, header_checksum);

uint64_t HeaderChecksum(const FileHeader& h, absl::Span<const int32_t> tokens) {
  const uint64_t c = Checksum64(&h, kChecked, 0x6b7668647231ULL);
  return Checksum64(tokens.data(), tokens.size() * sizeof(int32_t), c);
}

// Reads exactly n bytes at off; false on a short read or error.
bool ReadAt(int fd, void* dst, size_t n, off_t off) {
  auto* p = static_cast<char*>(dst);
  while (n > 0) {
    const ssize_t r = pread(fd, p, n, off);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    off += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

bool WriteAll(int fd, const void* src, size_t n) {
  const auto* p = static_cast<const char*>(src);
  while (n > 0) {
    const ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

bool ParseKey(const std::string& name, uint64_t* key) {
  const size_t n = std::strlen(kSuffix);
  if (name.size() != 16 + n || name.compare(16, n, kSuffix) != 0) return false;
  uint64_t k = 0;
  for (int i = 0; i < 16; ++i) {
    const char c = name[i];
    const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) return false;
    k = k << 4 | static_cast<uint64_t>(d);
  }
  *key = k;
  return true;
}

}  // namespace

KvDiskStore::KvDiskStore(const KvDiskOptions& options)
    : options_(options),
      payload_bytes_(options.shape.ElementsPerBlock() * KvTypeBytes(options.shape.type)),
      // Names depend on the tokens only: a file another model or layout wrote under the same
      // name is then found, rejected and replaced, rather than lingering unused.
      root_(0x74676b7664697331ULL) {}

absl::StatusOr<std::unique_ptr<KvDiskStore>> KvDiskStore::Open(const KvDiskOptions& options) {
  if (options.dir.empty()) return absl::InvalidArgumentError("KV disk tier: empty directory");
  if (options.max_bytes <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("KV disk tier: max_bytes must be > 0, got ", options.max_bytes));
  }
  if (absl::Status s = options.shape.Validate(); !s.ok()) return s;
  auto store = std::unique_ptr<KvDiskStore>(new KvDiskStore(options));
  if (absl::Status s = store->Scan(); !s.ok()) return s;
  store->writer_ = std::thread([p = store.get()] { p->WriterLoop(); });
  return store;
}

KvDiskStore::~KvDiskStore() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (writer_.joinable()) writer_.join();
}

absl::Status KvDiskStore::Scan() {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(options_.dir, ec);
  if (ec || !fs::is_directory(options_.dir)) {
    return absl::FailedPreconditionError(
        absl::StrCat("KV disk tier: cannot create directory ", options_.dir, ": ", ec.message()));
  }
  struct Found {
    uint64_t key;
    int64_t bytes;
    fs::file_time_type mtime;
  };
  std::vector<Found> found;
  for (const auto& entry : fs::directory_iterator(options_.dir, ec)) {
    const std::string name = entry.path().filename().string();
    std::error_code e2;
    if (name.find(".tmp") != std::string::npos) {
      fs::remove(entry.path(), e2);  // a write cut short (crash): never renamed, never used
      continue;
    }
    uint64_t key;
    if (!ParseKey(name, &key) || !entry.is_regular_file(e2)) continue;
    const auto size = entry.file_size(e2);
    const auto mtime = entry.last_write_time(e2);
    if (!e2) found.push_back({key, static_cast<int64_t>(size), mtime});
  }
  if (ec) {
    return absl::FailedPreconditionError(
        absl::StrCat("KV disk tier: cannot list ", options_.dir, ": ", ec.message()));
  }
  std::sort(found.begin(), found.end(),
            [](const Found& a, const Found& b) { return a.mtime < b.mtime; });
  absl::MutexLock lock(&mu_);
  for (const Found& f : found) {
    lru_.push_back(f.key);
    files_[f.key] = FileEntry{f.bytes, std::prev(lru_.end())};
    stats_.bytes_on_disk += f.bytes;
  }
  TrimLocked(0);
  stats_.files = static_cast<int64_t>(files_.size());
  return absl::OkStatus();
}

uint64_t KvDiskStore::ChainKey(uint64_t parent, absl::Span<const int32_t> block_tokens) {
  uint64_t h = Mix64(parent ^ 0x6b766469736b31ULL);
  for (int32_t t : block_tokens) h = Mix64(h ^ static_cast<uint32_t>(t));
  return h;
}

std::string KvDiskStore::PathOf(uint64_t key) const {
  return absl::StrFormat("%s/%016x%s", options_.dir, key, kSuffix);
}

bool KvDiskStore::Contains(uint64_t key) const {
  absl::MutexLock lock(&mu_);
  return files_.contains(key) || pending_.contains(key);
}

void KvDiskStore::Touch(uint64_t key) {
  auto it = files_.find(key);
  if (it == files_.end()) return;
  lru_.splice(lru_.end(), lru_, it->second.lru);
}

bool KvDiskStore::Enqueue(uint64_t key, absl::Span<const int32_t> chain, const std::byte* payload,
                          bool wait) {
  {
    absl::MutexLock lock(&mu_);
    if (files_.contains(key)) {
      Touch(key);
      return false;
    }
    if (pending_.contains(key)) return false;
    if (!wait && pending_bytes_ + payload_bytes_ > options_.max_pending_bytes) {
      ++stats_.blocks_dropped;
      return false;
    }
    pending_bytes_ += payload_bytes_;  // reserved before the copy, so the bound holds
  }
  // The copy outside the lock: Read and the writer go on meanwhile.
  auto job = std::make_shared<Job>();
  job->key = key;
  job->chain.assign(chain.begin(), chain.end());
  job->payload.assign(payload, payload + payload_bytes_);
  absl::MutexLock lock(&mu_);
  pending_[key] = job;
  if (wait) {
    // Room for this one beside the others (it is counted already): at most one block over.
    auto room = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return pending_bytes_ <= options_.max_pending_bytes + payload_bytes_ || jobs_.empty();
    };
    mu_.Await(absl::Condition(&room));
  }
  jobs_.push_back(std::move(job));
  return true;
}

std::vector<std::byte> KvDiskStore::Header(const Job& job) const {
  FileHeader h{};
  std::memcpy(h.magic, kMagic, sizeof(kMagic));
  h.version = options_.layout_version;
  h.kv_type = static_cast<uint32_t>(options_.shape.type);
  h.model_id = options_.model_id;
  h.n_layers = static_cast<uint32_t>(options_.shape.n_layers);
  h.n_kv_heads = static_cast<uint32_t>(options_.shape.n_kv_heads);
  h.head_dim = static_cast<uint32_t>(options_.shape.head_dim);
  h.block_size = static_cast<uint32_t>(options_.shape.block_size);
  h.n_tokens = static_cast<uint32_t>(job.chain.size());
  h.payload_bytes = payload_bytes_;
  h.payload_checksum = Checksum64(job.payload.data(), job.payload.size());
  h.header_checksum = HeaderChecksum(h, job.chain);
  std::vector<std::byte> out(sizeof(h) + job.chain.size() * sizeof(int32_t));
  std::memcpy(out.data(), &h, sizeof(h));
  std::memcpy(out.data() + sizeof(h), job.chain.data(), job.chain.size() * sizeof(int32_t));
  return out;
}

absl::Status KvDiskStore::WriteFile(const Job& job, int64_t* bytes) const {
  const std::vector<std::byte> head = Header(job);
  *bytes = static_cast<int64_t>(head.size() + job.payload.size());
  if (*bytes > options_.max_bytes) {
    return absl::ResourceExhaustedError("a block's file is larger than the tier's cap");
  }
  const std::string path = PathOf(job.key);
  const std::string tmp = absl::StrCat(path, ".tmp.", getpid());
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return absl::InternalError(absl::StrCat(tmp, ": ", std::strerror(errno)));
  bool ok = WriteAll(fd, head.data(), head.size()) &&
            WriteAll(fd, job.payload.data(), job.payload.size());
  int err = ok ? 0 : errno;
  if (close(fd) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (ok && rename(tmp.c_str(), path.c_str()) != 0) {
    ok = false;
    err = errno;
  }
  if (!ok) {
    unlink(tmp.c_str());
    return absl::InternalError(absl::StrCat(path, ": ", std::strerror(err)));
  }
  return absl::OkStatus();
}

void KvDiskStore::WriterLoop() {
  while (true) {
    std::shared_ptr<const Job> job;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]()
                       ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || !jobs_.empty(); };
      mu_.Await(absl::Condition(&ready));
      if (jobs_.empty()) return;  // stopping, and everything queued is written
      job = std::move(jobs_.front());
      jobs_.pop_front();
      writing_ = true;
    }
    int64_t bytes = 0;
    absl::Status st = WriteFile(*job, &bytes);
    absl::MutexLock lock(&mu_);
    writing_ = false;
    pending_.erase(job->key);
    pending_bytes_ -= payload_bytes_;
    if (!st.ok()) {
      ++stats_.blocks_dropped;
      // Once: a full or read-only disk would otherwise log every block.
      if (!warned_write_) {
        spdlog::warn("KV disk tier: cannot write a block ({}); such blocks are recomputed",
                     st.ToString());
        warned_write_ = true;
      }
      continue;
    }
    auto it = files_.find(job->key);
    if (it != files_.end()) {  // rewritten in place by rename: replace its entry
      stats_.bytes_on_disk -= it->second.bytes;
      lru_.erase(it->second.lru);
      files_.erase(it);
    }
    lru_.push_back(job->key);
    files_[job->key] = FileEntry{bytes, std::prev(lru_.end())};
    stats_.bytes_on_disk += bytes;
    ++stats_.blocks_written;
    TrimLocked(job->key);
    stats_.files = static_cast<int64_t>(files_.size());
  }
}

void KvDiskStore::DropFile(uint64_t key) {
  auto it = files_.find(key);
  if (it != files_.end()) {
    stats_.bytes_on_disk -= it->second.bytes;
    lru_.erase(it->second.lru);
    files_.erase(it);
    stats_.files = static_cast<int64_t>(files_.size());
  }
  unlink(PathOf(key).c_str());
}

void KvDiskStore::TrimLocked(uint64_t keep) {
  while (stats_.bytes_on_disk > options_.max_bytes && !lru_.empty()) {
    uint64_t victim = lru_.front();
    if (victim == keep) {
      if (lru_.size() == 1) break;
      victim = *std::next(lru_.begin());
    }
    DropFile(victim);
    ++stats_.blocks_evicted;
  }
}

absl::Status KvDiskStore::Read(uint64_t key, absl::Span<const int32_t> chain, std::byte* dst) {
  const std::string path = PathOf(key);
  {
    absl::MutexLock lock(&mu_);
    auto queued = pending_.find(key);
    if (queued != pending_.end()) {
      const Job& job = *queued->second;
      if (!std::equal(job.chain.begin(), job.chain.end(), chain.begin(), chain.end())) {
        return absl::NotFoundError("another chain's KV block (hash collision)");
      }
      std::memcpy(dst, job.payload.data(), payload_bytes_);
      ++stats_.blocks_read;
      return absl::OkStatus();
    }
    if (!files_.contains(key)) return absl::NotFoundError("no KV block file");
  }
  auto reject = [&](const std::string& why) {
    spdlog::warn("KV disk tier: rejected {} ({}); its tokens are recomputed", path, why);
    absl::MutexLock lock(&mu_);
    DropFile(key);
    ++stats_.blocks_rejected;
    return absl::DataLossError(absl::StrCat(path, ": ", why));
  };
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    absl::MutexLock lock(&mu_);
    DropFile(key);  // deleted behind our back: forget it
    return absl::NotFoundError(absl::StrCat(path, ": ", std::strerror(errno)));
  }
  struct Closer {
    int fd;
    ~Closer() { close(fd); }
  } closer{fd};
  struct stat st {};
  FileHeader h{};
  if (fstat(fd, &st) != 0 || st.st_size < static_cast<off_t>(sizeof(h)) ||
      !ReadAt(fd, &h, sizeof(h), 0)) {
    return reject("shorter than its header (torn)");
  }
  const uint64_t want_size =
      sizeof(h) + uint64_t{h.n_tokens} * sizeof(int32_t) + uint64_t{h.payload_bytes};
  if (h.payload_bytes > (uint64_t{1} << 40) || want_size != static_cast<uint64_t>(st.st_size)) {
    return reject(absl::StrCat("size ", st.st_size, " is not what its header says (torn)"));
  }
  std::vector<int32_t> tokens(h.n_tokens);
  if (!ReadAt(fd, tokens.data(), tokens.size() * sizeof(int32_t), sizeof(h))) {
    return reject("unreadable token ids");
  }
  if (std::memcmp(h.magic, kMagic, sizeof(kMagic)) != 0) return reject("not a KV block file");
  if (HeaderChecksum(h, tokens) != h.header_checksum) return reject("header checksum mismatch");
  if (h.version != kKvDiskLayoutVersion) {
    return reject(
        absl::StrCat("layout version ", h.version, ", this build reads ", kKvDiskLayoutVersion));
  }
  if (h.model_id != options_.model_id) return reject("written for another model");
  if (h.kv_type != static_cast<uint32_t>(options_.shape.type) ||
      h.n_layers != static_cast<uint32_t>(options_.shape.n_layers) ||
      h.n_kv_heads != static_cast<uint32_t>(options_.shape.n_kv_heads) ||
      h.head_dim != static_cast<uint32_t>(options_.shape.head_dim) ||
      h.block_size != static_cast<uint32_t>(options_.shape.block_size) ||
      h.payload_bytes != payload_bytes_) {
    return reject("another KV type or block shape");
  }
  if (!std::equal(tokens.begin(), tokens.end(), chain.begin(), chain.end())) {
    return absl::NotFoundError("another chain's KV block file (hash collision)");
  }
  if (!ReadAt(fd, dst, payload_bytes_, static_cast<off_t>(sizeof(h) + tokens.size() * 4))) {
    return reject("unreadable payload");
  }
  if (Checksum64(dst, payload_bytes_) != h.payload_checksum) {
    return reject("payload checksum mismatch");
  }
  futimens(fd, nullptr);  // its modification time orders the next start's LRU
  absl::MutexLock lock(&mu_);
  Touch(key);
  ++stats_.blocks_read;
  return absl::OkStatus();
}

void KvDiskStore::Flush() {
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return jobs_.empty() && !writing_; };
  mu_.Await(absl::Condition(&idle));
}

KvDiskStats KvDiskStore::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

}  // namespace textgen
