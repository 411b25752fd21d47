#!/usr/bin/env bash
# Held streams on loopback: C concurrent event streams of EVENTS events INTERVAL ms apart,
# each restarted as soon as it ends, for DUR seconds, through direct, nginx, HAProxy and
# Ringside (each with its shipped defaults; Ringside's access log on, workers as shipped).
# Every proxy is started fresh for each size, so its peak RSS belongs to that run.
# Prints one markdown table per size. Bounded: about (DUR + 8) s x 5 targets x sizes.
# Event delay: how late each event reached the client against the upstream's schedule
# (ringside-load streams, INTERVAL given). HAProxy's defaults send an unfinished body with
# MSG_MORE, so the kernel holds a streamed event until the next ones join it (measured: three
# events every ~300 ms at 100 ms spacing); `haproxy-nodelay` is HAProxy with
# `option http-no-delay`, which sends each event when it comes, as nginx and Ringside do.
# Machine CPU: the whole machine's busy time per 100k events (load tool and upstream included,
# and the kernel's network work that no process is charged for); against `direct` it shows what
# a proxy costs the machine, not only its own process. Meaningless when the cores are saturated.
# ROUNDS=N: the targets take turns N times per size (one row per target and round), then a
# summary per target: the median of each figure over its rounds, and Ringside's CPU per event
# against HAProxy's defaults in each round (the two run about a minute apart; this host's own
# figure for one proxy moves by a quarter from one run to the next).
# Usage: benches/held_streams.sh   (env: SIZES="1000 5000 9000" DUR=16 EVENTS=50 INTERVAL=100
#   TARGETS="direct nginx haproxy haproxy-nodelay ringside" ROUNDS=1, RS_EXTRA: TOML appended
#   to Ringside's config, PROVIDER_HEAD=1: every answer carries the head a provider sends,
#   about 1.5 KB of ids, cookies and rate limits, not the simulator's plain one; RS_BIN_B: another
#   Ringside binary, run as the target `ringside-b` with the same configuration, to compare two
#   builds within one run; UPSTREAM=tls: every proxy reaches the simulator's TLS front instead,
#   the targets then `direct` (plain), `nginx` (proxy_pass https://), `haproxy` (`ssl` to the
#   server), `haproxy-h2` (the same with `proto h2`), `ringside` (HTTP/2 where offered, its
#   default) and `ringside-h1` (`http2 = "never"`; `ringside-b-h1` with RS_BIN_B), and `haproxy-nodelay` on request (`ssl`
#   with `option http-no-delay`: each event sent when it comes); RS_MAX_CONNECTIONS: Ringside's
#   `max_connections` (0, the default, follows the descriptor limit: two per client while a
#   stream may take an HTTP/1.1 connection, one where every provider speaks HTTP/2); after each size, the front's count of
#   upstream connections by protocol and of resumed TLS sessions, per target; FRONT_BY=nginx:
#   nginx is the provider's TLS front instead, `nginx_tls_front`: OpenSSL's ticket defaults,
#   no RFC 9149 ticket requests honoured; its log counts the connections; RS_KEEP=DIR: Ringside's
#   metrics and log after each of its runs, kept in DIR)
set -euo pipefail
cd "$(dirname "$0")/.."
SIZES=${SIZES:-1000 5000 9000}
ROUNDS=${ROUNDS:-1}
DUR=${DUR:-16}
EVENTS=${EVENTS:-50}
INTERVAL=${INTERVAL:-100}
BASE=${BASE_PORT:-19300}
SIM=$BASE; PROXY=$((BASE+1)); ADMIN=$((BASE+2)); SIM_TLS=$((BASE+3))
UPSTREAM=${UPSTREAM:-plain}

. benches/lib.sh
install_missing nginx nginx-light haproxy haproxy
build_and_prepare
# Two descriptors per proxied stream, and the load tool holds C of its own.
ulimit -n "$(ulimit -Hn)"

SIM_ARGS=()
[ "${PROVIDER_HEAD:-0}" = 1 ] && SIM_ARGS=(--fault "key:sk-bench=none;provider-head")
$BIN simulate --listen 127.0.0.1:$SIM --events "$EVENTS" --interval-ms "$INTERVAL" "${SIM_ARGS[@]}" >/dev/null 2>&1 &
SIM_PID=$!; PIDS+=($SIM_PID)
FRONT_BY=${FRONT_BY:-sim}
if [ "$UPSTREAM" = tls ] && [ "$FRONT_BY" = nginx ]; then
  nginx_tls_front $SIM_TLS $SIM log
elif [ "$UPSTREAM" = tls ]; then
  sim_tls_front $((BASE+4)) $SIM_TLS $SIM
fi
sleep 0.5

