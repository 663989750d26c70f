"""Live transcription: sessions of streamed audio whose windows share the scheduler's
forward passes with every other caller, at a priority above interactive requests."""
