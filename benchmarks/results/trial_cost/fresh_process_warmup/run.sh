#!/usr/bin/env bash
# A raw MiniLM training loop (batch 16, seq 128, 2 threads, AdamW, 30 steps) twice in one fresh
# process: the first run is cold, the second warm. Interleaved with glibc malloc's dynamic mmap
# threshold and trimming turned off (a guess at what a fresh process pays in its first steps).
set -euo pipefail
cd "$(dirname "$0")"
uptime
for i in 1 2 3; do
  python warm_probe.py default 2>/dev/null | tail -1
  MALLOC_MMAP_THRESHOLD_=1000000000000 MALLOC_TRIM_THRESHOLD_=1000000000000 MALLOC_TOP_PAD_=536870912 \
    python warm_probe.py malloc 2>/dev/null | tail -1
done
