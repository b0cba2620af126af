"""The P2 A/B table from ab.sh's JSONs: python summarize.py (in this folder)."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from p2_ab_summarize import main  # noqa: E402

main(HERE, "before (574b07f)", "after (controller in the driver)")
