#!/usr/bin/env bash
# Writes docs/configuration.md: every flag of every binary, from the binaries' own --help, and
# every environment variable (the flags' TEXTGEN_ variables, and the variables read outside the
# flag library, listed by hand below).
#
# Usage: scripts/gen-config-docs.sh [--check] [BIN_DIR]
#   BIN_DIR   where the built binaries are (default build/bin)
#   --check   regenerate into a temporary file and compare with docs/configuration.md; exit 1
#             with a message when they differ (ctest's config_docs_current runs this)
#
# After adding or changing a flag: rebuild, run scripts/gen-config-docs.sh, commit the result.
# A flag of a binary other than textgen-server that reads a TEXTGEN_ variable (SetEnvPrefix /
# ->envname in its source) goes into FLAG_VARIABLES below; a new getenv() of a TEXTGEN_
# variable in the product code goes into the hand-written table (the script fails naming any
# it does not know).
set -euo pipefail

check=0
bin_dir=""
for arg in "$@"; do
  case "$arg" in
    --check) check=1 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "gen-config-docs.sh: unknown option $arg (see --help)" >&2; exit 2 ;;
    *)
      [ -z "$bin_dir" ] || { echo "gen-config-docs.sh: one BIN_DIR only" >&2; exit 2; }
      bin_dir="$arg"
      ;;
  esac
done
src_dir="$(cd "$(dirname "$0")/.." && pwd)"
bin_dir="${bin_dir:-$src_dir/build/bin}"
[ -d "$bin_dir" ] || { echo "gen-config-docs.sh: no directory $bin_dir (build first)" >&2; exit 2; }
bin_dir="$(cd "$bin_dir" && pwd)"
doc="$src_dir/docs/configuration.md"

# Binaries in the order of the document, each with one sentence of what it is.
BINARIES=(textgen-server textgen-run textgen-client textgen-bench textgen-synth-model ops-bench)
declare -A ABOUT=(
  [textgen-server]="The server: the gRPC API, and with \`--http-listen\` the OpenAI-compatible HTTP API and the chat page (see [api-grpc.md](api-grpc.md), [api-http.md](api-http.md), [deployment.md](deployment.md))."
  [textgen-run]="The offline generator, like \`llama-cli\`: one generation, tokenization or chat-template rendering per run, no server (see [decoding.md](decoding.md))."
  [textgen-client]="The command-line gRPC client of \`textgen-server\`, with subcommands; each subcommand has its own \`--help\`."
  [textgen-bench]="The engine's benchmark: Markdown tables of bandwidth, prefill/decode speed, beam search, KV cache and prefix cache (see [performance.md](performance.md))."
  [textgen-synth-model]="Writes a GGUF of a real model's shape with synthetic weights, for benchmarks without downloads (see [performance.md](performance.md#synthetic-models-textgen-synth-model))."
  [ops-bench]="Per-call time of single kernels of \`engine/ops\` (see [performance.md](performance.md))."
)
CLIENT_SUBCOMMANDS=(generate chat tokenize info health session load)

# Flags of the binaries other than textgen-server that also read a TEXTGEN_ variable
# (textgen-server: every flag, as its --help says). "binary flag variable", one a line.
FLAG_VARIABLES="textgen-run --batch-invariant TEXTGEN_BATCH_INVARIANT
textgen-bench --batch-invariant TEXTGEN_BATCH_INVARIANT
textgen-client --api-key TEXTGEN_API_KEY
textgen-client --tls-ca TEXTGEN_TLS_CA
textgen-client --tls-server-name TEXTGEN_TLS_SERVER_NAME"

