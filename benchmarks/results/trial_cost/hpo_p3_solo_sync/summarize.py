"""This A/B's table (P3 packed with Train's synchronization actor before, without it after): python summarize.py [FOLDER]"""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
subprocess.run([sys.executable, os.path.join(os.path.dirname(HERE), "hpo_p3_ab_summarize.py"),
                sys.argv[1] if len(sys.argv) > 1 else HERE, "sync actor (79964b2)", "no sync actor (c058dd5)"], check=True)
