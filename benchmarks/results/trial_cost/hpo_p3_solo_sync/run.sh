#!/bin/bash
# P3 packed (hpo.py --concurrent 2) with Train's synchronization actor (79964b2) and without it in
# one-worker trials (c058dd5), per seed: plain HF, then the two ftplat sides in alternating order; clean clones
# in /tmp/p3s/{before,after} with /tmp/p3s/shared -> the shared folder. Then: python summarize.py /tmp/p3s
set -u
rm -rf /tmp/p3s && mkdir -p /tmp/p3s && ln -s /work/shared /tmp/p3s/shared
git clone -q /work/main /tmp/p3s/before && git -C /tmp/p3s/before checkout -q 79964b2
git clone -q /work/main /tmp/p3s/after && git -C /tmp/p3s/after checkout -q c058dd5
piece() {  # side results method-args seed
  cd /tmp/p3s/$1
  echo "$(date -u +%T) seed $4 $1 $2 load $(cut -d' ' -f1-3 /proc/loadavg)" >> /tmp/p3s/progress.txt
  PYTHONPATH=/tmp/p3s/$1/platform timeout 900 python benchmarks/hpo.py $3 --seed $4 --trials 4 \
      --results /tmp/p3s/$2 > /tmp/p3s/$2_$4.log 2>&1
}
for seed in 0 1 2; do
  piece after hf "--method hf_random" $seed
  if [ $((seed % 2)) -eq 0 ]; then order="before after"; else order="after before"; fi
  for side in $order; do piece $side packed_$side "--method ftplat_random --concurrent 2" $seed; done
done
echo "$(date -u +%T) done" >> /tmp/p3s/progress.txt
