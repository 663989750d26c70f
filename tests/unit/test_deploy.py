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


# The fields of KEDA's TriggerAuthentication (keda.sh/v1alpha1) these manifests use, as
# KEDA's documentation gives them: a secret's key handed to a scaler as a parameter.
TRIGGER_AUTHENTICATION: dict[str, Any] = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "keda.sh/v1alpha1"},
        "spec": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "secretTargetRef": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["parameter", "name", "key"],
                        "properties": {k: {"type": "string"} for k in ("parameter", "name", "key")},
                    },
                }
            },
        },
    },
}


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: str(p.relative_to(K8S)))
def test_every_manifest_validates_against_its_schema(path: Path) -> None:
    docs = documents(path)
    assert docs, path
    for doc in docs:
        if doc["kind"] == "TriggerAuthentication":
            jsonschema.validate(doc, TRIGGER_AUTHENTICATION)
        elif doc["apiVersion"].startswith("keda.sh/"):
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


def selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """Whether a label selector (matchLabels, matchExpressions with In) selects ``labels``."""
    if any(labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
        return False
    for rule in selector.get("matchExpressions", []):
        assert rule["operator"] == "In", rule
        if labels.get(rule["key"]) not in rule["values"]:
            return False
    return True


def pod_labels() -> dict[str, dict[str, str]]:
    """Each workload's pods' labels, by the workload's name."""
    workloads = [d for k, d in by_kind().items() if k[0] in ("Deployment", "StatefulSet")]
    return {d["metadata"]["name"]: d["spec"]["template"]["metadata"]["labels"] for d in workloads}


def test_redis_requires_the_password_every_asrserve_pod_and_keda_are_given() -> None:
    manifests = by_kind()
    redis = manifests[("StatefulSet", "asrserve-redis")]["spec"]["template"]["spec"]
    (container,) = redis["containers"]
    args, env = container["args"], {e["name"]: e for e in container["env"]}
    assert args[args.index("--requirepass") + 1] == "$(REDIS_PASSWORD)"
    secret = {"name": "asrserve-redis", "key": "password"}
    assert env["REDIS_PASSWORD"]["valueFrom"]["secretKeyRef"] == secret
    config = manifests[("ConfigMap", "asrserve-config")]["data"]
    folder, _, key = config["ASRSERVE_BROKER_PASSWORD_FILE"].rpartition("/")
    assert key == secret["key"]
    for name in ("asrserve-api", "asrserve-worker", "asrserve-worker-gpu"):
        pod = manifests[("Deployment", name)]["spec"]["template"]["spec"]
        volumes = {v["name"]: v for v in pod["volumes"]}
        mounts = [m for c in pod["containers"] for m in c["volumeMounts"]]
        (mount,) = [m for m in mounts if m["mountPath"] == folder]
        assert volumes[mount["name"]]["secret"]["secretName"] == secret["name"], name
    auth = manifests[("TriggerAuthentication", "asrserve-redis")]["spec"]["secretTargetRef"]
    assert auth == [{"parameter": "password", **secret}]
    triggers = manifests[("ScaledObject", "asrserve-worker")]["spec"]["triggers"]
    assert {t["authenticationRef"]["name"] for t in triggers} == {"asrserve-redis"}


def test_network_policies_admit_only_asrserve_to_redis_and_prometheus_to_the_workers() -> None:
    manifests, pods = by_kind(), pod_labels()

    def chosen(selector: dict[str, Any]) -> set[str]:
        return {name for name, labels in pods.items() if selects(selector, labels)}

    redis = manifests[("NetworkPolicy", "asrserve-redis")]["spec"]
    assert chosen(redis["podSelector"]) == {"asrserve-redis"}
    (rule,) = redis["ingress"]
    assert rule["ports"] == [{"protocol": "TCP", "port": 6379}]
    in_cluster = [p for p in rule["from"] if "namespaceSelector" not in p]
    admitted = set().union(*(chosen(p["podSelector"]) for p in in_cluster))
    assert admitted == {"asrserve-api", "asrserve-worker", "asrserve-worker-gpu"}
    workers = manifests[("NetworkPolicy", "asrserve-worker")]["spec"]
    assert chosen(workers["podSelector"]) == {"asrserve-worker", "asrserve-worker-gpu"}
    (rule,) = workers["ingress"]
    assert rule["ports"] == [{"protocol": "TCP", "port": 9100}]
    assert [p["podSelector"] for p in rule["from"]] == [
        {"matchLabels": {"app.kubernetes.io/name": "prometheus"}}
    ]


def test_the_api_serves_wyoming_on_its_service_to_home_assistant_alone() -> None:
    manifests, pods = by_kind(), pod_labels()
    pod = manifests[("Deployment", "asrserve-api")]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    env = {e["name"]: e["value"] for e in container["env"]}
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert (env["ASRSERVE_WYOMING_PORT"], env["ASRSERVE_WYOMING_HOST"]) == ("10300", "0.0.0.0")
    assert ports == {"http": 8000, "wyoming": 10300}
    service = manifests[("Service", "asrserve-api")]["spec"]["ports"]
    assert {p["targetPort"]: p["port"] for p in service} == {"http": 8000, "wyoming": 10300}
    policy = manifests[("NetworkPolicy", "asrserve-api")]["spec"]
    assert {name for name, labels in pods.items() if selects(policy["podSelector"], labels)} == {
        "asrserve-api"
    }
    http, wyoming = policy["ingress"]
    assert (http["ports"], "from" in http) == ([{"protocol": "TCP", "port": 8000}], False)
    assert wyoming["ports"] == [{"protocol": "TCP", "port": 10300}]
    assert [p["podSelector"] for p in wyoming["from"]] == [
        {"matchLabels": {"app.kubernetes.io/name": "home-assistant"}}
    ]


def test_compose_publishes_wyoming_on_loopback_by_default() -> None:
    api = yaml.safe_load((ROOT / "deploy" / "compose.yaml").read_text())["services"]["api"]
    env = api["environment"]
    assert (env["ASRSERVE_WYOMING_PORT"], env["ASRSERVE_WYOMING_HOST"]) == ("10300", "0.0.0.0")
    assert "${ASRSERVE_WYOMING_PUBLISH:-127.0.0.1:10300}:10300" in api["ports"]
    Settings.model_validate({k.removeprefix("ASRSERVE_").lower(): v for k, v in env.items()})


def test_compose_redis_requires_the_password_the_nodes_read() -> None:
    compose = yaml.safe_load((ROOT / "deploy" / "compose.yaml").read_text())
    redis = compose["services"]["redis"]
    assert '--requirepass "$$(cat /run/secrets/redis_password)"' in redis["command"][-1]
    assert redis["secrets"] == ["redis_password"]
    for name in ("api", "worker"):
        service = compose["services"][name]
        path = service["environment"]["ASRSERVE_BROKER_PASSWORD_FILE"]
        assert path == "/run/secrets/redis_password" and "redis_password" in service["secrets"]


def test_compose_drains_workers_within_their_stop_grace() -> None:
    compose = yaml.safe_load((ROOT / "deploy" / "compose.yaml").read_text())
    worker = compose["services"]["worker"]
    example = (ROOT / "deploy" / "asrserve.env.example").read_text().splitlines()
    env = dict(line.split("=", 1) for line in example if line and not line.startswith("#"))
    assert float(worker["stop_grace_period"].removesuffix("s")) >= (
        float(env["ASRSERVE_SHUTDOWN_GRACE_S"]) + 20
    )
    assert "--appendonly yes" in compose["services"]["redis"]["command"][-1]


@pytest.mark.parametrize(
    "containerfile", ["Containerfile", "Containerfile.cuda", "Containerfile.cuda13"]
)
def test_containerfiles_pass_hadolint(containerfile: str) -> None:
    hadolint = Path(sys.executable).parent / "hadolint"
    done = subprocess.run(
        [str(hadolint), "--no-color", str(ROOT / containerfile)], capture_output=True, text=True
    )
    assert (done.returncode, done.stdout) == (0, ""), done.stdout
