#!/usr/bin/env bash
# Instructions per event of the SSE scanner, per shape, counted by valgrind (deterministic, unlike
# time on a shared machine): one pass and eleven passes of 200 events, difference / 2000.
# Usage: benches/sse_instructions.sh   (installs valgrind from Debian packages if missing)
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null 2>&1 || (apt-get install -y -q valgrind || (apt-get update -q && apt-get install -y -q valgrind)) >/dev/null
cargo bench --bench sse_floor --no-run -q 2>/dev/null
BIN=$(ls -t target/release/deps/sse_floor-* | grep -v '\.d$' | head -1)
count() {  # shape passes
  SSE_FLOOR_ONLY="$1" SSE_FLOOR_PASSES="$2" timeout 300 valgrind --tool=cachegrind --cache-sim=no \
    --cachegrind-out-file=/dev/null "$BIN" 2>&1 | awk '/I *refs/ {gsub(",", "", $4); print $4}'
}
for shape in "openai chat chunk, recorded" "openai chat chunk, trimmed" "chunked" "anthropic" "responses"; do
  one=$(count "$shape" 1); more=$(count "$shape" 11)
  printf '%-30s %6d instructions/event\n' "$shape" $(( (more - one) / 2000 ))
done
