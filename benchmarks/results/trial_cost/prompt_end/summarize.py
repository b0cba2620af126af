"""This A/B's table: python summarize.py (in this folder)."""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
subprocess.run([sys.executable, os.path.join(os.path.dirname(HERE), "overhead_ab_summarize.py"), HERE], check=True)
