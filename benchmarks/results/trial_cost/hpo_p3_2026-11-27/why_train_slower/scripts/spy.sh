cd /work/main
echo "ft $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
python benchmarks/hpo.py --method ftplat_random --seed 0 --trials 1 --results /tmp/cpu/spy_ft --force > /tmp/cpu/spy_ft.log 2>&1 &
for i in $(seq 1 200); do p=$(pgrep -f "^ray::RayTrainWorker" | head -1); [ -n "$p" ] && break; sleep 0.5; done
py-spy record -p $p --rate 20 -f raw -o /tmp/cpu/spy_ft.raw --threads --idle --nonblocking > /tmp/cpu/spy_ft.pyspy 2>&1
wait
sleep 3
echo "hf $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
python benchmarks/hpo.py --method hf_random --seed 0 --trials 1 --results /tmp/cpu/spy_hf --force > /tmp/cpu/spy_hf.log 2>&1 &
hp=$!
py-spy record -p $hp --rate 20 -f raw -o /tmp/cpu/spy_hf.raw --threads --idle --nonblocking > /tmp/cpu/spy_hf.pyspy 2>&1
wait
echo "DONE $(date +%T)"
