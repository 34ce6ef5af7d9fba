"""Kinds of host memory a GPU can reach (pageable, pinned, registered, write-combined, mapped, managed, C2C), each with a number and its source.

Notebook 02's table. A number is read from data/ where a shipped dataset has it, quoted with its
address where only a published page has it, and the row says "no number in any source here" where
none exists — nothing is made up. Sources of the behaviour:
- cudaHostAlloc / cudaHostRegister / flags: CUDA Driver API, cuMemHostAlloc and cuMemHostRegister
  ("WC memory can be transferred across the PCI Express bus more quickly on some system
  configurations, but cannot be read efficiently by most CPUs"; "On systems where
  CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES is true, cuMemHostAlloc may not
  page-lock the allocated memory").
- How the driver pins: NVIDIA open-gpu-kernel-modules, kernel-open/nvidia/os-mlock.c,
  os_lock_user_pages(): NV_GET_USER_PAGES (get_user_pages), no RLIMIT_MEMLOCK check.
- `.to("cpu", non_blocking=True)` pins its destination: PyTorch aten/src/ATen/native/TensorConversions.cpp,
  _to_copy: `pin_out = non_blocking && self.is_cuda() && options.device().is_cpu() && ...`.
"""

from __future__ import annotations

from ..reference import load

SWEEP = "h100_vm_labkit_gpu_copy_sweep"
PIN_COST = "h100_vm_labkit_pin_cost"
ZERO_COPY = "nvbandwidth_sm_h2d_vs_d2h_8xh100_issue24_points"
C2C = "nvbandwidth_c2c_dgx_station_gb300_mlengineering_points"
#: Unified memory: no shipped dataset; the one published measurement found (a GTX 1080, kernel touching managed
#: memory with and without cudaMemPrefetchAsync), quoted with its address.
UVM_SOURCE = "https://github.com/parallelArchitect/pascal-um-benchmark (README, GTX 1080, CUDA 12.0)"
UVM_DEMAND_GBPS, UVM_PREFETCH_GBPS, UVM_FAULTS = 8.2, 242.3, 31_774
NONE_HERE = "no number in any source here"


def _sweep_GBps(direction: str, memory: str) -> float:
    f = load(SWEEP).frame
    row = f[(f["direction"] == direction) & (f["memory"] == memory) & (f["nbytes"] == 1 << 30)]
    return float(row["bandwidth_GBps"].iloc[0])


def _points(name: str, needle: str) -> list[float]:
    f = load(name).frame
    return [float(v) for v in f[f["quantity"].str.contains(needle, regex=False)]["value"]]


def numbers() -> dict:
    """The recorded numbers the table quotes (GB/s unless named _s or _count), read from data/."""
    f = load(PIN_COST).frame
    at16 = f[f["nbytes"] == 16 << 20]
    fresh = float(at16[at16["quantity"].str.startswith("pin_memory() of a fresh")]["value"].iloc[0])
    warm = float(at16[at16["quantity"].str.startswith("pin_memory() with torch's")]["value"].iloc[0])
    zc_read, zc_write = _points(ZERO_COPY, "host_to_device_memcpy_sm"), _points(ZERO_COPY, "device_to_host_memcpy_sm")
    return {
        "pageable_h2d_1GiB": _sweep_GBps("h2d", "pageable"),
        "pinned_h2d_1GiB": _sweep_GBps("h2d", "pinned"),
        "pin_fresh_16MiB_s": fresh,
        "pin_cached_16MiB_s": warm,
        "zero_copy_read_min": min(zc_read),
        "zero_copy_read_max": max(zc_read),
        "zero_copy_write_median": sorted(zc_write)[len(zc_write) // 2],
        "c2c_h2d": _points(C2C, "(host_to_device_memcpy_ce)")[0],
        "c2c_d2h": _points(C2C, "(device_to_host_memcpy_ce)")[0],
        "uvm_demand": UVM_DEMAND_GBPS,
        "uvm_prefetch": UVM_PREFETCH_GBPS,
        "uvm_faults_count": UVM_FAULTS,
    }


def kinds():
    """DataFrame: memory, how you get it, what a GPU copy or access does, a number, where it comes from."""
    import pandas as pd

    n = numbers()
    h100 = f"recorded: H100 VM — labkit record ({SWEEP})"
    rows = [
        (
            "pageable",
            "torch.empty, numpy, malloc",
            "driver stages it through its own pinned buffer (CPU copy + DMA)",
            f"H2D {n['pageable_h2d_1GiB']:.2f} GB/s at 1 GiB",
            h100,
        ),
        (
            "pinned (cudaHostAlloc)",
            "t.pin_memory(), torch.empty(pin_memory=True), DataLoader(pin_memory=True)",
            "copy engine DMAs it directly; allocating is slow, so torch caches the blocks",
            f"H2D {n['pinned_h2d_1GiB']:.2f} GB/s at 1 GiB; pin_memory() of 16 MiB {n['pin_fresh_16MiB_s'] * 1e3:.2f} ms "
            f"fresh vs {n['pin_cached_16MiB_s'] * 1e3:.3f} ms from torch's cache",
            f"{h100} and {PIN_COST}",
        ),
        (
            "pinned in place (cudaHostRegister)",
            "existing pages; torch: PYTORCH_CUDA_ALLOC_CONF=pinned_use_cuda_host_register:True (pytorch#108488)",
            "the driver pins the pages it is given (get_user_pages) — no new buffer, no copy",
            NONE_HERE,
            "open-gpu-kernel-modules os-mlock.c; CUDA Runtime API cudaHostRegister",
        ),
        (
            "write-combined (cudaHostAllocWriteCombined)",
            "cudaHostAlloc flag (bandwidthTest --wc)",
            "not cached by the CPU: H2D may be faster on some systems, CPU reads are very slow",
            NONE_HERE,
            "CUDA Driver API, cuMemHostAlloc (CU_MEMHOSTALLOC_WRITECOMBINED)",
        ),
        (
            "mapped pinned = zero-copy",
            "cudaHostAllocMapped, or any pinned buffer under unified addressing",
            "kernels load/store host memory over the link, no copy (what nvbandwidth's SM tests do)",
            f"kernel reading host {n['zero_copy_read_min']:.1f}–{n['zero_copy_read_max']:.1f} GB/s, writing it "
            f"{n['zero_copy_write_median']:.1f} GB/s",
            f"recorded: 8x H100 — nvbandwidth#24 ({ZERO_COPY})",
        ),
        (
            "managed / unified (cudaMallocManaged)",
            "one pointer for CPU and GPU",
            "pages migrate on GPU page faults; cudaMemPrefetchAsync moves them before the kernel needs them",
            f"{n['uvm_demand']} GB/s demand-paged ({n['uvm_faults_count']:,} faults) vs {n['uvm_prefetch']} GB/s "
            "after prefetch",
            f"recorded: GTX 1080 — {UVM_SOURCE}; not a shipped dataset",
        ),
        (
            "pinned over NVLink-C2C (Grace Hopper / Blackwell)",
            "as pinned; pageable is reached through host page tables",
            "the GPU can reach pageable memory through the host page tables; cudaHostAlloc may not page-lock",
            f"CE H2D {n['c2c_h2d']:.2f} / D2H {n['c2c_d2h']:.2f} GB/s pinned; pageable: {NONE_HERE}",
            f"recorded: DGX Station GB300 — ml-engineering ({C2C})",
        ),
    ]
    return pd.DataFrame(rows, columns=["memory", "how you get it", "what the GPU does", "number", "source"])
