"""What PyTorch sees on this machine: a GPU it runs (NVIDIA's or AMD's as ``cuda``, Apple's
as ``mps``), what it was built for, and the most memory it held on a CUDA device."""

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


def reset_peak_memory(device: str) -> None:
    """Count ``device``'s peak memory afresh from now (a CUDA device; elsewhere nothing)."""
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)


def peak_memory(device: str) -> int | None:
    """The most bytes PyTorch's allocator held on ``device`` since the last reset (its
    ``max_memory_allocated``); None off CUDA, where PyTorch does not count them."""
    import torch

    if not device.startswith("cuda"):
        return None
    torch.cuda.synchronize(device)
    return int(torch.cuda.max_memory_allocated(device))
