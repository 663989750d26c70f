"""Where the embedded mode keeps its state, and what it keeps for how long."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field

from asrserve.settings.fields import FLAG


class StorageSettings(BaseModel):
    data_dir: Path = Field(
        Path("data"),
        description="The SQLite database (WAL), uploaded audio and stored files.",
        json_schema_extra=FLAG,
    )
    audio_retention_s: float = Field(
        3600.0,
        ge=0,
        description="Uploaded audio is deleted this long after its job ends (0: at once).",
        json_schema_extra=FLAG,
    )
    record_traffic: bool = Field(
        True,
        description="Record arrivals and batches under `data_dir/recordings` (`asrserve tune`).",
    )
    record_max_lines: int = Field(
        100_000, ge=1, description="Rotate a recording file to `.1` at this many lines."
    )

    @property
    def db_path(self) -> Path:
        return self.data_dir / "asrserve.db"

    @property
    def audio_dir(self) -> Path:
        return self.data_dir / "audio"

    @property
    def spool_dir(self) -> Path:
        """Decoded audio of long files while their jobs run (unnamed temporary files)."""
        return self.data_dir / "spool"
