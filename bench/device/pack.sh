#!/usr/bin/env bash
# Builds the CUDA binaries here and packs what the GPU machine needs into one archive
# (.device-bundle/bundle.tar.xz): the CLI, the test binaries, cuda_bench, librematcore,
# librematcuda, the plugins, presets and corpus, and the non-CUDA shared libraries a bare
# machine may lack.
# Usage: bench/device/pack.sh   (then run bench/device/run.sh there, carrying .device-bundle)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=build-device
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DREMAT_WITH_CUDA=ON -DREMAT_WITH_QT=OFF >/dev/null
cmake --build "$build" -j "$(nproc)" --target rematlab-batch remat_gpu_tests remat_unit_tests remat_resources \
  $(cd "$build" && ninja -t targets all 2>/dev/null | grep -o '^remat_policy_[a-z_]*:\|^cuda_bench:\|^remat_nccl_tests:\|^nccl_bench:\|^rematnccl:' | tr -d ':' | sort -u)
stage=.device-bundle/remat
rm -rf .device-bundle && mkdir -p "$stage/bin/plugins" "$stage/lib" "$stage/runtime"
cp "$build"/bin/rematlab-batch "$build"/bin/remat_gpu_tests "$build"/bin/remat_unit_tests "$stage/bin/"
[ -x "$build/bin/remat_cupti_tests" ] && cp "$build/bin/remat_cupti_tests" "$stage/bin/"
[ -x "$build/bin/cuda_bench" ] && cp "$build/bin/cuda_bench" "$stage/bin/"  # the speed check's figures
for b in remat_nccl_tests nccl_bench; do [ -x "$build/bin/$b" ] && cp "$build/bin/$b" "$stage/bin/"; done
cp "$build"/bin/plugins/*.so "$stage/bin/plugins/"
cp -P "$build"/lib/*.so* "$stage/lib/"
cp -r "$build/share" "$stage/share"
for l in libopenblas.so.0 libgfortran.so.5 libquadmath.so.0; do
  cp -L "$(ldconfig -p | awk -v n="$l" '$1 == n {print $NF; exit}')" "$stage/runtime/$l"
done
cp bench/device/run.sh "$stage/"
# CUDA ranks end to end (run.sh runs it where there are two GPUs or more).
mkdir -p "$stage/tests/e2e" "$stage/tests/gpu"
cp tests/e2e/e2e_common.py "$stage/tests/e2e/" && cp tests/gpu/nccl_ranks_e2e.py "$stage/tests/gpu/"
# The PyTorch scripts the figures are compared with, when this checkout has them beside it.
if [ -d ../shared/anchors ]; then mkdir -p .device-bundle/anchors && cp ../shared/anchors/*.py .device-bundle/anchors/; fi
tar -C .device-bundle -cJf .device-bundle/bundle.tar.xz remat
rm -rf "$stage"
ls -la .device-bundle
