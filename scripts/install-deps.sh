#!/usr/bin/env bash
# Installs every build and test dependency from Debian 12 packages. Idempotent.
# --build-only: only what building needs (the container image's build stage).
set -euo pipefail
PKGS=(
  build-essential cmake ninja-build pkg-config ccache git ca-certificates
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libspdlog-dev libfmt-dev catch2 nlohmann-json3-dev
  libcpp-httplib-dev  # the server's Prometheus /metrics endpoint (and the tests' scrapes)
  libssl-dev  # TLS: cpp-httplib's HTTPS server (its header includes OpenSSL's) and the certificate checks
  libcli11-dev  # every binary's flags, --help and TEXTGEN_ variables (header-only, cli/)
  libpcre2-dev  # the tokenizer's pre-tokenizer regexes (8-bit, UTF + UCP)
  libsqlite3-dev  # durable sessions: --state-dir's sessions.sqlite3 (state/)
  libhiredis-dev  # sessions shared between replicas in Redis (state/redis_session_journal.cc)
  libdnnl-dev ocl-icd-opencl-dev opencl-c-headers  # oneDNN's CMake config wants OpenCL (its GPU runtime)
)
if [ "${1:-}" != "--build-only" ]; then
  PKGS+=(
    nginx-light   # the load-balancer test runs docker/nginx/textgen.conf (/usr/sbin/nginx)
    python3-yaml  # the k8s manifest test parses docker/k8s/*.yaml
    redis-server  # the Redis session store's tests start /usr/bin/redis-server (tests/support)
    # The JSON Schema suite validates every generated document with an independent validator
    # (tests/engine/grammar/validate_json.py).
    python3-jsonschema
    # The Python client example (client/python/chat_example.py) and its test: gRPC and
    # protobuf for /usr/bin/python3; its modules are generated with protoc and
    # grpc_python_plugin (protobuf-compiler, protobuf-compiler-grpc, already above).
    python3-grpcio python3-protobuf
    # scripts/test-container.sh: builds and runs the image, then docker/compose.yaml (a
    # container network with names), and reads the expected text from the reference JSON.
    openssl  # the TLS tests make throwaway certificates at test time
    podman runc debootstrap netavark aardvark-dns podman-compose jq
    # A run-time need of podman's network stack that Debian only suggests: netavark 1.4 sets
    # up a bridge network's NAT and forwarding rules by running iptables; without it every
    # container on a compose network fails with "netavark: No such file or directory".
    iptables
    # The HTTP API's tests: the official openai and @anthropic-ai/sdk npm packages under
    # Node.js (npm ci fetches them), and the chat page in headless Chromium driven through
    # chromedriver's WebDriver protocol.
    nodejs chromium chromium-driver
    # scripts/test-fuzz.sh: the libFuzzer targets (fuzz/) are built by clang 14 with Debian's
    # libFuzzer runtime (libclang_rt.fuzzer), against the same Debian libraries as the rest.
    clang libfuzzer-14-dev
  )
  # npm comes with nodejs from other sources (NodeSource); Debian packages it separately.
  command -v npm >/dev/null || PKGS+=(npm)
fi
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
