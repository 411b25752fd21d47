#!/usr/bin/env bash
# Held streams measured as a new user would: `oha` holding C concurrent streaming chat
# completions through HAProxy and Ringside (each with its shipped defaults) to an upstream that
# is not Ringside's simulator (benches/mock/sse_mock.js, Node's http), 50 events 100 ms apart.
# oha counts only streams that ended within DUR, so its CPU per 100k events counts the CPU of
# the streams cut at the end too (both proxies alike), and moves with how many streams of the
# third wave end in time; the column beside it divides by every event the mock wrote (its
# GET /events), as benches/held_streams.sh counts every event.
# ROUNDS=N: the targets take turns N times per size (the order reversed every other round),
# then the medians and Ringside's CPU against HAProxy's round by round
# (benches/held_streams_oha_table.py).
# UPSTREAM_TLS=1: the mock answers over TLS (a CA and a localhost certificate made by openssl
# for the run), and both proxies verify it, as they would a real provider. Node finishes 5,000
# simultaneous handshakes in several seconds: past Ringside's connect timeout (5 s, handshake
# included), so the connections that time out cool the key and trip the breaker, and the rest
# of the run is answered 503; HAProxy bounds a handshake by `timeout server` (60 s). To compare
# the streams themselves: RS_UPSTREAM='connect_timeout_ms = 60000'.
# Installs haproxy and nodejs (Debian) and oha (cargo install, about 13 minutes once) if missing.
# The mock listens with Node's default queue of 511: at C = 5,000 each proxy's first wave of
# upstream connects overflows it, and the dropped SYNs, sent again 1 s and 3 s later, set the
# p99 and how many second streams end in time (for both proxies); BACKLOG=8192 measures the
# proxies without that.
# Usage: benches/held_streams_oha.sh   (env: SIZES="1000 5000" DUR=16 ROUNDS=1
#   TARGETS="haproxy ringside", KEEP_LOGS=DIR: keep Ringside's log of each run there, which
#   benches/access_log_waves.py reads: where the slow streams lost their time
#   UPSTREAM_TLS=1, BACKLOG=511, RS_UPSTREAM: lines added to Ringside's [upstream] table)
# Bounded: about (DUR + 3) s per target, size and round.
set -euo pipefail
cd "$(dirname "$0")/.."
SIZES=${SIZES:-1000 5000}
ROUNDS=${ROUNDS:-1}
DUR=${DUR:-16}
BASE=${BASE_PORT:-19600}
MOCK=$BASE; PROXY=$((BASE+1)); ADMIN=$((BASE+2))

. benches/lib.sh
install_missing haproxy haproxy node nodejs
command -v oha >/dev/null 2>&1 || cargo install oha --locked -q
build_and_prepare
ulimit -n "$(ulimit -Hn)"

SCHEME=http
if [ "${UPSTREAM_TLS:-0}" = 1 ]; then
  SCHEME=https
  test_certs "$WORK"
  export TLS_CERT="$WORK/cert.pem" TLS_KEY="$WORK/key.pem"
fi

cat > "$WORK/ringside.toml" <<TOML
[server]
listen = "127.0.0.1:$PROXY"
admin_listen = "127.0.0.1:$ADMIN"
data_dir = "$WORK/ringside-data"
[upstream]
$([ $SCHEME = https ] && printf 'ca_file = "%s"\n' "$WORK/ca.pem")
${RS_UPSTREAM:-}
$(bench_provider $MOCK sim bench-model "$SCHEME://localhost:$MOCK")
TOML
haproxy_cfg $PROXY $MOCK > "$WORK/haproxy.cfg"
if [ $SCHEME = https ]; then
  sed -i "s|^  server up 127.0.0.1:$MOCK\$|  server up 127.0.0.1:$MOCK ssl verify required ca-file $WORK/ca.pem sni str(localhost) verifyhost localhost|" "$WORK/haproxy.cfg"
fi

BODY='{"model":"bench-model","stream":true,"messages":[{"role":"user","content":"hello"}]}'
: > "$WORK/rows.jsonl"
for C in $SIZES; do
  echo
  echo "### C = $C streams through oha, ${DUR}s, $(nproc) cores, upstream over $SCHEME"
  echo
  echo "| target | streams completed | other answers | CPU s per 100k events (user) | CPU s per 100k events relayed | peak RSS MiB | p50 / p99 stream s |"
  echo "|---|---:|---|---:|---:|---:|---|"
  for round in $(seq "$ROUNDS"); do
    order=${TARGETS:-haproxy ringside}
    # Even rounds take the targets in the reverse order, so that none always runs first.
    [ $((round % 2)) -eq 0 ] && order=$(echo $order | tr ' ' '\n' | tac | tr '\n' ' ')
    for t in $order; do
      # A fresh mock for each target: tearing down the last run's thousands of (TLS) connections
      # keeps Node's one thread busy for seconds, which the next target would pay for.
      node benches/mock/sse_mock.js $MOCK &
      mock=$!; PIDS+=("$mock")
      wait_for_port $MOCK
      case $t in
        haproxy) haproxy -f "$WORK/haproxy.cfg" >/dev/null 2>&1 & pid=$! ;;
        ringside) rm -rf "$WORK/ringside-data"
          BENCH_KEY=sk-bench $BIN serve --config "$WORK/ringside.toml" >"$WORK/ringside.log" 2>&1 & pid=$! ;;
      esac
      PIDS+=("$pid")
      wait_for_port $PROXY
      sleep 0.5
      c0=$(cpu_ticks "$pid"); u0=$(user_ticks "$pid")
      ( while sleep 0.5; do mem_kib VmRSS "$pid"; done ) > "$WORK/rss.txt" 2>/dev/null &
      SAMPLER=$!
      timeout $((DUR + 60)) oha -c "$C" -z "${DUR}s" --no-tui --output-format json -m POST \
        -H 'content-type: application/json' -H 'authorization: Bearer sk-bench' -d "$BODY" \
        "http://127.0.0.1:$PROXY/v1/chat/completions" > "$WORK/oha.json" 2>/dev/null || true
      c1=$(cpu_ticks "$pid"); u1=$(user_ticks "$pid")
      # Every event the upstream wrote during the run, the cut streams' too.
      sent=$(curl -sk --max-time 5 "$SCHEME://localhost:$MOCK/events" || echo 0)
      kill $SAMPLER 2>/dev/null || true; wait $SAMPLER 2>/dev/null || true
      peak=$(sort -n "$WORK/rss.txt" | tail -1)
      stop_proc "$pid" "$mock"
      # KEEP_LOGS=DIR: Ringside's log of each run (its access lines: time to first byte,
      # attempts) outlives the run's work folder.
      if [ -n "${KEEP_LOGS:-}" ] && [ "$t" = ringside ]; then
        mkdir -p "$KEEP_LOGS" && cp "$WORK/ringside.log" "$KEEP_LOGS/ringside-c$C-round$round.log"
      fi
      label=$t; [ "$ROUNDS" -gt 1 ] && label="$t, round $round"
      python3 benches/held_streams_oha_table.py --row "$WORK/rows.jsonl" "$t" "$label" "$round" \
        "$WORK/oha.json" "$c0" "$c1" "$u0" "$u1" "$(getconf CLK_TCK)" "${peak:-0}" "${sent:-0}" "$C"
      sleep 1
    done
  done
  [ "$ROUNDS" -gt 1 ] && python3 benches/held_streams_oha_table.py --summary "$WORK/rows.jsonl" "$C"
done
