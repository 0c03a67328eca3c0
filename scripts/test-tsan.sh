#!/usr/bin/env bash
# The multi-threaded tests again under ThreadSanitizer, in build-tsan/ (TEXTGEN_SANITIZE=thread,
# one kernel level: this CPU's, like test-sanitizers.sh). Every process writes its reports to
# build-tsan/tsan-reports/ and goes on; after the tests, scripts/tsan_triage.py fails the run on
# any report with a frame of ours in an access or on memory we allocated (and on any report that
# is not a data race), and lists, without failing, races that lie wholly inside gRPC's own inline
# code on gRPC's memory (why TSan's suppressions cannot express that: the script's header). A
# report in a textgen-server child that the test itself survived fails the run too.
#
#   scripts/test-tsan.sh          # the CI-sized subset (.ci/run runs it last)
#   scripts/test-tsan.sh --full   # every server test that can run under TSan (builds server_tests)
#
# What runs (TSan slows our code 5-15x; measured cost at the end of this header):
#   support/tsan_absl_sync_*  the Abseil shim below hides no real race and leaves no false one
#   tsan/server/happens_before_*  server/happens_before.h adds the edge it states, only that
#   engine/scheduler/*        the engine thread: queueing, batching, streaming callbacks,
#                             cancellation, sessions, prefill, shutdown
#   tsan/ops/*                the WorkerPool under ParallelFor/ParallelForEach: hand-offs,
#                             late workers, nesting, concurrent callers, sleeping and waking
#   state/*                   the session journals' writer threads: SQLite's, and Redis's
#                             writer, answer thread and Get under 8 threads, outages and
#                             reconnection against real redis-server processes (~7 s)
#   tsan/server/*             (CI) server_tsan_tests: the server test files named in
#                             tests/CMakeLists.txt (cancel, chat, errors, generate, lifecycle,
#                             limits, openai_connection, session), real TSan-built textgen-server
#                             processes driven over gRPC and HTTP: streaming, client cancels and
#                             deadlines, sessions, the queue and its limits, prompt workers under
#                             megabyte texts, HTTP disconnects, SIGTERM draining. One binary of
#                             8 files instead of server_tests' 22 keeps the cold build in budget.
#   server/*                  (--full) all of server_tests minus the exclusions below: adds the
#                             metrics, auth/API keys, hostile input, prefix cache, conversion and
#                             the other OpenAI API tests
# Left out:
#   the other engine tests    single-threaded (format, kv_cache, util, decoding, model): TSan
#                             cannot report anything there. tokenizer's and chat's one
#                             concurrent test each are not run (the server tests drive both
#                             through the prompt workers)
#   engine/ops (but the pool)  oneDNN's threads are OpenMP's (held to one, below); the two tests
#                             that call one Linear / AMX matmul from two threads cover no path
#                             the server takes (one engine thread runs every kernel), and the
#                             ops test binary is the costliest to build
#   server tls, python_client, arch_eog tests  no server threads of ours beyond what the other
#                             server tests exercise (TLS lives in uninstrumented gRPC and
#                             cpp-httplib; the Python client is another process), and they are
#                             slow (arch_eog loads every architecture's model)
#   the chat test that sends template_kwargs (a google.protobuf.Struct): a tool limitation,
#                             not a race. protobuf's map_field.h (3.21, line 427) gives
#                             MapFieldBase two extra members when __SANITIZE_THREAD__ is defined,
#                             so a Struct built by Debian's uninstrumented libprotobuf (its
#                             constructor, its parser) has another layout than the inline Map code
#                             compiled into our TSan binaries reads: the test's own
#                             `(*kwargs.mutable_fields())["k"]` takes SIGSEGV in
#                             Map::InnerMap::FindHelper (map.h:272, num_buckets_ read 8 bytes
#                             off), and so would the server's TemplateKwargsToJson. A 5-line
#                             program with only protobuf shows the same under -fsanitize=thread.
#   client/, docker/, soak/, openai_node/, web/   client tools and deployment checks; the soak
#                             test alone would take the whole budget
#
# Third-party code is not instrumented (Debian packages), so:
#   - OpenMP (libgomp) is held to one thread (OMP_THREAD_LIMIT=1): TSan does not see libgomp's
#     barriers, so oneDNN's parallel calls would report false races on their output rows; they
#     run on the calling thread. The ops' own parallel loops run on our WorkerPool (atomics TSan
#     sees); what is checked is our own threads (engine loop, compute pool, server/gRPC/HTTP
#     threads, prompt workers) and what they share.
#   - Abseil's mutexes: tests/support/tsan_absl_sync.cc (linked into every TSan binary) adds the
#     happens-before edges an instrumented Abseil would report to TSan.
#   - gRPC and protobuf: their own memory accesses are invisible to TSan; see tsan.supp for
#     what, if anything, is suppressed and why.
#   - gRPC's callback API orders some of our calls only inside libgrpc++: it calls OnDone after
#     every other reaction has returned, but runs OnCancel in a libgrpc++ closure whose release
#     (the call's refcount) TSan never sees. A Finish from OnCancel then looked unordered with
#     the GenerateReactor's destruction after OnDone (the engine thread dropping the last
#     reference via its sink; seen in 2 of 6 runs by an earlier session). Not a use-after-free
#     (gRPC's reference is dropped only in OnDone); server/happens_before.h states the order to
#     TSan in the reactor rather than a suppression, which would also hide a real early free.
#   - history_size=7: the earlier access of a report keeps its stack, so the gRPC entries in
#     tsan.supp can match it (one report in 3 runs had none and failed the run).
#
# Cost, 2-core Ice Lake shared with a CI run (load 3-6): empty build-tsan/ 12 min wall (792 CPU-s,
#   ccache nearly cold; 1,120 CPU-s with no ccache at all), rebuild after one server file 30-50 s,
#   run 220-264 s (-j2, 77 tests). As a CI line: ~16-17 min cold, ~6-7 min warm (estimated).
set -euo pipefail
cd "$(dirname "$0")/.."
FULL=0
case "${1:-}" in
  --full) FULL=1 ;;
  "") ;;
  *) echo "usage: $0 [--full]" >&2; exit 2 ;;
