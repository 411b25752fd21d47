#!/usr/bin/env bash
# Record the PGO profile that release builds use (tuning/pgo/ringside.profdata; see
# tuning/pgo/rustc-wrapper.sh). Builds an instrumented ringside in target/pgo-gen, runs it on
# loopback against the simulator -- OpenAI JSON and SSE, Anthropic JSON and SSE, a key that
# answers 429 so fail-over runs too; where node is installed, SSE from a TLS upstream (the
# independent mock over https: every real provider is reached over TLS); JSON and SSE over
# HTTP/2 from the simulator's TLS front (`http2 = "always"`: OpenAI, Anthropic and Google answer
# over HTTP/2, and `auto` chooses it) -- then `ringside demo`, and merges what it counted.
# Rerun after changing the hot path: a function the profile no longer matches is taken as cold
# (+19 % instructions per request measured with a stale profile, 2026-12-02).
# Then `cargo clean -p ringside --release` (cargo does not track the profile as an input).
# Bounded: about 6 minutes on 2 cores, most of it the instrumented build.
# Needs: llvm-profdata (rustup component llvm-tools, added if missing) and wrk (Debian).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v wrk >/dev/null 2>&1 || { apt-get install -y -q wrk || (apt-get update -q && apt-get install -y -q wrk); } >/dev/null
sysroot=$(rustc --print sysroot)
find_profdata() { find "$sysroot/lib/rustlib" -name llvm-profdata -type f 2>/dev/null | head -1; }
PROFDATA=$(find_profdata)
if [ -z "$PROFDATA" ]; then rustup component add llvm-tools >/dev/null; PROFDATA=$(find_profdata); fi
BASE=${BASE_PORT:-19170}
SIM=$BASE; RS=$((BASE+1)); ADMIN=$((BASE+2)); TLS_PORT=$((BASE+3))
WORK=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done; rm -rf "$WORK"; }
trap cleanup EXIT
. benches/lib.sh
RUNS="json:6 sse:6 ajson:3 asse:3 agent:3"
UPSTREAM=""
if command -v node >/dev/null 2>&1; then
  tls_mock "$WORK" $TLS_PORT; PIDS+=($TLS_MOCK_PID); disown
  RUNS="$RUNS tls:4"
  UPSTREAM=$(printf '[upstream]\nca_file = "%s"\n%s' "$WORK/ca.pem" "$(tls_provider $TLS_PORT | sed 's/BENCH_KEY/PGO_KEY/')")
else
  echo "pgo.sh: node is not installed: the profile leaves out a TLS upstream" >&2
fi

# Build scripts run instrumented too: their counts go to a directory that is thrown away.
RUSTFLAGS="-Cprofile-generate=$WORK/build" cargo build --release -q --target-dir target/pgo-gen --bin ringside
BIN=target/pgo-gen/release/ringside

# The simulator's own counts are not wanted (SIGKILL: it writes none).
LLVM_PROFILE_FILE=/dev/null $BIN simulate --listen 127.0.0.1:$SIM --events 20 \
  --fault 'key:sk-pgo-bad=429;retry-after=1' >/dev/null 2>&1 &
PIDS+=($!); disown
# The simulator's HTTP/2 TLS front, relaying to it (its counts not wanted either).
H2_PORT=$((BASE+5))
LLVM_PROFILE_FILE=/dev/null sim_tls_front $((BASE+4)) $H2_PORT $SIM; disown
RUNS="$RUNS h2:4 h2json:2"
cat > "$WORK/ringside.toml" <<TOML
[server]
listen = "127.0.0.1:$RS"
admin_listen = "127.0.0.1:$ADMIN"
workers = 1
pin_workers = false
access_log = true                  # as shipped: the access log is on the request path (to serve.log)
$UPSTREAM
[[providers]]
id = "sim"
dialect = "openai"
base_url = "http://127.0.0.1:$SIM/v1"
  [[providers.connections]]
  id = "bad"
  key_env = "PGO_BAD_KEY"
  models = ["bench-model"]
  priority = 0
  [[providers.connections]]
  id = "good"
  key_env = "PGO_KEY"
  models = ["bench-model"]
  priority = 1
