// ThreadSanitizer builds only (TEXTGEN_SANITIZE=thread): teaches TSan the happens-before edges of
// Debian's Abseil synchronization primitives.
//
// Debian's libabsl_synchronization.so is not built with -fsanitize=thread, so absl::Mutex,
// absl::CondVar, absl::Notification and absl::BlockingCounter synchronize through atomics and
// futexes that TSan never sees: every access guarded by an absl::Mutex would be reported as a
// race. An Abseil built with TSan annotates these itself; this library does the same from the
// outside. It defines the primitives' out-of-line members, so the dynamic linker binds every call
// to them (ours, gRPC's and Abseil's own) here first; each forwards to the real function (found
// with dlsym(RTLD_NEXT)) and adds __tsan_acquire / __tsan_release on the object's address:
//   lock (any kind, once it holds the mutex)  -> acquire(mutex)
//   unlock (any kind, before letting go)      -> release(mutex)
//   Await / CondVar::Wait                     -> release(mutex), wait, acquire(mutex)
//   Notify / DecrementCount                   -> release(object)
//   WaitForNotification / Wait (when done)    -> acquire(object)
// A reader unlock also releases, which orders readers among themselves: slightly more
// happens-before than the real rwlock gives, never less than it guarantees writers.
//
// Abseil evaluates a waiter's absl::Condition in whichever thread releases the mutex; that thread
// reads the waiter's Condition (and what the predicate reads) with synchronization TSan cannot
// see. Abseil's own TSan build ignores the accesses of such an evaluation; so do we, for the
// duration of every real call that can evaluate conditions (unlocks, waits, LockWhen).
//
// Only linked into TSan builds (CMakeLists.txt). Reads no flags, changes no behavior: every call
// still runs the real Abseil function.
#include <dlfcn.h>  // dlsym, RTLD_NEXT, RTLD_DEFAULT (_GNU_SOURCE: g++ defines it)
#include <sanitizer/tsan_interface.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/base/options.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

extern "C" {
void AnnotateIgnoreReadsBegin(const char* file, int line);
void AnnotateIgnoreReadsEnd(const char* file, int line);
void AnnotateIgnoreWritesBegin(const char* file, int line);
void AnnotateIgnoreWritesEnd(const char* file, int line);
}

namespace {

#define TEXTGEN_STR2(x) #x
#define TEXTGEN_STR(x) TEXTGEN_STR2(x)

// The Itanium-mangled name of an Abseil member: `nested` is the part after the namespace, e.g.
// "5Mutex4LockEv" for absl::<inline ns>::Mutex::Lock(). `is_const` for const members.
std::string AbslSymbol(const char* nested, bool is_const) {
  const std::string ns = TEXTGEN_STR(ABSL_OPTION_INLINE_NAMESPACE_NAME);
  return std::string(is_const ? "_ZNK" : "_ZN") + "4absl" + std::to_string(ns.size()) + ns + nested;
}

// The real Abseil function `nested` as a plain function pointer (`this` is the first argument in
// the Itanium C++ ABI). Aborts with the symbol's name if Abseil does not define it: a TSan run
// without these edges would only report false races.
template <typename Fn>
Fn Real(const char* nested, bool is_const = false) {
  const std::string name = AbslSymbol(nested, is_const);
  void* sym = dlsym(RTLD_NEXT, name.c_str());
  if (sym == nullptr) {
    std::fprintf(stderr, "tsan_absl_sync: %s not found in Abseil\n", name.c_str());
    std::abort();
  }
  return reinterpret_cast<Fn>(sym);
}

// Ignores this thread's memory accesses while alive (see the file comment: conditions evaluated
// on behalf of other threads).
class IgnoreAccesses {
 public:
  IgnoreAccesses() {
    AnnotateIgnoreReadsBegin(__FILE__, __LINE__);
    AnnotateIgnoreWritesBegin(__FILE__, __LINE__);
  }
  ~IgnoreAccesses() {
    AnnotateIgnoreWritesEnd(__FILE__, __LINE__);
    AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
  }
  IgnoreAccesses(const IgnoreAccesses&) = delete;
  IgnoreAccesses& operator=(const IgnoreAccesses&) = delete;
};

void Acquire(const void* p) { __tsan_acquire(const_cast<void*>(p)); }
void Release(const void* p) { __tsan_release(const_cast<void*>(p)); }

// absl::Notification::HasBeenNotified() is inline: an acquire load of the `notified_yet_` atomic
// that follows the Mutex member, which TSan instruments in our code. Notify() therefore also
// releases on that address, so a true HasBeenNotified() orders like WaitForNotification().
const void* NotifiedFlag(const absl::Notification* n) {
  static_assert(sizeof(absl::Notification) == 2 * sizeof(absl::Mutex),
                "absl::Notification layout changed: {Mutex mutex_; atomic<bool> notified_yet_;}");
  return reinterpret_cast<const char*>(n) + sizeof(absl::Mutex);
}

// Fails the process at load time if the executable's calls to Abseil do not reach this library
// (it must come before Abseil in the NEEDED list): the run would report a false race on every
// mutex-guarded access, or worse pass with some primitives annotated and others not.
__attribute__((constructor)) void CheckInterposed() {
  const std::string name = AbslSymbol("5Mutex4LockEv", false);
  void* bound = dlsym(RTLD_DEFAULT, name.c_str());
  void* ours = dlsym(RTLD_NEXT, name.c_str());  // Abseil's, the one that must not be bound
  if (bound == nullptr || bound == ours) {
    std::fprintf(stderr,
                 "tsan_absl_sync: absl::Mutex::Lock binds to Abseil, not to this library: link "
                 "libtextgen_tsan_absl_sync.so before Abseil\n");
    std::abort();
  }
}

}  // namespace

