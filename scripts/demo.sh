#!/usr/bin/env bash
# The first command: installs the Debian packages, builds, then starts textgen-server on the
# bundled model (stories260K) with gRPC, the OpenAI-compatible HTTP API and the chat page,
# streams a story through textgen-client over gRPC, asks the HTTP API the same way curl would,
# prints the addresses with one-line examples, and serves until Ctrl-C (then drains, exit 0).
#
#   scripts/demo.sh [--once] [--grpc-port N] [--http-port N] [--prompt TEXT] [--bin-dir DIR]
#
# --once: stream, check the HTTP API, stop the server and exit (CI's end-to-end test).
# --bin-dir DIR: use the binaries already built in DIR (skips the install and the build).
set -euo pipefail
cd "$(dirname "$0")/.."

once=0
grpc_port=50051
http_port=8080
prompt="Once upon a time"
bin_dir=""
usage() { sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case "$1" in
    --once) once=1 ;;
    --grpc-port) grpc_port="${2:?--grpc-port needs a port}"; shift ;;
    --http-port) http_port="${2:?--http-port needs a port}"; shift ;;
    --prompt) prompt="${2:?--prompt needs a text}"; shift ;;
    --bin-dir) bin_dir="${2:?--bin-dir needs a directory}"; shift ;;
    -h | --help) usage; exit 0 ;;
    *) echo "demo.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
  shift
done
for p in "$grpc_port" "$http_port"; do
  case "$p" in
    '' | *[!0-9]*) echo "demo.sh: ports are numbers from 1 to 65535, got '$p'" >&2; exit 2 ;;
  esac
  if [ "$p" -lt 1 ] || [ "$p" -gt 65535 ]; then
    echo "demo.sh: ports are numbers from 1 to 65535, got '$p'" >&2
    exit 2
  fi
done
[ "$grpc_port" != "$http_port" ] || { echo "demo.sh: --grpc-port and --http-port must differ" >&2; exit 2; }

if [ -z "$bin_dir" ]; then
  bash scripts/install-deps.sh
  bash scripts/build.sh
  bin_dir=build/bin
fi

model="${TEXTGEN_MODELS:-$(cd .. && pwd)/shared/models}/stories260K.gguf"
if [ ! -f "$model" ]; then
  model=models/stories260K.gguf
  [ -f "$model" ] || bash scripts/fetch-model.sh
fi

# A port someone else listens on: say which and how to pick another, before starting anything.
port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
for spec in "$grpc_port gRPC --grpc-port" "$http_port HTTP --http-port"; do
  set -- $spec
  if port_in_use "$1"; then
    echo "demo.sh: port $1 (for $2) is already in use on 127.0.0.1; pick another with $3 N," \
      "e.g. scripts/demo.sh $3 $(($1 + 1))" >&2
    exit 1
  fi
done

grpc_addr="127.0.0.1:$grpc_port"
model_id="$(basename "$model")"  # the id the HTTP API serves the model under (/v1/models)
http_url="http://127.0.0.1:$http_port"
log="$(mktemp -t textgen-demo-server.XXXXXX.log)"
"$bin_dir/textgen-server" --model "$model" --listen "$grpc_addr" \
  --http-listen "127.0.0.1:$http_port" --chat-template scripts/story-template.jinja \
  --shutdown-grace 5 >"$log" 2>&1 &
server=$!

stop_server() {
  kill -TERM "$server" 2>/dev/null || true
  local code=0
  wait "$server" || code=$?
  return "$code"
}
fail() {
  echo "demo.sh: $1; the server's log ($log):" >&2
  tail -n 20 "$log" >&2
  kill -TERM "$server" 2>/dev/null || true
  wait "$server" 2>/dev/null || true
  exit 1
}

# Serving once the health check says so (the model loads in well under a second).
for _ in $(seq 1 300); do
  kill -0 "$server" 2>/dev/null || fail "the server exited at start"
  "$bin_dir/textgen-client" health --server "$grpc_addr" --timeout 1 >/dev/null 2>&1 && break
  sleep 0.1
done
"$bin_dir/textgen-client" health --server "$grpc_addr" --timeout 1 >/dev/null 2>&1 ||
  fail "the server did not start serving within 30 s"

echo "textgen-server is serving $model"
echo
echo "== A story streamed over gRPC (textgen-client generate) =="
"$bin_dir/textgen-client" generate --server "$grpc_addr" --prompt "$prompt" \
  --max-new-tokens 256 || fail "the gRPC stream failed"
echo

curl_body="{\"model\":\"$model_id\",\"messages\":[{\"role\":\"user\",\"content\":\"Once upon a time\"}],\"max_tokens\":32}"
echo "== The OpenAI-compatible API answers (curl $http_url/v1/chat/completions) =="
answer="$(curl -sS --max-time 30 "$http_url/v1/chat/completions" \
  -H 'Content-Type: application/json' -d "$curl_body")" || fail "the HTTP API did not answer"
echo "$answer"
case "$answer" in
  *'"chat.completion"'*) ;;
  *) fail "the HTTP API's answer is not a chat completion" ;;
esac
page="$(curl -sS --max-time 10 -o /dev/null -w '%{http_code}' "$http_url/")" || page=000
[ "$page" = 200 ] || fail "the chat page at $http_url/ answered $page"
echo

cat <<EOF
== textgen is serving ==
  gRPC                  $grpc_addr   (textgen.v1.TextGeneration; reflection on)
  OpenAI-compatible API $http_url/v1
  chat page             $http_url/   (open it in a browser)

Try:
  $bin_dir/textgen-client generate --server $grpc_addr --prompt "Once upon a time"
  curl $http_url/v1/chat/completions -H 'Content-Type: application/json' -d '$curl_body'
  python3 -c 'from openai import OpenAI; print(OpenAI(base_url="$http_url/v1", api_key="none").chat.completions.create(model="$model_id", messages=[{"role": "user", "content": "Once upon a time"}]).choices[0].message.content)'
  node -e 'import("openai").then(async ({default: OpenAI}) => console.log((await new OpenAI({baseURL: "$http_url/v1", apiKey: "none"}).chat.completions.create({model: "$model_id", messages: [{role: "user", content: "Once upon a time"}]})).choices[0].message.content))'
  grpcurl -plaintext -d '{"prompt": "Once upon a time"}' $grpc_addr textgen.v1.TextGeneration/Generate

The server's log: $log
EOF

if [ "$once" = 1 ]; then
  stop_server || { echo "demo.sh: the server exited with status $?" >&2; exit 1; }
  echo "demo.sh --once: done"
  exit 0
fi

echo "Serving until Ctrl-C."
# Ctrl-C (or a TERM) drains the server's streams, then the demo exits 0.
trap 'echo; echo "demo.sh: stopping the server (draining)"; stop_server && exit 0; exit 1' INT TERM
wait "$server" || true
echo "demo.sh: the server exited on its own; its log: $log" >&2
exit 1
