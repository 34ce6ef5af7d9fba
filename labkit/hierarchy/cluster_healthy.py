"""The "healthy cluster" exercise (predict 1 -> 2 -> 8 nodes before looking, then the recorded runs
beside) and the small-message floors against NCCL's latency model: both from cluster_model."""

from __future__ import annotations

from .. import reference
from . import cluster_model as cm
from .cluster_validation import GiB, _size

#: The "healthy cluster" exercise: (preset, size, recorded runs to check against: nodes -> [(label, busbw)]).
HEALTHY = [
    (
        "h100_ndr_8nic",
        4 * GiB,
        {
            1: [("issue 290, NVLS", 473.60)],
            2: [("issue 290, default", 154.74), ("issue 290, NCCL_ALGO=RING", 89.90)],
            8: [("CoreWeave, SHARP (CollNetChain), 4 GiB", 383.23)],
        },
    ),
    ("alps_gh200", 4 * GiB, {1: [("Alps", 338.78)], 2: [("Alps", 158.28)], 8: [("Alps", 92.48)]}),
    (
        "oci_bm_gpu4_8",
        10 * GiB,
        {1: [("OCI", 232.20)], 2: [("OCI, NCCL 2.26.5", 191.76), ("OCI, NCCL 2.21.5", 222.88)]},
    ),
    ("p4d_efa", 4 * GiB, {2: [("aws-efa-eks, NCCL_ALGO=RING", 43.81)]}),
    ("p6_b200_efa", 4 * GiB, {1: [("ml-engineering", 740.64)], 4: [("ml-engineering", 377.34)]}),
]


def healthy() -> list[dict]:
    """Predict 1 -> 2 -> 8 nodes (and 4 where recorded) before looking, then lay the recorded runs beside."""
    out = []
    for preset, S, rec in HEALTHY:
        s = cm.preset(preset)
        for m in sorted(set((1, 2, 8)) | set(rec)):
            pick = cm.nccl_choice(s, S, m)
            ring = cm.ring_allreduce(S, m, s)
            runs = rec.get(m, [])
            out.append(
                {
                    "system": s.name,
                    "preset": preset,
                    "size": _size(S),
                    "nodes": m,
                    "nccl_pick": pick.algorithm,
                    "pick_busbw_GBps": pick.busbw_GBps,
                    "ring_busbw_GBps": ring.busbw_GBps,
                    "recorded": "; ".join(f"{lab}: {v:g}" for lab, v in runs) or "-",
                }
            )
    return out


def latency_floors() -> list[dict]:
    """8-byte all-reduce times against NCCL's LL latency model (ring and tree, the lower one)."""
    out = []
    for name, preset in (
        ("nccl_allreduce_gh200_alps_1to16nodes_slingshot11", "alps_gh200"),
        ("nccl_allreduce_16xa100_2node_p4d_efa_awsefaeks", "p4d_efa"),
    ):
        f = reference.load(name).frame
        f = f[(f["nbytes"] == 8) & (f["placement"] == "out-of-place")]
        s = cm.preset(preset)
        for _, row in f.iterrows():
            m, g = int(row["nodes"]), s.gpus_per_node
            ring = cm.ring_latency_s(g * m, m, s, "ll")
            tree = cm.tree_latency_s(g, m, s, "ll")
            if name.startswith("nccl_allreduce_16xa100"):  # NCCL_ALGO=RING in that job
                algo, lat = "ring (forced)", ring
            else:
                algo, lat = ("ring", ring) if ring <= tree else ("tree", tree)
            rec = float(row["time_us"])
            out.append(
                {
                    "dataset": name,
                    "gpus": g * m,
                    "nodes": m,
                    "recorded_us": rec,
                    "algorithm": algo,
                    "model_us": lat * 1e6,
                    "ratio": rec / (lat * 1e6),
                }
            )
    return out