[[providers]]
id = "anth"
dialect = "anthropic"
base_url = "http://127.0.0.1:$SIM/v1"
  [[providers.connections]]
  id = "a"
  key_env = "PGO_KEY"
  models = ["claude-bench"]
[[providers]]
id = "h2"
dialect = "openai"
base_url = "https://localhost:$H2_PORT/v1"
http2 = "always"
ca_file = "$WORK/certs/ca.pem"
  [[providers.connections]]
  id = "h2"
  key_env = "PGO_KEY"
  models = ["h2-model"]
TOML
lua() { # name path body
  printf 'wrk.method="POST"\nwrk.path="%s"\nwrk.body=[[%s]]\nwrk.headers["content-type"]="application/json"\nwrk.headers["authorization"]="Bearer sk-client"\n' "$2" "$3" > "$WORK/$1.lua"
}
lua json /v1/chat/completions '{"model":"bench-model","messages":[{"role":"user","content":"hello"}]}'
lua sse /v1/chat/completions '{"model":"bench-model","stream":true,"messages":[{"role":"user","content":"hello"}]}'
lua ajson /v1/messages '{"model":"claude-bench","max_tokens":64,"messages":[{"role":"user","content":"hello"}]}'
lua tls /v1/chat/completions '{"model":"tls-model","stream":true,"messages":[{"role":"user","content":"hello"}]}'
lua h2 /v1/chat/completions '{"model":"h2-model","stream":true,"messages":[{"role":"user","content":"hello"}]}'
lua h2json /v1/chat/completions '{"model":"h2-model","messages":[{"role":"user","content":"hello"}]}'
lua asse /v1/messages '{"model":"claude-bench","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hello"}]}'
# An agent's turn: a 32 KB conversation with code, escapes and non-ASCII (\u escapes too, as
# Python's json writes them), so that the body check's long-string path is trained as well.
python3 benches/agent_body.py "$WORK/agent.json" --mixed
printf 'wrk.method="POST"\nwrk.path="/v1/chat/completions"\nlocal f=io.open("%s")\nwrk.body=f:read("*a")\nf:close()\nwrk.headers["content-type"]="application/json"\nwrk.headers["authorization"]="Bearer sk-client"\n' "$WORK/agent.json" > "$WORK/agent.lua"

mkdir -p "$WORK/raw"
export LLVM_PROFILE_FILE="$WORK/raw/%p-%m.profraw"
PGO_KEY=sk-pgo PGO_BAD_KEY=sk-pgo-bad $BIN serve --config "$WORK/ringside.toml" >"$WORK/serve.log" 2>&1 &
SERVE=$!
for _ in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/$RS) 2>/dev/null && break; sleep 0.1; done
for run in $RUNS; do
  IFS=: read -r name secs <<< "$run"
  printf '%-6s ' "$name"
  # A profile of error answers would steer the optimiser wrong: stop if 1% are not 2xx.
  wrk -t1 -c64 -d${secs}s -s "$WORK/$name.lua" "http://127.0.0.1:$RS" | awk '
    /requests in/ {n=$1} /Non-2xx/ {bad=$NF} /Requests\/sec/ {rate=$2}
    END {printf "%s req/s, %d of %d not 2xx\n", rate, bad, n; exit (n == 0 || bad * 100 > n)}' ||
    { echo "pgo.sh: the $name run failed; the profile was not changed" >&2; exit 1; }
done
kill -TERM $SERVE
wait $SERVE
$BIN demo >/dev/null
unset LLVM_PROFILE_FILE

"$PROFDATA" merge -o tuning/pgo/ringside.profdata "$WORK"/raw/*.profraw
rustc -vV | sed -n 's/^LLVM version: \([0-9]*\).*/\1/p' > tuning/pgo/llvm-major
echo "tuning/pgo/ringside.profdata: $(du -k tuning/pgo/ringside.profdata | cut -f1) KiB, LLVM $(cat tuning/pgo/llvm-major)"
