#!/usr/bin/env bash
# End-to-end load comparison on loopback: direct to the simulator, through nginx, through
# Ringside (lean: no access log, unpinned) and Ringside with its shipped defaults, in one run,
# the targets taking turns round after round; then the stream guard on against off, fleet
# mode (Redis on loopback) against the lean instance, translated requests (an Anthropic
# upstream for a Chat client) against passed-through ones, and budgets on against off. Prints one markdown table and the
# ratios. Bounded in time (about 4 x DUR x ROUNDS seconds per target, plus 12 x DUR x
# GUARD_ROUNDS for the guard, fleet, translation and budget rounds). Usage: benches/e2e.sh
#   (env: DUR=5 ROUNDS=3 GUARD_ROUNDS=3 RS_WORKERS=1 NGINX_WORKERS=1 RS_PIN=false;
#    BASELINE_BIN=path/to/an/older/ringside adds "this build / baseline" on JSON, lean configs)
set -euo pipefail
cd "$(dirname "$0")/.."
DUR=${DUR:-5}
ROUNDS=${ROUNDS:-3}
RS_WORKERS=${RS_WORKERS:-1}
NGINX_WORKERS=${NGINX_WORKERS:-1}
RS_PIN=${RS_PIN:-false}
EVENTS=${EVENTS:-20}
BASE=${BASE_PORT:-19100}
SIM=$BASE; RS=$((BASE+1)); RSADMIN=$((BASE+2)); NGX=$((BASE+3))

. benches/lib.sh
install_missing wrk wrk nginx nginx-light python3 python3 redis-server redis-server
build_and_prepare

$BIN simulate --listen 127.0.0.1:$SIM --events $EVENTS >/dev/null 2>&1 &
SIM_PID=$!; PIDS+=($SIM_PID)

cat > "$WORK/ringside.toml" <<TOML
[server]
listen = "127.0.0.1:$RS"
admin_listen = "127.0.0.1:$RSADMIN"
workers = $RS_WORKERS
data_dir = "$WORK/data-lean"
# The load generator and the simulator share these cores: a pinned worker cannot move off a
# core they are busy on (measured: 6-14% fewer requests/s pinned). nginx is unpinned by default.
pin_workers = $RS_PIN
access_log = false
[upstream]
pool_max_idle_per_upstream = 256
$(bench_provider $SIM)
$(bench_provider $SIM xlate xlate-model | sed 's/dialect = "openai"/dialect = "anthropic"/')
TOML
BENCH_KEY=sk-bench $BIN serve --config "$WORK/ringside.toml" >/dev/null 2>&1 &
RS_PID=$!; PIDS+=($RS_PID)
# The same with the stream guard off (plain relay), to price the guard on SSE.
RSOFF=$((BASE+10))
# (Each instance has its own data dir: a live one holds its dir's lock.)
sed -e "s/127.0.0.1:$RS\"/127.0.0.1:$RSOFF\"/" -e "s/127.0.0.1:$RSADMIN\"/127.0.0.1:$((BASE+11))\"/" \
  -e "s|data-lean|data-off|" "$WORK/ringside.toml" > "$WORK/ringside-off.toml"
printf '[stream]\nguard = false\n' >> "$WORK/ringside-off.toml"
BENCH_KEY=sk-bench $BIN serve --config "$WORK/ringside-off.toml" >/dev/null 2>&1 &
PIDS+=($!)
# The shipped defaults (access log on, written to a file as a service's journal would be;
# pin_workers as shipped), to price the defaults against the lean configuration above.
RSDEF=$((BASE+12))
sed -e "s/127.0.0.1:$RS\"/127.0.0.1:$RSDEF\"/" -e "s/127.0.0.1:$RSADMIN\"/127.0.0.1:$((BASE+13))\"/" \
  -e '/^pin_workers = /d' -e '/^access_log = false/d' -e "s|data-lean|data-defaults|" \
  "$WORK/ringside.toml" > "$WORK/ringside-defaults.toml"
