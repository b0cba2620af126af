"""The table of this run: plain HF (hf/), ftplat packed with the cluster started before the
sweep's clock (warm/) and inside it (cold/), per seed: python summarize.py"""
import json
import os
import statistics

HERE = os.path.dirname(os.path.abspath(__file__))


def piece(folder, method, seed):
    return json.load(open(os.path.join(HERE, folder, f"{method}-seed{seed}.json")))


def spread(xs, unit=""):
    return f"{statistics.median(xs):.2f}{unit} [{min(xs):.2f}, {max(xs):.2f}]"


print("| seed | plain HF wall | ftplat packed, cluster up | ftplat packed, cluster started in the wall "
      "| **P3** cluster up | **P3** started in the wall |")
print("|---|---|---|---|---|---|")
up, cold = [], []
for seed in (0, 1, 2):
    hf = piece("hf", "hf_random", seed)["wall_s"]
    w = piece("warm", "ftplat_random", seed)["wall_s"]
    c = piece("cold", "ftplat_random", seed)["wall_s"]
    up.append(w / hf)
    cold.append(c / hf)
    print(f"| {seed} | {hf:.1f} s | {w:.1f} s | {c:.1f} s | {w / hf:.2f}x | {c / hf:.2f}x |")
print(f"| median | | | | {spread(up, 'x')} | {spread(cold, 'x')} |")
