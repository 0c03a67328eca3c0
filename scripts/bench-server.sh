#!/usr/bin/env bash
# Server benchmark: textgen-client load against textgen-server on loopback, one row per stream
# count (generated tokens/s in total, TTFT and inter-token p50/p99, errors); then, unless
# --no-sessions, the time to first token of a session's 5th turn against the same conversation
# sent whole without a session. Prints Markdown.
#
# Usage: scripts/bench-server.sh [MODEL] [options]
#   --model PATH            model to serve (default $TEXTGEN_MODELS/stories260K.gguf)
#   --streams "1 8 32"      concurrent streams, one row each (default "1 8 32")
#   --prompt TEXT           prompt of every request (default "Once upon a time")
#   --prompt-tokens N       instead: random prompts of exactly N tokens (see textgen-client load)
#   --new-tokens N          max_new_tokens, EOS ignored (default 128)
#   --seconds S             each row runs S seconds (default $BENCH_SECONDS or 10)
#   --requests-per-stream K instead: each row sends streams x K requests
#   --llama-cpp LIST        reference tok/s per stream count, e.g. "1:118,4:255", shown with
#                           our ratio to it
#   --kv-cache-mib N        the server's KV pool (default: the server's)
#   --threads N             the server's compute threads (default: its choice)
#   --no-sessions           skip the session table
set -euo pipefail
cd "$(dirname "$0")/.."
model="${TEXTGEN_MODELS:-$(cd .. && pwd)/shared/models}/stories260K.gguf"
streams="1 8 32"
prompt=(--prompt "Once upon a time")
new_tokens=128
seconds="${BENCH_SECONDS:-10}"
per_stream=""
refs=""
server_args=()
sessions=1
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --model) model="$2"; shift 2 ;;
    --streams) streams="$2"; shift 2 ;;
    --prompt) prompt=(--prompt "$2"); shift 2 ;;
    --prompt-tokens) prompt=(--prompt-tokens "$2"); shift 2 ;;
    --new-tokens) new_tokens="$2"; shift 2 ;;
    --seconds) seconds="$2"; shift 2 ;;
    --requests-per-stream) per_stream="$2"; shift 2 ;;
    --llama-cpp) refs="$2"; shift 2 ;;
    --kv-cache-mib) server_args+=(--kv-cache-mib "$2"); shift 2 ;;
    --threads) server_args+=(--threads "$2"); shift 2 ;;
    --no-sessions) sessions=0; shift ;;
    -h|--help) usage ;;
    -*) echo "bench-server.sh: unknown flag $1" >&2; usage ;;
    *) model="$1"; shift ;;
  esac
done
[ -e "$model" ] || { echo "bench-server.sh: no model at $model" >&2; exit 1; }

port=$((50000 + RANDOM % 10000))
addr="127.0.0.1:$port"
bin="${TEXTGEN_BIN_DIR:-build/bin}"
tmp="$(mktemp -d)"
"$bin/textgen-server" --model "$model" --listen "$addr" --log-level warn "${server_args[@]}" &
server=$!
trap 'kill -TERM $server 2>/dev/null; wait $server 2>/dev/null || true; rm -rf "$tmp"' EXIT
for _ in $(seq 300); do
  "$bin/textgen-client" health --server "$addr" >/dev/null 2>&1 && break
  kill -0 $server 2>/dev/null || { echo "bench-server.sh: the server exited" >&2; exit 1; }
  sleep 0.1
done

# One untimed call of the benchmark's shape first: the server's own warm-up runs a one-token
# pass, so a first long prefill would still pay for kernel generation in some row's TTFT.
"$bin/textgen-client" load --server "$addr" "${prompt[@]}" --max-new-tokens 2 --requests 1 \
  >/dev/null || { echo "bench-server.sh: the warm-up call failed" >&2; exit 1; }