BENCH_KEY=sk-bench $BIN serve --config "$WORK/ringside-defaults.toml" >"$WORK/access.log" 2>&1 &
RSDEF_PID=$!; PIDS+=($RSDEF_PID)

# The lean instance again in fleet mode (Redis on loopback, no persistence), to price fleet
# mode on uncapped keys: its requests should never touch Redis.
REDIS=$((BASE+14)); RSFLEET=$((BASE+15))
redis-server --port $REDIS --bind 127.0.0.1 --save '' --appendonly no --dir "$WORK" >/dev/null 2>&1 &
PIDS+=($!)
sed -e "s/127.0.0.1:$RS\"/127.0.0.1:$RSFLEET\"/" -e "s/127.0.0.1:$RSADMIN\"/127.0.0.1:$((BASE+16))\"/" \
  -e "s|data-lean|data-fleet|" "$WORK/ringside.toml" > "$WORK/ringside-fleet.toml"
printf '[fleet]\nredis_url = "redis://127.0.0.1:%s"\ninstance_id = "bench"\nsecret_env = "BENCH_FLEET_SECRET"\n' "$REDIS" >> "$WORK/ringside-fleet.toml"
sleep 0.5
BENCH_FLEET_SECRET=bench-fleet-secret-of-at-least-32-characters BENCH_KEY=sk-bench $BIN serve --config "$WORK/ringside-fleet.toml" >/dev/null 2>&1 &
PIDS+=($!)

# The lean instance again billing every request to a tenant with day and month budgets, named
# by a trusted gateway (docs/budgets.md), to price budgets: JSON and SSE against the lean one.
RSBUDGET=$((BASE+19))
sed -e "s/127.0.0.1:$RS\"/127.0.0.1:$RSBUDGET\"/" -e "s/127.0.0.1:$RSADMIN\"/127.0.0.1:$((BASE+20))\"/" \
  -e "s|data-lean|data-budgets|" -e 's/^\[server\]$/[server]\ntrusted_proxies = ["127.0.0.1\/32"]/' \
  "$WORK/ringside.toml" > "$WORK/ringside-budgets.toml"
printf '[[tenants]]\nid = "bench"\ntokens_per_day = 1000000000000\nusd_per_month = 1000000000\n' >> "$WORK/ringside-budgets.toml"
BENCH_KEY=sk-bench $BIN serve --config "$WORK/ringside-budgets.toml" >/dev/null 2>&1 &
RSBUDGET_PID=$!; PIDS+=($RSBUDGET_PID)

# Optionally an older build with the same lean config, to price a change in one run.
if [ -n "${BASELINE_BIN:-}" ]; then
  RSBASE=$((BASE+17))
  sed -e "s/127.0.0.1:$RS\"/127.0.0.1:$RSBASE\"/" -e "s/127.0.0.1:$RSADMIN\"/127.0.0.1:$((BASE+18))\"/" \
    -e "s|data-lean|data-baseline|" "$WORK/ringside.toml" > "$WORK/ringside-baseline.toml"
  BENCH_KEY=sk-bench "$BASELINE_BIN" serve --config "$WORK/ringside-baseline.toml" >/dev/null 2>&1 &
  PIDS+=($!)
fi

cat > "$WORK/nginx.conf" <<NGX
worker_processes $NGINX_WORKERS;
daemon off;
master_process $( [ "$NGINX_WORKERS" -gt 1 ] && echo on || echo off );
pid $WORK/nginx.pid;
error_log $WORK/nginx-error.log;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $WORK; proxy_temp_path $WORK; fastcgi_temp_path $WORK; uwsgi_temp_path $WORK; scgi_temp_path $WORK;
  upstream sim { server 127.0.0.1:$SIM; keepalive 128; }
  server {
    listen 127.0.0.1:$NGX;
    location / {
      proxy_pass http://sim;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Authorization "Bearer sk-bench";
      proxy_buffering off;
      # Agent-sized request bodies in memory, not in a temp file per request (20x slower).
      client_body_buffer_size 128k;
    }
  }
}
NGX
nginx -c "$WORK/nginx.conf" -p "$WORK" &
NGX_PID=$!; PIDS+=($NGX_PID)
sleep 1

