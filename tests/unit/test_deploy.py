"""The deployment artifacts, offline: every Kubernetes manifest against the Kubernetes
schemas (kubernetes-validate) or, for KEDA's ScaledObject, against KEDA's own CRD schema
(tests/data/keda_scaledobjects.yaml, from kedacore/keda config/crd/bases); both
Containerfiles through hadolint; and the numbers the manifests must agree on with the
service. scripts/test-images.sh runs the image and the compose stack for real."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from asrserve.queue.redis import STREAMS
from asrserve.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"
KUBERNETES = "1.33"  # the oldest release still supported upstream when these were written
MANIFESTS = sorted([*K8S.rglob("*.yaml"), *K8S.rglob("*.yaml.example")])


def documents(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]


def by_kind() -> dict[tuple[str, str], dict[str, Any]]:
    return {
        (doc["kind"], doc["metadata"]["name"]): doc for path in MANIFESTS for doc in documents(path)
    }


def scaled_object_schema() -> dict[str, Any]:
    crd = yaml.safe_load((ROOT / "tests" / "data" / "keda_scaledobjects.yaml").read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1alpha1"]
    schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    return schema


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: str(p.relative_to(K8S)))
def test_every_manifest_validates_against_its_schema(path: Path) -> None:
    docs = documents(path)
    assert docs, path
    for doc in docs:
        if doc["apiVersion"].startswith("keda.sh/"):
            jsonschema.validate(doc, scaled_object_schema())
        else:
            kubernetes_validate.validate(doc, KUBERNETES, strict=True)


def test_a_rolling_update_outlasts_the_workers_drain() -> None:
    manifests = by_kind()
    config = manifests[("ConfigMap", "asrserve-config")]["data"]
    grace = float(config["ASRSERVE_SHUTDOWN_GRACE_S"])
    for name in ("asrserve-worker", "asrserve-worker-gpu"):
        pod = manifests[("Deployment", name)]["spec"]["template"]["spec"]
        # the drain, then the hand-back of what is left and the node's own stop (~10 s)
        assert pod["terminationGracePeriodSeconds"] >= grace + 20, name
        (container,) = pod["containers"]
        env = {e["name"]: e["value"] for e in container["env"]}
        probes = [container["livenessProbe"], container["readinessProbe"]]
        assert {p["httpGet"]["path"] for p in probes} == {"/healthz", "/readyz"}, name
        assert {p["httpGet"]["port"] for p in probes} == {"probes"}, name
        assert container["ports"] == [{"name": "probes", "containerPort": 9100}], name
        assert env["ASRSERVE_METRICS_PORT"] == "9100", name


def test_keda_scales_on_the_streams_the_queue_writes() -> None:
    scaled = by_kind()[("ScaledObject", "asrserve-worker")]
    prefix = Settings().redis_prefix
    streams = [t["metadata"]["stream"] for t in scaled["spec"]["triggers"]]
    assert streams == [f"{prefix}:q:{name}" for name in STREAMS.values()]
    # no consumerGroup: KEDA then scales on XLEN, which holds only unfinished work
    assert all("consumerGroup" not in t["metadata"] for t in scaled["spec"]["triggers"])


def test_compose_drains_workers_within_their_stop_grace() -> None:
    compose = yaml.safe_load((ROOT / "deploy" / "compose.yaml").read_text())
    worker = compose["services"]["worker"]
    example = (ROOT / "deploy" / "asrserve.env.example").read_text().splitlines()
    env = dict(line.split("=", 1) for line in example if line and not line.startswith("#"))
    assert float(worker["stop_grace_period"].removesuffix("s")) >= (
        float(env["ASRSERVE_SHUTDOWN_GRACE_S"]) + 20
    )
    assert "--appendonly" in compose["services"]["redis"]["command"]


@pytest.mark.parametrize(
    "containerfile", ["Containerfile", "Containerfile.cuda", "Containerfile.cuda13"]
)
def test_containerfiles_pass_hadolint(containerfile: str) -> None:
    hadolint = Path(sys.executable).parent / "hadolint"
    done = subprocess.run(
        [str(hadolint), "--no-color", str(ROOT / containerfile)], capture_output=True, text=True
    )
    assert (done.returncode, done.stdout) == (0, ""), done.stdout