echo "| streams | requests/s | generated tokens/s | llama.cpp | ratio | TTFT p50 / p99 ms | inter-token p50 / p99 ms | errors |"
echo "|---|---|---|---|---|---|---|---|"
for c in $streams; do
  if [ -n "$per_stream" ]; then
    amount=(--requests $((c * per_stream)))
  else
    amount=(--duration "$seconds")
  fi
  # A failed call makes load exit 1; the row still reports it (errors column).
  "$bin/textgen-client" load --server "$addr" "${prompt[@]}" --max-new-tokens "$new_tokens" \
    --ignore-eos --concurrency "$c" "${amount[@]}" --json > "$tmp/load.json" || true
  python3 - "$c" "$refs" "$tmp/load.json" <<'PY'
import json, sys
c, refs, path = sys.argv[1], sys.argv[2], sys.argv[3]
j = json.load(open(path))
def g(*keys):
    v = j
    for k in keys:
        v = v.get(k, {}) if isinstance(v, dict) else {}
    return v if v != {} else float('nan')
ref = dict(p.split(':') for p in refs.split(',') if p).get(c)
tps = g('generated_tokens_per_s')
ref_cells = f"{float(ref):.0f} | {tps / float(ref):.2f}x" if ref else "– | –"
print(f"| {c} | {g('requests_per_s'):.2f} | {tps:.0f} | {ref_cells} | "
      f"{g('time_to_first_token_ms','p50'):.2f} / {g('time_to_first_token_ms','p99'):.2f} | "
      f"{g('inter_token_latency_ms','p50'):.3f} / {g('inter_token_latency_ms','p99'):.3f} | "
      f"{g('errors_total')} |")
PY
done
rss_kib="$(awk '/^VmHWM:/ {print $2}' /proc/$server/status 2>/dev/null || true)"
[ -n "$rss_kib" ] && echo && echo "Server peak RSS: $((rss_kib / 1024)) MiB."

[ "$sessions" = 1 ] || exit 0
# A 5-turn conversation: TTFT of turn 5 with the session's cache vs the whole conversation
# as one prompt without a session (server-side usage.time_to_first_token_ms, best of 5).
python3 - "$bin/textgen-client" "$addr" <<'PY'
import json, subprocess, sys
client, addr = sys.argv[1], sys.argv[2]
turns = ["Once upon a time", " Then the dog ran to the park.", " The cat was sad.",
         " Mom said no.", " At night, they"]
def run(args):
    out = subprocess.check_output([client] + args + ["--server", addr, "--json"], text=True)
    return [json.loads(l) for l in out.splitlines() if l.strip()]
def ttft(msgs):
    return msgs[-1]["usage"].get("timeToFirstTokenMs", msgs[-1]["usage"].get("time_to_first_token_ms"))
best_s, best_w = [], []
for rep in range(5):
    sid = subprocess.check_output([client, "session", "--create", "--server", addr],
                                  text=True).strip()
    ids = []
    for k, t in enumerate(turns):
        msgs = run(["generate", "--session", sid, "--prompt", t, "--max-new-tokens", "48"])
        last = msgs[-1]
        tok = json.loads(subprocess.check_output(
            [client, "tokenize", "--text", t, "--server", addr, "--json"] +
            (["--add-special"] if k == 0 else []), text=True))
        ids += tok["ids"]
        if k < len(turns) - 1:
            ids += last["hypotheses"][0]["ids"]
    best_s.append(ttft(msgs))
    usage = msgs[-1]["usage"]
    whole = run(["generate", "--prompt-ids", ",".join(map(str, ids)), "--max-new-tokens", "48"])
    best_w.append(ttft(whole))
    subprocess.check_call([client, "session", "--delete", sid, "--server", addr])
s, w = min(best_s), min(best_w)
print()
print("| 5th turn of a session | prompt tokens | cached tokens | TTFT ms (best of 5) |")
print("|---|---|---|---|")
print(f"| with the session's cache | {usage.get('promptTokens', usage.get('prompt_tokens'))} | "
      f"{usage.get('cachedTokens', usage.get('cached_tokens'))} | {s:.3f} |")
print(f"| whole conversation, no session | {len(ids)} | 0 | {w:.3f} |")
print(f"\nspeed-up: {w / s:.1f}x")
PY
