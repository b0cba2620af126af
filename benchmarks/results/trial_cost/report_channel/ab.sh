# hpo.py's ftplat_random piece (seed 0), the report channel (/work/main) against its parent
# commit 652792b (git worktree add /tmp/before_rc 652792b), interleaved, 3 rounds.
#   bash ab.sh ab_train after --trials 2                  # one trial at a time; after side first
#   bash ab.sh ab_packed before --trials 2 --concurrent 2  # two one-thread trials at once
NAME=$1 FIRST=$2; shift 2
cd /work/main
OUT=benchmarks/results/trial_cost/report_channel/$NAME
SIDES="after before"; [ "$FIRST" = before ] && SIDES="before after"
for r in 1 2 3; do
  for side in $SIDES; do
    echo "$side $r $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
    if [ $side = after ]; then src=/work/main; else src=/tmp/before_rc; fi
    PYTHONPATH=$src/platform python $src/benchmarks/hpo.py --method ftplat_random --seed 0 "$@" \
        --results $OUT/${side}_$r --force > /tmp/${NAME}_${side}_$r.log 2>&1
  done
done
echo "DONE $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
