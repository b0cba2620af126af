cd /work/main
for r in 1 2; do
for m in hf_random ftplat_random; do
  rm -f /tmp/cpu/stop; python /tmp/cpu/sample.py /tmp/cpu/ab_${m}_$r.json /tmp/cpu/stop &
  echo "$m $r $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
  python benchmarks/hpo.py --method $m --seed 0 --trials 2 --results /tmp/cpu/ab_$r --force > /tmp/cpu/ab_${m}_$r.log 2>&1
  touch /tmp/cpu/stop; sleep 2
done; done
echo "DONE $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
