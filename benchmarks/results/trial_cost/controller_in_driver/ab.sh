#!/bin/bash
# P2 A/B for the Train controller in the trial driver's process: before = 574b07f's product code,
# after = 574b07f with the controller run in-process (the prototype patch, in_process.patch),
# each a worktree (git worktree add /tmp/before_ctl 574b07f; git worktree add /tmp/after_ctl 574b07f
# && git -C /tmp/after_ctl apply in_process.patch), /tmp/shared -> the shared folder.
# overhead.py --repeats 1 from each, interleaved after/before, 3 rounds; JSONs in this folder.
set -u
OUT=$(cd "$(dirname "$0")" && pwd)
mkdir -p /tmp/ctlab/logs
for i in 1 2 3; do
  for side in after before; do
    if [ $side = after ]; then src=/tmp/after_ctl; else src=/tmp/before_ctl; fi
    echo "$(date -u +%T) round $i $side load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a $OUT/progress.txt
    (cd $src && PYTHONPATH=$src/platform timeout 900 python benchmarks/overhead.py --repeats 1 \
        --json $OUT/ab_${side}_$i.json > /tmp/ctlab/logs/${side}_$i.log 2>&1)
  done
done
echo "$(date -u +%T) done load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a $OUT/progress.txt
