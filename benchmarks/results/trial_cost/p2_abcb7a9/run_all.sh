#!/bin/bash
# P2 on one warm cluster (overhead.py --repeats 3), then the P3 pieces (plain HF, ftplat one at a time, ftplat packed, per seed), from a clean clone of abcb7a9.
cd /tmp/p3n/repo
export PYTHONPATH=/tmp/p3n/repo/platform
echo "$(date -u +%T) overhead load $(cut -d' ' -f1-3 /proc/loadavg)" >> /tmp/p3n/progress.txt
timeout 1200 python benchmarks/overhead.py --repeats 3 --json /tmp/p3n/overhead.json > /tmp/p3n/overhead.log 2>&1
P3DIR=/tmp/p3n bash /tmp/p3n/repo/benchmarks/results/trial_cost/p3_pieces.sh \
    "hf|one_at_a_time|--method hf_random" "c1|one_at_a_time|--method ftplat_random" "c2|packed|--method ftplat_random --concurrent 2"
