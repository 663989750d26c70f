#!/usr/bin/env bash
# On a CUDA machine, with nothing fetched from the network: the bench with float16 on the
# device for batch sizes 1..64, printing throughput, mean batch size and GPU utilization.
#
# Needs, carried with the working tree: .whl/ (scripts/gpu_wheels.sh, run where pip works)
# and the bench corpus .corpus/bench/ (built by `make bench` or the tests, needs espeak-ng).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gpu-check}
mkdir -p "$OUT"
VENV=/tmp/asrserve-gpu
if [ ! -x "$VENV/bin/asrserve" ]; then
    python3 -m venv --system-site-packages "$VENV"
    "$VENV/bin/pip" install -q --no-index --find-links .whl --no-deps .whl/*.whl
    "$VENV/bin/pip" install -q --no-index --no-build-isolation --no-deps -e .
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
"$VENV/bin/python" -c 'import ctranslate2; print("ctranslate2 CUDA devices:", ctranslate2.get_cuda_device_count())'
for batch in 1 2 4 8 16 32 64; do
    nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader,nounits -lms 200 \
        > "$OUT/smi-$batch.csv" &
    smi=$!
    "$VENV/bin/asrserve" bench --device cuda --compute-type float16 --policies greedy \
        --max-batch-size "$batch" --concurrency 64 --requests 256 \
        --audio .corpus/bench --refs .corpus/bench/refs.json --json "$OUT/bench-$batch.json" \
        > "$OUT/bench-$batch.txt" 2>&1 || { cat "$OUT/bench-$batch.txt"; kill $smi; exit 1; }
    kill $smi
    "$VENV/bin/python" - "$batch" "$OUT" <<'PY'
import json, sys
batch, out = sys.argv[1], sys.argv[2]
run = json.load(open(f"{out}/bench-{batch}.json"))["runs"][0]
util = [float(l.split(",")[0]) for l in open(f"{out}/smi-{batch}.csv") if l.strip()]
busy = sum(util) / len(util) if util else float("nan")
print(f"max batch {batch:>3}: {run['audio_s_per_wall_s']:8.1f} audio s/s, "
      f"mean batch {run['mean_batch_size']}, p50 {run['p50_s']} s, GPU util {busy:.0f}%, "
      f"WER {run['wer']}")
PY
done
# Adaptive vs full encoder windows on 2–15 s clips, side by side in one run.
"$VENV/bin/asrserve" bench --device cuda --compute-type float16 --policies greedy \
    --encoder-windows adaptive,full --baseline greedy/full --concurrency 64 --requests 256 \
    --max-clip-seconds 15 --audio .corpus/bench --refs .corpus/bench/refs.json \
    --json "$OUT/bench-windows.json"
