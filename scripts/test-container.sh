#!/usr/bin/env bash
# Builds the image from docker/Dockerfile with podman and exercises it: a container on the
# shared demo model (mounted read-only) must report SERVING through its HEALTHCHECK, stream the
# reference text of a greedy generation, serve /metrics, and exit 0 within its grace period on
# SIGTERM. Prints the image's size and the times. Needs root (podman, debootstrap); CI runs it.
#
# No Docker engine or registry is reachable here: the debian:bookworm-slim base image is made
# with debootstrap and imported once (reused afterwards; --rebuild-base makes it again).
set -euo pipefail
cd "$(dirname "$0")/.."
# Where the container tests cannot run at all, say so and fail: a test command that passes
# without having run them would hide exactly the breakage they exist to catch.
cannot_run() {
  echo "test-container.sh: FAIL: the container tests cannot run on this machine: $*" >&2
  exit 1
}
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null && sudo -n true 2>/dev/null ||
    cannot_run "they need root (podman, debootstrap), and this user is not root and has no" \
      "password-less sudo; run scripts/test.sh as root or with sudo"
  exec sudo -E bash "$0" "$@"
fi
for tool in podman podman-compose debootstrap iptables jq; do
  command -v "$tool" >/dev/null ||
    cannot_run "$tool is not installed (scripts/install-deps.sh installs it)"
done
podman_info=$(podman info --format '{{.Host.NetworkBackend}}' 2>&1) ||
  cannot_run "podman does not work here: $podman_info"

models="${TEXTGEN_MODELS:-$(cd .. && pwd)/shared/models}"
[ -f "$models/stories260K.gguf" ] || { echo "test-container.sh: no models in $models" >&2; exit 1; }
reference="${TEXTGEN_REFERENCE:-$models/../reference}/stories260K.greedy.json"
[ -f "$reference" ] || { echo "test-container.sh: no $reference" >&2; exit 1; }
rebuild_base=0
[ "${1:-}" = "--rebuild-base" ] && rebuild_base=1

export CONTAINERS_CONF="$PWD/docker/podman/containers.conf"
podman=(podman --runtime runc --cgroup-manager=cgroupfs)
base=docker.io/library/debian:bookworm-slim
image=localhost/textgen:test
container="textgen-test-$$"
grace=10  # the server's default --shutdown-grace
log() { echo "test-container.sh: $*"; }
# The logs first, the verdict last (where a tail of the output shows it).
fail() {
  "${podman[@]}" logs "$container" 2>&1 | grep -v 'level=' | tail -n 40 >&2 || true
  echo "test-container.sh: FAIL: $*" >&2
  exit 1
}
cleanup() { "${podman[@]}" rm -f -t 0 "$container" >/dev/null 2>&1 || true; }
trap cleanup EXIT

# --- The base image: debootstrap minbase, trimmed as Debian's slim images are. ---
if [ "$rebuild_base" = 1 ] || ! "${podman[@]}" image exists "$base"; then
  t0=$SECONDS
  root=$(mktemp -d /tmp/textgen-rootfs.XXXXXX)
  debootstrap --variant=minbase bookworm "$root" http://deb.debian.org/debian >"$root.log" 2>&1 ||
    { cat "$root.log" >&2; exit 1; }
  cat >"$root/etc/apt/sources.list" <<'SOURCES'
deb http://deb.debian.org/debian bookworm main
deb http://deb.debian.org/debian bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
SOURCES
  # As debian:bookworm-slim: no docs, man pages or locales from later installs, no apt lists.
  cat >"$root/etc/dpkg/dpkg.cfg.d/slim" <<'SLIM'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
