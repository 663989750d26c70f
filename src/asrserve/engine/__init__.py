"""Speech engines behind a small protocol."""

from asrserve.engine.base import ChunkInput, Engine, ModelNotFoundError, RawSegment, RawWord

__all__ = ["ChunkInput", "Engine", "ModelNotFoundError", "RawSegment", "RawWord"]
