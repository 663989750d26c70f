"""What PyTorch sees on this machine: a GPU it runs (NVIDIA's or AMD's as ``cuda``, Apple's
as ``mps``), and what it was built for."""

from __future__ import annotations


def gpu() -> str | None:
    """``cuda``, ``mps``, or None: PyTorch is not installed or sees no GPU."""
    try:
        import torch
    except ImportError:
        return None
    if torch.cuda.is_available():
        return "cuda"
    if torch.backends.mps.is_available():
        return "mps"
    return None


def build() -> str:
    """The PyTorch release and the GPU stack it was built for, in words."""
    import torch

    hip = getattr(torch.version, "hip", None)
    if hip:
        return f"torch {torch.__version__}, ROCm {hip}"
    if torch.version.cuda:
        return f"torch {torch.__version__}, CUDA {torch.version.cuda}"
    return f"torch {torch.__version__}"
