"""`labkit bench fidelity` and its part of `labkit record`: labkit's pinned copy bandwidth against a raw CUDA probe."""

from __future__ import annotations

from ..provenance import write_measured
from ..runtime import require_cuda
from ..units import parse_size
from .fidelity import DEFAULT_NBYTES, RAW_INNER, RAW_REPEATS, check, to_frame


def add_arguments(parser) -> None:
    parser.add_argument("--size", default="256MiB", help="copy size (default 256MiB)")
    parser.add_argument("--device", type=int, default=0)


def bench(args):
    """One record per direction: labkit's and the raw probe's bandwidth, their ratio, the link limit."""
    require_cuda("labkit bench fidelity (it compares two GPU timers)")
    for f in check(parse_size(args.size), device=args.device):
        yield f.to_dict()


def record(folder, quick: bool, env: dict) -> list[str]:
    """The fidelity check at DEFAULT_NBYTES, where a GPU exists."""
    if not env.get("cuda_available"):
        return []
    results = check(DEFAULT_NBYTES)
    write_measured(
        folder,
        "fidelity_points",
        to_frame(results),
        env,
        kind="point",
        title="fidelity: labkit vs raw CUDA-runtime pinned copies",
        bandwidth_direction="mixed",
        method=(
            "labkit.copies.fidelity.check: labkit.copies.sweeps.gpu_copy_sweep (median of 10 samples) and "
            f"labkit.copies.fidelity.raw_copy ({RAW_REPEATS} samples of {RAW_INNER} cudaMemcpyAsync between "
            "cudaEvents on one stream), one process"
        ),
        caveats=(
            "ratio = labkit / raw; the link limit is computed from the PCIe spec for the link NVML reports, "
            "not measured"
        ),
    )
    return ["fidelity_points"]
