#!/usr/bin/env bash
# Whether clang can build the sanitize preset: clang++ with the AddressSanitizer, UBSan and
# libFuzzer runtimes (Debian: clang, libclang-rt-14-dev). Exits 0, or 1 with the reason on stdout
# in one line.
set -uo pipefail
if ! command -v clang++ >/dev/null 2>&1; then
  echo "clang++ not found (apt-get install clang libclang-rt-14-dev)"
  exit 1
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
printf 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }\n' >"$dir/t.cpp"
if ! clang++ -fsanitize=fuzzer,address,undefined "$dir/t.cpp" -o "$dir/t" >"$dir/log" 2>&1; then
  echo "clang++ cannot link a sanitized fuzz target ($(head -c 200 "$dir/log" | tr '\n' ' ')); apt-get install libclang-rt-14-dev"
  exit 1
fi
exit 0
