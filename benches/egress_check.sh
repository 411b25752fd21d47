#!/usr/bin/env bash
# Egress the way an enterprise runs it, against real third-party parts rather than the test
# suite's stand-ins: Ringside reaches a private endpoint through tinyproxy (HTTP CONNECT with
# Basic proxy credentials) and an nginx TLS front that requires a client certificate (OpenSSL,
# its own CA, a certificate for a name the base_url does not carry: `tls_server_name`), with
# HTTP/2 (`http2 = "auto"`) and HTTP/1.1 (`never`). Checks, for each: a JSON answer and a
# stream end to end, the front saw Ringside's certificate over the expected protocol and its
# own name in Host (`:authority`), the
# tunnel went through the proxy; then wrong proxy credentials give the client, after one
# attempt, a clear 503 in its dialect naming the refusal (the provider's keys cool for it); so
# does a missing client certificate, which nginx answers with a 400 page; wrong credentials
# under 20 s of steady requests reach the proxy a few times, not at every probe; no key or proxy
# password reaches Ringside's log. Exits non-zero on the first failed check. Bounded: every request has a 20 s limit; about 60 s in all.
# Usage: benches/egress_check.sh   (env: BASE_PORT=19600)
set -euo pipefail
cd "$(dirname "$0")/.."
BASE=${BASE_PORT:-19600}
PROXY=$BASE; SIM=$((BASE+1)); ADMIN=$((BASE+2)); FRONT=$((BASE+3)); TINY=$((BASE+4))
. benches/lib.sh
install_missing nginx nginx-light tinyproxy tinyproxy-bin curl curl
build_and_prepare
W=$WORK
fail() { echo "FAILED: $*" >&2; exit 1; }

# The front's certificate names private.example; the client certificate has a CA of its own.
certs() {
  local ca=$1 name=$2 ext=$3
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
    -keyout "$W/$ca.key" -out "$W/$ca.pem" -subj "/CN=$ca" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign" 2>/dev/null
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout "$W/$name.key" -out "$W/$name.csr" -subj "/CN=$name" 2>/dev/null
  printf '%s\nbasicConstraints=CA:FALSE\n' "$ext" > "$W/$name.cnf"
  openssl x509 -req -in "$W/$name.csr" -CA "$W/$ca.pem" -CAkey "$W/$ca.key" \
    -CAcreateserial -out "$W/$name.pem" -days 2 -extfile "$W/$name.cnf" 2>/dev/null
}
certs server-ca private.example $'subjectAltName=DNS:private.example\nextendedKeyUsage=serverAuth'
certs client-ca ringside 'extendedKeyUsage=clientAuth'

mkdir -p "$W/front"
cat > "$W/front/nginx.conf" <<NGX
worker_processes 1; daemon off; master_process off;
pid $W/front/nginx.pid; error_log $W/front/error.log;
events { worker_connections 1000; }
http {
  log_format f '\$server_protocol \$ssl_client_verify \$ssl_client_s_dn \$status \$host';
  access_log $W/front/access.log f;
  client_body_temp_path $W/front; proxy_temp_path $W/front; fastcgi_temp_path $W/front; uwsgi_temp_path $W/front; scgi_temp_path $W/front;
  server {
    listen 127.0.0.1:$FRONT ssl http2;
    ssl_certificate $W/private.example.pem; ssl_certificate_key $W/private.example.key;
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_client_certificate $W/client-ca.pem; ssl_verify_client on;
    location / { proxy_pass http://127.0.0.1:$SIM; proxy_http_version 1.1;
                 proxy_set_header Connection ""; proxy_buffering off; }
  }
}
NGX
printf 'Port %s\nListen 127.0.0.1\nTimeout 60\nMaxClients 100\nBasicAuth corp s3cret\nConnectPort %s\nLogFile "%s"\nLogLevel Connect\n' \
  "$TINY" "$FRONT" "$W/tinyproxy.log" > "$W/tinyproxy.conf"
for mode in auto never; do
  cat > "$W/ringside-$mode.toml" <<TOML
[server]
listen = "127.0.0.1:$PROXY"
admin_listen = "127.0.0.1:$ADMIN"
data_dir = "$W/data-$mode"

[[providers]]
id = "private"
dialect = "openai"
base_url = "https://127.0.0.1:$FRONT/v1"
http2 = "$mode"
proxy = "http://127.0.0.1:$TINY"
proxy_auth_env = "EGRESS_PROXY_AUTH"
ca_file = "$W/server-ca.pem"
client_cert_file = "$W/ringside.pem"
client_key_file = "$W/ringside.key"
tls_server_name = "private.example"
  [[providers.connections]]
  id = "k1"
  key_env = "EGRESS_KEY"
  models = ["m1"]
TOML
done

