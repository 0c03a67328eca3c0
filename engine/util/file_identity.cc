#include "engine/util/file_identity.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace textgen {
namespace {

constexpr uint64_t kP1 = 0x9E3779B185EBCA87ULL;
constexpr uint64_t kP2 = 0xC2B2AE3D27D4EB4FULL;
constexpr uint64_t kP3 = 0x165667B19E3779F9ULL;
constexpr uint64_t kP4 = 0x85EBCA77C2B2AE63ULL;
constexpr uint64_t kP5 = 0x27D4EB2F165667C5ULL;

uint64_t Round(uint64_t acc, uint64_t x) { return std::rotl(acc + x * kP2, 31) * kP1; }
uint64_t Merge(uint64_t acc, uint64_t v) { return (acc ^ Round(0, v)) * kP1 + kP4; }
uint64_t Load64(const unsigned char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

absl::Status ErrnoStatus(int err, const std::string& what) {
  std::string msg = absl::StrCat(what, ": ", std::strerror(err));
  if (err == ENOENT) return absl::NotFoundError(msg);
  if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(msg);
  return absl::InternalError(msg);
}

absl::StatusOr<uint64_t> RegularFileIdentity(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, absl::StrCat("cannot open model file ", path));
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    close(fd);
    return ErrnoStatus(err, absl::StrCat("cannot stat model file ", path));
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  constexpr size_t kHead = size_t{1} << 20;
  constexpr size_t kSample = 4096;
  constexpr int kSamples = 64;
  std::vector<unsigned char> buf;
  auto read_at = [&](uint64_t off, size_t n) -> bool {
    buf.resize(n);
    size_t got = 0;
    while (got < n) {
      const ssize_t r = pread(fd, buf.data() + got, n - got, static_cast<off_t>(off + got));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return false;
      got += static_cast<size_t>(r);
    }
    return true;
  };
  uint64_t h = Checksum64(&size, sizeof(size), 0x7465787467656e31ULL);  // "textgen1"
  const size_t head = static_cast<size_t>(std::min<uint64_t>(size, kHead));
  bool ok = read_at(0, head);
  if (ok) h = Checksum64(buf.data(), buf.size(), h);
  if (ok && size > kHead + kSample) {
    const uint64_t span = size - kHead - kSample;
    for (int i = 0; i < kSamples && ok; ++i) {
      const uint64_t off = kHead + span * static_cast<uint64_t>(i) / (kSamples - 1);
      ok = read_at(off, kSample);
      if (ok) h = Checksum64(buf.data(), buf.size(), h);
    }
  }
  const int err = errno;
  close(fd);
  if (!ok) return ErrnoStatus(err == 0 ? EIO : err, absl::StrCat("cannot read model file ", path));
  return h;
}

}  // namespace

uint64_t Checksum64(const void* data, size_t bytes, uint64_t seed) {
  const auto* p = static_cast<const unsigned char*>(data);
  const unsigned char* const end = p + bytes;
  uint64_t h;
  if (bytes >= 32) {
    uint64_t v1 = seed + kP1 + kP2, v2 = seed + kP2, v3 = seed, v4 = seed - kP1;
    const unsigned char* const limit = end - 32;
    do {
      v1 = Round(v1, Load64(p));
      v2 = Round(v2, Load64(p + 8));
      v3 = Round(v3, Load64(p + 16));
      v4 = Round(v4, Load64(p + 24));
      p += 32;
    } while (p <= limit);
    h = std::rotl(v1, 1) + std::rotl(v2, 7) + std::rotl(v3, 12) + std::rotl(v4, 18);
    h = Merge(Merge(Merge(Merge(h, v1), v2), v3), v4);
  } else {
    h = seed + kP5;
  }
  h += static_cast<uint64_t>(bytes);
  for (; p + 8 <= end; p += 8) h = std::rotl(h ^ Round(0, Load64(p)), 27) * kP1 + kP4;
  for (; p < end; ++p) h = std::rotl(h ^ (*p * kP5), 11) * kP1;
  h ^= h >> 33;
  h *= kP2;
  h ^= h >> 29;
  h *= kP3;
  h ^= h >> 32;
  return h;
}

absl::StatusOr<uint64_t> FileIdentity(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_directory(path, ec)) return RegularFileIdentity(path);
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(path, ec)) {
    if (entry.is_regular_file(ec)) names.push_back(entry.path().filename().string());
  }
  if (ec) return absl::InternalError(absl::StrCat("cannot list ", path, ": ", ec.message()));
  std::sort(names.begin(), names.end());
  uint64_t h = 0x74677364697231ULL;
  for (const std::string& name : names) {
    absl::StatusOr<uint64_t> id = RegularFileIdentity(absl::StrCat(path, "/", name));
    if (!id.ok()) return id.status();
    h = Checksum64(name.data(), name.size(), h);
    h = Checksum64(&*id, sizeof(*id), h);
  }
  return h;
}

}  // namespace textgen