SLIM
  find "$root/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
  rm -rf "$root"/usr/share/{man,info}/* "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*
  find "$root/usr/share/locale" -mindepth 1 -maxdepth 1 -not -name locale.alias \
    -exec rm -rf {} +
  tar -C "$root" -c . | "${podman[@]}" import - "$base" >/dev/null
  rm -rf "$root" "$root.log"
  log "base image $base made with debootstrap in $((SECONDS - t0)) s"
fi

# --- Preflight: a container on a bridge network (what compose uses) must start, checked in
# seconds instead of after the image build. Missing run-time pieces of podman's network stack
# (iptables for netavark, once) show up here with podman's own error. ---
mkdir -p build
preflight_net="textgen-preflight-$$"
"${podman[@]}" network create "$preflight_net" >/dev/null 2>build/preflight.log ||
  { cat build/preflight.log >&2; cannot_run "podman cannot create a network"; }
if ! "${podman[@]}" run --rm --network "$preflight_net" "$base" true >>build/preflight.log 2>&1; then
  "${podman[@]}" network rm -f "$preflight_net" >/dev/null 2>&1 || true
  cannot_run "a container cannot start on a podman bridge network:
$(grep -v 'level=' build/preflight.log | tail -n 5)"
fi
"${podman[@]}" network rm -f "$preflight_net" >/dev/null 2>&1 || true

# --- Build from the repository's own Dockerfile. ---
build_log=build/container-build.log
t0=$SECONDS
# The host's ccache, which scripts/build.sh filled with the same compiler and flags, serves the
# image's build too (paths hashed relative to the source folder): a cold CI machine compiles the
# server once instead of twice.
ccache_args=()
host_ccache=$(ccache -k cache_dir 2>/dev/null || true)
if [ -n "$host_ccache" ] && [ -d "$host_ccache" ]; then
  ccache_args=(--volume "$host_ccache:/hostccache" --build-arg CCACHE_DIR=/hostccache)
  # ccache hashes LANG too: without the host's, every lookup misses.
  [ -n "${LANG:-}" ] && ccache_args+=(--build-arg "LANG=$LANG")
fi
"${podman[@]}" build --isolation=chroot --format docker -f docker/Dockerfile -t "$image" \
  "${ccache_args[@]}" . \
  >"$build_log" 2>&1 || { tail -n 60 "$build_log" >&2; fail "podman build"; }
build_s=$((SECONDS - t0))
size=$("${podman[@]}" image inspect --format '{{.Size}}' "$image")
log "built $image in ${build_s} s; size $((size / 1000000)) MB (log: $build_log)"

# --- Run it: host network (this sandbox has no container networking), model read-only. ---
# (podman also logs that it cannot start a systemd timer for the HEALTHCHECK: there is no
# systemd here, so the check below runs it by hand with `podman healthcheck run`.)
free_port() {
  local p
  while :; do
    p=$((20000 + RANDOM % 40000))
    (: </dev/tcp/127.0.0.1/$p) 2>/dev/null || { echo "$p"; return; }
  done
}
port=$(free_port)
mport=$(free_port)
[ "$port" != "$mport" ] || mport=$((port + 1))
"${podman[@]}" run -d --name "$container" --network=host \
  -v "$models:/models:ro" \
  -e TEXTGEN_LISTEN="127.0.0.1:$port" -e TEXTGEN_METRICS_LISTEN="127.0.0.1:$mport" \
  -e TEXTGEN_COMPUTE=f32 \
  "$image" >/dev/null 2>build/container-run.log ||
  { cat build/container-run.log >&2; fail "podman run"; }
user=$("${podman[@]}" exec "$container" id -u)
[ "$user" = 10001 ] || fail "the server runs as uid $user, not the unprivileged 10001"

# The image's own HEALTHCHECK (textgen-client against the gRPC health service).
healthy=0
for _ in $(seq 1 120); do
  if "${podman[@]}" healthcheck run "$container" >/dev/null 2>&1; then healthy=1; break; fi
  [ "$("${podman[@]}" inspect --format '{{.State.Running}}' "$container")" = true ] ||
    fail "the container exited before serving"
  sleep 0.5
done
[ "$healthy" = 1 ] || fail "no SERVING from the HEALTHCHECK within 60 s"
log "healthy (HEALTHCHECK: SERVING), running as uid $user"

# A streamed greedy generation (f32 compute: llama.cpp's arithmetic) must give the reference
# text; --json shows each streamed message, so more than one proves it streamed.
case_json=$(jq -c '.cases[] | select(.prompt == "Lily and Ben went to the park.")' "$reference")
prompt=$(jq -r .prompt <<<"$case_json")
want=$(jq -r .text <<<"$case_json")
n=$(jq '.generated_ids | length' <<<"$case_json")
stream=build/container-stream.jsonl
"${podman[@]}" exec "$container" textgen-client generate --server "127.0.0.1:$port" \
  --prompt "$prompt" --max-new-tokens "$n" --json >"$stream" 2>/dev/null ||
  fail "textgen-client generate"
messages=$(wc -l <"$stream")
got=$(jq -j '.text // empty' "$stream")
[ "$messages" -gt 1 ] || fail "the generation came in $messages message(s), not streamed"
[ "$got" = "$want" ] || fail "generated text differs from the reference:
  got:  $got
  want: $want"
log "streamed generation matches the reference ($n tokens in $messages messages)"

# Prometheus metrics on the second port (counted the generation above).
exec 3<>"/dev/tcp/127.0.0.1/$mport"
printf 'GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n' >&3
metrics=$(cat <&3)
exec 3<&-
grep -q '^textgen_generated_tokens_total [1-9]' <<<"$metrics" ||
  fail "/metrics does not count the generated tokens"
log "/metrics serves the counters"

# SIGTERM: the server drains and exits 0 within the grace period.
t0=$(date +%s%N)
"${podman[@]}" kill --signal TERM "$container" >/dev/null
code=$(timeout $((grace + 5)) "${podman[@]}" wait "$container") ||
  fail "still running $((grace + 5)) s after SIGTERM"
stop_ms=$((($(date +%s%N) - t0) / 1000000))
[ "$code" = 0 ] || fail "exit code $code after SIGTERM"
# Read the whole log first: with pipefail, `podman logs | grep -q` fails when grep exits at the
# match and podman gets SIGPIPE writing the next line (CI saw exactly that).
stop_log=$("${podman[@]}" logs "$container" 2>&1)
grep -q "draining" <<<"$stop_log" || fail "no drain in the log"
log "SIGTERM: exit 0 after ${stop_ms} ms (grace ${grace} s)"
# --- docker/compose.yaml with podman-compose: two replicas of this image behind the nginx
# load balancer, on a container network (netavark, names resolved by aardvark-dns). ---
project="textgen-test-$$"
compose=(podman-compose -f docker/compose.yaml -p "$project")
lb_port=$(free_port)
export TEXTGEN_IMAGE="$image" TEXTGEN_LB_IMAGE=localhost/textgen-lb:test
export TEXTGEN_REDIS_IMAGE=localhost/textgen-redis:test
# Exact arithmetic: a session recomputed on the other replica must give the same tokens.
export TEXTGEN_COMPUTE=f32 TEXTGEN_BATCH_INVARIANT=on
export TEXTGEN_MODELS="$models" TEXTGEN_PORT="$lb_port"
# podman-compose 1.0.3's down leaves the project's network behind.
compose_down() {
  "${compose[@]}" down -v -t 0 >/dev/null 2>&1 || true
  "${podman[@]}" volume rm -f "${project}_redis-data" >/dev/null 2>&1 || true
  "${podman[@]}" network rm -f "${project}_default" >/dev/null 2>&1 || true
}
compose_fail() {
  local c
  for c in textgen-1 textgen-2 redis lb; do
    echo "--- $c log:" >&2
    "${podman[@]}" logs "${project}_${c}_1" 2>&1 | grep -v 'level=' | tail -n 30 >&2 || true
  done
  echo "test-container.sh: FAIL: compose: $*" >&2
  exit 1
}
# podman-compose 1.0.3 exits 0 from `up -d` even when podman could not start a container (it
# prints podman's error and goes on), and such a container has no log. Name each one that did
# not start with podman's own reason, before waiting for health checks that cannot pass.
compose_check_started() {
  local c state status err reasons=""
  for c in textgen-1 textgen-2 redis lb; do
    state=$("${podman[@]}" inspect --format '{{.State.Status}}|{{.State.Error}}' \
      "${project}_${c}_1" 2>&1) || state="not created|$(tail -n 1 <<<"$state")"
    status=${state%%|*}
    err=${state#*|}
    [ "$status" = running ] || reasons+="
  $c: $status${err:+: $err}"
  done
  [ -z "$reasons" ] && return 0
  echo "--- podman-compose up (build/compose-up.log), its errors:" >&2
  grep -iE 'error|no such|denied|failed' build/compose-up.log | tail -n 20 >&2 || true
  echo "test-container.sh: FAIL: compose: containers did not start (not a replica's health):$reasons" >&2
  exit 1
}
trap 'cleanup; compose_down' EXIT
t0=$SECONDS
"${compose[@]}" build lb redis >build/compose-build.log 2>&1 ||
  { tail -n 40 build/compose-build.log >&2; fail "podman-compose build lb redis"; }
"${compose[@]}" up -d >build/compose-up.log 2>&1 ||
  { cat build/compose-up.log >&2; fail "podman-compose up"; }
compose_check_started
# A client container on the host network, through the port compose publishes.
client() {
  "${podman[@]}" run --rm --network=host --entrypoint textgen-client "$image" "$@" \
    --server "127.0.0.1:$lb_port" 2>/dev/null
}
for replica in textgen-1 textgen-2; do
  ok=0
  for _ in $(seq 1 120); do
    if "${podman[@]}" healthcheck run "${project}_${replica}_1" >/dev/null 2>&1; then
      ok=1; break
    fi
    sleep 0.5
  done
  [ "$ok" = 1 ] || compose_fail "$replica not SERVING within 60 s"
done
ok=0
for _ in $(seq 1 60); do
  if client health >/dev/null; then ok=1; break; fi
  sleep 0.5
done
[ "$ok" = 1 ] || compose_fail "no SERVING through the load balancer on port $lb_port"
log "compose up: 2 replicas and nginx healthy in $((SECONDS - t0)) s"

# A session pinned by x-session-id: its second turn reuses the first turn's cache.
id=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
[ "$(client session --create --id "$id")" = "$id" ] || compose_fail "session --create"
cached=()
for turn in 1 2 3; do
  client generate --session "$id" --prompt " Turn $turn." --max-new-tokens 8 --json \
    >"$stream" || compose_fail "session turn $turn"
  cached+=("$(jq -s '[.[] | .usage.cached_tokens // 0] | max' "$stream")")
done
[ "${cached[1]}" -gt 0 ] && [ "${cached[2]}" -gt 0 ] ||
  compose_fail "session turns reused no cache (cached_tokens ${cached[*]})"
log "compose: a session's turns stay on one replica (cached_tokens ${cached[*]})"

# Calls without a session go round-robin: both replicas serve some.
for _ in 1 2 3 4 5 6; do
  client generate --prompt "Once upon a time" --max-new-tokens 4 >/dev/null ||
    compose_fail "sessionless generate"
done
# nginx's access log names the replica (upstream=ADDRESS) that served each call.
replicas_used=$("${podman[@]}" logs "${project}_lb_1" 2>/dev/null |
  grep 'TextGeneration/Generate .* session="-"' | grep -o 'upstream=[^ ]*' | sort -u | wc -l)
[ "$replicas_used" = 2 ] ||
  compose_fail "sessionless calls reached $replicas_used replica(s), not both"
log "compose: sessionless calls round-robin"

# A replica lost mid-conversation (kill -9): nginx sends the session's next turn to the other
# replica, which continues it from Redis with the tokens of an uninterrupted run.
turn_text() {  # SESSION TURN: the turn's text, or fails
  client generate --session "$1" --prompt " Turn $2." --max-new-tokens 8 --json >"$stream" ||
    return 1
  jq -j '.text // empty' "$stream"
}
# Which replica's address served the session's latest call (nginx's access log).
served_by() {
  # $upstream_addr lists every replica tried ("A:50051, B:50051"): the last one served it.
  "${podman[@]}" logs "${project}_lb_1" 2>/dev/null | grep "session=\"$1\"" | tail -n 1 |
    sed -E 's/.*upstream=(.*) grpc_status=.*/\1/' | awk -F', ' '{print $NF}' | cut -d: -f1
}
address_of() {
  "${podman[@]}" inspect --format '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' \
    "${project}_$1_1"
}
ref=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
lost=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
for s in "$ref" "$lost"; do
  [ "$(client session --create --id "$s")" = "$s" ] || compose_fail "session --create $s"