$BIN simulate --listen 127.0.0.1:$SIM --events 5 >/dev/null 2>&1 &
PIDS+=($!)
nginx -c "$W/front/nginx.conf" -p "$W/front" >/dev/null 2>&1 &
PIDS+=($!)
tinyproxy -d -c "$W/tinyproxy.conf" >/dev/null 2>&1 &
PIDS+=($!)
wait_for_port $SIM; wait_for_port $FRONT; wait_for_port $TINY

chat() { # chat STREAM: one request through Ringside; the body, then the status on a line
  local stream=""; [ "$1" = stream ] && stream='"stream":true,'
  curl -s -N -m 20 -w '\n%{http_code}' "http://127.0.0.1:$PROXY/v1/chat/completions" \
    -H 'content-type: application/json' \
    -d "{\"model\":\"m1\",$stream\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}" || true
}
serve() { # serve MODE PROXY_AUTH: Ringside in the background, its pid in RS
  rm -rf "$W/data-$1"
  EGRESS_KEY=sk-egress-secret-key EGRESS_PROXY_AUTH=$2 \
    $BIN serve --config "$W/ringside-$1.toml" >>"$W/ringside.log" 2>&1 &
  RS=$!; PIDS+=($RS); wait_for_port $PROXY
}

for mode in auto never; do
  proto=HTTP/2.0; [ $mode = never ] && proto=HTTP/1.1
  serve $mode corp:s3cret
  json=$(chat json); sse=$(chat stream)
  stop_proc $RS
  [ "$(tail -1 <<<"$json")" = 200 ] && grep -q '"Hello from the Ringside upstream"' <<<"$json" ||
    fail "$mode: JSON answer: $json"
  [ "$(tail -1 <<<"$sse")" = 200 ] && grep -q 'data: \[DONE\]' <<<"$sse" ||
    fail "$mode: stream: $(tail -c 300 <<<"$sse")"
  seen=$(grep -c "^$proto SUCCESS CN=ringside 200 private.example$" "$W/front/access.log" || true)
  [ "$seen" -ge 2 ] || fail "$mode: the front saw $seen requests over $proto for private.example with the client certificate"
  echo "ok: http2 = \"$mode\": JSON and a stream over $proto, through the proxy, with the client certificate, for private.example"
done
grep -q "CONNECT.*127.0.0.1:$FRONT" "$W/tinyproxy.log" || fail "the tunnels did not go through tinyproxy"
echo "ok: tinyproxy carried $(grep -c "CONNECT.*127.0.0.1:$FRONT" "$W/tinyproxy.log") tunnels"

serve auto corp:wrong-password
tries() { grep -c "Request .*CONNECT" "$W/tinyproxy.log" || true; }
before=$(tries)
t0=$(date +%s%N); refused=$(chat json); ms=$(( ($(date +%s%N) - t0) / 1000000 ))
# Then 20 s of 5 requests a second with the same wrong credentials: a proxy asked again and
# again with them may lock the company's account out. It should see one try per cooldown.
for _ in $(seq 100); do chat json >/dev/null; sleep 0.2; done
stop_proc $RS
tries=$(( $(tries) - before ))
[ "$(tail -1 <<<"$refused")" = 503 ] && grep -q 'the egress proxy refused its credentials' <<<"$refused" &&
  grep -q '"attempts":1,' <<<"$refused" && grep -q '"code":"egress_refused"' <<<"$refused" ||
  fail "wrong proxy credentials: $refused"
echo "ok: wrong proxy credentials: 503 egress_refused after one attempt, in $ms ms, $(grep -o '"last_error":"[^"]*"' <<<"$refused")"
[ "$tries" -le 8 ] || fail "wrong proxy credentials: the proxy saw $tries tries in 20 s"
echo "ok: wrong proxy credentials for 20 s at 5 requests a second: the proxy saw $tries tries"
# Without the client certificate nginx answers a 400 page, not a TLS alert: read as the
# provider's certificate refused (rule client_certificate_refused), for every key.
sed -e '/client_cert_file\|client_key_file/d' -e 's/data-auto/data-nocert/' \
  "$W/ringside-auto.toml" > "$W/ringside-nocert.toml"
serve nocert corp:s3cret
nocert=$(chat json)
stop_proc $RS
[ "$(tail -1 <<<"$nocert")" = 503 ] && grep -q 'refused the TLS client certificate' <<<"$nocert" &&
  grep -q '"attempts":1,' <<<"$nocert" && grep -q '"code":"tls_refused"' <<<"$nocert" || fail "no client certificate: $nocert"
echo "ok: no client certificate: 503 tls_refused after one attempt, $(grep -o '"last_error":"[^"]*"' <<<"$nocert")"
! grep -q 'sk-egress-secret-key\|s3cret\|wrong-password' "$W/ringside.log" ||
  fail "a secret reached Ringside's log"
echo "ok: no key or proxy password in Ringside's log"
