cd /work/main
for r in 1 2 3; do for m in idle0 idle10; do
  rm -f /tmp/cpu/stop /tmp/cpu/stop.ready
  if [ $m = idle10 ]; then (cd /tmp && python /tmp/cpu/holdn.py 10 /tmp/cpu/stop > /dev/null 2>&1 &); while [ ! -f /tmp/cpu/stop.ready ]; do sleep 0.5; done; sleep 5; fi
  echo "$m $r $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
  python benchmarks/hpo.py --method hf_random --seed 0 --trials 1 --results /tmp/cpu/it_${m}_$r --force > /tmp/cpu/it_${m}_$r.log 2>&1
  touch /tmp/cpu/stop; sleep 6
  grep -o "'train_runtime': '[0-9.]*'" /tmp/cpu/it_${m}_$r.log
done; done
echo DONE
