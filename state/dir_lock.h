// An exclusive lock on a state directory, held as long as the object lives: a second server on
// the same directory is refused instead of writing the same database beside the first.
#ifndef TEXTGEN_STATE_DIR_LOCK_H_
#define TEXTGEN_STATE_DIR_LOCK_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace textgen::state {

class DirLock {
 public:
  // flock(LOCK_EX | LOCK_NB) on `path` (created if missing), which then holds this process's
  // id. FailedPrecondition naming the path (and the holder's pid) if another process holds it;
  // the errno's Unavailable / PermissionDenied if the file cannot be created or opened.
  static absl::StatusOr<std::unique_ptr<DirLock>> Acquire(const std::string& path);
  ~DirLock();  // releases it (closing the descriptor)
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;

 private:
  explicit DirLock(int fd) : fd_(fd) {}
  int fd_;
};

}  // namespace textgen::state

#endif  // TEXTGEN_STATE_DIR_LOCK_H_
