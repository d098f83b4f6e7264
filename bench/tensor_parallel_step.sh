#!/usr/bin/env bash
# The step of `small` (fp32, CPU) on 2 tensor-parallel ranks against one process: the ratio of
# the median step times, and the share of rank 0's last step spent in collectives (ops.csv rows
# whose op is all_reduce, all_gather or reduce_scatter). Both runs use the same total threads.
# Usage: bench/tensor_parallel_step.sh BUILD_DIR [STEPS] [THREADS]
set -euo pipefail
bin="${1:-build}/bin/rematlab-batch"
steps="${2:-5}"
threads="${3:-2}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
common=(--model small --dtype fp32 --seed 1 --warmup 1 --steps "$steps" --threads "$threads")
"$bin" run "${common[@]}" --out "$tmp/one" > /dev/null
"$bin" run "${common[@]}" --tp 2 --out "$tmp/tp2" > /dev/null
python3 - "$tmp" <<'PY'
import csv, json, os, sys
tmp = sys.argv[1]
one = json.load(open(os.path.join(tmp, "one", "summary.json")))
ranks = json.load(open(os.path.join(tmp, "tp2", "ranks.json")))
t1 = one["step_time_ms_median"]
t2 = max(r["step_time_ms_median"] for r in ranks["ranks"])
comm = total = 0
rows = list(csv.DictReader(open(os.path.join(tmp, "tp2", "rank-0", "ops.csv"))))
start = min(int(r["start_ns"]) for r in rows)
end = max(int(r["end_ns"]) for r in rows)
for r in rows:
    if r["op"] in ("all_reduce", "all_gather", "reduce_scatter") or r["name"].endswith(
            (".all_reduce", ".all_gather", ".reduce_scatter")):
        comm += int(r["end_ns"]) - int(r["start_ns"])
total = end - start
print("one process: step median %.1f ms" % t1)
print("tp 2: step median (slower rank) %.1f ms, ratio tp2/one %.2f" % (t2, t2 / t1))
print("tp 2 rank 0: collectives %.1f%% of the last step (%.1f of %.1f ms)"
      % (100.0 * comm / total, comm / 1e6, total / 1e6))
PY
