"""The `labkit explain` command line: its flags, and the verdict printed as text or as one JSON object per run."""

from __future__ import annotations

import json

from .. import flags
from . import explain, model
from .rules import size_text

#: The flags that state a fact about the run, by argparse name, and explain()'s name for each.
FACT_FLAGS = {
    **{k: k for k in ("op", "nodes", "gpus_per_node", "gpu", "nics_per_node", "system", "algorithm")},
    "nvlink_GBps": "nvlink_GBps",
    "nic_bandwidth": "nic_GBps",
}


def add_arguments(p) -> None:
    p.add_argument(
        "log", nargs="?", help="an nccl-tests log file (any layout `labkit ref import-log` reads) or a dataset name"
    )
    p.add_argument("--op", help="the collective, where the log does not name it (e.g. all_reduce)")
    flags.add_cluster_flags(
        p, nodes="those the run spanned, where the log does not say", gpus_per_node="where the log does not say"
    )
    p.add_argument("--gpu", help="GPU model (H100, A100, H200, B200, GB200), where the log's Rank lines do not say")
    p.add_argument(
        "--nvlink-bandwidth",
        dest="nvlink_GBps",
        type=flags.real(0.0),
        metavar="GBPS",
        help="GB/s per GPU per direction inside a node",
    )
    p.add_argument("--pcie-only", action="store_true", help="GPUs joined by PCIe only (no NVLink)")
    p.add_argument("--system", metavar="NAME", help="a known system instead of the hardware flags (see --list-systems)")
    p.add_argument("--algorithm", help="the NCCL_ALGO the run used, where the log does not say (e.g. RING)")
    p.add_argument("--run", type=flags.whole(1), metavar="N", help="explain only the N-th table of the log (1-based)")
    p.add_argument("--list-systems", action="store_true", help="print the known --system names and exit")
    p.add_argument("--json", action="store_true", help="one JSON object per run")


def _f(x, digits=1) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def render(r: dict) -> str:
    """The text report of one run."""
    head = f"{r['run']}: {r['op'] or 'collective not named'}"
    if r.get("gpus_per_node"):
        basis = " (derived from busbw/algbw)" if r["world_size_basis"].startswith("derived") else ""
        head += f", {r['world_size']} ranks{basis} on {r['nodes']} node(s) x {r['gpus_per_node']} GPUs"
    head += f"{', ' + r['gpu'] if r['gpu'] else ''}{', NCCL ' + r['nccl_version'] if r['nccl_version'] else ''}"
    lines = [head]
    at = f"{_f(r['measured_busbw_GBps'])} GB/s busbw at {size_text(r['size_bytes'])}"
    if r["verdict"] == "invalid":
        lines.append(f"verdict: invalid ({at}) - not a valid measurement of one job across its ranks:")
        lines += [f"  - {why}" for why in r["invalid_reasons"]]
        return "\n".join(lines)
    lines.append(
        f"verdict: {r['verdict']} - {at} is {r['ratio']:.2f} x the model's {_f(r['expected_busbw_GBps'])} GB/s "
        f"({r['algorithm']}, bound by {r['bound']}; algorithm: {r['algorithm_basis']})"
    )
    if r["below_expected_sizes"]:
        s = r["below_expected_sizes"]
        lines.append(f"  below 0.8 x the model at {len(s)} size(s), {size_text(s[0])} to {size_text(s[-1])}")
    if r["nccl_pick"] != r["algorithm"]:
        lines.append(f"  the model's guess at NCCL's pick: {r['nccl_pick']} at {_f(r['nccl_pick_busbw_GBps'])} GB/s")
    lines.append(f"  forced ring in the model: {_f(r['ring_busbw_GBps'])} GB/s")
    if r["causes"]:
        lines.append("likely causes, most likely first:" if r["verdict"] != "healthy" else "notes:")
        for i, c in enumerate(r["causes"], 1):
            lines.append(f"  {i}. {c['title']}: {c['evidence']}")
    lines.append(f"({r['units']}; expected values are a model: {r['model']})")
    return "\n".join(lines)


def cmd_explain(args) -> int:
    if args.list_systems:
        print("\n".join(model.preset_names()))
        return 0
    if not args.log:
        raise ValueError("give LOG: an nccl-tests log file or a dataset name (labkit ref list)")
    facts = {name: getattr(args, dest) for dest, name in FACT_FLAGS.items() if getattr(args, dest) is not None}
    facts.update(nvls=args.nvls, sharp=args.sharp, pcie_only=args.pcie_only)
    results = explain(args.log, run=args.run, **facts)
    for i, r in enumerate(results):
        if args.json:
            print(json.dumps(r, default=str))
        else:
            print(("\n" if i else "") + render(r))
    return 0
