"""Speech engines behind a small protocol."""

from asrserve.engine.base import (
    ChunkInput,
    Engine,
    ModelInfo,
    ModelNotFoundError,
    RawSegment,
    RawWord,
)

__all__ = ["ChunkInput", "Engine", "ModelInfo", "ModelNotFoundError", "RawSegment", "RawWord"]
