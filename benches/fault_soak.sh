#!/usr/bin/env bash
# A soak through every fault at once: the simulator's TLS front with its HTTP/2 faults (every
# Nth stream refused, connections shut down with GOAWAY, one dropped under its streams, a slow
# request window), a key that answers 503 for a while, 350 clients of streams and JSON, and a
# 200 KB prompt sent again and again, for DUR seconds. Not a benchmark: it prints what an
# operator would ask afterwards. How the answers ended (status, error code), the slowest
# request, the requests that waited over a second and what they waited for (the decision
# record's `waited_for`), the breaker's openings and closings, the HTTP/2 streams left open
# (`ringside_upstream_h2_streams`, 0 when none leaked), peak RSS, and the front's counts. (The
# load tool's `ok` counts answers of any status, `errors` the exchanges that failed; the
# statuses are the access log's `answers` line.)
# Bounded: about DUR + 15 s.
# Usage: benches/fault_soak.sh   (env: DUR=20, DRIVER=auto|uring|epoll, HTTP2=auto|never,
#   REFUSE=5 (every Nth stream refused), GOAWAY=100000 (a GOAWAY after N streams a
#   connection), DROP=40 (the first connection past its Nth stream dropped), SLOW_WINDOW=4096
#   (a request body's window given back that many bytes at a time), FAULT="key:sk-a=503;times=300"
#   (the simulator's fault, `docs/simulator.md`), BASE_PORT=19800, KEEP_LOG=FILE: Ringside's
#   log (the access log and its events) kept there)
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/lib.sh
DUR=${DUR:-20}
BASE=${BASE_PORT:-19800}
SIM=$BASE; TLS=$((BASE + 1)); PROXY=$((BASE + 2)); ADMIN=$((BASE + 3))
build_and_prepare
mkdir -p "$WORK/certs"; test_certs "$WORK/certs"
$BIN simulate --listen 127.0.0.1:$SIM --tls-listen 127.0.0.1:$TLS \
  --tls-cert "$WORK/certs/cert.pem" --tls-key "$WORK/certs/key.pem" --events 30 \
  --fault "${FAULT:-key:sk-a=503;times=300}" \
  --h2-fault refuse-every="${REFUSE:-5}" --h2-fault goaway-after="${GOAWAY:-100000}" \
  --h2-fault drop-after="${DROP:-40}" --h2-fault slow-window="${SLOW_WINDOW:-4096}" \
  >"$WORK/sim.log" 2>&1 & PIDS+=($!)
cat >"$WORK/ringside.toml" <<TOML
[server]
listen = "127.0.0.1:$PROXY"
admin_listen = "127.0.0.1:$ADMIN"
data_dir = "$WORK/data"
driver = "${DRIVER:-auto}"

[upstream]
ca_file = "$WORK/certs/ca.pem"

[[providers]]
id = "sim"
dialect = "openai"
base_url = "https://localhost:$TLS/v1"
http2 = "${HTTP2:-auto}"
  [[providers.connections]]
  id = "a"
  key_env = "KEY_A"
  models = ["bench-model"]
  [[providers.connections]]
  id = "b"
  key_env = "KEY_B"
  models = ["bench-model"]
TOML
KEY_A=sk-a KEY_B=sk-b $BIN serve --config "$WORK/ringside.toml" >"$WORK/ringside.log" 2>&1 & PIDS+=($!)
RS=$!
wait_for_port $PROXY
STREAM='{"model":"bench-model","stream":true,"messages":[{"role":"user","content":"hello"}]}'
JSON='{"model":"bench-model","messages":[{"role":"user","content":"hello"}]}'
python3 -c "import json; print(json.dumps({'model': 'bench-model', 'messages': [{'role': 'user', 'content': 'x' * 200000}]}))" >"$WORK/big.json"
$LOAD 127.0.0.1:$PROXY /v1/chat/completions "$STREAM" 400 "$DUR" 300 >"$WORK/load_streams.txt" 2>&1 &
L1=$!
$LOAD 127.0.0.1:$PROXY /v1/chat/completions "$JSON" 400 "$DUR" 50 >"$WORK/load_json.txt" 2>&1 &
L2=$!
(
  end=$((SECONDS + DUR))
  while [ $SECONDS -lt "$end" ]; do
    curl -s -o /dev/null -m 20 -H 'content-type: application/json' \
      --data-binary @"$WORK/big.json" http://127.0.0.1:$PROXY/v1/chat/completions || true
  done
) &
L3=$!
wait $L1 $L2 $L3 || true
sleep 3
echo "streams: $(cat "$WORK/load_streams.txt")"
echo "json:    $(cat "$WORK/load_json.txt")"
echo "peak RSS: $(($(mem_kib VmHWM $RS) / 1024)) MiB"
curl -s 127.0.0.1:$ADMIN/metrics | grep -E '^ringside_upstream_h2_streams|^ringside_breaker_state' || true
echo "front: $(curl -s 127.0.0.1:$SIM/_sim/front)"
python3 - "$WORK/ringside.log" <<'PY'
import collections, json, sys
ends, waits, breaker = collections.Counter(), collections.Counter(), collections.Counter()
slowest = None
for line in open(sys.argv[1]):
    r = json.loads(line) if line.startswith("{") else {}
    if r.get("kind") != "access":
        if r.get("msg") in ("breaker opened", "breaker closed"):
            breaker[r["msg"]] += 1
        continue
    ends[(r["status"], r.get("error_code") or r.get("outcome"))] += 1
    if slowest is None or r["total_ms"] > slowest["total_ms"]:
        slowest = r
    if r.get("waited_ms", 0) > 1000:
        w = r.get("waited_for") or {}
        waits[(w.get("connection"), w.get("reason"))] += 1
print("answers:", ", ".join(f"{s} {why}: {n}" for (s, why), n in sorted(ends.items())))
print("breaker:", dict(breaker) or "never opened")
print("waited over 1 s, by what the wait followed:", dict(waits) or "none")
if slowest:
    print("slowest:", slowest["total_ms"], "ms,", slowest["status"],
          [a["outcome"] for a in slowest.get("attempts", [])], slowest.get("waited_for"))
PY
[ -z "${KEEP_LOG:-}" ] || cp "$WORK/ringside.log" "$KEEP_LOG"
# Gone before the next run takes the same ports (Ringside drains for 5 s on SIGTERM).
stop_proc "${PIDS[@]}"
