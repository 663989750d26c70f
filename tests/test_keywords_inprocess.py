"""OpenAI's ``keywords[]`` reach the decoding options however a request arrives: the official
``openai`` client's transcription (as repeated ``keywords[]`` fields), a translation, an async
job's form, and a Batch API line's body (a JSON list), each seen by the fake engine; a bad
list is a 400 naming ``keywords[]``. The app in this process (``tests/support/inprocess.py``).
"""

from __future__ import annotations

import json
from pathlib import Path

import openai

from tests.support.api import submit_job, wait_job
from tests.support.batches import create_batch, line, upload_audio
from tests.support.fakes import FakeEngine
from tests.support.inprocess import URL, served
from tests.support.servers import JFK
from tests.support.wait import wait_until

TERMS = ("Kubernetes", "kubectl")


def last(engine: FakeEngine) -> tuple[str, ...]:
    """The keywords of the engine's last batch."""
    return engine.options[-1].keywords


def test_keywords_reach_the_engine_from_forms_jobs_and_batch_lines(tmp_path: Path) -> None:
    tiny, base = FakeEngine(model_id="tiny.en"), FakeEngine(model_id="base")
    base.multilingual = True  # translates
    env = {"ASRSERVE_MODELS": "tiny.en,base"}
    with served(tmp_path / "data", env, lambda _: [{"tiny.en": tiny, "base": base}]) as http:
        oai = openai.OpenAI(base_url=f"{URL}/v1", api_key="unused", max_retries=0, http_client=http)
        with JFK.open("rb") as audio:
            oai.audio.transcriptions.create(model="tiny.en", file=audio, keywords=list(TERMS))
        assert last(tiny) == TERMS
        translated = http.post(
            "/v1/audio/translations",
            files={"file": ("jfk.flac", JFK.read_bytes())},
            data={"model": "base", "keywords[]": "Zyqlo"},
        )
        assert translated.status_code == 200, translated.text
        assert last(base) == ("Zyqlo",)

        job = submit_job(http, JFK, model="tiny.en", **{"keywords[]": " Grafana "})
        assert wait_job(http, job["id"])["status"] == "succeeded"
        assert last(tiny) == ("Grafana",)  # stripped

        (file_id,) = upload_audio(oai, [JFK])
        body = line("c", file_id, model="tiny.en", keywords=["Pydantic", "Szczecin"])
        batch_id = create_batch(oai, [body], tmp_path)

        def completed() -> bool:
            return oai.batches.retrieve(batch_id).status == "completed"

        wait_until(completed, 60, f"batch {batch_id} to complete", every=0.05)
        assert last(tiny) == ("Pydantic", "Szczecin")

        refused = http.post(
            "/v1/audio/transcriptions",
            files={"file": ("jfk.flac", JFK.read_bytes())},
            data={"keywords[]": ["ok", "<|endoftext|>"]},
        )
        assert refused.status_code == 400
        assert json.loads(refused.text)["error"]["param"] == "keywords[]"
