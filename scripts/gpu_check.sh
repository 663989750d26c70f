#!/usr/bin/env bash
# The served comparison on a CUDA machine (one GPU, 16 CPU cores), in about 13 minutes:
#   1. `asrserve bench --device cuda` (float16), policies none and greedy, 64/16/1
#      closed-loop clients, full and adaptive encoder windows, at max batch sizes 1, 16 and
#      64 (one bench run, so one JSON, per batch size), GPU utilization sampled;
#   2. `asrserve bench --ceiling`: the engine alone on the CPU cores, every layout;
#   3. the served CPU path with the auto layout (`--device cpu`, no layout flags);
#   4. live sessions on CUDA (`--live`): N real-time WebSocket sessions, greedy against
#      none, the largest N whose completed turns' p95 stays within 1.5 s;
# then a summary of every JSON written. Output: $OUT if set, else ./gpu-check-out.
#
# UNTESTED: written on a machine without a GPU. It passes `bash -n` and shellcheck; the
# bench flags are those of `asrserve bench` when it was written (src/asrserve/bench/cli.py).
#
# The venv (.venv) is made if missing: with nothing fetched from the network when .whl/ is
# there (scripts/gpu_wheels.sh, run where pip works, with the same EXTRAS if any; carry
# .whl/ with the tree), else as `make run` makes it (`pip install -e .`, which needs the
# package index). CUDA needs cuBLAS for CUDA 12 (libcublas.so.12) where CTranslate2 can
# load it (docs/deployment.md#gpu-nodes): without it the check stops at once, saying so in
# one line, since no CUDA step could run. Carry .corpus/bench/ too (built by `make bench`
# or the tests): building it needs espeak-ng.
#
# Policy `none` ignores the batch size (whole files, one at a time), so it runs only with
# the first batch size; later runs are greedy alone and the summary sets them against it.
# Each step has its own timeout (SIGINT first, so bench stops the servers it started); a
# step that fails or times out is reported and the next one runs.
set -euo pipefail
cd "$(dirname "$0")/.."

OUT_DIR="${OUT:-./gpu-check-out}"
BATCH_SIZES="${BATCH_SIZES:-1 16 64}"
FIRST_STEP_S="${FIRST_STEP_S:-130}"  # none + greedy, 2 windows each: 4 servers
STEP_S="${STEP_S:-70}"               # greedy, 2 windows: 2 servers
CEILING_S="${CEILING_S:-180}"
CEILING_SIZES="${CEILING_SIZES:-8,32}"
CPU_S="${CPU_S:-120}"
LIVE_S="${LIVE_S:-240}"  # 2 servers, 4 session counts of 20 s each
LIVE_COUNTS="${LIVE_COUNTS:-8,16,32,64}"
COMPUTE_TYPE="${COMPUTE_TYPE:-float16}"
ASRSERVE=.venv/bin/asrserve
PYTHON=.venv/bin/python

EXTRAS="${EXTRAS:-bench}"  # the extras scripts/gpu_wheels.sh was given (bench, e.g. bench,base)

# CTranslate2's PyPI wheels are built with CUDA 12 and load cuBLAS 12 when they first run
# on CUDA: the same dlopen as CTranslate2's, before anything is installed.
python3 -c 'import ctypes; ctypes.CDLL("libcublas.so.12")' 2>/dev/null || {
    echo "gpu_check: CTranslate2 cannot load libcublas.so.12 (CUDA 12):" \
        "install cuBLAS for CUDA 12 where the loader finds it (LD_LIBRARY_PATH, ldconfig);" \
        "a CUDA 13 install has libcublas.so.13 only (docs/deployment.md#gpu-nodes). Stopping."
    exit 3
}

mkdir -p "$OUT_DIR"
if [[ ! -x "$ASRSERVE" ]]; then
    if [[ -d .whl ]]; then
        echo "== making the venv from .whl/ (no network)"
        python3 -m venv --system-site-packages .venv
        # Resolved from .whl/ alone, so a missing dependency fails here, by name.
        .venv/bin/pip install -q --no-index --find-links .whl -c constraints.txt \
            -e ".${EXTRAS:+[$EXTRAS]}"
    else
        echo "== making the venv (make .venv/.stamp-run)"
        make .venv/.stamp-run
    fi
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader \
    | tee "$OUT_DIR/gpu.txt"
"$PYTHON" - <<'PY' || exit 3
import sys

import ctranslate2

count = ctranslate2.get_cuda_device_count()
print(f"ctranslate2 {ctranslate2.__version__}: {count} CUDA devices")
if count == 0:
    sys.exit("gpu_check: CTranslate2 sees no CUDA device (no GPU, or a driver older than its"
             " CUDA 12 runtime). Stopping.")
