"""The Batch API: large offline workloads as OpenAI-shaped batches of transcription requests."""
