"""What runs the models: which models, the engine, devices, replicas and decoding."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, field_validator, model_validator
from pydantic_settings import NoDecode

from asrserve.settings.fields import FLAG, EncoderWindow, names, numbers
from asrserve.settings.keep_alive import FOREVER, model_spec
from asrserve.settings.registered import AUTO, check_engine


class EngineSettings(BaseModel):
    models: Annotated[tuple[str, ...], NoDecode] = Field(
        ("tiny.en",),
        description="Models to serve, the first the default (comma-separated): directories,"
        " packaged models (`tiny.en`, `base`), faster-whisper size names or hub repo ids"
        " (docs/models.md); `NAME:keep_alive=300` gives one its own keep_alive.",
    )
    model: Path | None = Field(
        None,
        description="The older setting: a CTranslate2 Whisper model directory, the one model"
        " served when `models` is not set.",
    )
    model_id: str | None = Field(
        None,
        description="The id the one configured model is served as; default: its name.",
        json_schema_extra=FLAG,
    )
    model_cache_dir: Path | None = Field(
        None,
        description="Joined packaged and downloaded models; default: `data_dir/models`.",
        json_schema_extra=FLAG,
    )
    offline: bool = Field(
        False,
        description="Never download a model (`HF_HUB_OFFLINE=1` too): use the cache only.",
    )
    engine: str = Field(
        AUTO,
        description="The engine that runs the models: `ctranslate2` (faster-whisper's),"
        " `transformers` (PyTorch: CUDA 12 and 13, Blackwell, ROCm, Apple MPS, CPU; the"
        " `transformers` extra), or `auto`: CTranslate2 where it can run the device (the CPU;"
        " an NVIDIA card whose compute capability its installed library carries code for, up"
        " to Hopper, with CUDA 12's cuBLAS), else transformers"
        " (docs/engines.md).",
        json_schema_extra=FLAG,
    )
    device: str = Field(
        "cpu", pattern="^(cpu|cuda|mps|auto)$",
        description="`cpu`, `cuda` (NVIDIA, or AMD under ROCm), `mps` (Apple's GPU,"
        " transformers only) or `auto`.",
        json_schema_extra=FLAG,
    )  # fmt: skip
    device_index: Annotated[tuple[int, ...], NoDecode] = Field(
        (0,),
        description="CUDA devices, one model replica each (`0,1`); or `--devices cuda:0,cuda:1`.",
        json_schema_extra=FLAG,
    )
    compute_type: str = Field(
        "default",
        description="What the weights run in: `default` is `int8` on the CPU and `float16` on"
        " CUDA with ctranslate2, `float32` on the CPU and `float16` on a GPU with"
        " transformers (which also takes `bfloat16`).",
        json_schema_extra=FLAG,
    )
    cpu_threads: Annotated[int, Field(ge=0)] | Literal["auto"] = Field(
        "auto",
        description="Threads per CPU replica; `auto` (or 0): the cores shared out between the"
        " replicas (docs/scheduler.md, the layout).",
        json_schema_extra=FLAG,
    )
    cpu_replicas: Annotated[int, Field(ge=1)] | Literal["auto"] = Field(
        "auto",
        description="Model replicas on the CPU (batches run at once; they share one copy of"
        " the weights); `auto`: one per core, one thread each, up to 8.",
        json_schema_extra=FLAG,
    )
    beam_size: int = Field(
        5, ge=1, le=20, description="The default beam size.", json_schema_extra=FLAG
    )
    model_idle_s: float = Field(
        0.0,
        ge=0,
        description="A model that has run nothing for this long releases its weights on each"
        " device, and loads them again for its next request (0: never): every model's default"
        " `keep_alive`, unless its `models` entry names its own (docs/models.md).",
    )
    vad_filter: bool = Field(
        True, description="Cut every file at the silences Silero VAD finds before decoding."
    )
    staged_decode: bool = Field(
        True,
        description="Decode a file and find its speech a window at a time: its first windows"
        " run (and a streamed answer shows their text) before the rest is read, with the same"
        " windows and text. `false`: the whole file first (the bench's baseline).",
    )
    first_window_s: float = Field(
        15.0,
        ge=1,
        le=30,
        description="A file longer than one window closes its first window at this many"
        " seconds of speech (a longer first region is that window alone), so a streamed"
        " answer's first text waits for a short window's decode; later windows hold up to"
        " 30 s (tiny.en's WER within noise of 30 at 15, worse at 10; docs/benchmarks.md)."
        " 30: every window packed to 30 s.",
    )
    encoder_window: EncoderWindow = Field(
        EncoderWindow.ADAPTIVE,
        description="`adaptive`: pad each window to its length bucket (`encoder_windows_s`),"
        " where the model's engine takes short windows; `full`: 30 s windows.",
        json_schema_extra=FLAG,
    )
    encoder_windows_s: Annotated[tuple[float, ...], NoDecode] = Field(
        (5.0, 10.0, 15.0, 20.0, 30.0),
        description="The window buckets (s) of adaptive windows.",
        json_schema_extra=FLAG,
    )
    fallback_temperatures: Annotated[tuple[float, ...], NoDecode] = Field(
        (0.0, 0.2, 0.4, 0.6, 0.8, 1.0),
        description="Whisper's temperature fallback for requests at `temperature` 0: a window"
        " whose decode loops or is unlikely is decoded again at the next temperature (`0`:"
        " never; docs/decoding.md).",
        json_schema_extra=FLAG,
    )

    _engine_numbers = field_validator(
        "device_index", "encoder_windows_s", "fallback_temperatures", mode="before"
    )(numbers)
    _engine_names = field_validator("models", mode="before")(names)

    @model_validator(mode="before")
    @classmethod
    def _one_model_directory(cls, data: Any) -> Any:
        """The older ``model`` (a directory) is the one model served unless ``models`` is set."""
        if isinstance(data, dict) and data.get("model") is not None and "models" not in data:
            data["models"] = (str(data["model"]),)
        return data

    @field_validator("encoder_windows_s")
    @classmethod
    def _check_windows(cls, value: tuple[float, ...]) -> tuple[float, ...]:
        if not value or any(not 1.0 <= w <= 30.0 for w in value):
            raise ValueError("encoder windows must be between 1 and 30 s")
        return tuple(sorted(set(value)))

    @field_validator("fallback_temperatures")
    @classmethod
    def _check_temperatures(cls, value: tuple[float, ...]) -> tuple[float, ...]:
        if not value or value[0] != 0.0 or list(value) != sorted(set(value)) or value[-1] > 1.0:
            raise ValueError("fallback temperatures rise from 0 to at most 1, e.g. 0,0.2,0.4")
        return value

    @field_validator("models")
    @classmethod
    def _some_model(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value:
            raise ValueError("name at least one model to serve")
        for entry in value:
            model_spec(entry)  # ValueError for an option it does not know or a bad value
        return value

    @model_validator(mode="after")
    def _model_id_of_one(self) -> EngineSettings:
        if self.model_id and len(self.models) > 1:
            raise ValueError("model_id renames the one model served; several are served by name")
        return self

    @field_validator("engine")
    @classmethod
    def _known_engine(cls, value: str) -> str:
        return check_engine(value)  # ValueError naming the registered engines

    @model_validator(mode="after")
    def _engine_runs_device(self) -> EngineSettings:
        if self.engine == "ctranslate2" and self.device == "mps":
            raise ValueError(
                "CTranslate2 has no Apple GPU backend: use ASRSERVE_ENGINE=transformers or auto"
            )
        return self

    @property
    def keep_alive(self) -> float:
        """Every model's keep_alive unless its entry names one: ``model_idle_s`` (0: forever)."""
        return self.model_idle_s or FOREVER

    @property
    def windows(self) -> tuple[float, ...]:
        """The encoder windows chunks may be padded to under the configured mode; a model
        gets those its engine takes (:meth:`~asrserve.engine.base.Capabilities.windows`)."""
        if self.encoder_window is EncoderWindow.FULL:
            return (30.0,)
        return self.encoder_windows_s
