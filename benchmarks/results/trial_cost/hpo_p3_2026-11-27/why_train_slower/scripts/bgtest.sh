cd /work/main
for r in 3 4 5; do for m in quiet bg; do
  rm -f /tmp/cpu/stop; python /tmp/cpu/sample.py /tmp/cpu/bg_${m}_$r.json /tmp/cpu/stop &
  [ $m = bg ] && python /tmp/cpu/bg.py 20 /tmp/cpu/stop &
  sleep 1; echo "$m $r $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
  python benchmarks/hpo.py --method hf_random --seed 0 --trials 1 --results /tmp/cpu/bg_${m}_$r --force > /tmp/cpu/bg_${m}_$r.log 2>&1
  touch /tmp/cpu/stop; sleep 2
  grep -o "'train_runtime': '[0-9.]*'" /tmp/cpu/bg_${m}_$r.log
done; done
echo DONE