JSON_BODY='{"model":"bench-model","messages":[{"role":"user","content":"hello"}]}'
SSE_BODY='{"model":"bench-model","stream":true,"messages":[{"role":"user","content":"hello"}]}'
printf 'wrk.method="POST"\nwrk.body=[[%s]]\nwrk.headers["content-type"]="application/json"\nwrk.headers["authorization"]="Bearer sk-bench"\n' "$JSON_BODY" > "$WORK/json.lua"
printf 'wrk.method="POST"\nwrk.body=[[%s]]\nwrk.headers["content-type"]="application/json"\nwrk.headers["authorization"]="Bearer sk-bench"\n' "$SSE_BODY" > "$WORK/sse.lua"
# An agent's turn: a 32 KB conversation, non-ASCII as \u escapes (as Python's json writes it).
python3 benches/agent_body.py "$WORK/agent.json"
AGENT_BYTES=$(wc -c < "$WORK/agent.json")
printf 'wrk.method="POST"\nlocal f=io.open("%s")\nwrk.body=f:read("*a")\nf:close()\nwrk.headers["content-type"]="application/json"\nwrk.headers["authorization"]="Bearer sk-bench"\n' "$WORK/agent.json" > "$WORK/agent.lua"

# The kernel's share of the same (system time only).
sys_ticks() {
  [ -n "$1" ] || { echo 0; return; }
  local t=0 p; for p in $(tree "$1"); do t=$((t + $(awk '{print $15}' /proc/"$p"/stat))); done; echo $t
}
mem_mib() { awk -v k="$(mem_kib "$1" "$2")" 'BEGIN{printf "%.1f", k/1024}'; }
hz=$(getconf CLK_TCK)
# The CPU of this shell's finished children (wrk, once it has been waited for).
# ($$ is the main shell, whose children wrk's `timeout` is, even inside a $(...) subshell.)
child_ticks() { awk '{print $16+$17}' /proc/$$/stat; }
rps() { awk '/Requests\/sec/ {print $2}' "$1"; }
reqs() { awk '/requests in/ {print $1}' "$1"; }

