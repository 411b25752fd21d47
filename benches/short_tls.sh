#!/usr/bin/env bash
# Short requests to a TLS upstream: JSON answers and 20-event streams through nginx
# (`proxy_pass https://`), HAProxy (`ssl` to the server, with and without `proto h2`) and
# Ringside (HTTP/2 where offered, its default; and `http2 = "never"`), each with its shipped
# defaults (worker count included: one per core, sharing the cores with wrk and the
# simulator, as a sidecar runs), reaching the simulator's TLS front. Prints requests/s, the
# proxy's CPU per 10k requests, and the upstream's (simulator and TLS front together) per
# target; ratios from one run. The front relays each request to the simulator in a process of
# its own. Its cost shares the cores, and serving HTTP/2 costs it more per request than
# HTTP/1.1: the upstream columns show how much of a rate gap is the upstream's, which a real
# provider pays on its own machines. FRONT_BY=nginx: nginx is the provider's TLS front instead
# (`nginx_tls_front`: HTTP/2 and HTTP/1.1 by ALPN, as providers' edges answer).
# UPSTREAM=plain: the same with every proxy reaching the simulator over plaintext HTTP/1.1
# (nginx `proxy_pass http://` with keep-alive, HAProxy without `ssl`, Ringside with an
# `http://` provider; the targets then nginx, haproxy and ringside).
# Bounded: about 2 x (DUR + 3) s per target.
# Usage: benches/short_tls.sh   (env: DUR=5 CONNS=64 WORKERS= (Ringside's and nginx's worker
#   count and HAProxy's threads; empty: shipped defaults) TARGETS="nginx haproxy haproxy-h2 ringside ringside-h1";
#   RS_BIN_B: another Ringside binary, run as the target `ringside-b` (HTTP/2 where offered) to
#   compare two builds within one run; SDK_HEADERS=1: each request with the OpenAI Python
#   SDK's headers (benches/lib.sh chat_scripts); ROUNDS=N: the targets take turns N times, then each
#   figure's median and every target's rates against HAProxy's round by round)
set -euo pipefail
cd "$(dirname "$0")/.."
DUR=${DUR:-5}
CONNS=${CONNS:-64}
BASE=${BASE_PORT:-19400}
SIM=$BASE; PROXY=$((BASE+1)); ADMIN=$((BASE+2)); SIM_TLS=$((BASE+3)); FRONT=$((BASE+4))
UPSTREAM=${UPSTREAM:-tls}
. benches/lib.sh
install_missing wrk wrk nginx nginx-light haproxy haproxy
build_and_prepare
$BIN simulate --listen 127.0.0.1:$SIM --events 20 >/dev/null 2>&1 &
PIDS+=($!)
SIM_PID=${PIDS[-1]}
FRONT_PID=""
if [ "$UPSTREAM" = tls ] && [ "${FRONT_BY:-sim}" = nginx ]; then
  nginx_tls_front $SIM_TLS $SIM; FRONT_PID=${PIDS[-1]}
elif [ "$UPSTREAM" = tls ]; then
  sim_tls_front $FRONT $SIM_TLS $SIM; FRONT_PID=${PIDS[-1]}
fi
chat_scripts "$WORK"
workers_line() { [ -n "${WORKERS:-}" ] && echo "workers = $WORKERS" || true; }
for mode in auto never; do
  cat > "$WORK/ringside-$mode.toml" <<TOML
[server]
listen = "127.0.0.1:$PROXY"
admin_listen = "127.0.0.1:$ADMIN"
data_dir = "$WORK/ringside-data"
$(workers_line)
$(if [ "$UPSTREAM" = tls ]; then tls_front_provider $SIM_TLS $mode; else bench_provider $SIM; fi)
TOML
done
# Where nginx and HAProxy send requests: the TLS front, or the simulator itself.
if [ "$UPSTREAM" = tls ]; then
  PASS=$(nginx_tls_pass simup); UP_PORT=$SIM_TLS
else
  PASS="proxy_pass http://simup;"; UP_PORT=$SIM
fi
cat > "$WORK/nginx.conf" <<NGX
worker_processes ${WORKERS:-auto};
daemon off;
master_process on;
pid $WORK/nginx.pid;
error_log $WORK/nginx-error.log;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $WORK; proxy_temp_path $WORK; fastcgi_temp_path $WORK; uwsgi_temp_path $WORK; scgi_temp_path $WORK;
  upstream simup { server 127.0.0.1:$UP_PORT; keepalive 128; }
  server {
    listen 127.0.0.1:$PROXY;
    location / {
      $PASS
      proxy_http_version 1.1; proxy_set_header Connection ""; proxy_buffering off;
    }
  }
}
NGX
if [ "$UPSTREAM" = tls ]; then
  haproxy_tls_cfgs $PROXY $SIM_TLS
else
  haproxy_cfg $PROXY $SIM > "$WORK/haproxy.cfg"
fi
# WORKERS: HAProxy runs as many threads (its default is one per CPU).
if [ -n "${WORKERS:-}" ]; then
  for cfg in "$WORK"/haproxy*.cfg; do sed -i "s/^global\$/global\n  nbthread $WORKERS/" "$cfg"; done
fi

