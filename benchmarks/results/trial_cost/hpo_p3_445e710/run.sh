#!/bin/bash
# P3 pieces at HEAD (product code of 4cf956b), from a clone in /tmp/p3h/repo
# (P3DIR names another folder holding repo/, for another commit's clone).
set -u
P3DIR=${P3DIR:-/tmp/p3h}
cd $P3DIR/repo
export PYTHONPATH=$P3DIR/repo/platform
for seed in 0 1 2; do
  echo "$(date -u +%T) seed $seed hf load $(cut -d' ' -f1-3 /proc/loadavg)" >> $P3DIR/progress.txt
  timeout 900 python benchmarks/hpo.py --method hf_random --seed $seed --trials 4 --results $P3DIR/c1 > $P3DIR/hf_$seed.log 2>&1
  echo "$(date -u +%T) seed $seed ftplat c1 load $(cut -d' ' -f1-3 /proc/loadavg)" >> $P3DIR/progress.txt
  timeout 900 python benchmarks/hpo.py --method ftplat_random --seed $seed --trials 4 --results $P3DIR/c1 > $P3DIR/c1_$seed.log 2>&1
  echo "$(date -u +%T) seed $seed ftplat c2 load $(cut -d' ' -f1-3 /proc/loadavg)" >> $P3DIR/progress.txt
  timeout 900 python benchmarks/hpo.py --method ftplat_random --seed $seed --trials 4 --concurrent 2 --results $P3DIR/c2 > $P3DIR/c2_$seed.log 2>&1
done
echo "$(date -u +%T) done" >> $P3DIR/progress.txt
