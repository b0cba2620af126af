# Run here (the development machine), in the project root, before a GPU session's calls: builds
# the two folders the calls carry, each under a call's 64 MiB, from ../shared (as the sixteenth
# session carried them): .gpu/c1 = ray's wheel, a 12,000-review sample of IMDB's train split
# and MiniLM's config and tokenizer files (1_install_a.sh); .gpu/c2 = the other wheels
# (3_first_steps.sh, 4_next_probe.sh, 5_eval_offpath.sh install them).
set -e
rm -rf .gpu/c1 .gpu/c2 && mkdir -p .gpu/c1/imdb .gpu/c1/minilm .gpu/c2
grep -qx "/.gpu/" .git/info/exclude || echo /.gpu/ >> .git/info/exclude
cp ../shared/gpu/a/*.whl .gpu/c1/
M=../shared/models/all-MiniLM-L6-v2
cp $M/config.json $M/special_tokens_map.json $M/tokenizer.json $M/tokenizer_config.json $M/vocab.txt .gpu/c1/minilm/
python -c "
import numpy as np, pyarrow.parquet as pq
t = pq.read_table('../shared/data/imdb/train.parquet')
pq.write_table(t.take(np.sort(np.random.default_rng(0).permutation(t.num_rows)[:12000])), '.gpu/c1/imdb/train.parquet')"
cp ../shared/gpu/b/*.whl .gpu/c2/
du -sh .gpu/c1 .gpu/c2
