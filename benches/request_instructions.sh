#!/usr/bin/env bash
# User-space instructions per proxied request, counted by callgrind on the running server (one
# io_uring worker, access log off) against the simulator on loopback: deterministic where CPU
# time on a shared machine is not. Counters are zeroed after a warm-up, then one wrk run of
# JSON requests and one of 20-event SSE streams is divided by its request count. Kernel time is
# not included (see benches/e2e.sh for that). Where node is installed, a third row counts
# 20-event streams from a TLS upstream (the independent mock over https, `tls_mock`), the path
# every real provider takes; an `h2` row counts them over HTTP/2 from the simulator's TLS front
# (a provider with `http2 = "always"`), as OpenAI, Anthropic and Google answer, `h2-json`
# the JSON request there, and `h1tls-json` the same over HTTP/1.1 (`http2 = "never"`) from the
# same front: what HTTP/2 costs per request against HTTP/1.1 over TLS. Two more rows count the same JSON request and stream answered by a
# provider of another API (Anthropic's Messages on the simulator), translated both ways, with
# their ratio to the pass-through rows. Bounded: about two minutes.
# Usage: benches/request_instructions.sh   (installs valgrind and wrk from Debian packages if missing;
#   ACCESS_LOG=true counts the access log too: its lines and its writer thread;
#   RINGSIDE_BIN=PATH counts that binary instead of building this tree's; KEEP_CALLGRIND=DIR
#   keeps the dumps for callgrind_annotate; BUDGETS=true bills every request to a tenant with
#   day and month budgets, named by a trusted gateway's x-ringside-tenant: what budgets cost)
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/lib.sh
install_missing valgrind valgrind wrk wrk callgrind_control valgrind
# RINGSIDE_BIN=PATH counts another build (two builds compared without PGO, say) and skips this one.
if [ -n "${RINGSIDE_BIN:-}" ]; then BIN=$RINGSIDE_BIN; else cargo build --release -q; BIN=target/release/ringside; fi
BASE=${BASE_PORT:-19150}
SIM=$BASE; RS=$((BASE+1)); ADMIN=$((BASE+2))
WORK=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done; rm -rf "$WORK"; }
trap cleanup EXIT

$BIN simulate --listen 127.0.0.1:$SIM --events 20 >/dev/null 2>&1 &
PIDS+=($!); disown
KINDS="json sse json-x sse-x"
UPSTREAM=""
if command -v node >/dev/null 2>&1; then
  tls_mock "$WORK" $((BASE+3)); PIDS+=($TLS_MOCK_PID); disown
  KINDS="json sse json-x sse-x tls"
  # Under callgrind the first handshakes take seconds (new code is being translated): a
  # 5 s connect timeout would cool the connection and leave the counted run waiting.
  UPSTREAM=$(printf '[upstream]\nca_file = "%s"\nconnect_timeout_ms = 60000\n%s' \
    "$WORK/ca.pem" "$(tls_provider $((BASE+3)))")
