"""P3 packed with Ray's copy (before) and hard links (after): python summarize.py FOLDER"""
import json
import os
import statistics
import sys

root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))


def wall(folder, name):
    return json.load(open(os.path.join(root, folder, name)))["wall_s"]


ratios = {"before": [], "after": []}
print("| seed | plain HF wall | ftplat packed, copies (eebf1cb) | ftplat packed, links (d3a3928) "
      "| P3 packed, copies | P3 packed, links |")
print("|---|---|---|---|---|---|")
for seed in (0, 1, 2):
    hf = wall("hf", f"hf_random-seed{seed}.json")
    w = {side: wall(f"packed_{side}", f"ftplat_random-seed{seed}.json") for side in ratios}
    for side in ratios:
        ratios[side].append(w[side] / hf)
    print(f"| {seed} | {hf:.1f} s | {w['before']:.1f} s | {w['after']:.1f} s "
          f"| {w['before'] / hf:.2f}x | {w['after'] / hf:.2f}x |")
cells = [f"{statistics.median(r):.2f}x [{min(r):.2f}, {max(r):.2f}]" for r in ratios.values()]
print(f"| median | | | | {cells[0]} | {cells[1]} |")
