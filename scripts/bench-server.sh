#!/usr/bin/env bash
# Server benchmark (issue: gRPC service): textgen-client load against textgen-server on
# loopback, for 1, 8 and 32 concurrent streams; then the time to first token of a session's
# 5th turn against the same conversation sent whole without a session.
# Usage: scripts/bench-server.sh [MODEL] (default: $TEXTGEN_MODELS/stories260K.gguf)
set -euo pipefail
cd "$(dirname "$0")/.."
model="${1:-${TEXTGEN_MODELS:-$(cd .. && pwd)/shared/models}/stories260K.gguf}"
port=$((50000 + RANDOM % 10000))
addr="127.0.0.1:$port"
bin="${TEXTGEN_BIN_DIR:-build/bin}"
"$bin/textgen-server" --model "$model" --listen "$addr" --log-level warn &
server=$!
trap 'kill -TERM $server 2>/dev/null; wait $server 2>/dev/null || true' EXIT
for _ in $(seq 100); do "$bin/textgen-client" health --server "$addr" >/dev/null 2>&1 && break; sleep 0.1; done

echo "| streams | requests/s | generated tokens/s | TTFT p50 / p99 ms | inter-token p50 / p99 ms | errors |"
echo "|---|---|---|---|---|---|"
for c in 1 8 32; do
  "$bin/textgen-client" load --server "$addr" --prompt "Once upon a time" --max-new-tokens 128 \
    --ignore-eos --concurrency "$c" --duration "${BENCH_SECONDS:-10}" --json > /tmp/textgen-load.json
  python3 - "$c" <<'PY'
import json, sys
j = json.load(open('/tmp/textgen-load.json'))
def g(*keys):
    v = j
    for k in keys:
        v = v.get(k, {}) if isinstance(v, dict) else {}
    return v if v != {} else float('nan')
print(f"| {sys.argv[1]} | {g('requests_per_s'):.1f} | {g('generated_tokens_per_s'):.0f} | "
      f"{g('time_to_first_token_ms','p50'):.2f} / {g('time_to_first_token_ms','p99'):.2f} | "
      f"{g('inter_token_latency_ms','p50'):.3f} / {g('inter_token_latency_ms','p99'):.3f} | "
      f"{g('errors_total')} |")
PY
done

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