done
want=()
for turn in 1 2 3; do
  text=$(turn_text "$ref" "$turn") || compose_fail "reference session turn $turn"
  want+=("$text")
done
got1=$(turn_text "$lost" 1) || compose_fail "session turn 1"
holder_addr=$(served_by "$lost")
holder=""
for replica in textgen-1 textgen-2; do
  [ "$(address_of "$replica")" = "$holder_addr" ] && holder=$replica
done
[ -n "$holder" ] || compose_fail "no replica has the address $holder_addr that served the session"
survivor=textgen-1
[ "$holder" = textgen-1 ] && survivor=textgen-2
survivor_addr=$(address_of "$survivor")
# Sessionless calls keep coming while the replica dies.
(for _ in $(seq 1 12); do client generate --prompt "Once upon a time" --max-new-tokens 4 \
  >/dev/null 2>&1; done) &
traffic=$!
sleep 0.5
"${podman[@]}" kill --signal KILL "${project}_${holder}_1" >/dev/null
# Keep it down (restart: unless-stopped would bring it back), so the turn must move.
"${podman[@]}" stop -t 0 "${project}_${holder}_1" >/dev/null 2>&1 || true
got=("$got1")
for turn in 2 3; do
  text=$(turn_text "$lost" "$turn") || compose_fail "session turn $turn after $holder was killed"
  got+=("$text")
  [ "$(served_by "$lost")" = "$survivor_addr" ] ||
    compose_fail "turn $turn after the kill was not served by $survivor"
