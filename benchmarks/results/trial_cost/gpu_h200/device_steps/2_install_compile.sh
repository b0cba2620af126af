set -e
cp .gpu/c2/part.* /tmp/parts/
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .gpu/c2/*.whl
export PYTHONPATH=/tmp/site:$PWD/platform:$PWD/benchmarks PYTHONUNBUFFERED=1
python3 -c "import sys; print('dont_write_bytecode', sys.flags.dont_write_bytecode)"; env | grep -i PYTHONDONTWRITE || echo "PYTHONDONTWRITEBYTECODE unset"
t0=$(date +%s.%N); python3 -m compileall -q -j 0 /tmp/site > /tmp/compileall.log 2>&1 || echo "compileall rc $? (some files failed; tail below)"; tail -3 /tmp/compileall.log
echo "compileall of /tmp/site: $(python3 -c "print(round($(date +%s.%N)-$t0,1))") s"
python3 -m compileall -q -j 0 platform benchmarks jobs > /dev/null
t0=$(date +%s.%N); python3 -c "import ray, ftplat, transformers, torch; print(ray.__version__, transformers.__version__, torch.__version__, torch.cuda.is_available())"
echo "import time with bytecode: $(python3 -c "print(round($(date +%s.%N)-$t0,1))") s"
python3 -c "import accelerate, peft; print('accelerate', accelerate.__version__, 'peft', peft.__version__)"; python3 --version; uptime
