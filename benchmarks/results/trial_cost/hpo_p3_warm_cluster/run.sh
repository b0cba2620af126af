#!/bin/bash
# P3 packed, with the cluster started inside the sweep's wall (as every P3 run before) and
# before it (--warm-cluster, as under `ray job submit`), beside plain HF, per seed in a row;
# from a clone of a1ccec2 in /tmp/p3w/repo (with /tmp/p3w/shared -> the shared folder).
P3DIR=${P3DIR:-/tmp/p3w} exec bash "$(dirname "$0")/../p3_pieces.sh" \
    "hf|hf|--method hf_random" "warm|warm|--method ftplat_random --concurrent 2 --warm-cluster" \
    "cold|cold|--method ftplat_random --concurrent 2"
