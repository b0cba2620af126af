#!/bin/bash
# The P3 pieces per seed (plain HF, ftplat one trial at a time, ftplat two packed) at 3b0c801,
# from a clean clone in /tmp/p3q/repo (with /tmp/p3q/shared -> the shared folder), results
# copied here afterwards. Then: python summarize.py (in this folder).
set -eu
rm -rf /tmp/p3q && mkdir -p /tmp/p3q && ln -s /work/shared /tmp/p3q/shared
git clone -q /work/main /tmp/p3q/repo && git -C /tmp/p3q/repo checkout -q 3b0c801
P3DIR=/tmp/p3q bash /tmp/p3q/repo/benchmarks/results/trial_cost/p3_pieces.sh \
    "hf|one_at_a_time|--method hf_random" "c1|one_at_a_time|--method ftplat_random" "c2|packed|--method ftplat_random --concurrent 2"
