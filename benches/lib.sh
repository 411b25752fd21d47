# Shared by the load scripts (sourced, not run): packages, the build, a work dir cleaned up on
# exit, the bench provider's config, and reading a process tree's CPU and memory from /proc.

# install_missing CMD PACKAGE [CMD PACKAGE ...]: the Debian packages whose command is missing.
install_missing() {
  local need=""
  while [ $# -ge 2 ]; do command -v "$1" >/dev/null 2>&1 || need="$need $2"; shift 2; done
  if [ -n "$need" ]; then
    (apt-get install -y -q $need || (apt-get update -q && apt-get install -y -q $need)) >/dev/null
  fi
}

# The release build with the load tool; BIN, LOAD; WORK (removed on exit) and PIDS (killed).
build_and_prepare() {
  cargo build --release -q --features load-tool
  BIN=target/release/ringside
  LOAD=target/release/ringside-load
  WORK=$(mktemp -d)
  PIDS=()
  trap 'for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$WORK"' EXIT
}

# stop_proc PID...: SIGTERM, then wait (up to 30 s, then SIGKILL) until each has exited. A
# process started inside `$(...)` is not this shell's child, so `wait` returns at once: the
# next target would start beside one still draining its streams, and fail on its ports.
stop_proc() {
  local p i
  kill "$@" 2>/dev/null || true
  for p in "$@"; do
    for i in $(seq 300); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
}

# bench_provider PORT [ID MODEL URL]: the one provider every bench config uses (key from
# BENCH_KEY): by default id "sim", model "bench-model", at http://127.0.0.1:PORT.
bench_provider() {
  cat <<TOML
[[providers]]
id = "${2:-sim}"
dialect = "openai"
base_url = "${4:-http://127.0.0.1:$1}/v1"
  [[providers.connections]]
  id = "bench"
  key_env = "BENCH_KEY"
  models = ["${3:-bench-model}"]
TOML
}

# chat_scripts DIR: DIR/json.lua and DIR/sse.lua, wrk scripts posting the bench model's chat
# request with the bench key, as a plain answer and as a stream. SDK_HEADERS=1: with the
# headers the OpenAI Python SDK sends besides (its user agent, a dozen x-stainless-*), which
# Ringside passes to the provider.
chat_scripts() {
  local kind stream
  for kind in json sse; do
    stream=$([ $kind = sse ] && echo '"stream":true,' || true)
    printf 'wrk.method="POST"\nwrk.body=[[{"model":"bench-model",%s"messages":[{"role":"user","content":"hello"}]}]]\nwrk.headers["content-type"]="application/json"\nwrk.headers["authorization"]="Bearer sk-bench"\n' "$stream" > "$1/$kind.lua"
    [ "${SDK_HEADERS:-0}" = 1 ] || continue
    local h
    for h in "accept=application/json" "user-agent=OpenAI/Python 1.54.3" "x-stainless-lang=python" \
      "x-stainless-package-version=1.54.3" "x-stainless-os=Linux" "x-stainless-arch=x64" \
      "x-stainless-runtime=CPython" "x-stainless-runtime-version=3.11.2" "x-stainless-async=false" \
      "x-stainless-retry-count=0" "x-stainless-read-timeout=600" "openai-organization=org-abcdefghijklmnop" \
      "openai-project=proj_abcdefghijklmnopqrstuv"; do
      printf 'wrk.headers["%s"]="%s"\n' "${h%%=*}" "${h#*=}" >> "$1/$kind.lua"
    done
  done
}

# test_certs DIR: a CA (DIR/ca.pem) and a localhost certificate it signed (DIR/cert.pem,
# DIR/key.pem), made by openssl for a TLS upstream on loopback; good for two days.
test_certs() {
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
    -keyout "$1/ca.key" -out "$1/ca.pem" -subj "/CN=bench CA" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign" 2>/dev/null
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout "$1/key.pem" -out "$1/leaf.csr" -subj "/CN=localhost" 2>/dev/null
  printf 'subjectAltName=DNS:localhost\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' > "$1/ext.cnf"
  openssl x509 -req -in "$1/leaf.csr" -CA "$1/ca.pem" -CAkey "$1/ca.key" \
    -CAcreateserial -out "$1/cert.pem" -days 2 -extfile "$1/ext.cnf" 2>/dev/null
}

# tls_mock DIR PORT: the independent SSE mock (benches/mock/sse_mock.js) over https with
# DIR's certificate (test_certs), 20 events 1 ms apart per stream, in the background; its pid
# in TLS_MOCK_PID. For a TLS upstream in the instruction counts and the PGO profile.
tls_mock() {
  test_certs "$1"
  TLS_CERT="$1/cert.pem" TLS_KEY="$1/key.pem" EVENTS=20 INTERVAL=1 \
    node benches/mock/sse_mock.js "$2" >/dev/null 2>&1 &
  TLS_MOCK_PID=$!
}

# tls_provider PORT: a provider reaching the TLS mock (tls_mock) as localhost, model
# "tls-model", key from BENCH_KEY.
tls_provider() { bench_provider "$1" tls-mock tls-model "https://localhost:$1"; }

# sim_tls_front FRONT_PORT TLS_PORT SIM_PORT: certificates in $WORK/certs (test_certs) and the
# simulator's TLS front on TLS_PORT (its own listener, unused, on FRONT_PORT: `/_sim/front`
# there), in a process of its own relaying to the simulator at SIM_PORT: each stream holds a
# descriptor at both ends of the relay. Its pid joins PIDS. SIM_BIN: the binary that runs it
# (another build's front: e.g. one from before it honoured RFC 9149 ticket requests).
sim_tls_front() {
  mkdir -p "$WORK/certs"; test_certs "$WORK/certs"
  ${SIM_BIN:-$BIN} simulate --listen 127.0.0.1:$1 --tls-listen 127.0.0.1:$2 --tls-relay-to 127.0.0.1:$3 \
    --tls-cert "$WORK/certs/cert.pem" --tls-key "$WORK/certs/key.pem" >/dev/null 2>&1 &
  PIDS+=($!)
}

# nginx_tls_front TLS_PORT SIM_PORT: nginx as the provider's TLS front instead: HTTP/2 and
# HTTP/1.1 by ALPN, TLS 1.2 and 1.3, sessions resumed, kept-alive HTTP/1.1 to the simulator at
# SIM_PORT, the certificates of sim_tls_front, its own prefix in $WORK/front. Its pid joins
# PIDS. One worker per core (FRONT_WORKERS: with one, a burst of 5,000 connects queues its
# handshakes past a 5 s connect timeout on a 2-core host). FRONT_TLS: its ssl_protocols
# ("TLSv1.2": a front whose sessions are TLS 1.2 ones, reused rather than used up). A third
# argument `log`: one line per request in $WORK/front/access.log (nginx_front_counts reads it).
nginx_tls_front() {
  mkdir -p "$WORK/certs" "$WORK/front"; test_certs "$WORK/certs"
  local log="access_log off;"
  [ "${3:-}" = log ] && log="log_format front '\$connection \$connection_requests \$server_protocol \$ssl_session_reused'; access_log $WORK/front/access.log front;"
  cat > "$WORK/front/nginx.conf" <<NGX
worker_processes ${FRONT_WORKERS:-auto};
worker_rlimit_nofile 65536;
daemon off;
master_process on;
pid $WORK/front/nginx.pid;
error_log $WORK/front/error.log;
events { worker_connections 30000; }
http {
  $log
  client_body_temp_path $WORK/front; proxy_temp_path $WORK/front; fastcgi_temp_path $WORK/front; uwsgi_temp_path $WORK/front; scgi_temp_path $WORK/front;
  upstream sim { server 127.0.0.1:$2; keepalive 256; }
  ssl_session_cache shared:front:10m;
  server {
    # A provider's edge takes a burst of connects: not nginx's default queue of 511, which
    # drops SYNs beyond it (a second's retransmit each) while its one worker handshakes.
    listen 127.0.0.1:$1 ssl http2 backlog=4096;
    ssl_certificate $WORK/certs/cert.pem; ssl_certificate_key $WORK/certs/key.pem;
    # Debian's nginx 1.22 offers TLS 1.2 at most unless told; providers' edges offer 1.3.
    ssl_protocols ${FRONT_TLS:-TLSv1.2 TLSv1.3};
    http2_max_concurrent_streams 256;
    keepalive_requests 1000000;
    location / {
      proxy_pass http://sim; proxy_http_version 1.1; proxy_set_header Connection "";
      proxy_buffering off;
    }
  }
}
NGX
  nginx -c "$WORK/front/nginx.conf" -p "$WORK/front" >/dev/null 2>&1 &
  PIDS+=($!)
}

# nginx_front_counts: what nginx_tls_front's log holds so far, as "h2 h1 resumed": connections
# by protocol and TLS sessions resumed, each connection counted at its first request's end (the
# line nginx writes then), as sim_tls_front's `/_sim/front` counts them.
nginx_front_counts() {
  awk '$2 == 1 { if ($3 == "HTTP/2.0") h2++; else h1++; if ($4 == "r") r++ }
       END { printf "%d %d %d\n", h2, h1, r }' "$WORK/front/access.log" 2>/dev/null || echo "0 0 0"
}

# tls_front_provider PORT HTTP2: Ringside's [upstream] trusting $WORK/certs/ca.pem and the bench
# provider at the TLS front on PORT (as localhost), its `http2` setting HTTP2; RS_UPSTREAM: more
# lines for that [upstream] (e.g. `connects_in_flight = 0`).
tls_front_provider() {
  printf '[upstream]\nca_file = "%s"\n%s\n' "$WORK/certs/ca.pem" "${RS_UPSTREAM:-}"
  bench_provider "$1" sim bench-model "https://localhost:$1" | sed "s/^dialect = .*/&\nhttp2 = \"$2\"/"
}

# nginx_tls_pass UPSTREAM: nginx's proxy_pass to the TLS front (an `upstream UPSTREAM` block),
# checking its certificate against $WORK/certs/ca.pem as localhost.
nginx_tls_pass() {
  echo "proxy_pass https://$1; proxy_ssl_verify on; proxy_ssl_trusted_certificate $WORK/certs/ca.pem; proxy_ssl_name localhost; proxy_ssl_server_name on;"
}

# haproxy_tls_cfgs LISTEN_PORT TLS_PORT: $WORK/haproxy.cfg (haproxy_cfg, `ssl` to the TLS
# front, its certificate checked) and $WORK/haproxy-h2.cfg (the same with `proto h2`).
haproxy_tls_cfgs() {
  haproxy_cfg "$1" "$2" | sed "s|^  server up .*|  server up 127.0.0.1:$2 ssl verify required ca-file $WORK/certs/ca.pem sni str(localhost)|" > "$WORK/haproxy.cfg"
  sed 's|ca-file .*|& alpn h2 proto h2|' "$WORK/haproxy.cfg" > "$WORK/haproxy-h2.cfg"
}

# wait_for_port PORT: until something accepts on 127.0.0.1:PORT (at most about 30 s).
wait_for_port() {
  for _ in $(seq 60); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.5
  done
}

# A process and its children (nginx's workers when it runs more than one).
tree() { echo "$1"; pgrep -P "$1" || true; }
# User + system clock ticks of a process tree (0 for no pid).
cpu_ticks() {
  [ -n "$1" ] || { echo 0; return; }
  local t=0 p; for p in $(tree "$1"); do t=$((t + $(awk '{print $14+$15}' /proc/"$p"/stat))); done; echo $t
}
# User clock ticks alone of a process tree: what the kernel's share does not blur.
user_ticks() {
  [ -n "$1" ] || { echo 0; return; }
  local t=0 p; for p in $(tree "$1"); do t=$((t + $(awk '{print $14}' /proc/"$p"/stat))); done; echo $t
}
# machine_ticks: busy clock ticks of the whole machine (user, nice, system, irq, softirq, steal
# from /proc/stat): every process plus the kernel's network work done outside any of them, such
# as a held segment sent later from a timer.
machine_ticks() { awk '$1 == "cpu" {print $2 + $3 + $4 + $7 + $8 + $9}' /proc/stat; }
# mem_kib FIELD PID: a /proc/PID/status field (VmRSS, VmHWM) in KiB, summed over the tree.
mem_kib() {
  local k=0 p; for p in $(tree "$2"); do k=$((k + $(awk -v f="$1:" '$1 == f {print $2}' /proc/"$p"/status))); done; echo $k
}

# haproxy_cfg LISTEN_PORT UPSTREAM_PORT: HAProxy with its defaults in HTTP mode, one server.
haproxy_cfg() {
  cat <<HAP
global
  maxconn 9900
defaults
  mode http
  timeout connect 5s
  timeout client 60s
  timeout server 60s
frontend f
  bind 127.0.0.1:$1
  default_backend b
backend b
  http-reuse safe
  server up 127.0.0.1:$2
HAP
}
