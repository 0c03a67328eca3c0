#!/usr/bin/env bash
# The multi-threaded tests again under ThreadSanitizer, in build-tsan/ (TEXTGEN_SANITIZE=thread).
# Any report fails the run: each process halts on its first report (exit 66) and writes it to
# build-tsan/tsan-reports/, which must stay empty (a report in a textgen-server child that the
# test itself survived still fails). CI runs it after scripts/test-sanitizers.sh.
#
# What runs (TSan slows our code 5-15x; CI's budget for this script is ~10 min cold on 2 cores):
#   support/tsan_absl_sync_*  the Abseil shim below hides no real race and leaves no false one
#   engine/scheduler/*        the engine thread: queueing, batching, streaming callbacks,
#                             cancellation, sessions, prefill, shutdown
#   server/*                  minus the excluded ones below: real textgen-server processes (built
#                             with TSan) driven over gRPC and HTTP: streaming, cancellation,
#                             sessions, queue limits, metrics, shutdown/draining
# Left out:
#   the other engine tests    single-threaded (format, kv_cache, util, decoding, model): TSan
#                             cannot report anything there. tokenizer's and chat's one
#                             concurrent test each are not run yet (their binaries' build time
#                             under TSan is not measured; the server tests drive both through
#                             the prompt workers)
#   engine/ops                its threads are OpenMP's (held to one, below); the two tests that
#                             call one Linear / AMX matmul from two threads cover no path the
#                             server takes (one engine thread runs every kernel), and the ops
#                             test binary is the costliest to build
#   server tls, python_client, arch_eog tests  no server threads of ours beyond what the other
#                             server tests exercise (TLS lives in uninstrumented gRPC and
#                             cpp-httplib; the Python client is another process), and they are
#                             slow (arch_eog loads every architecture's model)
#   the two chat tests that send a google.protobuf.Struct (template kwargs): protobuf's headers
#                             switch to TSan-only inline code (PROTOBUF_TSAN) that does not match
#                             Debian's uninstrumented libprotobuf; building a Struct map crashes
#                             (SIGSEGV in Map::InnerMap) in the test process itself
#   "a queued request whose client disconnects ...": its test process takes a fatal signal
#                             (inside libstdc++) under TSan only; not triaged yet
#   client/, docker/, soak/, openai_node/, web/   client tools and deployment checks; the soak
#                             test alone would take the whole budget
#
# Third-party code is not instrumented (Debian packages), so:
#   - OpenMP (libgomp) is held to one thread (OMP_THREAD_LIMIT=1): TSan does not see libgomp's
#     barriers, so every parallel kernel would report false races on its output rows. The ops'
#     OpenMP kernels and oneDNN therefore run on the calling thread; what is checked is our own
#     threads (engine loop, server/gRPC/HTTP threads, prompt workers) and what they share.
#   - Abseil's mutexes: tests/support/tsan_absl_sync.cc (linked into every TSan binary) adds the
#     happens-before edges an instrumented Abseil would report to TSan.
#   - gRPC and protobuf: their own memory accesses are invisible to TSan; see tsan.supp for
#     what, if anything, is suppressed and why.
set -euo pipefail
cd "$(dirname "$0")/.."
export TEXTGEN_MODELS="${TEXTGEN_MODELS:-$(cd .. && pwd)/shared/models}"
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=true
B=build-tsan
cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTEXTGEN_SANITIZE=thread >/dev/null
# server_tests brings textgen-server and the other binaries the server tests start.
cmake --build "$B" -j"$(nproc)" --target tsan_absl_sync_check engine_scheduler_tests \
  server_tests

REPORTS="$PWD/$B/tsan-reports"
rm -rf "$REPORTS" && mkdir -p "$REPORTS"
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 log_path=$REPORTS/tsan \
suppressions=$PWD/scripts/tsan.supp"
export OMP_THREAD_LIMIT=1 OMP_NUM_THREADS=1

ENGINE='^engine/scheduler/'
# tls_test.cc (4), python_client_test.cc, arch_eog_test.cc, by test name.
EXCLUDE='^server/(TLS |mutual TLS |unusable TLS |a listener other hosts |the Python example '
EXCLUDE+='|every architecture family |template keyword arguments reach |each bad Chat input gets '
EXCLUDE+='|a queued request whose client disconnects )'
status=0
ctest --test-dir "$B" --output-on-failure -j"$(nproc)" --timeout 900 \
  -R "^support/tsan_|$ENGINE|^server/" -E "$EXCLUDE" || status=$?
if compgen -G "$REPORTS/tsan*" >/dev/null; then
  echo "test-tsan.sh: ThreadSanitizer reports:" >&2
  cat "$REPORTS"/tsan* >&2
  status=1
fi
exit "$status"
