#!/bin/bash
# An overhead.py A/B: interleaved A B A B A B, one overhead.py pair per run, each run on its own
# fresh local cluster, each side from its own source tree (its platform/ and benchmarks/).
#   bash overhead_ab_run.sh OUT BEFORE_TREE AFTER_TREE [more overhead.py arguments]
# writes OUT/{before,after}_{1,2,3}.json and OUT/progress.txt (logs beside the trees);
# overhead_ab_summarize.py OUT prints the table.
set -u
OUT=$1 BEFORE=$2 AFTER=$3; shift 3
mkdir -p "$OUT"
for round in 1 2 3; do
  for side in before after; do
    if [ $side = before ]; then tree=$BEFORE; else tree=$AFTER; fi
    echo "$(date -u +%T) round $round $side load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/progress.txt"
    PYTHONPATH=$tree/platform timeout 900 python "$tree/benchmarks/overhead.py" --repeats 1 "$@" \
      --json "$OUT/${side}_$round.json" > "$tree.${side}_$round.log" 2>&1
    echo "$(date -u +%T) rc=$?" >> "$OUT/progress.txt"
  done
done