declare -A R
# One round of one target: JSON and SSE throughput with the proxy's CPU, then latency at a fixed
# rate. Totals add up over rounds; the latency percentiles are the median over rounds.
round() {  # name port pid
  local name=$1 port=$2 pid=$3 url="http://127.0.0.1:$2/v1/chat/completions"
  timeout $((DUR+10)) wrk -t1 -c64 -d1s -s "$WORK/json.lua" "$url" >/dev/null 2>&1 || true   # warm-up
  local c0 s0 w0 k0; c0=$(cpu_ticks "$pid"); s0=$(cpu_ticks "$SIM_PID"); w0=$(child_ticks); k0=$(sys_ticks "$pid")
  timeout $((DUR+10)) wrk -t1 -c64 -d${DUR}s -s "$WORK/json.lua" "$url" > "$WORK/$name.json.txt"
  local c1 s1 w1 k1; c1=$(cpu_ticks "$pid"); s1=$(cpu_ticks "$SIM_PID"); w1=$(child_ticks); k1=$(sys_ticks "$pid")
  timeout $((DUR+10)) wrk -t1 -c64 -d${DUR}s -s "$WORK/sse.lua" "$url" > "$WORK/$name.sse.txt"
  local c2 s2 w2 k2; c2=$(cpu_ticks "$pid"); s2=$(cpu_ticks "$SIM_PID"); w2=$(child_ticks); k2=$(sys_ticks "$pid")
  timeout $((DUR+10)) wrk -t1 -c64 -d${DUR}s -s "$WORK/agent.lua" "$url" > "$WORK/$name.agent.txt"
  local c3; c3=$(cpu_ticks "$pid")
  R[$name.na]=$(( ${R[$name.na]:-0} + $(reqs "$WORK/$name.agent.txt") ))
  R[$name.ca]=$(( ${R[$name.ca]:-0} + c3 - c2 ))
  R[$name.sj]=$(( ${R[$name.sj]:-0} + s1 - s0 )); R[$name.ss]=$(( ${R[$name.ss]:-0} + s2 - s1 ))
  R[$name.wj]=$(( ${R[$name.wj]:-0} + w1 - w0 )); R[$name.ws]=$(( ${R[$name.ws]:-0} + w2 - w1 ))
  R[$name.nj]=$(( ${R[$name.nj]:-0} + $(reqs "$WORK/$name.json.txt") ))
  R[$name.ns]=$(( ${R[$name.ns]:-0} + $(reqs "$WORK/$name.sse.txt") ))
  R[$name.cj]=$(( ${R[$name.cj]:-0} + c1 - c0 ))
  R[$name.cs]=$(( ${R[$name.cs]:-0} + c2 - c1 ))
  R[$name.kj]=$(( ${R[$name.kj]:-0} + k1 - k0 ))
  R[$name.ks]=$(( ${R[$name.ks]:-0} + k2 - k1 ))
  local lat; lat=$(timeout $((DUR+20)) $LOAD 127.0.0.1:$port /v1/chat/completions "$JSON_BODY" 1000 "$DUR" 32)
  R[$name.p50s]="${R[$name.p50s]:-} $(echo "$lat" | python3 -c 'import json,sys; print(json.load(sys.stdin)["p50_ms"])')"
  R[$name.p99s]="${R[$name.p99s]:-} $(echo "$lat" | python3 -c 'import json,sys; print(json.load(sys.stdin)["p99_ms"])')"
}
median() { echo "$1" | tr ' ' '\n' | grep . | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
finish_target() {  # name port pid
  local name=$1 port=$2 pid=$3 secs=$((DUR * ROUNDS))
  R[$name.json]=$(awk -v n="${R[$name.nj]}" -v s=$secs 'BEGIN{printf "%.0f", n/s}')
  R[$name.sse]=$(awk -v n="${R[$name.ns]}" -v s=$secs 'BEGIN{printf "%.0f", n/s}')
  R[$name.p50]=$(median "${R[$name.p50s]}")
  R[$name.p99]=$(median "${R[$name.p99s]}")
  us() { awk -v t="$1" -v hz="$hz" -v n="$2" 'BEGIN{ if (n > 0) printf "%.1f", t/hz/n*1e6; else print "-" }'; }
  local pj=- ps=-
  if [ -n "$pid" ]; then
    pj=$(us "${R[$name.cj]}" "${R[$name.nj]}"); ps=$(us "${R[$name.cs]}" "${R[$name.ns]}")
    R[$name.kernel]="$(us "${R[$name.kj]}" "${R[$name.nj]}") of $pj | $(us "${R[$name.ks]}" "${R[$name.ns]}") of $ps"
  fi
  R[$name.split]="$(us "${R[$name.sj]}" "${R[$name.nj]}") / $(us "${R[$name.wj]}" "${R[$name.nj]}") / $pj | $(us "${R[$name.ss]}" "${R[$name.ns]}") / $(us "${R[$name.ws]}" "${R[$name.ns]}") / $ps"
  if [ -z "$pid" ]; then R[$name.cpu]="-"; R[$name.cpusse]="-"; R[$name.peak]="-"; R[$name.idle]="-"; return; fi
  R[$name.cpu]=$(awk -v t="${R[$name.cj]}" -v hz="$hz" -v n="${R[$name.nj]}" 'BEGIN{printf "%.2f", t/hz/n*10000}')
  R[$name.cpusse]=$(awk -v t="${R[$name.cs]}" -v hz="$hz" -v n="${R[$name.ns]}" 'BEGIN{printf "%.2f", t/hz/n*10000}')
  R[$name.peak]=$(mem_mib VmHWM "$pid")
  R[$name.idle]=$(python3 - "$port" "$pid" <<'PY'
import socket, sys
port, pid = int(sys.argv[1]), sys.argv[2]
body = b'{"model":"bench-model","messages":[]}'
req = b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer sk-bench\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body)
socks = []
for _ in range(1000):
    s = socket.create_connection(("127.0.0.1", port)); s.sendall(req); s.recv(65536); socks.append(s)
# The process and its children (nginx's workers when it runs more than one).
pids = [pid] + open(f"/proc/{pid}/task/{pid}/children").read().split()
def rss(p):
    return int([l for l in open(f"/proc/{p}/status") if l.startswith("VmRSS")][0].split()[1])
print("%.1f" % (sum(rss(p) for p in pids) / 1024))
PY
)
}

