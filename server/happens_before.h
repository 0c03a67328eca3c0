// An ordering that a library guarantees through code ThreadSanitizer cannot see, told to TSan
// (no-op in every other build).
//
// Debian's gRPC is not built with -fsanitize=thread. Some of the orderings its callback API
// promises run only through its compiled code, e.g. "OnDone is called after all other
// reactions": after an OnCancel reaction returns, libgrpc++ drops the call's reference with an
// atomic TSan never sees, so what OnCancel did (e.g. Finish) looks unordered with OnDone and with
// everything after it (the reactor's destruction). Release() where the promise starts, Acquire()
// where it holds: TSan then orders the two exactly as the library does, and still reports any
// access the library does not order (unlike a suppression, which would hide those too).
#ifndef TEXTGEN_SERVER_HAPPENS_BEFORE_H_
#define TEXTGEN_SERVER_HAPPENS_BEFORE_H_

#if defined(__SANITIZE_THREAD__)
#define TEXTGEN_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TEXTGEN_TSAN 1
#endif
#endif

#ifdef TEXTGEN_TSAN
#include <sanitizer/tsan_interface.h>
#endif

namespace textgen::server {

class HappensBefore {
 public:
  // Everything this thread did so far happens before what follows a later Acquire().
  void Release() {
#ifdef TEXTGEN_TSAN
    __tsan_release(this);
#endif
  }
  void Acquire() {
#ifdef TEXTGEN_TSAN
    __tsan_acquire(this);
#endif
  }
};

}  // namespace textgen::server

#endif  // TEXTGEN_SERVER_HAPPENS_BEFORE_H_
