# ftplat_random sweeps of 2 trials (hpo.py's P3 piece), the report channel against its parent
# commit in a worktree (git worktree add /tmp/before_rc 652792b), interleaved, 3 rounds.
cd /work/main
OUT=benchmarks/results/trial_cost/report_channel/ab_train
for r in 1 2 3; do
  for side in after before; do
    echo "$side $r $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
    if [ $side = after ]; then
      python benchmarks/hpo.py --method ftplat_random --seed 0 --trials 2 --results $OUT/after_$r --force > /tmp/rc_${side}_$r.log 2>&1
    else
      PYTHONPATH=/tmp/before_rc/platform python /tmp/before_rc/benchmarks/hpo.py --method ftplat_random --seed 0 --trials 2 --results $OUT/before_$r --force > /tmp/rc_${side}_$r.log 2>&1
    fi
  done
done
echo "DONE $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
