"""The app in this process, for tests whose claim is about HTTP semantics, validation, keys or
error shapes rather than the model or the process: ``create_app`` with a :class:`FakeEngine`
replica of each served model, driven by starlette's ``TestClient`` (an ``httpx.Client`` over
the ASGI app, its lifespan and WebSockets included; the ``openai`` client takes it as its
``http_client``). The stores are real (SQLite files in the data dir), as are the upload path,
the probe processes, VAD and the scheduler: only the forward pass is fake.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from starlette.testclient import TestClient

from asrserve.api.app import create_app
from asrserve.engine.base import Engine
from asrserve.engine.registry import served_models
from asrserve.inference.runtime import EngineFactory
from asrserve.settings import Settings
from tests.support.fakes import FakeEngine

URL = "http://127.0.0.1"  # a loopback name: the host check admits it
WS = "ws://127.0.0.1"  # TestClient.websocket_connect takes a whole URL to send this host


@dataclass
class InProcess:
    """The client, and the fake engines its app runs (``gate`` holds their forward passes)."""

    client: TestClient
    engines: list[FakeEngine] = field(default_factory=list)


def settings_for(data_dir: Path, env: Mapping[str, str]) -> Settings:
    """The settings a server started with ``env`` (``ASRSERVE_`` names) would read."""
    given: dict[str, Any] = {"data_dir": data_dir, "calibration": "off"}
    given |= {name.removeprefix("ASRSERVE_").lower(): value for name, value in env.items()}
    return Settings(**given)


@contextlib.contextmanager
def served(data_dir: Path, env: Mapping[str, str], engines: EngineFactory) -> Iterator[TestClient]:
    """The app over ``data_dir`` (settings as a server started with ``env`` reads them), its
    replicas from ``engines`` (fakes that do more than :class:`FakeEngine`, several devices,
    or the real loader, for what only the real models show), started until the block ends."""
    app = create_app(settings_for(data_dir, env), engine_factory=engines)
    with TestClient(app, base_url=URL, raise_server_exceptions=False) as client:
        yield client


@contextlib.contextmanager
def in_process(data_dir: Path, env: Mapping[str, str] | None = None) -> Iterator[InProcess]:
    """The app over ``data_dir`` with a :class:`FakeEngine` of each served model, started (its
    lifespan run) until the block ends."""
    engines: list[FakeEngine] = []

    def fakes(settings: Settings) -> list[dict[str, Engine]]:
        engines.extend(FakeEngine(model_id=model.id) for model in served_models(settings))
        return [{engine.model_id: engine for engine in engines}]

    with served(data_dir, env or {}, fakes) as client:
        yield InProcess(client, engines)
