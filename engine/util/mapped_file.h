// A read-only memory map of a whole file.
#ifndef TEXTGEN_ENGINE_UTIL_MAPPED_FILE_H_
#define TEXTGEN_ENGINE_UTIL_MAPPED_FILE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/statusor.h"

namespace textgen {

// Owns an mmap of a file for its lifetime. Thread-compatible; the bytes are immutable.
class MappedFile {
 public:
  // NotFound if the file does not exist, PermissionDenied if it cannot be read,
  // FailedPrecondition if it is not a regular file, Internal on other OS errors (with errno
  // text). Every message names the path. Empty files map to size 0, data nullptr.
  static absl::StatusOr<std::unique_ptr<MappedFile>> Open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // The whole file as bytes (not text); empty for an empty file.
  std::string_view view() const {
    return std::string_view(reinterpret_cast<const char*>(data_), size_);
  }

 private:
  MappedFile(std::string path, const uint8_t* data, size_t size)
      : path_(std::move(path)), data_(data), size_(size) {}
  std::string path_;
  const uint8_t* data_;
  size_t size_;
};

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_UTIL_MAPPED_FILE_H_
