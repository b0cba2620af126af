# Packed pieces (hpo.py --trials 2 --concurrent 2: two one-thread trials at once), the report
# channel (ac07279, /work/main) against its parent 652792b (worktree /tmp/before_rc),
# interleaved, 3 rounds.
cd /work/main
OUT=benchmarks/results/trial_cost/report_channel/ab_packed
for r in 1 2 3; do
  for side in before after; do
    echo "$side $r $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
    if [ $side = after ]; then
      python benchmarks/hpo.py --method ftplat_random --seed 0 --trials 2 --concurrent 2 --results $OUT/after_$r --force > /tmp/rcp_${side}_$r.log 2>&1
    else
      PYTHONPATH=/tmp/before_rc/platform python /tmp/before_rc/benchmarks/hpo.py --method ftplat_random --seed 0 --trials 2 --concurrent 2 --results $OUT/before_$r --force > /tmp/rcp_${side}_$r.log 2>&1
    fi
  done
done
echo "DONE $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
