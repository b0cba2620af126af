"""IMDB sentiment sweep: fine-tune a BERT-family model, searching lr, warmup and weight decay.

    python jobs/imdb_sweep.py                                    # embedded IMDB recipe
    python jobs/imdb_sweep.py --config jobs/configs/imdb_cpu.yaml    # small-machine profile
    ray job submit --working-dir . --runtime-env cluster/local/runtime_env.yaml \
        -- python jobs/imdb_sweep.py ...                             # on a cluster (cluster/README.md)

Connects to the cluster in RAY_ADDRESS when set, else starts a local Ray. ``--help`` lists
the options; key=value arguments override any config field.
"""

import sys

from ftplat.cli.sweep import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], prog="jobs/imdb_sweep.py"))
