"""This A/B's table (P3 packed with Ray's copy before, hard links after): python summarize.py [FOLDER]"""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
subprocess.run([sys.executable, os.path.join(os.path.dirname(HERE), "hpo_p3_ab_summarize.py"),
                sys.argv[1] if len(sys.argv) > 1 else HERE, "copies (eebf1cb)", "links (d3a3928)"], check=True)
