// Fuzz inputs as files. The readers under test take paths (they mmap or stream the file), so
// each input is written to an in-memory file (memfd) and opened as /proc/self/fd/N: no disk
// I/O per input, and the file is exactly the input's size.
#ifndef TEXTGEN_FUZZ_FUZZ_FILE_H_
#define TEXTGEN_FUZZ_FUZZ_FILE_H_

#include <cstddef>
#include <cstdint>
#include <string>

namespace textgen::fuzz {

// One reusable in-memory file; aborts (a fuzzing setup error, not a finding) if the OS refuses.
// Not thread-safe: libFuzzer runs inputs one at a time.
class FuzzFile {
 public:
  explicit FuzzFile(const char* name);
  ~FuzzFile();
  FuzzFile(const FuzzFile&) = delete;
  FuzzFile& operator=(const FuzzFile&) = delete;

  // Replaces the contents with `data` [size].
  void Write(const uint8_t* data, size_t size);
  // A path that opens this file (valid while it lives).
  const std::string& path() const { return path_; }

 private:
  int fd_;
  std::string path_;
};

// A fresh directory under $TMPDIR (default /tmp) in which `file_name` is a symbolic link to
// `target`'s path, for readers that take a folder (tokenizer.json). Removed at exit.
class FuzzDir {
 public:
  FuzzDir();
  ~FuzzDir();
  FuzzDir(const FuzzDir&) = delete;
  FuzzDir& operator=(const FuzzDir&) = delete;

  void Link(const std::string& file_name, const FuzzFile& target);
  // Writes a regular file of fixed contents.
  void Put(const std::string& file_name, const std::string& contents);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace textgen::fuzz

#endif  // TEXTGEN_FUZZ_FUZZ_FILE_H_