start() {
  case $1 in
    nginx) nginx -c "$WORK/nginx.conf" -p "$WORK" >/dev/null 2>&1 & echo $! ;;
    haproxy) haproxy -f "$WORK/haproxy.cfg" >/dev/null 2>&1 & echo $! ;;
    haproxy-h2) haproxy -f "$WORK/haproxy-h2.cfg" >/dev/null 2>&1 & echo $! ;;
    ringside) rm -rf "$WORK/ringside-data"
      BENCH_KEY=sk-bench $BIN serve --config "$WORK/ringside-auto.toml" >"$WORK/rs.log" 2>&1 & echo $! ;;
    ringside-h1) rm -rf "$WORK/ringside-data"
      BENCH_KEY=sk-bench $BIN serve --config "$WORK/ringside-never.toml" >"$WORK/rs.log" 2>&1 & echo $! ;;
    ringside-b) rm -rf "$WORK/ringside-data"
      BENCH_KEY=sk-bench "$RS_BIN_B" serve --config "$WORK/ringside-auto.toml" >"$WORK/rs.log" 2>&1 & echo $! ;;
  esac
}
hz=$(getconf CLK_TCK)
# per_10k N T1 T0: seconds of CPU per 10k requests from clock ticks T0..T1 over N requests.
per_10k() {
  python3 -c "import sys; n=int(sys.argv[1] or 0); print(f'{(int(sys.argv[2])-int(sys.argv[3]))/int(sys.argv[4])/n*1e4:.2f}' if n else '-')" "$1" "$2" "$3" "$hz"
}
echo "| target | JSON req/s | SSE req/s (20 events) | proxy CPU s / 10k JSON | proxy CPU s / 10k SSE | upstream CPU s / 10k JSON | upstream CPU s / 10k SSE |"
echo "|---|---:|---:|---:|---:|---:|---:|"
DEFAULT_TARGETS="nginx haproxy haproxy-h2 ringside ringside-h1"
[ "$UPSTREAM" = tls ] || DEFAULT_TARGETS="nginx haproxy ringside"
ROUNDS=${ROUNDS:-1}
for round in $(seq "$ROUNDS"); do
# Even rounds take the targets in the reverse order, so that none always runs first.
order=${TARGETS:-$DEFAULT_TARGETS}
[ $((round % 2)) -eq 0 ] && order=$(echo $order | tr ' ' '\n' | tac | tr '\n' ' ')
for t in $order; do
  pid=$(start $t); PIDS+=("$pid")
  wait_for_port $PROXY; sleep 0.5
  timeout 20 wrk -t1 -c$CONNS -d1s -s "$WORK/json.lua" "http://127.0.0.1:$PROXY/v1/chat/completions" >/dev/null 2>&1 || true
  row="| $t"; [ "$ROUNDS" -gt 1 ] && row="| $t, round $round"; cpu=""; up=""
  for kind in json sse; do
    c0=$(cpu_ticks "$pid"); u0=$(( $(cpu_ticks "$SIM_PID") + $(cpu_ticks "$FRONT_PID") ))
    out=$(timeout $((DUR + 15)) wrk -t1 -c$CONNS -d${DUR}s -s "$WORK/$kind.lua" "http://127.0.0.1:$PROXY/v1/chat/completions" 2>&1 || true)
    c1=$(cpu_ticks "$pid"); u1=$(( $(cpu_ticks "$SIM_PID") + $(cpu_ticks "$FRONT_PID") ))
    n=$(echo "$out" | awk '/requests in/ {print $1}')
    rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
    bad=$(echo "$out" | awk '/Non-2xx/ {print $NF}')
    row="$row | ${rps:-0}${bad:+ ($bad non-2xx)}"
    cpu="$cpu | $(per_10k "${n:-0}" "$c1" "$c0")"
    up="$up | $(per_10k "${n:-0}" "$u1" "$u0")"
  done
  echo "$row$cpu$up |"
  echo "$round $t$(echo "$row$cpu$up" | sed 's/([^)]*)//g; s/^| [^|]*//; s/|/ /g')" >> "$WORK/rounds.txt"
  [ -n "${KEEP_LOG:-}" ] && cp "$WORK/rs.log" "$KEEP_LOG" 2>/dev/null || true
  stop_proc "$pid"
  sleep 1
done
done
# With ROUNDS > 1: each figure's median per target, and each target's JSON and SSE rates
# against HAProxy's in the same round (the ratio that one run can give on a noisy host).
if [ "$ROUNDS" -gt 1 ]; then
  python3 - "$WORK/rounds.txt" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    f = line.split()
    vals = [float(x) if x != "-" else None for x in f[2:]]
    rows.setdefault(f[1], {})[int(f[0])] = vals
def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None
print("\nMedians over the rounds; JSON and SSE rate ÷ HAProxy's in each round:\n")
print("| target | JSON req/s | SSE req/s | proxy CPU / 10k JSON | proxy CPU / 10k SSE | upstream / 10k JSON | upstream / 10k SSE | JSON ÷ HAProxy | SSE ÷ HAProxy |")
print("|---|---:|---:|---:|---:|---:|---:|---|---|")
base = rows.get("haproxy", {})
for t, by_round in rows.items():
    cols = [med([v[i] for v in by_round.values()]) for i in range(6)]
    ratios = []
    for i in (0, 1):
        r = [by_round[k][i] / base[k][i] for k in sorted(by_round) if k in base and base[k][i]]
        ratios.append(" / ".join(f"{x:.2f}" for x in r) or "-")
    cells = " | ".join("-" if c is None else (f"{c:.0f}" if i < 2 else f"{c:.2f}") for i, c in enumerate(cols))
    print(f"| {t} | {cells} | {ratios[0]} | {ratios[1]} |")
PY
fi
