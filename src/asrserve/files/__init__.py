"""Stored files (OpenAI Files API): batch request files, audio, batch outputs."""
