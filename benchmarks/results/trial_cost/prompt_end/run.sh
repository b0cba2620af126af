#!/bin/bash
# P2 with Train's worker (3230dfc: a run ends one poll after its last report) against ftplat's
# (21698a8: it ends at that poll): overhead_ab_run.sh from clones in /tmp/ab/{before,after}; results
# land in this folder. Then trial_gap.py --compare on the same clones (trial_gap.json).
HERE=$(cd "$(dirname "$0")" && pwd)
rm -rf /tmp/ab/before /tmp/ab/after && mkdir -p /tmp/ab
git clone -q /work/main /tmp/ab/before && git -C /tmp/ab/before checkout -q 3230dfc
git clone -q /work/main /tmp/ab/after && git -C /tmp/ab/after checkout -q 21698a8
bash "$HERE/../overhead_ab_run.sh" "$HERE" /tmp/ab/before /tmp/ab/after
PYTHONPATH=/tmp/ab/after/platform python /tmp/ab/after/benchmarks/trial_gap.py --trials 3 --repeats 3 --tracking \
  --compare /tmp/ab/before/platform --json "$HERE/trial_gap.json" > /tmp/ab/trial_gap.log 2>&1
