set -e
mkdir -p /tmp/imdb /tmp/minilm
cp .gpu/c1/imdb/* /tmp/imdb/; cp .gpu/c1/minilm/* /tmp/minilm/
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .gpu/c1/*.whl
date -u; uptime; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; echo ok
