"""The table of this run: plain HF (hf/), ftplat packed with the cluster started before the
sweep's clock (warm/) and inside it (cold/), per seed: python summarize.py"""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
subprocess.run([sys.executable, os.path.join(os.path.dirname(HERE), "hpo_p3_ab_summarize.py"), HERE,
                "cluster up", "cluster started in the wall", "warm", "cold"], check=True)
