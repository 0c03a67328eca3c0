#include "state/dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace textgen::state {

absl::StatusOr<std::unique_ptr<DirLock>> DirLock::Acquire(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int err = errno;
    const std::string why = absl::StrCat("cannot open the lock file ", path, ": ", strerror(err));
    return err == EACCES || err == EPERM || err == EROFS ? absl::PermissionDeniedError(why)
                                                         : absl::UnavailableError(why);
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    std::string holder;
    char buf[32] = {};
    if (err == EWOULDBLOCK && ::pread(fd, buf, sizeof(buf) - 1, 0) > 0) {
      holder = absl::StrCat(" (process ", absl::StripAsciiWhitespace(buf), ")");
    }
    ::close(fd);
    if (err != EWOULDBLOCK) {
      return absl::UnavailableError(absl::StrCat("cannot lock ", path, ": ", strerror(err)));
    }
    return absl::FailedPreconditionError(
        absl::StrCat("another textgen-server", holder, " uses this state directory (", path,
                     " is locked); give each server its own --state-dir"));
  }
  // The holder's pid, for the message a second server prints (best effort).
  const std::string pid = absl::StrCat(::getpid(), "\n");
  if (::ftruncate(fd, 0) == 0) {
    [[maybe_unused]] ssize_t n = ::pwrite(fd, pid.data(), pid.size(), 0);
  }
  return std::unique_ptr<DirLock>(new DirLock(fd));
}

DirLock::~DirLock() { ::close(fd_); }

}  // namespace textgen::state
