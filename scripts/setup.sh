#!/usr/bin/env bash
# Installs what is missing (Debian 12 packages), then configures and builds RematLab.
# Usage: scripts/setup.sh [run|test]   (test also installs what the tests need)
set -euo pipefail
cd "$(dirname "$0")/.."
profile="${1:-run}"

packages=(build-essential cmake ninja-build pkg-config git ccache libopenblas-dev libdnnl-dev libsleef-dev libhwy-dev nlohmann-json3-dev
          libcli11-dev libboost-graph-dev libgloo-dev libgtest-dev libbenchmark-dev qt6-base-dev libqcustomplot-dev
          libgl1-mesa-dev)
if [ "$profile" = test ]; then
  # clang and its runtimes: libFuzzer and the sanitizers of the fuzz stage (scripts/fuzz.sh).
  packages+=(python3 python3-torch python3-numpy python3-venv python3-pip python3-dev python3-pybind11 xvfb xauth imagemagick clang libclang-rt-14-dev)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
fi

cmake --preset default
cmake --build build -j "$(nproc)"