esac
# Before OMP_THREAD_LIMIT=1 below: GNU nproc honours it (ctest ran with -j1 until it was read here).
JOBS=$(nproc)
export TEXTGEN_MODELS="${TEXTGEN_MODELS:-$(cd .. && pwd)/shared/models}"
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=true
B=build-tsan
cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTEXTGEN_SANITIZE=thread \
  -DTEXTGEN_MARCH=native -DTEXTGEN_ISA_LEVELS=native >/dev/null
# The server test binaries bring textgen-server and the other binaries their tests start.
if ((FULL)); then
  SERVER_TESTS=server_tests SERVER='^server/'
else
  SERVER_TESTS=server_tsan_tests SERVER='^tsan/server/'
fi
cmake --build "$B" -j"$JOBS" --target tsan_absl_sync_check engine_scheduler_tests \
  ops_tsan_tests state_tests "$SERVER_TESTS"

REPORTS="$PWD/$B/tsan-reports"
rm -rf "$REPORTS" && mkdir -p "$REPORTS"
# history_size=7 (the most, 4M accesses per thread): with less, the earlier access of a report
# in a busy gRPC server often has no stack ("failed to restore the stack"), and then no
# suppression naming that stack's gRPC function can match.
# halt_on_error=0 exitcode=0: a gRPC-internal report must not kill the server or fail the test
# it happened in; the triage below decides.
export TSAN_OPTIONS="halt_on_error=0 exitcode=0 second_deadlock_stack=1 history_size=7 \
log_path=$REPORTS/tsan suppressions=$PWD/scripts/tsan.supp"
export OMP_THREAD_LIMIT=1 OMP_NUM_THREADS=1

ENGINE='^engine/scheduler/|^tsan/ops/|^state/'
# tls_test.cc (4), python_client_test.cc, arch_eog_test.cc, and the chat test with
# template_kwargs, by test name.
EXCLUDE='^(tsan/)?server/(TLS |mutual TLS |unusable TLS |a listener other hosts |the Python example '
EXCLUDE+='|every architecture family |template keyword arguments reach )'
status=0
ctest --test-dir "$B" --output-on-failure -j"$JOBS" --timeout 900 \
  -R "^support/tsan_|$ENGINE|$SERVER" -E "$EXCLUDE" || status=$?
shopt -s nullglob
python3 scripts/tsan_triage.py "$PWD" "$PWD/$B" "$REPORTS"/tsan* || status=1
exit "$status"
