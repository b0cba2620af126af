"""The P3 table from this run's JSONs: python summarize.py (in this folder)."""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
subprocess.run([sys.executable, os.path.join(os.path.dirname(HERE), "p3_summarize.py"), HERE], check=True)