fi
# The simulator's HTTP/2 TLS front (relaying to it): 20-event streams over HTTP/2, the `h2` row.
H2=$((BASE+5))
sim_tls_front $((BASE+4)) $H2 $SIM
KINDS="$KINDS h2 h2-json h1tls-json"
cat > "$WORK/ringside.toml" <<TOML
[server]
listen = "127.0.0.1:$RS"
admin_listen = "127.0.0.1:$ADMIN"
workers = 1
pin_workers = false
driver = "uring"
access_log = ${ACCESS_LOG:-false}
$([ "${BUDGETS:-false}" = true ] && echo 'trusted_proxies = ["127.0.0.1/32"]')
$UPSTREAM
$(bench_provider $SIM)
$(bench_provider $SIM xlate xlate-model | sed 's/dialect = "openai"/dialect = "anthropic"/')
$(bench_provider $H2 h2 h2-model "https://localhost:$H2" | sed "s|^dialect = .*|&\nhttp2 = \"always\"\nca_file = \"$WORK/certs/ca.pem\"|")
$(bench_provider $H2 h1tls h1tls-model "https://localhost:$H2" | sed "s|^dialect = .*|&\nhttp2 = \"never\"\nca_file = \"$WORK/certs/ca.pem\"|")
$([ "${BUDGETS:-false}" = true ] && printf '[[tenants]]\nid = "bench"\ntokens_per_day = 1000000000000\nusd_per_month = 1000000000\n')
TOML
chat_scripts "$WORK"
if [ "${BUDGETS:-false}" = true ]; then
  for f in "$WORK"/*.lua; do echo 'wrk.headers["x-ringside-tenant"]="bench"' >> "$f"; done
fi
# The same requests for the Anthropic provider: translated (docs/dialects.md).
for kind in json sse; do sed 's/bench-model/xlate-model/' "$WORK/$kind.lua" > "$WORK/$kind-x.lua"; done
sed 's/bench-model/tls-model/' "$WORK/sse.lua" > "$WORK/tls.lua"
sed 's/bench-model/h2-model/' "$WORK/sse.lua" > "$WORK/h2.lua"
sed 's/bench-model/h2-model/' "$WORK/json.lua" > "$WORK/h2-json.lua"
sed 's/bench-model/h1tls-model/' "$WORK/json.lua" > "$WORK/h1tls-json.lua"

# Kept dumps name their functions in full: each is read alone, and compressed names are
# defined only in the first dump of a run.
BENCH_KEY=${BENCH_KEY:-sk-bench} valgrind --tool=callgrind --callgrind-out-file="$WORK/cg.%p" \
  ${KEEP_CALLGRIND:+--compress-strings=no} \
  $BIN serve --config "$WORK/ringside.toml" >"$WORK/vg.log" 2>&1 &
VG=$!; PIDS+=($VG); disown
wait_for_port $RS
URL="http://127.0.0.1:$RS/v1/chat/completions"
# One TLS stream first for each TLS row, alone: the session and the code it runs, before eight
# at once.
for model in tls-model h2-model; do
  case " $KINDS " in *" ${model%-model} "*) ;; *) continue ;; esac
  curl -s -m 120 -o /dev/null -H 'content-type: application/json' \
    -d "{\"model\":\"$model\",\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":\"hello\"}]}" "$URL" || true
done
for kind in $KINDS; do
  timeout 30 wrk -t1 -c8 -d2s -s "$WORK/$kind.lua" "$URL" >/dev/null
  callgrind_control -z $VG >/dev/null 2>&1
  n=$(timeout 30 wrk -t1 -c8 -d4s -s "$WORK/$kind.lua" "$URL" | awk '/requests in/ {print $1}')
  rm -f "$WORK"/cg.*.[0-9]*
  callgrind_control -d $VG >/dev/null 2>&1
  sleep 1
  total=0
  for f in "$WORK"/cg.*.[0-9]*; do
    [ -s "$f" ] || continue
    s=$(awk '/^summary:/ {print $2; exit}' "$f"); total=$((total + ${s:-0}))
  done
  if [ "${n:-0}" -eq 0 ]; then
    echo "$kind: no request completed in the counted run; the server said:" >&2
    grep -v '"msg":"access"' "$WORK/vg.log" | tail -5 >&2
    exit 1
  fi
  per=$((total / n))
  case $kind in json) JSON_PER=$per ;; sse) SSE_PER=$per ;; esac
  ratio=""
  case $kind in
    json-x) ratio=$(awk -v a=$per -v b=${JSON_PER:-0} 'BEGIN { if (b) printf "  %.2fx the json row", a / b }') ;;
    sse-x) ratio=$(awk -v a=$per -v b=${SSE_PER:-0} 'BEGIN { if (b) printf "  %.2fx the sse row", a / b }') ;;
  esac
  printf '%-10s %7d requests  %9d instructions/request%s\n' "$kind" "$n" $per "$ratio"
  # KEEP_CALLGRIND=DIR keeps each row's dumps, for callgrind_annotate (where they went).
  if [ -n "${KEEP_CALLGRIND:-}" ]; then
    mkdir -p "$KEEP_CALLGRIND/$kind"; cp "$WORK"/cg.*.[0-9]* "$KEEP_CALLGRIND/$kind/" 2>/dev/null || true
  fi
done
