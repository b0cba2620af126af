#!/bin/bash
# P3 packed (hpo.py --concurrent 2) with Ray's checkpoint copy (eebf1cb) and with hard links
# (d3a3928), per seed: plain HF, then the two ftplat sides in alternating order; clean clones
# in /tmp/p3l/{before,after} with /tmp/p3l/shared -> the shared folder. Then: python summarize.py /tmp/p3l
set -u
rm -rf /tmp/p3l && mkdir -p /tmp/p3l && ln -s /work/shared /tmp/p3l/shared
git clone -q /work/main /tmp/p3l/before && git -C /tmp/p3l/before checkout -q eebf1cb
git clone -q /work/main /tmp/p3l/after && git -C /tmp/p3l/after checkout -q d3a3928
piece() {  # side results method-args seed
  cd /tmp/p3l/$1
  echo "$(date -u +%T) seed $4 $1 $2 load $(cut -d' ' -f1-3 /proc/loadavg)" >> /tmp/p3l/progress.txt
  PYTHONPATH=/tmp/p3l/$1/platform timeout 900 python benchmarks/hpo.py $3 --seed $4 --trials 4 \
      --results /tmp/p3l/$2 > /tmp/p3l/$2_$4.log 2>&1
}
for seed in 0 1 2; do
  piece after hf "--method hf_random" $seed
  if [ $((seed % 2)) -eq 0 ]; then order="before after"; else order="after before"; fi
  for side in $order; do piece $side packed_$side "--method ftplat_random --concurrent 2" $seed; done
done
echo "$(date -u +%T) done" >> /tmp/p3l/progress.txt