# Variables read outside the flag library (getenv), documented by hand.
read_by_hand() {
  cat <<'EOF'
| variable | read by | what |
|---|---|---|
| `TEXTGEN_MODELS` | textgen-server, textgen-run, textgen-bench, textgen-synth-model; the scripts and tests | the models folder. `textgen-server`'s and `textgen-run`'s default `--model` is `$TEXTGEN_MODELS/stories260K.gguf` (else `models/stories260K.gguf`); `textgen-synth-model`'s default `--vocab` folder is `$TEXTGEN_MODELS/vocab/` (else `../shared/models/vocab/`, else `models/vocab/`); `textgen-bench`'s default `--cache-model` is `$TEXTGEN_MODELS/stories260K.gguf` (else `../shared/models/stories260K.gguf`). `scripts/test.sh`, `scripts/demo.sh` and the tests default to `../shared/models` beside the checkout. |
| `TEXTGEN_MAX_ISA` | every binary that runs the kernels | `avx2`, `avx512`, `avx512vnni`, `avx512bf16` or `amx`: the highest kernel level to use (default: the best the CPU and OS allow). Also caps oneDNN's ISA unless `ONEDNN_MAX_CPU_ISA` is set. An unknown name stops `textgen-server` with an error. See [kernels.md](kernels.md#kernel-levels). |
| `TEXTGEN_BF16_DOT` | every binary that runs the kernels | `auto` (default, the same as `f32`), `vdpbf16ps` or `f32`: how `--compute bf16` multiplies BF16 weights where AMX does not; `vdpbf16ps` is another numerics mode, opt-in. An unknown value stops `textgen-server`. See [kernels.md](kernels.md#bf16-dot-products). |
| `TEXTGEN_KERNEL_SELECT` | every binary that loads a model | the variable of `--kernel-select` (`textgen-server`, `textgen-run`, `textgen-bench`; the other binaries read it too): `measure` (default) or `table`: whether the level that runs a weight format whose levels agree bit for bit (Q8_0 so far) is measured on the model's weights after loading, per call shape (1 row; 2-4 rows), or is the highest level the CPU has. The choice changes speed, never answers. See [kernels.md](kernels.md#kernels-chosen-by-measurement). |
| `TEXTGEN_KERNEL_CACHE` | every binary that loads a model | where measured kernel choices are kept between runs (default `$XDG_CACHE_HOME/textgen/kernel-choices.tsv`, else `~/.cache/textgen/kernel-choices.tsv`); `off` measures at every start. |
| `ONEDNN_MAX_CPU_ISA` | oneDNN | oneDNN's own cap (e.g. `AVX2`); when set it wins over the one `TEXTGEN_MAX_ISA` implies. |
| `GOMP_SPINCOUNT`, `OMP_*` | libgomp | oneDNN's OpenMP team only (the engine's own loops run on its worker pool); the defaults are kept on purpose, see [kernels.md](kernels.md#threads). |

Read by the scripts and tests only:

| variable | read by | what |
|---|---|---|
| `TEXTGEN_BIN_DIR` | tests, `scripts/bench.sh` | where the binaries are (ctest sets it; default `build/bin`) |
| `TEXTGEN_REFERENCE` | tests, `scripts/test-container.sh` | llama.cpp reference outputs (default `$TEXTGEN_MODELS/../reference`) |
| `TEXTGEN_CHAT_TEMPLATES` | tests | the chat-template corpus (default `$TEXTGEN_MODELS/../chat-templates`) |
| `TEXTGEN_SOAK_SECONDS` | the soak test | how long it runs (default 60) |
| `TEXTGEN_TEST_SERVER_LOG` | tests | `1`: print each test server's log when it stops |
| `TEXTGEN_BENCH_MODELS` | `scripts/bench.sh`, `textgen-bench --structured` | where the synthetic models are cached (`scripts/bench.sh`'s default `build/bench-models`; `textgen-bench` without it writes to a temporary folder it removes) |
| `BENCH_SECONDS` | `scripts/bench-server.sh` | seconds per row (default 10; `--seconds` wins) |
| `TEXTGEN_FUZZ_SECONDS` | `scripts/test-fuzz.sh` | fuzzing time per target (default 30; an argument wins) |
| `TEXTGEN_CMAKE_ARGS` | `scripts/build.sh` | extra CMake arguments, e.g. `-DTEXTGEN_MARCH=native` |
| `TEXTGEN_IMAGE`, `TEXTGEN_LB_IMAGE`, `TEXTGEN_MODEL_FILE`, `TEXTGEN_PORT` | `docker/compose.yaml` | images, model file under `/models` and published port (see `docker/README.md`) |
EOF
}
# The TEXTGEN_ variables the table above covers (checked against the product code's getenv()).
BY_HAND="TEXTGEN_MODELS TEXTGEN_MAX_ISA TEXTGEN_BF16_DOT TEXTGEN_KERNEL_SELECT TEXTGEN_KERNEL_CACHE TEXTGEN_BENCH_MODELS"

fail() { echo "gen-config-docs.sh: $*" >&2; exit 1; }

# The hand-written lists must cover what the code reads.
check_sources() {
  local name
  for name in $(cd "$src_dir" && grep -rhoE 'getenv\("TEXTGEN_[A-Z0-9_]+"\)' \
      engine server client cli tests/bench | sed -E 's/getenv\("(.*)"\)/\1/' | sort -u); do
    [[ " $BY_HAND " == *" $name "* ]] ||
      fail "$name is read (getenv) but not documented: add it to the table in $0"
  done
  for name in $(cd "$src_dir" && grep -rhoE 'envname\("TEXTGEN_[A-Z0-9_]+"\)' \
      server client cli tests/bench | sed -E 's/envname\("(.*)"\)/\1/' | sort -u); do
    grep -q " $name\$" <<<"$FLAG_VARIABLES" ||
      fail "$name is a flag's variable (->envname) but not in FLAG_VARIABLES in $0"
  done
}

# A binary's --help, with a fixed environment (no TEXTGEN_ variables, C locale), so that the
# text depends on the binary only.
help_of() {
  local out
  if ! out="$(cd / && env -i PATH=/usr/bin:/bin LC_ALL=C HOME=/nonexistent "$@" --help 2>&1)"; then
    fail "'$(basename "$1") ${*:2} --help' failed:
$out"
  fi
  printf '%s\n' "$out"
}

code_block() {
  echo '```text'
  cat
  echo '```'
}

# GitHub's heading anchor: lower case, spaces to '-', punctuation other than '-' and '_' gone.
anchor() { tr 'A-Z ' 'a-z-' <<<"$1" | tr -cd 'a-z0-9_-'; }

# "  --flag TYPE  help" lines of a --help text (two spaces in; continuation lines of a help text
# are indented further) -> the flag names, in order.
flags_in() { grep -oE '^  --[a-z0-9-]+' | sed 's/^ *//' | grep -vx -- '--help'; }

variables_section() {
  local bin="$1" help="$2" flag var rows=""
  if [ "$bin" = textgen-server ]; then
    for flag in $(flags_in <<<"$help"); do
      var="TEXTGEN_$(tr 'a-z-' 'A-Z_' <<<"${flag#--}")"
      rows+="| \`$flag\` | \`$var\` |"$'\n'
    done
  else
    while read -r b flag var; do
      [ "$b" = "$bin" ] || continue
      grep -qE "^  $flag( |\$)" <<<"$help" || fail "$bin has no flag $flag (FLAG_VARIABLES in $0)"
      rows+="| \`$flag\` | \`$var\` |"$'\n'
    done <<<"$FLAG_VARIABLES"
  fi
  if [ -z "$rows" ]; then
    echo "No flag of $bin reads an environment variable."
    return
  fi
  if [ "$bin" = textgen-server ]; then
    echo "Every flag also reads a variable: an empty one counts as unset, a flag on the command"
    echo "line wins, and a bad value exits 2 naming the variable."
  else
    echo "These flags also read a variable (an empty one counts as unset; the command line wins):"
  fi
  echo
  echo "| flag | variable |"
  echo "|---|---|"
  printf '%s' "$rows"
}

generate() {
  local bin help sub
  for bin in "${BINARIES[@]}"; do
    [ -x "$bin_dir/$bin" ] || fail "no $bin_dir/$bin (build everything first: scripts/build.sh)"
  done
  cat <<'EOF'
# Configuration: flags and environment variables

<!-- Generated by scripts/gen-config-docs.sh from the binaries' --help. Do not edit by hand:
     change the flag's help in the code, rebuild, and run scripts/gen-config-docs.sh. -->

Every flag of every binary, as its `--help` prints it, and the environment variables. Flags
take a value as `--flag VALUE` or `--flag=VALUE`; a bad value exits 2 naming the flag (or the
variable it came from); `--help` exits 0.

## Contents

- [Environment variables](#environment-variables)
EOF
  for bin in "${BINARIES[@]}"; do
    echo "- [$bin](#$(anchor "$bin"))"
    if [ "$bin" = textgen-client ]; then
      for sub in "${CLIENT_SUBCOMMANDS[@]}"; do
        echo "  - [textgen-client $sub](#$(anchor "textgen-client $sub"))"
      done
    fi
  done
  cat <<'EOF'

## Environment variables

The flags' own variables are listed with each binary below (`textgen-server`: every flag,
`TEXTGEN_` and the flag's name in capitals with `_` for `-`). These are read besides them:

EOF
  read_by_hand
  for bin in "${BINARIES[@]}"; do
    help="$(help_of "$bin_dir/$bin")"
    echo
    echo "## $bin"
    echo
    echo "${ABOUT[$bin]}"
    echo
    code_block <<<"$help"
    if [ "$bin" = textgen-client ]; then
      # The client's flags belong to its subcommands: their variables are in their help texts.
      local all=""
      for sub in "${CLIENT_SUBCOMMANDS[@]}"; do all+="$(help_of "$bin_dir/$bin" "$sub")"$'\n'; done
      echo
      variables_section "$bin" "$all"
      for sub in "${CLIENT_SUBCOMMANDS[@]}"; do
        echo
        echo "### textgen-client $sub"
        echo
        help_of "$bin_dir/$bin" "$sub" | code_block
      done
    else
      echo
      variables_section "$bin" "$help"
    fi
  done
}

check_sources
tmp="$(mktemp)"
trap 'rm -f "$tmp"' EXIT
generate >"$tmp"
if [ "$check" = 1 ]; then
  if ! diff -u "$doc" "$tmp" >&2; then
    echo "docs/configuration.md is stale: run scripts/gen-config-docs.sh" >&2
    exit 1
  fi
  echo "docs/configuration.md is current"
else
  mkdir -p "$(dirname "$doc")"
  cp "$tmp" "$doc"
  echo "wrote docs/configuration.md"
fi
