#!/usr/bin/env bash
# Whether `ringside drill` is a gate you can rely on: RUNS drills of one config in a row, each
# while LOAD busy loops keep the machine's cores occupied (a loaded CI runner), and for each
# scenario how many runs held. A gate holds every scenario in every run, or fails the same ones
# every time; a scenario that both held and failed flips on load. Bounded: each drill gets at
# most 10 minutes; the busy loops end with the script.
# Usage: benches/drill_stability.sh   (RUNS=10 LOAD=2 CONFIG=ringside.example.toml by default;
#   RINGSIDE_BIN=PATH drills that binary instead of building this tree's; EXTRA="--phase 4")
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-10}
LOAD=${LOAD:-2}
CONFIG=${CONFIG:-ringside.example.toml}
if [ -n "${RINGSIDE_BIN:-}" ]; then BIN=$RINGSIDE_BIN; else cargo build --release -q; BIN=target/release/ringside; fi
WORK=$(mktemp -d)
BUSY=()
cleanup() { for p in "${BUSY[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$WORK"; }
trap cleanup EXIT
for _ in $(seq "$LOAD"); do
  (while :; do :; done) &
  BUSY+=($!)
done
for i in $(seq "$RUNS"); do
  start=$(date +%s)
  # shellcheck disable=SC2086
  timeout 600 "$BIN" drill --config "$CONFIG" --json "$WORK/run-$i.json" ${EXTRA:-} >/dev/null 2>&1 || true
  echo "run $i/$RUNS: $(( $(date +%s) - start )) s" >&2
done
python3 - "$WORK" "$RUNS" <<'PY'
import json, pathlib, sys
work, runs = pathlib.Path(sys.argv[1]), int(sys.argv[2])
held, seen, figures = {}, {}, {}
for f in sorted(work.glob("run-*.json")):
    for s in json.loads(f.read_text())["scenarios"]:
        name = s["scenario"]["name"]
        seen[name] = seen.get(name, 0) + 1
        held[name] = held.get(name, 0) + (1 if s["held"] else 0)
        figures.setdefault(name, []).append(s["figures"]["fault_amplification"])
flips = 0
print(f"{'scenario':<30} {'held':>9}  fault amplification per run")
for name in seen:
    h, n = held[name], seen[name]
    mark = "" if h in (0, n) else "  FLIPS"
    flips += bool(mark)
    amps = " ".join(f"{a:.2f}" for a in figures[name])
    print(f"{name:<30} {h:>4}/{n:<4}  {amps}{mark}")
print(f"\n{len(list(work.glob('run-*.json')))} of {runs} runs reported; "
      f"{flips} scenario(s) flipped between runs")
sys.exit(1 if flips else 0)
PY
