"""The P3 table from a P3 run's JSONs (FOLDER/one_at_a_time/ holds plain HF's and ftplat's
one-at-a-time pieces, FOLDER/packed/ ftplat's two-at-a-time ones): python p3_summarize.py FOLDER"""
import json
import os
import statistics
import sys

HERE = sys.argv[1]


def wall(folder, name):
    return json.load(open(os.path.join(HERE, folder, name)))["wall_s"]


rows = []
print("| seed | plain HF wall | ftplat, 1 at a time | ftplat, 2 packed | P3, 1 at a time | P3, 2 packed |")
print("|---|---|---|---|---|---|")
for seed in (0, 1, 2):
    hf = wall("one_at_a_time", f"hf_random-seed{seed}.json")
    c1 = wall("one_at_a_time", f"ftplat_random-seed{seed}.json")
    c2 = wall("packed", f"ftplat_random-seed{seed}.json")
    rows.append((c1 / hf, c2 / hf))
    print(f"| {seed} | {hf:.1f} s | {c1:.1f} s | {c2:.1f} s | {c1 / hf:.2f}x | {c2 / hf:.2f}x |")
one, packed = [r[0] for r in rows], [r[1] for r in rows]
print(f"| median | | | | {statistics.median(one):.2f}x [{min(one):.2f}, {max(one):.2f}] "
      f"| {statistics.median(packed):.2f}x [{min(packed):.2f}, {max(packed):.2f}] |")
