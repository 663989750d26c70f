#!/usr/bin/env bash
# The deployment artifacts, tried for real (issue 27): builds the CPU image on a base made
# from Debian packages (no registry is needed), then scripts/image_checks.py runs it alone,
# as the compose stack with two workers (a kill -9, a drain, a Redis restart), and checks
# probes under load. Run by .ci/run after `make test`; needs root (podman) and the venv.
# The base images are cached in podman's store between runs.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
for tool in podman runc mmdebstrap; do
    command -v "$tool" >/dev/null || missing+=("$tool")
done
if ((${#missing[@]})); then
    echo "test-images: installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman runc mmdebstrap >/dev/null
fi

work=$(mktemp -d /tmp/asrserve-images.XXXXXX)
trap 'rm -rf "$work"' EXIT
# runc, and no default rlimits: crun and rlimits both fail on these machines.
printf '[containers]\ndefault_ulimits = []\n\n[engine]\nruntime = "runc"\n' >"$work/containers.conf"
export CONTAINERS_CONF="$work/containers.conf"

base_image() {  # NAME PACKAGES: a Debian bookworm image of those packages, built once
    if ! podman image exists "$1"; then
        echo "test-images: building $1 from Debian packages ($2)"
        mmdebstrap --quiet --variant=minbase --include="$2" bookworm "$work/base.tar"
        podman import --quiet "$work/base.tar" "$1" >/dev/null
        rm -f "$work/base.tar"
    fi
}
base_image localhost/asrserve-base:bookworm python3,python3-venv,ca-certificates
base_image localhost/asrserve-redis:bookworm redis-server

build_args=(--build-arg BASE_IMAGE=localhost/asrserve-base:bookworm)
if [[ -n "${PIP_CERT:-}" || -f /etc/ssl/certs/ca-certificates.crt ]]; then
    cert=${PIP_CERT:-/etc/ssl/certs/ca-certificates.crt}
    build_args+=(-v "$cert:/ca.crt:ro" --build-arg PIP_CERT=/ca.crt)
fi
# --format docker keeps HEALTHCHECK (the OCI format has no such field).
start=$(date +%s)
podman build --quiet --format docker --network host "${build_args[@]}" \
    -t localhost/asrserve:test -f Containerfile . >/dev/null
echo "test-images: built localhost/asrserve:test in $(($(date +%s) - start)) s"

.venv/bin/python scripts/image_checks.py --image localhost/asrserve:test \
    --redis-image localhost/asrserve-redis:bookworm "$@"
