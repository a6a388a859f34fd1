#!/usr/bin/env bash
# The benchmarks a session runs when it is lent a GPU machine, as one script:
# the batch engine's throughput (experiments/bench_batch.py, side by side with a cvxpy +
# Clarabel loop on the same machine's CPU) and the cold start (experiments/bench_coldstart.py).
# Packages the machine lacks may travel as wheels in .whl/ (installed into /tmp/site).
# Results go to $OUT (default /tmp/gpu_bench); docs/performance.md records them.
set -uo pipefail
OUT=${OUT:-/tmp/gpu_bench}
mkdir -p "$OUT"
if compgen -G ".whl/*.whl" >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl || exit 1
    export PYTHONPATH=/tmp/site
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
{
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
    python3 -c "import jax, jaxlib; print('jax', jax.__version__, jax.devices())"
    nproc
} 2>&1 | tee "$OUT/env.txt"
timeout "${BATCH_TIMEOUT:-330}" python3 experiments/bench_batch.py \
    --families gpt3_4d,mixed --sizes 10000,100000,1000000 --dtypes float64,float32 \
    --cvxpy 40 --other-size 250000 --out "$OUT/bench_batch_gpu.md" 2>&1 | tee "$OUT/bench_batch.log"
timeout "${COLD_TIMEOUT:-200}" python3 experiments/bench_coldstart.py --cli-repeats 5 \
    --out "$OUT/bench_coldstart_gpu.md" 2>&1 | tee "$OUT/bench_coldstart.log"
