#include "fuzz/fuzz_file.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace textgen::fuzz {
namespace {

[[noreturn]] void Die(const std::string& what) {
  std::perror(what.c_str());
  std::abort();
}

}  // namespace

FuzzFile::FuzzFile(const char* name) : fd_(::memfd_create(name, MFD_CLOEXEC)) {
  if (fd_ < 0) Die("memfd_create");
  path_ = "/proc/self/fd/" + std::to_string(fd_);
}

FuzzFile::~FuzzFile() { ::close(fd_); }

void FuzzFile::Write(const uint8_t* data, size_t size) {
  if (::ftruncate(fd_, 0) != 0) Die("ftruncate");
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::pwrite(fd_, data + done, size - done, static_cast<off_t>(done));
    if (n <= 0) Die("pwrite");
    done += static_cast<size_t>(n);
  }
}

FuzzDir::FuzzDir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern =
      std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/textgen-fuzz-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) Die("mkdtemp " + pattern);
  path_ = pattern;
}

FuzzDir::~FuzzDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

void FuzzDir::Link(const std::string& file_name, const FuzzFile& target) {
  const std::string link = path_ + "/" + file_name;
  // /proc/self resolves in the reading process, which is this one.
  if (::symlink(target.path().c_str(), link.c_str()) != 0) Die("symlink " + link);
}

void FuzzDir::Put(const std::string& file_name, const std::string& contents) {
  std::ofstream out(path_ + "/" + file_name, std::ios::binary);
  out << contents;
  if (!out) Die("write " + path_ + "/" + file_name);
}

}  // namespace textgen::fuzz
