#!/bin/bash
# A P3 packed A/B (hpo.py --concurrent 2) between two commits, per seed: plain HF, then the two
# ftplat sides in alternating order, from clean clones in WORK/{before,after} with WORK/shared ->
# the shared folder. Results: WORK/hf, WORK/packed_before, WORK/packed_after, WORK/progress.txt;
# hpo_p3_ab_summarize.py WORK "before's label" "after's label" prints the table.
#   bash hpo_p3_ab_run.sh WORK BEFORE_COMMIT AFTER_COMMIT
set -u
WORK=$1 BEFORE=$2 AFTER=$3
rm -rf "$WORK" && mkdir -p "$WORK" && ln -s /work/shared "$WORK/shared"
git clone -q /work/main "$WORK/before" && git -C "$WORK/before" checkout -q "$BEFORE"
git clone -q /work/main "$WORK/after" && git -C "$WORK/after" checkout -q "$AFTER"
piece() {  # side results method-args seed
  cd "$WORK/$1"
  echo "$(date -u +%T) seed $4 $1 $2 load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$WORK/progress.txt"
  PYTHONPATH=$WORK/$1/platform timeout 900 python benchmarks/hpo.py $3 --seed $4 --trials 4 \
      --results "$WORK/$2" > "$WORK/$2_$4.log" 2>&1
}
for seed in 0 1 2; do
  piece after hf "--method hf_random" $seed
  if [ $((seed % 2)) -eq 0 ]; then order="before after"; else order="after before"; fi
  for side in $order; do piece $side packed_$side "--method ftplat_random --concurrent 2" $seed; done
done
echo "$(date -u +%T) done" >> "$WORK/progress.txt"
