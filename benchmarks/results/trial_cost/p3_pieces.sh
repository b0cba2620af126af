#!/bin/bash
# P3 pieces per seed (0 1 2), in a row, from a clone in $P3DIR/repo (with $P3DIR/shared -> the
# shared folder). Each argument is one piece, "LOG|RESULTS|hpo.py arguments": its log is
# $P3DIR/LOG_<seed>.log, its JSON goes to $P3DIR/RESULTS/, and progress.txt says when it started.
#   P3DIR=/tmp/p3h bash p3_pieces.sh "hf|c1|--method hf_random" "c1|c1|--method ftplat_random"
set -u
cd $P3DIR/repo
export PYTHONPATH=$P3DIR/repo/platform
for seed in 0 1 2; do
  for piece in "$@"; do
    IFS='|' read -r log results args <<< "$piece"
    echo "$(date -u +%T) seed $seed $log load $(cut -d' ' -f1-3 /proc/loadavg)" >> $P3DIR/progress.txt
    timeout 900 python benchmarks/hpo.py $args --seed $seed --trials 4 --results $P3DIR/$results \
        > $P3DIR/${log}_$seed.log 2>&1
  done
done
echo "$(date -u +%T) done" >> $P3DIR/progress.txt
