#!/usr/bin/env bash
# scripts/tsan_triage.py on real reports (tests/support/tsan_reports/, from earlier TSan runs of
# this server) and variants of them: what it tolerates and what it must not.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
triage=("$root/scripts/tsan_triage.py" "$root" "$root/build-tsan")
dir="$root/tests/support/tsan_reports"
failed=0
expect() {  # expect EXIT_STATUS TOLERATED_COUNT FILE
  local out rc=0
  out=$("${triage[@]}" "$dir/$3" 2>/dev/null) || rc=$?
  if [ "$rc" != "$1" ] || ! grep -q ", $2 gRPC-internal$" <<<"$out"; then
    echo "FAIL: $3: exit $rc (want $1); $(tail -1 <<<"$out") (want $2 gRPC-internal)" >&2
    failed=1
  fi
}
expect 0 1 grpc_call_on_done.txt         # both accesses in gRPC's inline code, gRPC's arena
expect 0 1 grpc_stack_not_restored.txt   # one stack lost, the other and the memory gRPC's
expect 0 1 grpc_client_status_from_test.txt  # our test called Finish; gRPC's threads raced
expect 1 0 library_caller_our_accessor.txt  # the same, but our frame touches the memory
expect 1 0 library_caller_stack_memory.txt  # the same, but on stack memory
expect 1 0 ours_spdlog_at_exit.txt       # one access in server/textgen_server.cc
expect 1 0 grpc_frames_our_memory.txt    # gRPC frames, but on a block our code allocated
expect 0 1 grpc_status_message_alloc.txt  # gRPC's Finish (called by us) allocated what its core read
expect 1 0 ours_string_alloc.txt         # the same block, but a std::string of our code's
expect 1 0 ours_absl_alloc.txt           # the same block, but our code's absl::StrCat allocated it
expect 1 0 grpc_frames_use_after_free.txt  # only data races are ever tolerated
expect 1 1 mixed_one_file.txt            # one of each in one log: the run fails
# No report files at all (a clean run) is a pass.
"${triage[@]}" >/dev/null || { echo "FAIL: no files" >&2; failed=1; }
exit "$failed"
