"""The ``transformers`` engine: Whisper on PyTorch (transformers' model definition), for the
devices CTranslate2 cannot run (CUDA 13, Blackwell, ROCm, Apple MPS) and on the CPU too.

Nothing here is imported until the engine is asked for (``engine/registry.py``); torch and
transformers are the ``transformers`` extra.
"""
