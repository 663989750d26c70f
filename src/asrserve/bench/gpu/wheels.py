"""The wheels the GPU machine lacks: fetched here, unpacked there without pip.

The machine has PyTorch, transformers, tokenizers, safetensors, huggingface_hub, numpy,
httpx, prometheus-client, onnxruntime, PyYAML, tqdm, typer and pytest (with what they
need), and no network. :data:`SHIPPED` is the rest of what the service and the bench
import, each at the version the project pins (``constraints.txt``, ``pyproject.toml``). A
wheel is a zip file laid out as site-packages wants it: unpacked into one folder on
``PYTHONPATH`` it imports, no installer needed.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

SHIPPED = (
    "av",
    "ctranslate2",
    "faster-whisper",
    "pydantic",
    "pydantic-core",
    "pydantic-settings",
    "annotated-types",
    "typing-inspection",
    "python-dotenv",
    "fastapi",
    "annotated-doc",
    "opentelemetry-api",
    "starlette",
    "uvicorn",
    "python-multipart",
    "redis",
    "websockets",
    "jiwer",
    "rapidfuzz",
    "nvidia-ml-py",
)
PYTHON_VERSION = "3.12"
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")
SITE = "site"  # home/site: the unpacked wheels


def pins(root: Path) -> dict[str, str]:
    """Every ``name==version`` of ``constraints.txt`` and of the project's dependencies."""
    lines = (root / "constraints.txt").read_text(encoding="utf-8").splitlines()
    project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    lines += [*project["dependencies"], *project["optional-dependencies"]["bench"]]
    found = {}
    for line in lines:
        name, sep, version = line.partition("==")
        if sep:
            found[_key(name)] = version.strip()
    return found


def pinned(root: Path, names: tuple[str, ...] = SHIPPED) -> list[str]:
    """``name==version`` for each name, as the project pins it."""
    versions = pins(root)
    missing = [name for name in names if _key(name) not in versions]
    if missing:
        raise SystemExit(f"gpu check: {', '.join(missing)} pinned nowhere in {root}")
    return [f"{name}=={versions[_key(name)]}" for name in names]


def _key(name: str) -> str:
    return name.strip().lower().replace("_", "-").replace(".", "-")


def download(requirements: list[str], folder: Path) -> list[Path]:
    """CPython 3.12 x86-64 wheels of exactly these requirements (no dependencies) into
    ``folder`` (pip skips those already there)."""
    platforms = [arg for platform in PLATFORMS for arg in ("--platform", platform)]
    target = ["--python-version", PYTHON_VERSION, "--implementation", "cp", *platforms]
    pip = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:"]
    subprocess.run([*pip, *target, "-d", str(folder), *requirements], check=True)
    wanted = {_key(requirement.replace("==", "-")) for requirement in requirements}
    return sorted(wheel for wheel in folder.glob("*.whl") if _release(wheel) in wanted)


def _release(wheel: Path) -> str:
    """A wheel's ``name-version``, as :func:`_key` writes it."""
    name, version = wheel.name.split("-")[:2]
    return _key(f"{name}-{version}")


def unpack(wheel: Path, site: Path) -> None:
    """The wheel's files into ``site`` with their permissions; its ``.data/purelib`` and
    ``platlib`` beside the rest (scripts and headers are not needed)."""
    with zipfile.ZipFile(wheel) as archive:
        for info in archive.infolist():
            name = info.filename
            top, _, rest = name.partition("/")
            if top.endswith(".data"):
                kind, _, inner = rest.partition("/")
                if kind not in ("purelib", "platlib") or not inner:
                    continue
                name = inner
            if info.is_dir():
                continue
            target = site / name
            target.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(info) as source, target.open("wb") as out:
                shutil.copyfileobj(source, out)
            mode = info.external_attr >> 16 & 0o777
            if mode:
                target.chmod(mode)


def install(payload: Path, home: Path) -> list[str]:
    """Every wheel of the payload unpacked into ``home/site`` (afresh); their names."""
    site = home / SITE
    shutil.rmtree(site, ignore_errors=True)
    site.mkdir(parents=True)
    wheels = sorted((payload / "wheels").glob("*.whl"))
    for wheel in wheels:
        unpack(wheel, site)
    (site / "shipped.json").write_text(json.dumps([w.name for w in wheels]), encoding="utf-8")
    return [wheel.name for wheel in wheels]
