cd /work/main
for m in hf_random ftplat_random; do
  echo "$m $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
  python benchmarks/hpo.py --method $m --seed 0 --trials 4 --threads 1 --results /tmp/bench/p3_t1 > /tmp/bench/p3_t1_$m.log 2>&1
done
echo "DONE $(date +%T)"
