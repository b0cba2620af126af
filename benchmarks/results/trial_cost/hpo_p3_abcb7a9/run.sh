#!/bin/bash
# P2 (overhead.py --repeats 3, one warm cluster) and then the P3 pieces per seed (plain HF, ftplat
# one trial at a time, ftplat two packed) at abcb7a9, from a clean clone in /tmp/p3n/repo (with
# /tmp/p3n/shared -> the shared folder). Then: python summarize.py (in this folder).
exec bash "$(dirname "$0")/../p2_abcb7a9/run_all.sh"