# The targets take turns, round after round: a shared machine's load drifts over minutes, and
# back-to-back single runs moved the ratios by +-15%.
for r in $(seq "$ROUNDS"); do
  round direct $SIM ""
  round nginx $NGX $NGX_PID
  round ringside $RS $RS_PID
  round defaults $RSDEF $RSDEF_PID
done
finish_target direct $SIM ""
finish_target nginx $NGX $NGX_PID
finish_target ringside $RS $RS_PID
finish_target defaults $RSDEF $RSDEF_PID
# Guard on vs off, SSE only: alternating rounds, compared by their totals (a single pair of
# runs moves by +-15% on a shared 2-core machine; the guard's own cost is a few percent).
GROUNDS=${GUARD_ROUNDS:-3}
on_total=0; off_total=0
for r in $(seq "$GROUNDS"); do
  timeout $((DUR+10)) wrk -t1 -c64 -d${DUR}s -s "$WORK/sse.lua" "http://127.0.0.1:$RSOFF/v1/chat/completions" > "$WORK/off.sse.txt"
  timeout $((DUR+10)) wrk -t1 -c64 -d${DUR}s -s "$WORK/sse.lua" "http://127.0.0.1:$RS/v1/chat/completions" > "$WORK/on.sse.txt"
  off_total=$((off_total + $(reqs "$WORK/off.sse.txt"))); on_total=$((on_total + $(reqs "$WORK/on.sse.txt")))
done

# Fleet mode vs the same lean instance, JSON only, alternating rounds compared by totals.
lean_total=0; fleet_total=0
for r in $(seq "$GROUNDS"); do
  timeout $((DUR+10)) wrk -t1 -c64 -d${DUR}s -s "$WORK/json.lua" "http://127.0.0.1:$RSFLEET/v1/chat/completions" > "$WORK/fleet.json.txt"
  timeout $((DUR+10)) wrk -t1 -c64 -d${DUR}s -s "$WORK/json.lua" "http://127.0.0.1:$RS/v1/chat/completions" > "$WORK/lean.json.txt"
  fleet_total=$((fleet_total + $(reqs "$WORK/fleet.json.txt"))); lean_total=$((lean_total + $(reqs "$WORK/lean.json.txt")))
done

# Translated against passed through on the lean instance: the same Chat requests, answered by
# the simulator's Anthropic Messages API (xlate-model) or its Chat API (bench-model), rounds
# alternating; the proxy's CPU per request compared (docs/dialects.md).
for kind in json sse; do sed 's/bench-model/xlate-model/' "$WORK/$kind.lua" > "$WORK/$kind-x.lua"; done
declare -A X
for r in $(seq "$GROUNDS"); do
  for kind in json json-x sse sse-x; do
    c0=$(cpu_ticks "$RS_PID")
    timeout $((DUR+10)) wrk -t1 -c64 -d${DUR}s -s "$WORK/$kind.lua" "http://127.0.0.1:$RS/v1/chat/completions" > "$WORK/x.$kind.txt"
    X[$kind.n]=$(( ${X[$kind.n]:-0} + $(reqs "$WORK/x.$kind.txt") ))
    X[$kind.c]=$(( ${X[$kind.c]:-0} + $(cpu_ticks "$RS_PID") - c0 ))
  done