cat > "$WORK/ringside.toml" <<TOML
[server]
listen = "127.0.0.1:$PROXY"
admin_listen = "127.0.0.1:$ADMIN"
data_dir = "$WORK/ringside-data"
max_connections = ${RS_MAX_CONNECTIONS:-0}
$(if [ "$UPSTREAM" = tls ]; then tls_front_provider $SIM_TLS HTTP2_MODE; else bench_provider $SIM; fi)
${RS_EXTRA:-}
TOML
sed 's/HTTP2_MODE/never/' "$WORK/ringside.toml" > "$WORK/ringside-h1.toml"
sed -i 's/HTTP2_MODE/auto/' "$WORK/ringside.toml"
cat > "$WORK/nginx.conf" <<NGX
worker_processes auto;
daemon off;
master_process on;
pid $WORK/nginx.pid;
error_log $WORK/nginx-error.log;
worker_rlimit_nofile 20000;
events { worker_connections 20000; }
http {
  access_log off;
  client_body_temp_path $WORK; proxy_temp_path $WORK; fastcgi_temp_path $WORK; uwsgi_temp_path $WORK; scgi_temp_path $WORK;
  upstream sim { server 127.0.0.1:$SIM; keepalive 128; }
  upstream simtls { server 127.0.0.1:$SIM_TLS; keepalive 128; }
  server {
    listen 127.0.0.1:$PROXY;
    location / {
      $(if [ "$UPSTREAM" = tls ]; then
        nginx_tls_pass simtls
      else echo "proxy_pass http://sim;"; fi)
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
    }
  }
}
NGX
if [ "$UPSTREAM" = tls ]; then
  haproxy_tls_cfgs $PROXY $SIM_TLS
else
  haproxy_cfg $PROXY $SIM > "$WORK/haproxy.cfg"
fi
sed 's/^  mode http$/  mode http\n  option http-no-delay/' "$WORK/haproxy.cfg" > "$WORK/haproxy-nodelay.cfg"

# A process and its children (nginx's workers).
hz=$(getconf CLK_TCK)
wait_port() { for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$1) 2>/dev/null && return 0; sleep 0.05; done; return 1; }

start() {  # target -> pid of the proxy (empty for direct)
  case $1 in
    direct) echo "" ;;
    nginx) nginx -c "$WORK/nginx.conf" -p "$WORK" >/dev/null 2>&1 & echo $! ;;
    haproxy) haproxy -f "$WORK/haproxy.cfg" >/dev/null 2>&1 & echo $! ;;
    haproxy-nodelay) haproxy -f "$WORK/haproxy-nodelay.cfg" >/dev/null 2>&1 & echo $! ;;
    haproxy-h2) haproxy -f "$WORK/haproxy-h2.cfg" >/dev/null 2>&1 & echo $! ;;
    ringside-h1) rm -rf "$WORK/ringside-data"
      BENCH_KEY=sk-bench $BIN serve --config "$WORK/ringside-h1.toml" >"$WORK/ringside.log" 2>&1 & echo $! ;;
    ringside) rm -rf "$WORK/ringside-data"
      BENCH_KEY=sk-bench $BIN serve --config "$WORK/ringside.toml" >"$WORK/ringside.log" 2>&1 & echo $! ;;
    ringside-b) rm -rf "$WORK/ringside-data"
      BENCH_KEY=sk-bench "${RS_BIN_B:?RS_BIN_B names the binary}" serve --config "$WORK/ringside.toml" >"$WORK/ringside.log" 2>&1 & echo $! ;;
    ringside-b-h1) rm -rf "$WORK/ringside-data"
      BENCH_KEY=sk-bench "${RS_BIN_B:?RS_BIN_B names the binary}" serve --config "$WORK/ringside-h1.toml" >"$WORK/ringside.log" 2>&1 & echo $! ;;
  esac
}

BODY='{"model":"bench-model","stream":true,"messages":[{"role":"user","content":"hello"}]}'
IDEAL=$((EVENTS * INTERVAL))
DEFAULT_TARGETS="direct nginx haproxy haproxy-nodelay ringside"
[ "$UPSTREAM" = tls ] && DEFAULT_TARGETS="direct nginx haproxy haproxy-h2 ringside ringside-h1"
# The TLS front's counters (connections by protocol, resumed sessions), as "h2 h1 resumed".
front() {
  [ "$FRONT_BY" = nginx ] && { nginx_front_counts; return; }
  curl -s "127.0.0.1:$((BASE+4))/_sim/front" | python3 -c 'import json,sys; f=json.load(sys.stdin); print(f["connections_h2"], f["connections_http1"], f["handshakes_resumed"])'; }
