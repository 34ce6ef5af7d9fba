"""Pinned (page-locked) host memory: capped allocation, and whether this machine can pin at all.

`pinned_empty` / `pin` refuse a buffer above `labkit.units.PINNED_CAP_BYTES` before anything is
allocated (pinned pages cannot be swapped out; pinning too much starves the OS), and say what to do
on a machine without CUDA (pinned memory is allocated through the CUDA driver).
"""

from __future__ import annotations

from ..runtime import gpu_count, require_cuda
from ..units import PINNED_CAP_BYTES, check_pinned_request

#: What to do without a GPU, added to `require_cuda`'s message.
NO_GPU_HINT = " (notebook 02 replays recorded data), `labkit bench host` for host memory"


def can_pin() -> bool:
    """True when torch can allocate pinned memory here (it needs a CUDA driver and device)."""
    return gpu_count() > 0


def pinned_empty(nbytes: int, *, cap: int = PINNED_CAP_BYTES):
    """An uninitialised pinned uint8 tensor of nbytes, refused above `cap` before anything is allocated."""
    import torch

    check_pinned_request(nbytes, cap)
    require_cuda("pinned_empty", hint=NO_GPU_HINT)
    return torch.empty(int(nbytes), dtype=torch.uint8, pin_memory=True)


def pin(tensor, *, cap: int = PINNED_CAP_BYTES):
    """`tensor.pin_memory()` (a pinned copy), refused above `cap`."""
    check_pinned_request(tensor.numel() * tensor.element_size(), cap)
    require_cuda("pin", hint=NO_GPU_HINT)
    return tensor.pin_memory()
