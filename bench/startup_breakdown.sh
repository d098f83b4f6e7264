#!/usr/bin/env bash
# Where gpt2-124m's start-up goes: `startup_ms` and its parts (summary.json's
# startup_breakdown_ms) of RUNS processes, each `run --model gpt2-124m --seq 128 --batch 1
# --steps 1 --warmup 0`, with the process's wall time (start-up and the one step) beside.
#
#   bench/startup_breakdown.sh [BIN] [RUNS] [THREADS]
#
# One line per run: startup_ms, the parts in the summary's order (alphabetical), the step's ms,
# the process's wall time and its CPU time (user + system, all threads, start-up and step); then
# the minimum and median of each column over the runs.
set -euo pipefail
BIN=${1:-build/bin/rematlab-batch}
RUNS=${2:-3}
THREADS=${3:-2}
WORK=$(mktemp -d /tmp/rematlab-startup.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
echo "$BIN; $RUNS runs; $THREADS threads; $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for r in $(seq 1 "$RUNS"); do
  s=$(date +%s.%N)
  /usr/bin/time -f "%U %S" -o "$WORK/$r.cpu" "$BIN" run --model gpt2-124m --seq 128 --batch 1 --steps 1 --warmup 0 --threads "$THREADS" --json \
    > "$WORK/$r.json"
  e=$(date +%s.%N)
  awk -v wall="$(echo "$e - $s" | bc)" -v cpu="$(awk '{print $1 + $2}' "$WORK/$r.cpu")" '
    /"startup_breakdown_ms": *\{/ {f = 1; next}
    f && /\}/ {f = 0}
    f {gsub(/[",:]/, ""); names = names " " $1; vals = vals " " sprintf("%.1f", $2)}
    /"startup_ms":/ {gsub(/,/, ""); st = sprintf("%.1f", $2)}
    /"step_time_ms_median":/ {gsub(/,/, ""); step = sprintf("%.1f", $2)}
    END {print "startup_ms" names " step_ms wall_ms cpu_ms"; print st vals " " step " " sprintf("%.0f", wall * 1000) " " sprintf("%.0f", cpu * 1000)}' \
    "$WORK/$r.json" > "$WORK/$r.row"
  [ "$r" = 1 ] && head -1 "$WORK/1.row" | tr ' ' '\t'
  tail -1 "$WORK/$r.row" | tr ' ' '\t'
done
for stat in min median; do
  for r in $(seq 1 "$RUNS"); do tail -1 "$WORK/$r.row"; done | awk -v stat="$stat" '
    {for (i = 1; i <= NF; ++i) v[i, NR] = $i; n = NF}
    END {
      line = stat
      for (i = 1; i <= n; ++i) {
        m = 0; for (r = 1; r <= NR; ++r) a[r] = v[i, r]
        for (x = 1; x <= NR; ++x) for (y = x + 1; y <= NR; ++y) if (a[y] + 0 < a[x] + 0) {t = a[x]; a[x] = a[y]; a[y] = t}
        m = stat == "min" ? a[1] : (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2)
        line = line "\t" m
      }
      print line
    }'
done
