cd /work/main
run() {  # name, then env prefix
  name=$1; shift
  rm -f /tmp/cpu/stop; python /tmp/cpu/sample.py /tmp/cpu/lev_$name.json /tmp/cpu/stop &
  [ "$name" != "${name#nice}" ] && python /tmp/cpu/renice.py 10 /tmp/cpu/stop &
  echo "$name $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
  env "$@" python benchmarks/hpo.py --method ftplat_random --seed 0 --trials 2 --results /tmp/cpu/lev_$name --force > /tmp/cpu/lev_$name.log 2>&1
  touch /tmp/cpu/stop; sleep 2
}
for r in 1 2; do
  run base$r X=1
  run poll2_$r RAY_TRAIN_HEALTH_CHECK_INTERVAL_S=2
  run nice$r X=1
done
echo "DONE $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