done
wait "$traffic" || true
for i in 0 1 2; do
  [ "${got[$i]}" = "${want[$i]}" ] || compose_fail "turn $((i + 1)) differs from the uninterrupted run:
  got:  ${got[$i]}
  want: ${want[$i]}"
done
# No call the surviving replica took failed (those on the killed one may have).
lost_calls=$("${podman[@]}" logs "${project}_lb_1" 2>/dev/null |
  grep -E "(upstream=|, )$survivor_addr:[0-9]+ grpc_status=" | grep -vc 'grpc_status=0 ' || true)
[ "$lost_calls" = 0 ] || compose_fail "$lost_calls call(s) served by $survivor did not end OK"
# With one replica down, new calls without a session are all served by the other.
for i in 1 2 3 4; do
  client generate --prompt "Once upon a time" --max-new-tokens 4 >/dev/null ||
    compose_fail "sessionless generate $i with $holder down"
done
log "compose: $holder killed mid-conversation; $survivor continued the session from Redis with the uninterrupted run's tokens, and served every other call"
compose_down

# Each build leaves its build stage (~1 GB) as a dangling image; the ccache mount keeps what
# makes the next build fast.
"${podman[@]}" image prune -f >/dev/null
log "ok: image $((size / 1000000)) MB, build ${build_s} s"