done
xcpu() { awk -v t="${X[$1.c]}" -v hz="$hz" -v n="${X[$1.n]}" 'BEGIN{ if (n > 0) printf "%.1f", t/hz/n*1e6; else print "-" }'; }

# Budgets on against off: the same requests, the billed ones naming their tenant; rounds
# alternating, the proxy's CPU per request compared (the issue's bound: 5 % more).
for kind in json sse; do
  { cat "$WORK/$kind.lua"; echo 'wrk.headers["x-ringside-tenant"]="bench"'; } > "$WORK/$kind-b.lua"
done
declare -A B
for r in $(seq "$GROUNDS"); do
  for kind in json sse; do
    for side in off on; do
      if [ $side = on ]; then pid=$RSBUDGET_PID; port=$RSBUDGET; script=$kind-b; else pid=$RS_PID; port=$RS; script=$kind; fi
      c0=$(cpu_ticks "$pid")
      timeout $((DUR+10)) wrk -t1 -c64 -d${DUR}s -s "$WORK/$script.lua" "http://127.0.0.1:$port/v1/chat/completions" > "$WORK/b.txt"
      B[$kind.$side.n]=$(( ${B[$kind.$side.n]:-0} + $(reqs "$WORK/b.txt") ))
      B[$kind.$side.c]=$(( ${B[$kind.$side.c]:-0} + $(cpu_ticks "$pid") - c0 ))
    done
  done
done
bcpu() { awk -v t="${B[$1.c]}" -v hz="$hz" -v n="${B[$1.n]}" 'BEGIN{ if (n > 0) printf "%.1f", t/hz/n*1e6; else print "-" }'; }

# This build vs the baseline build, JSON only, alternating rounds compared by totals.
base_total=0; this_total=0
if [ -n "${BASELINE_BIN:-}" ]; then
  for r in $(seq "$GROUNDS"); do
    timeout $((DUR+10)) wrk -t1 -c64 -d${DUR}s -s "$WORK/json.lua" "http://127.0.0.1:$RSBASE/v1/chat/completions" > "$WORK/base.json.txt"
    timeout $((DUR+10)) wrk -t1 -c64 -d${DUR}s -s "$WORK/json.lua" "http://127.0.0.1:$RS/v1/chat/completions" > "$WORK/this.json.txt"
    base_total=$((base_total + $(reqs "$WORK/base.json.txt"))); this_total=$((this_total + $(reqs "$WORK/this.json.txt")))
  done
fi

ratio() { awk -v a="$1" -v b="$2" 'BEGIN{ if (b+0>0) printf "%.2f", a/b; else print "-" }'; }
echo
echo "| target | JSON req/s (64 conns) | SSE streams/s ($EVENTS events) | p50 ms @1000 rps | p99 ms @1000 rps | proxy CPU s / 10k JSON | proxy CPU s / 10k SSE | peak RSS MiB | RSS MiB, 1000 idle clients |"
echo "|---|---|---|---|---|---|---|---|---|"
for t in direct nginx ringside defaults; do
  echo "| $t | ${R[$t.json]} | ${R[$t.sse]} | ${R[$t.p50]} | ${R[$t.p99]} | ${R[$t.cpu]} | ${R[$t.cpusse]} | ${R[$t.peak]} | ${R[$t.idle]} |"
