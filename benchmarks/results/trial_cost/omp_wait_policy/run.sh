# bg.py is benchmarks/results/trial_cost/hpo_p3_2026-11-27/why_train_slower/scripts/bg.py, copied to /tmp/omp/
cd /work/main
run() { # $1 label, $2 bg|quiet, $3 env
  rm -f /tmp/omp/stop
  [ $2 = bg ] && python /tmp/omp/bg.py 20 /tmp/omp/stop &
  sleep 1; echo "$1 $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
  env $3 python benchmarks/hpo.py --method hf_random --seed 0 --trials 1 --results /tmp/omp/$1 --force > /tmp/omp/$1.log 2>&1
  touch /tmp/omp/stop; sleep 2
  grep -o "'train_runtime': '[0-9.]*'" /tmp/omp/$1.log | tr '\n' ' '; echo
}
for r in 1 2 3; do
  run bg_default_$r bg OMP_X=1
  run bg_passive_$r bg OMP_WAIT_POLICY=PASSIVE
done
for r in 1 2; do
  run quiet_default_$r quiet OMP_X=1
  run quiet_passive_$r quiet OMP_WAIT_POLICY=PASSIVE
done
echo DONE