PY
declare -a AUDIO=()
if [[ -f .corpus/bench/refs.json ]]; then
    AUDIO=(--audio .corpus/bench --refs .corpus/bench/refs.json)
fi
echo "cpu cores: $(nproc)" | tee "$OUT_DIR/cpus.txt"

declare -a FAILED=()

# step NAME SECONDS ARGS...: one bench run, its output in $OUT_DIR/NAME.{json,log}.
step() {
    local name="$1" seconds="$2"
    shift 2
    echo "== $name (at most ${seconds} s): asrserve bench $*"
    local status=0
    timeout -s INT -k 20 "$seconds" "$ASRSERVE" bench --json "$OUT_DIR/$name.json" "$@" \
        >"$OUT_DIR/$name.log" 2>&1 || status=$?
    tail -n 25 "$OUT_DIR/$name.log"
    if [[ "$status" -ne 0 ]]; then
        echo "!! $name: exit $status$([[ "$status" -eq 124 ]] && echo ' (timed out)')"
        FAILED+=("$name:$status")
    fi
}

policies="none,greedy"
seconds="$FIRST_STEP_S"
for size in $BATCH_SIZES; do
    nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader,nounits -lms 200 \
        >"$OUT_DIR/cuda-b$size.smi.csv" &
    smi=$!
    step "cuda-b$size" "$seconds" "${AUDIO[@]}" --device cuda --compute-type "$COMPUTE_TYPE" \
        --policies "$policies" --concurrency 64,16,1 --max-batch-size "$size" \
        --encoder-windows full,adaptive
    kill "$smi" 2>/dev/null || true
    wait "$smi" 2>/dev/null || true
    policies="greedy"
    seconds="$STEP_S"
done

step ceiling "$CEILING_S" "${AUDIO[@]}" --ceiling --device cpu \
    --ceiling-batch-sizes "$CEILING_SIZES"
step cpu-auto "$CPU_S" "${AUDIO[@]}" --device cpu --policies greedy --concurrency 16,1
step cuda-live "$LIVE_S" "${AUDIO[@]}" --device cuda --compute-type "$COMPUTE_TYPE" --policies greedy,none \
    --live "$LIVE_COUNTS" --live-seconds 20

echo
echo "== summary ($OUT_DIR)"
"$PYTHON" - "$OUT_DIR" <<'PY'
"""Every bench JSON of this check: served rows (audio s / wall s, p50, mean batch, bound)
against policy none at the same load and window, mean GPU utilization per CUDA run, and
the ceiling's best layout."""
import json
import sys
from pathlib import Path

out = Path(sys.argv[1])
reports = {p.stem: json.loads(p.read_text()) for p in sorted(out.glob("*.json"))}
base = {}
for body in reports.values():
    for run in body.get("runs", []):
        if run["policy"].split("/")[0] == "none":
            window = run["policy"].partition("/")[2]
            base[(window, run["pattern"])] = run["audio_s_per_wall_s"]
print(f"{'run':<10} {'policy':<18} {'load':<16} {'audio s/s':>9} {'x none':>7} "
      f"{'p50 s':>6} {'batch':>6} bound")
for name, body in reports.items():
    for run in body.get("runs", []):
        window = run["policy"].partition("/")[2]
        ref = base.get((window, run["pattern"]))
        ratio = f"{run['audio_s_per_wall_s'] / ref:.2f}" if ref else "-"
        print(f"{name:<10} {run['policy']:<18} {run['pattern']:<16} "
              f"{run['audio_s_per_wall_s']:>9.2f} {ratio:>7} {run['p50_s']:>6.2f} "
              f"{str(run['mean_batch_size']):>6} {run.get('bound')}")
    smi = out / f"{name}.smi.csv"
    util = [float(line.split(",")[0]) for line in smi.read_text().splitlines()
            if line.strip()] if smi.exists() else []
    if util:
        print(f"{name}: GPU utilization {sum(util) / len(util):.0f}% mean over the run")
    ceiling = body.get("ceiling")
    if ceiling:
        best = ceiling["best"]
        print(f"{name}: ceiling {ceiling['audio_s_per_wall_s']:.2f} audio s/s "
              f"({best['replicas']} x {best['threads']} threads, {best['windows']} windows, "
              f"batch {best['batch_size']})")
    for policy, live in (body.get("live") or {}).get("policies", {}).items():
        rows = ", ".join(f"N={row['sessions']}: p95 {row['turn_p95_s']} s, batch "
                         f"{row['mean_batch']}" for row in live["rows"])
        print(f"{name}: {policy}: largest N within 1.5 s: {live['largest_n']} ({rows})")
PY

if ((${#FAILED[@]})); then
    echo "steps that failed: ${FAILED[*]}"
    exit 1
fi
echo "all steps finished"
