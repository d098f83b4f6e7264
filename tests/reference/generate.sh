#!/bin/sh
# Generates the PyTorch reference files when Debian's python3-torch is installed; without it
# the reference tests skip with a message.
# Usage: generate.sh OUT_DIR [SCRIPT]  (SCRIPT in this directory; default make_reference.py)
out="$1"
script="${2:-make_reference.py}"
if /usr/bin/python3 -c "import torch" 2>/dev/null; then
  exec /usr/bin/python3 "$(dirname "$0")/$script" "$out"
fi
echo "python3-torch is not installed: PyTorch reference tests will skip"
exit 0
