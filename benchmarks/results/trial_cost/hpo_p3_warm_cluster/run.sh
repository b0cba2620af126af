#!/bin/bash
# P3 packed, with the cluster started inside the sweep's wall (as every P3 run before) and
# before it (--warm-cluster, as under `ray job submit`), beside plain HF, per seed in a row;
# from a clone in /tmp/p3w/repo (with /tmp/p3w/shared -> the shared folder).
set -u
P3DIR=${P3DIR:-/tmp/p3w}
cd $P3DIR/repo
export PYTHONPATH=$P3DIR/repo/platform
for seed in 0 1 2; do
  echo "$(date -u +%T) seed $seed hf load $(cut -d' ' -f1-3 /proc/loadavg)" >> $P3DIR/progress.txt
  timeout 900 python benchmarks/hpo.py --method hf_random --seed $seed --trials 4 --results $P3DIR/hf > $P3DIR/hf_$seed.log 2>&1
  echo "$(date -u +%T) seed $seed ftplat c2 warm load $(cut -d' ' -f1-3 /proc/loadavg)" >> $P3DIR/progress.txt
  timeout 900 python benchmarks/hpo.py --method ftplat_random --seed $seed --trials 4 --concurrent 2 --warm-cluster --results $P3DIR/warm > $P3DIR/warm_$seed.log 2>&1
  echo "$(date -u +%T) seed $seed ftplat c2 cold load $(cut -d' ' -f1-3 /proc/loadavg)" >> $P3DIR/progress.txt
  timeout 900 python benchmarks/hpo.py --method ftplat_random --seed $seed --trials 4 --concurrent 2 --results $P3DIR/cold > $P3DIR/cold_$seed.log 2>&1
done
echo "$(date -u +%T) done" >> $P3DIR/progress.txt
