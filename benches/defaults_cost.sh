#!/usr/bin/env bash
# What the shipped defaults cost: Ringside lean (no access log, unpinned) against Ringside with
# its shipped defaults (access log on, written to a file as a service's journal would be; workers
# pinned where the CPU set allows), same build, same simulator, on loopback. PAIRS alternating
# pairs of DUR-second wrk runs per kind (JSON, then 20-event SSE streams), the order inside a
# pair swapped each time, so a shared machine's drifting load falls on both alike. Prints each
# pair's ratios, their median, the ratios of the totals, and the totals' CPU per request split
# into user and kernel time (the user-space difference is the steadiest signal: the kernel's
# share moves with the machine's load by more than the access log costs). Bounded: about 4 x PAIRS x (DUR + 1)
# seconds. Usage: benches/defaults_cost.sh   (env: PAIRS=8 DUR=4 RS_WORKERS=2)
set -euo pipefail
cd "$(dirname "$0")/.."
PAIRS=${PAIRS:-8}
DUR=${DUR:-4}
RS_WORKERS=${RS_WORKERS:-2}
BASE=${BASE_PORT:-19400}
SIM=$BASE; LEAN=$((BASE+1)); DEF=$((BASE+3))

. benches/lib.sh
install_missing wrk wrk
build_and_prepare

$BIN simulate --listen 127.0.0.1:$SIM --events 20 >/dev/null 2>&1 &
PIDS+=($!)
config() {  # port data-dir extra-lines
  cat <<TOML
[server]
listen = "127.0.0.1:$1"
admin_listen = "127.0.0.1:$(($1 + 1))"
workers = $RS_WORKERS
data_dir = "$WORK/$2"
$3
[upstream]
pool_max_idle_per_upstream = 256
$(bench_provider $SIM)
TOML
}
config $LEAN lean $'pin_workers = false\naccess_log = false' > "$WORK/lean.toml"
config $DEF defaults "" > "$WORK/defaults.toml"
BENCH_KEY=sk-bench $BIN serve --config "$WORK/lean.toml" >/dev/null 2>&1 &
LEAN_PID=$!; PIDS+=($LEAN_PID)
BENCH_KEY=sk-bench $BIN serve --config "$WORK/defaults.toml" >"$WORK/access.log" 2>&1 &
DEF_PID=$!; PIDS+=($DEF_PID)
wait_for_port $LEAN; wait_for_port $DEF
chat_scripts "$WORK"

# user_ticks PID: one process's user clock ticks (its kernel ticks: cpu_ticks less these).
user_ticks() { awk '{print $14}' /proc/"$1"/stat; }
# run KIND PORT PID: "requests cpu_ticks user_ticks" of one wrk run against one instance.
run() {
  local t0 t1 u0 u1 n
  timeout $((DUR + 10)) wrk -t1 -c64 -d1s -s "$WORK/$1.lua" "http://127.0.0.1:$2/v1/chat/completions" >/dev/null 2>&1 || true
  t0=$(cpu_ticks "$3"); u0=$(user_ticks "$3")
  n=$(timeout $((DUR + 10)) wrk -t1 -c64 -d${DUR}s -s "$WORK/$1.lua" "http://127.0.0.1:$2/v1/chat/completions" | awk '/requests in/ {print $1}')
  t1=$(cpu_ticks "$3"); u1=$(user_ticks "$3")
  echo "$n $((t1 - t0)) $((u1 - u0))"
}
hz=$(getconf CLK_TCK)
# us TICKS REQUESTS: microseconds per request.
us() { awk -v t="$1" -v n="$2" -v hz="$hz" 'BEGIN{ if (n > 0) printf "%.2f", t/hz/n*1e6; else print "-" }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{ if (b+0>0) printf "%.3f", a/b; else print "-" }'; }
median() { tr ' ' '\n' <<<"$1" | grep . | sort -g | awk '{v[NR]=$1} END {print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }

for kind in json sse; do
  rps_r=""; cpu_r=""; ln=0; lc=0; lu=0; dn=0; dc=0; du=0
  for p in $(seq "$PAIRS"); do
    if [ $((p % 2)) = 1 ]; then
      read -r an ac au < <(run $kind $LEAN $LEAN_PID); read -r bn bc bu < <(run $kind $DEF $DEF_PID)
    else
      read -r bn bc bu < <(run $kind $DEF $DEF_PID); read -r an ac au < <(run $kind $LEAN $LEAN_PID)
    fi
    ln=$((ln + an)); lc=$((lc + ac)); lu=$((lu + au)); dn=$((dn + bn)); dc=$((dc + bc)); du=$((du + bu))
    r=$(ratio "$bn" "$an")
    c=$(awk -v bc="$bc" -v bn="$bn" -v ac="$ac" -v an="$an" 'BEGIN{ if (bn > 0 && ac > 0) printf "%.3f", (bc/bn)/(ac/an); else print "-" }')
    rps_r="$rps_r $r"; cpu_r="$cpu_r $c"
    echo "$kind pair $p: lean $an requests, $ac ticks; defaults $bn requests, $bc ticks; defaults / lean: requests ${r}x, CPU/request ${c}x"
  done
  total_cpu=$(awk -v dc="$dc" -v dn="$dn" -v lc="$lc" -v ln="$ln" 'BEGIN{ if (dn > 0 && lc > 0) printf "%.3f", (dc/dn)/(lc/ln); else print "-" }')
  echo "$kind: defaults / lean, median of $PAIRS pairs: requests $(median "$rps_r")x, CPU/request $(median "$cpu_r")x; totals: requests $(ratio "$dn" "$ln")x, CPU/request ${total_cpu}x"
  echo "$kind: CPU µs per request (user + kernel = total): lean $(us "$lu" "$ln") + $(us $((lc - lu)) "$ln") = $(us "$lc" "$ln"); defaults $(us "$du" "$dn") + $(us $((dc - du)) "$dn") = $(us "$dc" "$dn")"
done
echo "($(wc -l < "$WORK/access.log") access-log lines; workers $RS_WORKERS, $(nproc) cores, $PAIRS pairs of ${DUR}s per kind)"