done
echo
echo "ringside / nginx: JSON $(ratio "${R[ringside.json]}" "${R[nginx.json]}")x, SSE $(ratio "${R[ringside.sse]}" "${R[nginx.sse]}")x, p99 $(ratio "${R[ringside.p99]}" "${R[nginx.p99]}")x, CPU/req JSON $(ratio "${R[ringside.cpu]}" "${R[nginx.cpu]}")x, CPU/req SSE $(ratio "${R[ringside.cpusse]}" "${R[nginx.cpusse]}")x"
echo "ringside with the shipped defaults / lean (access log on to a file, pinning as shipped): JSON $(ratio "${R[defaults.json]}" "${R[ringside.json]}")x, CPU/req JSON $(ratio "${R[defaults.cpu]}" "${R[ringside.cpu]}")x, SSE $(ratio "${R[defaults.sse]}" "${R[ringside.sse]}")x, CPU/req SSE $(ratio "${R[defaults.cpusse]}" "${R[ringside.cpusse]}")x ($(wc -l < "$WORK/access.log") log lines)"
echo
echo "Where the two cores went, CPU µs per JSON request | per SSE stream: simulator / client (wrk) / proxy"
for t in direct nginx ringside; do echo "  $t: ${R[$t.split]}"; done
# The proxy's kernel time (loopback TCP, wake-ups, io_uring or epoll) is the floor of its CPU
# per request: user-space work cannot take a ratio below kernel / nginx's total.
per() { awk -v t="$1" -v n="$2" 'BEGIN{ if (n > 0) print t/n; else print 0 }'; }
echo "Of the proxy's CPU, the kernel's, µs per JSON request | per SSE stream: nginx ${R[nginx.kernel]}; ringside ${R[ringside.kernel]}"
echo "ringside's kernel time alone / nginx's whole CPU: JSON $(ratio "$(per "${R[ringside.kj]}" "${R[ringside.nj]}")" "$(per "${R[nginx.cj]}" "${R[nginx.nj]}")")x, SSE $(ratio "$(per "${R[ringside.ks]}" "${R[ringside.ns]}")" "$(per "${R[nginx.cs]}" "${R[nginx.ns]}")")x"
agent() {  # name: "req/s (proxy CPU µs per request)"
  local n=${R[$1.na]} secs=$((DUR * ROUNDS))
  awk -v n="$n" -v s=$secs -v t="${R[$1.ca]}" -v hz="$hz" -v proxy="$2" 'BEGIN{
    printf "%.0f req/s", n/s; if (proxy && n > 0) printf " (proxy %.1f µs/req)", t/hz/n*1e6 }'
}
echo "budgets on / off, proxy CPU µs per request: JSON $(bcpu json.on) / $(bcpu json.off) = $(ratio "$(bcpu json.on)" "$(bcpu json.off)")x, SSE $(bcpu sse.on) / $(bcpu sse.off) = $(ratio "$(bcpu sse.on)" "$(bcpu sse.off)")x"
echo "agent-sized bodies ($AGENT_BYTES bytes, 64 conns): direct $(agent direct 0), nginx $(agent nginx 1), ringside $(agent ringside 1); ringside / nginx $(ratio "${R[ringside.na]}" "${R[nginx.na]}")x"
echo "stream guard on / off (SSE streams, $GROUNDS alternating rounds of ${DUR}s): $(ratio "$on_total" "$off_total")x ($on_total vs $off_total streams)"
echo "translated / passed through (Chat client, Anthropic upstream; $GROUNDS alternating rounds of ${DUR}s): JSON $(ratio "${X[json-x.n]}" "${X[json.n]}")x req/s, proxy CPU $(xcpu json-x) vs $(xcpu json) µs/req ($(ratio "$(xcpu json-x)" "$(xcpu json)")x); SSE $(ratio "${X[sse-x.n]}" "${X[sse.n]}")x streams/s, proxy CPU $(xcpu sse-x) vs $(xcpu sse) µs/stream ($(ratio "$(xcpu sse-x)" "$(xcpu sse)")x)"
echo "fleet mode / lean (JSON, uncapped keys, Redis on loopback, $GROUNDS alternating rounds of ${DUR}s): $(ratio "$fleet_total" "$lean_total")x ($fleet_total vs $lean_total requests)"
[ -n "${BASELINE_BIN:-}" ] && echo "this build / baseline $BASELINE_BIN (JSON, lean, $GROUNDS alternating rounds of ${DUR}s): $(ratio "$this_total" "$base_total")x ($this_total vs $base_total requests)"
echo "(workers: ringside $RS_WORKERS (pinned: $RS_PIN), nginx $NGINX_WORKERS, simulator 1; $ROUNDS rounds of ${DUR}s per measure, targets taking turns; p50/p99: median over rounds; $(nproc) cores)"