for C in $SIZES; do
  echo
  echo "### C = $C streams, $EVENTS events $INTERVAL ms apart (ideal $IDEAL ms), ${DUR}s, $(nproc) cores"
  echo
  python3 benches/held_streams_table.py --header
  rm -f "$WORK/rows.jsonl" "$WORK/upstream.txt"
  for round in $(seq "$ROUNDS"); do
    # Even rounds take the targets in the reverse order, so that none always runs first.
    order=${TARGETS:-$DEFAULT_TARGETS}
    [ $((round % 2)) -eq 0 ] && order=$(echo $order | tr ' ' '\n' | tac | tr '\n' ' ')
    for t in $order; do
      pid=$(start $t)
      port=$PROXY; [ "$t" = direct ] && port=$SIM
      wait_port "$port" || { echo "| $t | did not start |"; continue; }
      sleep 0.5
      idle=0; c0=0; u0=0
      if [ -n "$pid" ]; then PIDS+=("$pid"); idle=$(mem_kib VmRSS "$pid"); c0=$(cpu_ticks "$pid"); u0=$(user_ticks "$pid"); fi
      # Sample the RSS while the streams are held (peak of samples; VmHWM also counts start-up).
      peak=$idle
      ( while sleep 1; do [ -n "$pid" ] && mem_kib VmRSS "$pid"; done ) > "$WORK/rss.txt" 2>/dev/null &
      SAMPLER=$!
      m0=$(machine_ticks)
      [ "$UPSTREAM" = tls ] && f0=$(front)
      out=$(timeout $((DUR + 30)) $LOAD streams 127.0.0.1:$port /v1/chat/completions "$BODY" "$C" "$DUR" "$INTERVAL" || echo '{}')
      m1=$(machine_ticks)
      kill $SAMPLER 2>/dev/null || true; wait $SAMPLER 2>/dev/null || true
      if [ "$UPSTREAM" = tls ] && [ "$t" != direct ]; then
        f1=$(front)
        python3 -c 'import sys; a=list(map(int,sys.argv[2].split())); b=list(map(int,sys.argv[3].split())); d=[y-x for x,y in zip(a,b)]; print(f"- {sys.argv[1]}: {d[0]+d[1]} upstream connections ({d[0]} HTTP/2, {d[1]} HTTP/1.1), {d[2]} TLS sessions resumed, {d[0]+d[1]-d[2]} full handshakes")' "$t" "$f0" "$f1" >> "$WORK/upstream.txt"
        # Ringside's own account: connects of a burst that waited for a ticket, and how it ended.
        case $t in ringside*)
          w=$(curl -s "127.0.0.1:$ADMIN/metrics" | awk -F'[{}" ]+' '/^ringside_upstream_tls_ticket_waits_total/ {printf "%s %s, ", $3, $4}')
          [ -n "$w" ] && echo "  - waited for a ticket: ${w%, }" >> "$WORK/upstream.txt"
          # RS_KEEP=DIR: Ringside's metrics and log after each run, to read what its errors were.
          if [ -n "${RS_KEEP:-}" ]; then
            mkdir -p "$RS_KEEP"
            curl -s "127.0.0.1:$ADMIN/metrics" > "$RS_KEEP/$t-$C-$round.metrics"
            cp "$WORK/ringside.log" "$RS_KEEP/$t-$C-$round.log"
          fi ;;
        esac
      fi
      if [ -n "$pid" ]; then
        c1=$(cpu_ticks "$pid"); u1=$(user_ticks "$pid")
        peak=$(sort -n "$WORK/rss.txt" | tail -1); peak=${peak:-$idle}
        stop_proc "$pid"
      else c1=0; u1=0; fi
      python3 - "$t" "$out" "$c0" "$c1" "$hz" "$idle" "$peak" "$C" "$m0" "$m1" "$round" "$WORK/rows.jsonl" "$u0" "$u1" <<'PY'
import json, sys
t, out, c0, c1, hz, idle, peak, c, m0, m1, rnd, rows, u0, u1 = sys.argv[1:]
o = json.loads(out) if out.strip().startswith("{") else {}
ev = o.get("events", 0)
proxy = t != "direct"
row = {"target": t, "round": int(rnd), "completed": o.get("completed", 0),
       "errors": o.get("errors"), "events_per_s": o.get("events_per_s", 0),
       "cpu": (int(c1) - int(c0)) / int(hz) / ev * 1e5 if ev and proxy else None,
       "cpu_user": (int(u1) - int(u0)) / int(hz) / ev * 1e5 if ev and proxy else None,
       "machine": (int(m1) - int(m0)) / int(hz) / ev * 1e5 if ev else None,
       "rss": int(peak) / 1024 if proxy else None,
       "per_stream": (int(peak) - int(idle)) / int(c) if proxy else None,
       "p50": o.get("p50_ms"), "p99": o.get("p99_ms"),
       "delay_p50": o.get("event_delay_p50_ms"), "delay_p99": o.get("event_delay_p99_ms")}
with open(rows, "a") as f:
    f.write(json.dumps(row) + "\n")
PY
      label=$t; [ "$ROUNDS" -gt 1 ] && label="$t, round $round"
      python3 benches/held_streams_table.py --row "$WORK/rows.jsonl" "$label"
      sleep 1
    done
  done
  if [ "$ROUNDS" -gt 1 ]; then python3 benches/held_streams_table.py "$WORK/rows.jsonl"; fi
  if [ -f "$WORK/upstream.txt" ]; then echo; cat "$WORK/upstream.txt"; rm -f "$WORK/upstream.txt"; fi
done
