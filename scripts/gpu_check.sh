#!/usr/bin/env bash
# The GPU check (issues 40, 56): the transformers engine (and CTranslate2, where it can run)
# on tiny.en and base on a machine with CUDA 13 alone and no network, reached by calls of
# the device tool that each carry at most 64 MiB (the repository's tree and the carry paths):
#
#   bash scripts/gpu_check.sh pack           # here: .gpu/stage-1..N, and each call to make
#   bash scripts/gpu_check.sh stage 1        # there, carry [".gpu/stage-1"]; then 2, 3, ...
#   bash scripts/gpu_check.sh stage N && bash scripts/gpu_check.sh run    # the last call
#   bash scripts/gpu_check.sh dry-run DIR    # here, on the CPU: the same path with tiny sizes
#
# pack: the wheels the machine lacks, each model as int8 CTranslate2 weights (dequantized on
# arrival by the transformers engine's converter), the real recordings; cut into stages
# (scripts/gpu_pack.py; pack --help). stage: one stage into $ASRSERVE_GPU_HOME (default
# ~/asrserve-gpu), which lasts while the machine stays warm; a stage that finds an earlier
# one missing stops, naming the stage to start again from; the last one unpacks the
# wheels. run: every step (the engine alone per batch size in float16 and bfloat16, the
# service under 64 clients, WER per language; docs/benchmarks.md#gpu) within 8 minutes,
# one JSON: $OUT/gpu-check.json (OUT unset: ./gpu-check-out), with the driver, CUDA
# runtime, torch and CTranslate2 versions and the card's compute capability. dry-run: pack
# (tiny.en, 3 prompts, no wheels, 48 MiB calls), every stage and run on the CPU, into DIR
# (tests/test_gpu_check.py runs it).
#
# Every step is judged (src/asrserve/bench/gpu/judge.py), and run exits 1 after writing
# the JSON, naming each failed judgement, where one fails or a step fails, times out or is
# not reached before the deadline:
#   machine: every module the check imports imports; on CUDA, PyTorch sees the GPU and
#     the driver and compute capability are known (NVML);
#   engine alone: the float32 reference (every English window decoded alone in float32)
#     and each precision's row at each batch size (every window, b at a time) at WER
#     <= 0.1, each row within 0.02 of the reference's WER on the same windows; the known
#     clip (jfk.flac, else the first English recording) not empty and at WER <= 0.1;
#     10 s of zeros: nothing said, or Whisper's no-speech probability > 0.6;
#   service: no request failed; English WER under load and alone <= 0.1; each English
#     recording sent alone answered as the engine answers it in-process (same words);
#     10 s of zeros answered with empty text.
# run --only NAME,... runs those steps alone; run --break-decode (for the test) reverses the
# engine curves' words, which must fail the check.
#
# Not yet run on a GPU: written and dry-run on a machine without one.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"                    # there: the machine's Python
HERE_PYTHON="${HERE_PYTHON:-.venv/bin/python}"  # here: pack and dry-run (make .venv/.stamp-test)
GPU_HOME="${ASRSERVE_GPU_HOME:-${HOME:-/tmp}/asrserve-gpu}"
PACK_DIR="${GPU_PACK:-.gpu}"

# The unpacked wheels and this tree's src/ before the machine's own packages; no network.
gpu() {
    PYTHONPATH="$GPU_HOME/site:src${PYTHONPATH:+:$PYTHONPATH}" HF_HUB_OFFLINE=1 \
        "$PYTHON" -m asrserve.bench.gpu "$@"
}

dry_run() {
    local dir
    dir="$(realpath -m "$1")"
    shift
    PYTHON="$HERE_PYTHON"
    "$PYTHON" scripts/gpu_pack.py --out "$dir/pack" --models tiny.en --prompts 3 --no-long \
        --no-wheels --limit-mib 48
    GPU_HOME="$dir/home"
    local n=1
    while [[ -d "$dir/pack/stage-$n" ]]; do
        gpu stage "$dir/pack/stage-$n" --home "$GPU_HOME"
        n=$((n + 1))
    done
    gpu run --home "$GPU_HOME" --out "$dir/out" --device cpu --dtypes float32 \
        --batch-sizes 1,2 --clients 2 --rounds 1 --beam-size 1 --deadline-s 300 "$@"
}

case "${1:-}" in
    pack)
        shift
        exclude="$(git rev-parse --git-path info/exclude)"
        mkdir -p "$(dirname "$exclude")"
        grep -qx '/.gpu/' "$exclude" 2>/dev/null || echo '/.gpu/' >>"$exclude"
        exec "$HERE_PYTHON" scripts/gpu_pack.py "$@"
        ;;
    stage) gpu stage "$PACK_DIR/stage-${2:?stage N}" --home "$GPU_HOME" ;;
    run)
        shift
        gpu run --home "$GPU_HOME" --out "${OUT:-./gpu-check-out}" "$@"
        ;;
    dry-run) dry_run "${2:?dry-run DIR}" "${@:3}" ;;
    *)
        sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'
        exit 2
        ;;
esac
