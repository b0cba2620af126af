"""A P3 packed A/B's table (hpo.py --concurrent 2 on two sides, per seed against one plain HF
run: FOLDER/hf, FOLDER/packed_before, FOLDER/packed_after), each seed's walls and ratios, then
each side's median [min, max]:
python hpo_p3_ab_summarize.py FOLDER "before's label" "after's label" [BEFORE_SUBFOLDER AFTER_SUBFOLDER]
"""
import json
import os
import statistics
import sys

root, labels = sys.argv[1], {"before": sys.argv[2], "after": sys.argv[3]}
folders = dict(zip(labels, sys.argv[4:6])) if len(sys.argv) > 4 else {"before": "packed_before", "after": "packed_after"}


def wall(folder, name):
    return json.load(open(os.path.join(root, folder, name)))["wall_s"]


ratios = {"before": [], "after": []}
print(f"| seed | plain HF wall | ftplat packed, {labels['before']} | ftplat packed, {labels['after']} "
      f"| P3 packed, {labels['before']} | P3 packed, {labels['after']} |")
print("|---|---|---|---|---|---|")
for seed in (0, 1, 2):
    hf = wall("hf", f"hf_random-seed{seed}.json")
    w = {side: wall(folders[side], f"ftplat_random-seed{seed}.json") for side in ratios}
    for side in ratios:
        ratios[side].append(w[side] / hf)
    print(f"| {seed} | {hf:.1f} s | {w['before']:.1f} s | {w['after']:.1f} s "
          f"| {w['before'] / hf:.2f}x | {w['after'] / hf:.2f}x |")
cells = [f"{statistics.median(r):.2f}x [{min(r):.2f}, {max(r):.2f}]" for r in ratios.values()]
print(f"| median | | | | {cells[0]} | {cells[1]} |")
