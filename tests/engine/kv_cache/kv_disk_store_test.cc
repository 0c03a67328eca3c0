#include "engine/kv_cache/kv_disk_store.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "tests/test_util.h"

namespace textgen {
namespace kv_disk_store_test {

namespace fs = std::filesystem;

constexpr int kBs = 4;

KvDiskOptions Options(const std::string& dir, uint64_t model_id = 7, int64_t max_bytes = 1 << 20) {
  KvDiskOptions o;
  o.dir = dir;
  o.max_bytes = max_bytes;
  o.model_id = model_id;
  o.shape = {.n_layers = 2, .n_kv_heads = 2, .head_dim = 8, .block_size = kBs, .num_blocks = 1};
  return o;
}

// A fresh, empty directory for one test.
std::string FreshDir(const std::string& name) {
  const std::string dir = testing::ScratchDir() + "/kv_disk_store_test/" + name;
  fs::remove_all(dir);
  return dir;
}

std::unique_ptr<KvDiskStore> Open(const KvDiskOptions& o) {
  absl::StatusOr<std::unique_ptr<KvDiskStore>> s = KvDiskStore::Open(o);
  INFO(s.status().ToString());
  REQUIRE(s.ok());
  return std::move(s).value();
}

std::vector<std::byte> Payload(const KvDiskStore& s, int tag) {
  std::vector<std::byte> p(s.payload_bytes());
  for (size_t i = 0; i < p.size(); ++i) p[i] = static_cast<std::byte>((i * 31 + tag * 7) & 0xff);
  return p;
}

// The chain of `blocks` blocks (tokens 100 * tag + i) and its last block's key.
std::vector<int32_t> Chain(int blocks, int tag = 1) {
  std::vector<int32_t> c;
  for (int i = 0; i < blocks * kBs; ++i) c.push_back(100 * tag + i);
  return c;
}
uint64_t KeyOf(const KvDiskStore& s, const std::vector<int32_t>& chain) {
  uint64_t key = s.RootKey();
  for (size_t j = 0; j < chain.size(); j += kBs) {
    key = KvDiskStore::ChainKey(key, absl::MakeConstSpan(chain).subspan(j, kBs));
  }
  return key;
}
std::string PathOf(const std::string& dir, uint64_t key) {
  return absl::StrFormat("%s/%016x.kvb", dir, key);
}

// Writes one block and waits for it.
uint64_t Put(KvDiskStore& s, const std::vector<int32_t>& chain, int tag) {
  const uint64_t key = KeyOf(s, chain);
  const std::vector<std::byte> p = Payload(s, tag);
  REQUIRE(s.Enqueue(key, chain, p.data()));
  s.Flush();
  return key;
}

TEST_CASE("disk tier: a block written is read back byte for byte, also after a reopen",
          "[kv_cache][kv_disk]") {
  const std::string dir = FreshDir("round_trip");
  const std::vector<int32_t> chain = Chain(3);
  uint64_t key;
  {
    auto s = Open(Options(dir));
    key = Put(*s, chain, 5);
    CHECK(s->Contains(key));
    // Again: on disk already, nothing queued.
    CHECK_FALSE(s->Enqueue(key, chain, Payload(*s, 5).data()));
    std::vector<std::byte> got(s->payload_bytes());
    REQUIRE(s->Read(key, chain, got.data()).ok());
    CHECK(got == Payload(*s, 5));
    const KvDiskStats st = s->stats();
    CHECK(st.blocks_written == 1);
    CHECK(st.blocks_read == 1);
    CHECK(st.files == 1);
    CHECK(st.bytes_on_disk == static_cast<int64_t>(fs::file_size(PathOf(dir, key))));
    CHECK(st.bytes_on_disk ==
          static_cast<int64_t>(72 + chain.size() * sizeof(int32_t) + s->payload_bytes()));
  }
  // A leftover temporary file (a write cut by a crash) is removed at open.
  testing::WriteFile(dir + "/0000000000000001.kvb.tmp.123", "partial");
  auto s = Open(Options(dir));
  CHECK_FALSE(fs::exists(dir + "/0000000000000001.kvb.tmp.123"));
  CHECK(s->stats().files == 1);
  std::vector<std::byte> got(s->payload_bytes());
  REQUIRE(s->Read(key, chain, got.data()).ok());
  CHECK(got == Payload(*s, 5));
  // Another chain under the same name (a hash collision) is a plain miss; the file stays.
  CHECK(s->Read(key, Chain(3, 2), got.data()).code() == absl::StatusCode::kNotFound);
  CHECK(fs::exists(PathOf(dir, key)));
  CHECK(s->Read(key + 1, chain, got.data()).code() == absl::StatusCode::kNotFound);
}

// Writes one block with `writer`'s options, then reads it with `reader`'s: DataLoss, deleted,
// counted as rejected.
void CheckRejected(const KvDiskOptions& writer, const KvDiskOptions& reader,
                   void (*damage)(const std::string& path)) {
  const std::vector<int32_t> chain = Chain(2);
  uint64_t key;
  {
    auto w = Open(writer);
    key = Put(*w, chain, 3);
  }
  if (damage != nullptr) damage(PathOf(writer.dir, key));
  auto r = Open(reader);
  REQUIRE(r->Contains(key));
  std::vector<std::byte> got(r->payload_bytes());
  const absl::Status st = r->Read(key, chain, got.data());
  INFO(st.ToString());
  CHECK(st.code() == absl::StatusCode::kDataLoss);
  CHECK_FALSE(fs::exists(PathOf(writer.dir, key)));
  CHECK_FALSE(r->Contains(key));
  CHECK(r->stats().blocks_rejected == 1);
  CHECK(r->stats().blocks_read == 0);
  CHECK(r->stats().files == 0);
  CHECK(r->stats().bytes_on_disk == 0);
}

void FlipPayloadByte(const std::string& path) {
  std::string bytes = testing::ReadFile(path);
  bytes[bytes.size() - 10] ^= 0x40;
  testing::WriteFile(path, bytes);
}
void FlipTokenByte(const std::string& path) {
  std::string bytes = testing::ReadFile(path);
  bytes[72 + 5] ^= 0x01;
  testing::WriteFile(path, bytes);
}
void Truncate(const std::string& path) {
  REQUIRE(truncate(path.c_str(), static_cast<off_t>(fs::file_size(path) - 100)) == 0);
}
void TruncateToHeader(const std::string& path) { REQUIRE(truncate(path.c_str(), 40) == 0); }

TEST_CASE("disk tier: corrupt, torn, other-model and other-layout files are rejected",
          "[kv_cache][kv_disk]") {
  SECTION("a flipped payload byte") {
    const KvDiskOptions o = Options(FreshDir("corrupt"));
    CheckRejected(o, o, FlipPayloadByte);
  }
  SECTION("a flipped token id byte") {
    const KvDiskOptions o = Options(FreshDir("corrupt_tokens"));
    CheckRejected(o, o, FlipTokenByte);
  }
  SECTION("truncated (torn)") {
    const KvDiskOptions o = Options(FreshDir("torn"));
    CheckRejected(o, o, Truncate);
  }
  SECTION("truncated inside the header") {
    const KvDiskOptions o = Options(FreshDir("torn_header"));
    CheckRejected(o, o, TruncateToHeader);
  }
  SECTION("another model") {
    const KvDiskOptions o = Options(FreshDir("model"));
    CheckRejected(o, Options(o.dir, /*model_id=*/8), nullptr);
  }
  SECTION("another layout version") {
    KvDiskOptions old = Options(FreshDir("layout"));
    old.layout_version = kKvDiskLayoutVersion + 1;
    CheckRejected(old, Options(old.dir), nullptr);
  }
  SECTION("another KV type") {
    KvDiskOptions f32 = Options(FreshDir("kv_type"));
    KvDiskOptions bf16 = f32;
    bf16.shape.type = KvType::kBf16;
    bf16.shape.head_dim = 16;  // the same payload size: only the type differs
    CheckRejected(f32, bf16, nullptr);
  }
}

TEST_CASE("disk tier: the byte cap evicts the least recently used file", "[kv_cache][kv_disk]") {
  const std::string dir = FreshDir("cap");
  KvDiskOptions o = Options(dir);
  int64_t file_bytes;
  {
    auto probe = Open(Options(FreshDir("cap_probe")));
    Put(*probe, Chain(1, 1), 1);
    file_bytes = probe->stats().bytes_on_disk;
  }
  o.max_bytes = 3 * file_bytes + file_bytes / 2;  // room for three
  auto s = Open(o);
  const uint64_t a = Put(*s, Chain(1, 1), 1);
  const uint64_t b = Put(*s, Chain(1, 2), 2);
  const uint64_t c = Put(*s, Chain(1, 3), 3);
  // Reading `a` makes it the most recently used: `b` goes first.
  std::vector<std::byte> got(s->payload_bytes());
  REQUIRE(s->Read(a, Chain(1, 1), got.data()).ok());
  const uint64_t d = Put(*s, Chain(1, 4), 4);
  CHECK(s->Contains(a));
  CHECK_FALSE(s->Contains(b));
  CHECK_FALSE(fs::exists(PathOf(dir, b)));
  CHECK(s->Contains(c));
  CHECK(s->Contains(d));
  CHECK(s->stats().blocks_evicted == 1);
  CHECK(s->stats().files == 3);
  CHECK(s->stats().bytes_on_disk <= o.max_bytes);
  // A smaller cap at the next open trims the oldest files.
  s.reset();
  o.max_bytes = file_bytes + file_bytes / 2;
  s = Open(o);
  CHECK(s->stats().files == 1);
  CHECK(s->stats().bytes_on_disk <= o.max_bytes);
}

TEST_CASE("disk tier: a full queue drops instead of blocking, bad options are refused",
          "[kv_cache][kv_disk]") {
  KvDiskOptions o = Options(FreshDir("queue"));
  o.max_pending_bytes = 0;
  {
    auto s = Open(o);
    const std::vector<int32_t> chain = Chain(1);
    CHECK_FALSE(s->Enqueue(KeyOf(*s, chain), chain, Payload(*s, 1).data()));
    CHECK(s->stats().blocks_dropped == 1);
    // Waiting: queued, written.
    CHECK(s->Enqueue(KeyOf(*s, chain), chain, Payload(*s, 1).data(), /*wait=*/true));
    s->Flush();
    CHECK(s->stats().blocks_written == 1);
  }
  KvDiskOptions bad = o;
  bad.dir = "";
  CHECK(KvDiskStore::Open(bad).status().code() == absl::StatusCode::kInvalidArgument);
  bad = o;
  bad.max_bytes = 0;
  CHECK(KvDiskStore::Open(bad).status().code() == absl::StatusCode::kInvalidArgument);
  bad = o;
  bad.dir = "/proc/self/no_such_dir/kv";  // cannot be created
  absl::StatusOr<std::unique_ptr<KvDiskStore>> s = KvDiskStore::Open(bad);
  CHECK_FALSE(s.ok());
  CHECK_THAT(s.status().ToString(), Catch::Contains("/proc/self/no_such_dir/kv"));
}

TEST_CASE("disk tier: a write that fails is dropped and counted", "[kv_cache][kv_disk]") {
  const KvDiskOptions o = Options(FreshDir("unwritable"));
  auto s = Open(o);
  // The directory replaced by a file: every write fails (as root too, unlike permissions).
  fs::remove_all(o.dir);
  testing::WriteFile(o.dir, "not a directory");
  const std::vector<int32_t> chain = Chain(1);
  CHECK(s->Enqueue(KeyOf(*s, chain), chain, Payload(*s, 1).data()));
  s->Flush();
  CHECK(s->stats().blocks_dropped == 1);
  CHECK(s->stats().blocks_written == 0);
  CHECK_FALSE(s->Contains(KeyOf(*s, chain)));
  fs::remove(o.dir);
}

}  // namespace kv_disk_store_test
}  // namespace textgen
