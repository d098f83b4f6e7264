#!/usr/bin/env bash
# Resource report of every CUDA kernel (no GPU needed): compiles each kernels/*.cu for sm_90 with
# `ptxas -v` and prints one line per kernel: registers, static shared memory, stack and spills.
# Usage: bench/ptxas_report.sh [NVCC]   (default /usr/local/cuda/bin/nvcc)
set -euo pipefail
nvcc=${1:-/usr/local/cuda/bin/nvcc}
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '%-58s %5s %7s %6s %6s\n' kernel regs smem stack spill
for f in "$root"/kernels/*.cu; do
  "$nvcc" -std=c++17 -arch=sm_90 -I"$root" -Xptxas -v -c "$f" -o "$tmp/k.o" 2>&1 |
    awk -v file="$(basename "$f")" '
      /Compiling entry function/ { match($0, /'"'"'[^'"'"']+'"'"'/); name = substr($0, RSTART + 1, RLENGTH - 2) }
      /bytes stack frame/ { stack = $1; spill = $5 + $9 }
      /Used [0-9]+ registers/ {
        regs = $0; sub(/.*Used /, "", regs); sub(/ registers.*/, "", regs)
        smem = 0; if (match($0, /[0-9]+ bytes smem/)) { smem = substr($0, RSTART, RLENGTH); sub(/ bytes smem/, "", smem) }
        print name "\t" regs "\t" smem "\t" stack "\t" spill
      }'
done | while IFS=$'\t' read -r name regs smem stack spill; do
  short=$(echo "$name" | c++filt | sed -E 's/\(anonymous namespace\):://g; s/remat::kernels:://g; s/detail:://g; s/^void //; s/\(.*$//; s/unsigned short/bf16/g; s/CUB_[0-9]+_SM_[0-9]+:://')
  printf '%-58.58s %5s %7s %6s %6s\n' "$short" "$regs" "$smem" "$stack" "$spill"
done
