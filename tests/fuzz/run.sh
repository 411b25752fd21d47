#!/usr/bin/env bash
# Fuzz the release binary over loopback, three phases of SECONDS each (default 60):
#   1. damaged client requests (requests.py, two seeds at once) with the simulator upstream;
#   2. valid requests read by a strict HTTP/1.1 client (strict_client.py, two seeds) against
#      an upstream that damages every answer (upstream.py);
#   3. random methods, paths and JSON against the admin API (admin.py, two seeds), mostly with
#      the admin token, sometimes with none, a wrong one, a foreign Host or another Origin.
# Passes when no phase found a problem, Ringside is still up and ready, it logged no panic
# and ringside_task_panics_total is 0. Bounded: about 3 x SECONDS + 30 s. Needs python3.
# Usage: tests/fuzz/run.sh [SECONDS] [SEED]
set -euo pipefail
cd "$(dirname "$0")/../.."
SECS=${1:-60}
SEED=${2:-1}
BASE=${BASE_PORT:-19450}
UP=$BASE; RS=$((BASE+1)); ADMIN=$((BASE+2))
cargo build --release -q
BIN=target/release/ringside
WORK=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$WORK"; }
trap cleanup EXIT

# Short client timeouts (a request that never completes is answered 408 within a second) and
# lenient breakers and cooldowns, so the damaged answers keep reaching the relay instead of
# every connection cooling down after the first few.
cat > "$WORK/ringside.toml" <<TOML
[server]
listen = "127.0.0.1:$RS"
admin_listen = "127.0.0.1:$ADMIN"
workers = 2
pin_workers = false
data_dir = "$WORK/data"
admin_token_env = "FUZZ_ADMIN_TOKEN"
[limits]
header_read_timeout_ms = 1000
body_read_timeout_ms = 1000
keepalive_idle_ms = 1000
[resilience]
max_cooldown_ms = 1000
quota_cooldown_ms = 1000
# A 404 (model not found) locks the model on its key whatever \`enabled\` says: 1 ms here, or
# the damaged upstream's first 404s would answer nearly every later request with 429.
[resilience.lockout]
enabled = false
base_ms = 1
exponential = false
[[providers]]
id = "oa"
dialect = "openai"
base_url = "http://127.0.0.1:$UP/v1"
  [providers.breaker]
  degraded_at = 1000
  open_at = 1000
  [providers.cooldown]
  base_ms = 1
  max_level = 1
  [[providers.connections]]
  id = "a1"
  key_env = "FUZZ_KEY_A"
  models = ["gpt-x", "emb-x"]
  [[providers.connections]]
  id = "a2"
  key_env = "FUZZ_KEY_B"
  models = ["gpt-x"]
[[providers]]
id = "an"
dialect = "anthropic"
base_url = "http://127.0.0.1:$UP"
  [providers.breaker]
  degraded_at = 1000
  open_at = 1000
  [providers.cooldown]
  base_ms = 1
  max_level = 1
  [[providers.connections]]
  id = "c1"
  key_env = "FUZZ_KEY_C"
  models = ["claude-x"]
# No models list: \`relay/<anything>\` routes here, and the name becomes the route header.
[[providers]]
id = "relay"
dialect = "openai"
base_url = "http://127.0.0.1:$UP/v1"
  [providers.breaker]
  degraded_at = 1000
  open_at = 1000
  [providers.cooldown]
  base_ms = 1
  max_level = 1
  [[providers.connections]]
  id = "r1"
  key_env = "FUZZ_KEY_A"
[[routes]]
name = "smart"
targets = [{ provider = "oa", model = "gpt-x" }, { provider = "an", model = "claude-x" }]
TOML

$BIN simulate --listen 127.0.0.1:$UP --events 5 >/dev/null 2>&1 &
SIM=$!; PIDS+=($SIM)
FUZZ_KEY_A=sk-fuzz-a FUZZ_KEY_B=sk-fuzz-b FUZZ_KEY_C=sk-fuzz-c FUZZ_ADMIN_TOKEN=fuzz-admin-token \
  $BIN serve --config "$WORK/ringside.toml" >/dev/null 2>"$WORK/ringside.err" &
RSPID=$!; PIDS+=($RSPID)
for _ in $(seq 50); do python3 -c "import socket; socket.create_connection(('127.0.0.1', $RS))" 2>/dev/null && break; sleep 0.1; done

fail=0
phase() {  # name script port [clients, one seed each; default 2]
  local name=$1 script=$2 port=$3 seeds pids=() rc=0
  seeds=$(seq "$SEED" $((SEED + ${4:-2} - 1)))
  for s in $seeds; do
    timeout $((SECS+90)) python3 "tests/fuzz/$script" "$port" "$SECS" "$s" > "$WORK/$name.$s" 2>&1 & pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  for s in $seeds; do echo "$name (seed $s): $(tail -c 1500 "$WORK/$name.$s")"; done
  [ $rc -eq 0 ] || { echo "$name: PROBLEMS (above)"; fail=1; }
}
phase requests requests.py $RS
kill $SIM 2>/dev/null || true; wait $SIM 2>/dev/null || true
python3 tests/fuzz/upstream.py $UP "$SEED" >/dev/null 2>&1 &
PIDS+=($!)
sleep 0.5
# Most damaged answers end in the upstream's stall (a second): more clients, more answers.
phase upstream strict_client.py $RS 6
ADMIN_TOKEN=fuzz-admin-token phase admin admin.py $ADMIN

if ! kill -0 $RSPID 2>/dev/null; then echo "ringside is gone"; fail=1; fi
ready=$(python3 -c "
import urllib.request
print(urllib.request.urlopen('http://127.0.0.1:$ADMIN/healthz', timeout=5).read().decode())" 2>&1 || true)
echo "healthz: $ready"
[ "$ready" = "ok" ] || fail=1
panics=$(python3 -c "
import urllib.request
r = urllib.request.Request('http://127.0.0.1:$ADMIN/metrics', headers={'authorization': 'Bearer fuzz-admin-token'})
m = urllib.request.urlopen(r, timeout=5).read().decode()
print([l for l in m.splitlines() if l.startswith('ringside_task_panics_total')][0].split()[1])" 2>&1 || echo "?")
echo "ringside_task_panics_total: $panics"
[ "$panics" = "0" ] || fail=1
if grep -q panicked "$WORK/ringside.err"; then grep -m3 panicked "$WORK/ringside.err"; fail=1; fi
[ $fail -eq 0 ] && echo "fuzz: no problem found" || echo "fuzz: FAILED"
exit $fail