namespace absl {
ABSL_NAMESPACE_BEGIN

using MutexFn = void (*)(Mutex*);
using MutexBoolFn = bool (*)(Mutex*);
using CondFn = void (*)(Mutex*, const Condition&);
using CondTimeoutFn = bool (*)(Mutex*, const Condition&, Duration);
using CondDeadlineFn = bool (*)(Mutex*, const Condition&, Time);

void Mutex::Lock() {
  static const auto real = Real<MutexFn>("5Mutex4LockEv");
  real(this);
  Acquire(this);
}

void Mutex::ReaderLock() {
  static const auto real = Real<MutexFn>("5Mutex10ReaderLockEv");
  real(this);
  Acquire(this);
}

bool Mutex::TryLock() {
  static const auto real = Real<MutexBoolFn>("5Mutex7TryLockEv");
  const bool locked = real(this);
  if (locked) Acquire(this);
  return locked;
}

bool Mutex::ReaderTryLock() {
  static const auto real = Real<MutexBoolFn>("5Mutex13ReaderTryLockEv");
  const bool locked = real(this);
  if (locked) Acquire(this);
  return locked;
}

void Mutex::Unlock() {
  static const auto real = Real<MutexFn>("5Mutex6UnlockEv");
  Release(this);
  IgnoreAccesses ignore;
  real(this);
}

void Mutex::ReaderUnlock() {
  static const auto real = Real<MutexFn>("5Mutex12ReaderUnlockEv");
  Release(this);
  IgnoreAccesses ignore;
  real(this);
}

void Mutex::LockWhen(const Condition& cond) {
  static const auto real = Real<CondFn>("5Mutex8LockWhenERKNS0_9ConditionE");
  {
    IgnoreAccesses ignore;
    real(this, cond);
  }
  Acquire(this);
}

void Mutex::ReaderLockWhen(const Condition& cond) {
  static const auto real = Real<CondFn>("5Mutex14ReaderLockWhenERKNS0_9ConditionE");
  {
    IgnoreAccesses ignore;
    real(this, cond);
  }
  Acquire(this);
}

bool Mutex::LockWhenWithTimeout(const Condition& cond, Duration timeout) {
  static const auto real =
      Real<CondTimeoutFn>("5Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  bool met;
  {
    IgnoreAccesses ignore;
    met = real(this, cond, timeout);
  }
  Acquire(this);  // held whether or not the condition became true
  return met;
}

bool Mutex::LockWhenWithDeadline(const Condition& cond, Time deadline) {
  static const auto real =
      Real<CondDeadlineFn>("5Mutex20LockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  bool met;
  {
    IgnoreAccesses ignore;
    met = real(this, cond, deadline);
  }
  Acquire(this);
  return met;
}

bool Mutex::ReaderLockWhenWithTimeout(const Condition& cond, Duration timeout) {
  static const auto real =
      Real<CondTimeoutFn>("5Mutex25ReaderLockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  bool met;
  {
    IgnoreAccesses ignore;
    met = real(this, cond, timeout);
  }
  Acquire(this);
  return met;
}

bool Mutex::ReaderLockWhenWithDeadline(const Condition& cond, Time deadline) {
  static const auto real =
      Real<CondDeadlineFn>("5Mutex26ReaderLockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  bool met;
  {
    IgnoreAccesses ignore;
    met = real(this, cond, deadline);
  }
  Acquire(this);
  return met;
}

void Mutex::Await(const Condition& cond) {
  static const auto real = Real<CondFn>("5Mutex5AwaitERKNS0_9ConditionE");
  Release(this);
  {
    IgnoreAccesses ignore;
    real(this, cond);
  }
  Acquire(this);
}

bool Mutex::AwaitWithTimeout(const Condition& cond, Duration timeout) {
  static const auto real =
      Real<CondTimeoutFn>("5Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  Release(this);
  bool met;
  {
    IgnoreAccesses ignore;
    met = real(this, cond, timeout);
  }
  Acquire(this);
  return met;
}

bool Mutex::AwaitWithDeadline(const Condition& cond, Time deadline) {
  static const auto real =
      Real<CondDeadlineFn>("5Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  Release(this);
  bool met;
  {
    IgnoreAccesses ignore;
    met = real(this, cond, deadline);
  }
  Acquire(this);
  return met;
}

void CondVar::Wait(Mutex* mu) {
  static const auto real = Real<void (*)(CondVar*, Mutex*)>("7CondVar4WaitEPNS0_5MutexE");
  Release(mu);
  {
    IgnoreAccesses ignore;
    real(this, mu);
  }
  Acquire(mu);
}

bool CondVar::WaitWithTimeout(Mutex* mu, Duration timeout) {
  static const auto real = Real<bool (*)(CondVar*, Mutex*, Duration)>(
      "7CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE");
  Release(mu);
  bool timed_out;
  {
    IgnoreAccesses ignore;
    timed_out = real(this, mu, timeout);
  }
  Acquire(mu);
  return timed_out;
}

bool CondVar::WaitWithDeadline(Mutex* mu, Time deadline) {
  static const auto real =
      Real<bool (*)(CondVar*, Mutex*, Time)>("7CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE");
  Release(mu);
  bool timed_out;
  {
    IgnoreAccesses ignore;
    timed_out = real(this, mu, deadline);
  }
  Acquire(mu);
  return timed_out;
}

void Notification::Notify() {
  static const auto real = Real<void (*)(Notification*)>("12Notification6NotifyEv");
  Release(this);
  Release(NotifiedFlag(this));
  real(this);
}

void Notification::WaitForNotification() const {
  static const auto real =
      Real<void (*)(const Notification*)>("12Notification19WaitForNotificationEv", true);
  real(this);
  Acquire(this);
}

bool Notification::WaitForNotificationWithTimeout(Duration timeout) const {
  static const auto real = Real<bool (*)(const Notification*, Duration)>(
      "12Notification30WaitForNotificationWithTimeoutENS0_8DurationE", true);
  const bool notified = real(this, timeout);
  if (notified) Acquire(this);
  return notified;
}

bool Notification::WaitForNotificationWithDeadline(Time deadline) const {
  static const auto real = Real<bool (*)(const Notification*, Time)>(
      "12Notification31WaitForNotificationWithDeadlineENS0_4TimeE", true);
  const bool notified = real(this, deadline);
  if (notified) Acquire(this);
  return notified;
}

bool BlockingCounter::DecrementCount() {
  static const auto real = Real<bool (*)(BlockingCounter*)>("15BlockingCounter14DecrementCountEv");
  Release(this);
  return real(this);
}

void BlockingCounter::Wait() {
  static const auto real = Real<void (*)(BlockingCounter*)>("15BlockingCounter4WaitEv");
  real(this);
  Acquire(this);
}

ABSL_NAMESPACE_END
}  // namespace absl
