"""The model against every multi-node all-reduce dataset in data/: one row per recorded run, at its largest size.

`DATASETS` is the one table that maps a dataset to the system it ran on (a preset) and says, per run,
which algorithm ran (from the log's NCCL_ALGO, the job spec or the author where one is stated; else
NCCL's pick, which is what the model predicts) and whether the run is healthy. busbw is read from
data/*.csv (each derived from its raw log in data/raw/, or quoted from an issue thread's prose: a `point`
dataset, whose figure may be approximate and whose size the words leave out), never typed in here.

Status, as the source says: "healthy" (a maintainer or a clean published run), "misconfigured", "reported slow"
(the thread reports or a maintainer calls it slow), "user report" / "user report, approximate" (a user's run, or
round figures in a user's prose, with no verdict in the thread), "facts unpublished" (what the model needs is not published). Only healthy runs are
held to ±10%.

No factor in the model is fitted to these runs: the numbers are NCCL's tuning model with its own
constants (labkit.cluster.nccl).
"""

from __future__ import annotations

import copy
import dataclasses
import functools

from .. import reference
from ..units import format_bytes
from .model import predict
from .presets import preset

#: healthy runs must land within this of the model at the largest size (issue 24)
BAND = (0.9, 1.1)


@dataclasses.dataclass(frozen=True)
class Run:
    """One recorded run (a curve) of a dataset: rows where `column` contains `match` (all rows when None)."""

    label: str
    match: dict
    algorithm: str | None  # what ran, forced or stated; None = NCCL's default, i.e. the model's pick
    status: str  # "healthy", "misconfigured", "facts unpublished"
    basis: str
    gpus: int | None = None  # a run on k GPUs of one node: the model's node has k GPUs
    stated: str | None = None  # the algorithm NCCL ran by default, where the log or its author says: costed at it
    system: str | None = None  # a preset for this run where it is not the dataset's (one thread, two clusters)
    nvls: bool | None = None  # False: the run set NCCL_NVLS_ENABLE=0, so the model's node has no NVLS
    assume: dict | None = None  # what a quoted figure leaves out, modelled at: {"nbytes": S, "nodes": m}


@dataclasses.dataclass(frozen=True)
class Dataset:
    name: str
    system: str  # a preset name
    runs: tuple[Run, ...]
    gpus_per_node: int | None = None  # where the model's "node" is not the dataset's (GB200: a rack of 72)
    scope: str = "multi-node"  # "single-node": datasets of one node, shown beside the multi-node ones


_290 = "nccl_allreduce_h100_1node_nvls_2node_ib_ndr_issue290"
#: Why the model's NVLS on one node sits below the runs (B200, partial nodes): NCCL's own model, checked line by line.
_NVLS_CAP = (
    "the model is NCCL 2.30.7's own: an NVLS channel is priced at min(bwIntra x nvlsEfficiency x (n-1)/n x 2, "
    "bwInter) (tuning.cc:307-323); bwIntra is the search's speed step at or below NVLink / (n+1), every GPU carrying "
    "each channel and its head twice (search.cc:410-443): 80 for 8 B200s, 40 for 7 or 8 H100/H200s; and on a node "
    "without NICs bwInter is raised only to the top of the intra speed table, 60 GB/s on SM90, 90 on SM100 "
    "(search.cc:1057, :1063, :1274-1278), which caps the channel: 8 B200 channels are priced at 8 x 90 = 720 where "
    "their efficiency term gives 8 x 80 x 0.74 x 7/8 x 2 = 829; the run beats NCCL's estimate, which NCCL uses to "
    "choose an algorithm, not to predict; no NCCL source says why the cap sits there"
)
#: Why the partial-node runs ran NVLS where the model picks the ring: the runs' NCCL prices NVLS differently.
_NVLS_VERSIONS = (
    "NCCL 2.27.7 ran (stated for the B200 table and the H200 16 GiB runs, not for the H200 GPU-count table); its "
    "model prices NVLS at nChannels x min(bwIntra, bwInter), algbw x 5/6 (tuning.cc@v2.27.7-1:269, :276, :324), "
    "which on this module's graphs picks NVLS from 5 GPUs on H200 and from 6 on B200, as the author saw; NCCL "
    "2.30.7's, ported here, picks "
    "the ring at 4-5 H200 and 4-7 B200 GPUs (the ratio is the run over the model's NVLS, what ran); " + _NVLS_CAP
)
#: What NCCL makes of the nccl#1221 cluster's RoCE NICs, and what is left unexplained.
_ROCE = (
    "NCCL rates an IB-verbs port, RoCE or InfiniBand alike, by the speed the port reports, active_speed x "
    "active_width (net_ib.cc:225 at v2.19.3-1; net_ib/init.cc:404-411), as NET bandwidth Mb/s / 8000 (topo.cc:418): "
    "a 400 Gb/s RoCE port is 50 GB/s, as NDR, and the model's ring leaves on 8 NICs at 48 (PCIe Gen5), what NVIDIA's "
    "maintainer expects of NDR, '46-48GB/s per NIC' (AddyLaddy, nccl-tests#290); the same cluster's one-node ring "
    "(~330) is already x0.92 of the model, with no NIC in its path, where an H200 node's forced rings read x1.01-1.02 "
    "(ml-engineering); the stored thread shows no log and no maintainer verdict: the cause is unknown"
)
_MIS = (
    "misconfigured: the thread's own ring run carries 89.9 GB/s = 11.2 GB/s per NDR NIC against the "
    "'46-48GB/s per NIC' the maintainer expects (AddyLaddy, nccl-tests#290)"
)

DATASETS: tuple[Dataset, ...] = (
    Dataset(
        _290,
        "h100_ndr_8nic",
        (
            Run(
                "issue 290, 1 node",
                {"nodes": 1},
                None,
                "healthy",
                "default; 'will be using NVLink and NVLink SHARP' (AddyLaddy, nccl-tests#290)",
            ),
            Run("issue 290, 2 nodes, default", {"nodes": 2, "config": "default"}, None, "misconfigured", _MIS),
            Run(
                "issue 290, 2 nodes, NCCL_ALGO=RING",
                {"nodes": 2, "config": "NCCL_ALGO=RING"},
                "ring",
                "misconfigured",
                "NCCL_ALGO=RING in the log header; " + _MIS,
            ),
        ),
    ),
    Dataset(
        "nccl_allreduce_64xh100_8node_ib_sharp_coreweave",
        "h100_ndr_8nic_sharp",
        (
            Run(
                "CoreWeave 8 nodes, SHARP",
                {},
                "collnet_chain",
                "healthy",
                "NCCL_ALGO=COLLNETCHAIN NCCL_COLLNET_ENABLE=1 in the job spec (coreweave/nccl-tests @fb4787c); "
                "its busbw/algbw fixes 96 ranks, not the job's 64 (see the dataset's caveats): modelled at 8 nodes",
            ),
        ),
    ),
    Dataset(
        "nccl_allreduce_16xa100_2node_p4d_efa_awsefaeks",
        "p4d_efa",
        (
            Run(
                "p4d 2 nodes",
                {},
                "ring",
                "healthy",
                "ring inferred, not printed: NCCL_ALGO=RING is in every committed version of the repository's example "
                "job, whose header matches the printed run's in none exactly",
            ),
        ),
    ),
    Dataset(
        "nccl_allreduce_10gib_oci_bm_gpu4_8_1node_vs_2node_roce",
        "oci_bm_gpu4_8",
        (
            Run("OCI 1 node, NCCL 2.21.5", {"nodes": 1, "config": "2.21.5"}, None, "healthy", "default (no NCCL_ALGO)"),
            Run("OCI 1 node, NCCL 2.26.5", {"nodes": 1, "config": "2.26.5"}, None, "healthy", "default (no NCCL_ALGO)"),
            Run(
                "OCI 2 nodes, NCCL 2.21.5", {"nodes": 2, "config": "2.21.5"}, None, "healthy", "default (no NCCL_ALGO)"
            ),
            Run(
                "OCI 2 nodes, NCCL 2.26.5", {"nodes": 2, "config": "2.26.5"}, None, "healthy", "default (no NCCL_ALGO)"
            ),
        ),
    ),
    Dataset(
        "nccl_allreduce_gh200_alps_1to16nodes_slingshot11",
        "alps_gh200",
        tuple(
            Run(
                f"Alps {m} node{'s' if m > 1 else ''}",
                {"nodes": m},
                None,
                "healthy",
                "default (no NCCL_ALGO in run.sh)",
            )
            for m in (1, 2, 4, 8, 16)
        ),
    ),
    Dataset(
        "allreduce_torch_b200_p6_1node_vs_4node_efa_mlengineering",
        "p6_b200_efa",
        (
            Run(
                "p6-b200 1 node",
                {"nodes": 1},
                None,
                "healthy",
                "default; the author: NVLS from 6 GPUs on this node; " + _NVLS_CAP,
            ),
            Run(
                "p6-b200 4 nodes",
                {"nodes": 4},
                None,
                "healthy",
                "default, but chosen by AWS's OFI tuner plugin, not NCCL's own model (the author)",
            ),
        ),
    ),
    Dataset(
        "nccl_allreduce_gb200_nvl72_1_2_20racks_coreweave",
        "gb200_nvl72_rack",
        (
            Run("GB200 1 rack", {"world_size": 72}, None, "healthy", "default; algorithm not printed"),
            Run(
                "GB200 2 racks",
                {"world_size": 144},
                None,
                "facts unpublished",
                "algorithm, NIC count and fabric not published: the 72 NICs per rack are an assumption",
            ),
            Run(
                "GB200 20 racks",
                {"world_size": 1440},
                None,
                "facts unpublished",
                "algorithm, NIC count and fabric not published: the 72 NICs per rack are an assumption",
            ),
        ),
        gpus_per_node=72,
    ),
)


_GiB = 1 << 30
_1221 = "NCCL 2.19.3; a round figure in the reporter's prose (nccl#1221), no maintainer verdict in the stored thread"
_527 = (
    "in the thread 'Slow bus bandwidth w/ nccl 2.9.9 on EC2 instances' the commenter asks what to expect after busbw "
    "fell from 230.77 (1 instance) to 29.61 GB/s (4); no NCCL_ALGO shown; 'p4dn' modelled as p4d.24xlarge (8x A100, "
    "4x 100 Gb/s EFA), which the thread does not state"
)

#: Public runs from issue threads (issue 24): the healthy/slow mark is what the thread's maintainers said.
PUBLIC_THREADS: tuple[Dataset, ...] = (
    Dataset(
        "nccl_allreduce_h100_8x400g_roce_nvls_1_2_4nodes_issue1221_points",
        "h100_roce_8nic",
        tuple(
            Run(
                f"nccl#1221 {m} node{'s' if m > 1 else ''}, NVLS {'on' if v else 'off'}",
                {"nodes": m, "config": f"NCCL_NVLS_ENABLE={v}"},
                None,
                "user report, approximate",
                f"NCCL_NVLS_ENABLE={v}"
                + ("" if v else " (the model's node without NVLS)")
                + "; "
                + _1221
                + "; "
                + _ROCE,
                nvls=None if v else False,
                assume={"nbytes": 8 * _GiB},
            )
            for m in (1, 2, 4)
            for v in (0, 1)
        ),
    ),
    Dataset(
        "nccl_allreduce_1gib_p4dn_1to4nodes_efa_issue527",
        "p4dn_efa",
        tuple(
            Run(
                f"nccl#527 {m} instance{'s' if m > 1 else ''}",
                {"nodes": m},
                None,
                "reported slow" if m > 1 else "user report",
                _527 if m > 1 else "the single-instance baseline of the slowness report, not questioned in the thread",
            )
            for m in (1, 2, 3, 4)
        ),
    ),
    Dataset(
        "nccl_allreduce_dgxa100_8xhdr_and_8x100g_ring_issue812_points",
        "a100_hdr_8nic",
        (
            Run(
                "nccl#812 DGX A100, 8x HDR (maintainer)",
                {"config": "not stated"},
                None,
                "healthy",
                "the maintainer's own measurement ('we measure 192GB/s AllReduce BusBW', AddyLaddy, nccl#812); "
                "algorithm, nodes and size not stated (busbw over IB cards: more than one node)",
                assume={"nbytes": 8 * _GiB, "nodes": 2},
            ),
            Run(
                "nccl#812 2x DGX A100, 8x 100G, NCCL_ALGO=Ring",
                {"config": "NCCL_ALGO=Ring"},
                "ring",
                "reported slow",
                "the maintainer: 'only getting 60GB/s from Ring - that seems a little low for 8x100Gbit/s NICs' "
                "(AddyLaddy, nccl#812); ~60 is his round reading of the reporter's data",
                system="dgx_a100_100g_8nic",
                assume={"nbytes": 8 * _GiB},
            ),
        ),
    ),
    Dataset(
        "nccl_allreduce_a800_1xhdr_12nodes_issue412_points",
        "a800_hdr_1nic",
        (
            Run(
                "nccl#412 12 nodes, 8x A800, one HDR NIC each",
                {"nodes": 12},
                None,
                "facts unpublished",
                "nccl-tests '# Avg bus bandwidth', a mean over sizes the thread does not state (not the largest size), "
                "on a network shared with other jobs and storage; the maintainer expects 24 GB/s at 8G with the NIC on "
                "a GPU's PCIe switch, 'If the NIC is attached to the CPU getting 16 GB/s is normal' (sjeaugey, "
                "nccl#412); where this NIC attaches is not stated",
                assume={"nbytes": 8 * _GiB},
            ),
        ),
    ),
)


def _k_gpu_runs(system: str, first_nvls: int) -> tuple[Run, ...]:
    out = []
    for k in range(4, 9):
        out.append(
            Run(
                f"{system} {k} GPUs, NVLS off",
                {"world_size": k, "config": "NVLS_ENABLE=0"},
                "ring",
                "healthy",
                "NCCL_NVLS_ENABLE=0",
                gpus=k,
            )
        )
        ran = "nvls" if k >= first_nvls else "ring"
        out.append(
            Run(
                f"{system} {k} GPUs, default",
                {"world_size": k, "config": "default"},
                None,
                "healthy",
                f"default; the author's NCCL_DEBUG: {ran}" + (f"; {_NVLS_VERSIONS}" if ran == "nvls" else ""),
                gpus=k,
                stated=ran,
            )
        )
    return tuple(out)


def _single_node(name: str, preset: str, runs: tuple[Run, ...]) -> Dataset:
    return Dataset(name, preset, runs, scope="single-node")


def _healthy_default(label: str, why: str, stated: str | None = None) -> tuple[Run, ...]:
    """One healthy run at NCCL's default algorithm (stated: the one the page says ran)."""
    return (Run(label, {}, None, "healthy", why, stated=stated),)


#: Single-node datasets (NVLS against the ring by GPU count, cloud nodes): NCCL's NVLS model beside measurements.
SINGLE_NODE: tuple[Dataset, ...] = (
    _single_node(
        "nccl_allreduce_nvls_vs_ring_vs_gpu_count_8xh200_mlengineering", "h200_node", _k_gpu_runs("8x H200", 5)
    ),
    _single_node(
        "nccl_allreduce_nvls_vs_ring_vs_gpu_count_8xb200_p6_mlengineering", "p6_b200_efa", _k_gpu_runs("8x B200", 6)
    ),
    _single_node(
        "nccl_allreduce_busbw_azure_ndh100v5",
        "h100_ndr_8nic",
        _healthy_default("Azure ND H100 v5", "the page states NVLS", stated="nvls"),
    ),
    _single_node(
        "nccl_allreduce_busbw_azure_ndh200v5",
        "h200_node",
        _healthy_default("Azure ND H200 v5", "the page states NVLS", stated="nvls"),
    ),
    _single_node(
        "nccl_allreduce_busbw_azure_nda100v4",
        "a100_node",
        _healthy_default("Azure ND A100 v4", "A100 has no NVLS (the page's 'NVLS' cannot be)"),
    ),
    _single_node(
        "nccl_allreduce_busbw_azure_ndgb200v6_4gpu",
        "gb200_tray4",
        _healthy_default("Azure ND GB200 v6, 4 GPUs", "the page states Ring", stated="ring"),
    ),
)


def _select(frame, match: dict):
    f = frame
    if "placement" in f and (f["placement"] == "out-of-place").any():
        f = f[f["placement"] == "out-of-place"]
    for col, val in match.items():
        f = f[f[col].astype(str).str.contains(val, regex=False)] if isinstance(val, str) else f[f[col] == val]
    return f


def runs() -> list[dict]:
    """Every run of every dataset in DATASETS and SINGLE_NODE at its largest size, against the model (dicts)."""
    return copy.deepcopy(_runs())


@functools.lru_cache(maxsize=1)
def _runs() -> list[dict]:
    out = []
    for ds in DATASETS + PUBLIC_THREADS + SINGLE_NODE:
        d = reference.load(ds.name)
        for run in ds.runs:
            f = _select(d.frame, run.match)
            if f.empty:
                raise ValueError(f"{ds.name}: no rows match {run.match} ({run.label})")
            name = run.system or ds.system
            system = preset(name)
            if run.nvls is not None:
                system = dataclasses.replace(system, nvls=run.nvls)
            g = run.gpus or ds.gpus_per_node or system.gpus_per_node
            if g != system.gpus_per_node:
                system = dataclasses.replace(system, gpus_per_node=g)
            S, N, measured, approximate, assumed = _measured(ds.name, run, f, g)
            m = N // g
            pick = predict(system, m, S)
            said = run.algorithm or run.stated  # the model is costed at what ran, where a source says what ran
            ran = predict(system, m, S, algorithm=said) if said else pick
            ratio = measured / ran.busbw_GBps
            out.append(
                {
                    "dataset": ds.name,
                    "run": run.label,
                    "system": name,
                    "nodes": m,
                    "gpus": N,
                    "nbytes": S,
                    "size": format_bytes(S) + (" (assumed)" if "nbytes" in (run.assume or {}) else ""),
                    "measured_busbw_GBps": measured,
                    "approximate": approximate,
                    "assumed": assumed,
                    "algorithm": ran.algorithm,
                    "protocol": ran.protocol,
                    "forced": run.algorithm is not None,
                    "predicted_busbw_GBps": ran.busbw_GBps,
                    "ratio": ratio,
                    "nccl_pick": pick.algorithm,
                    "pick_busbw_GBps": pick.busbw_GBps,
                    "ring_busbw_GBps": pick.ring_busbw_GBps,
                    "status": run.status,
                    "scope": ds.scope,
                    "stated_algorithm": run.stated or (run.algorithm if run.algorithm else ""),
                    "within_10pct": BAND[0] <= ratio <= BAND[1],
                    "bound": ran.bound,
                    "basis": run.basis,
                    "source": d.meta.get("source", ""),
                }
            )
    return out


def _measured(dataset: str, run: Run, f, g: int) -> tuple[float, int, float, bool, str]:
    """(size, ranks, busbw, approximate, what was assumed) of one run: a sweep at its largest size, or a quoted figure
    (kind point: `value` is the busbw) modelled at the size and node count `run.assume` gives where the words do not."""
    import pandas as pd

    if "nbytes" in f:
        top = f[f["nbytes"] == f["nbytes"].max()].iloc[0]
        return float(top["nbytes"]), int(top["world_size"]), float(top["busbw_GBps"]), False, ""
    if len(f) != 1:
        raise ValueError(f"{dataset}: {len(f)} rows match {run.match} ({run.label}); a quoted figure needs exactly one")
    top, assume, notes = f.iloc[0], run.assume or {}, []
    if "nbytes" not in assume:
        raise ValueError(f"{dataset}: {run.label} quotes no size; give Run.assume['nbytes'] to model it at")
    S = float(assume["nbytes"])
    notes.append(f"size not stated: modelled at {format_bytes(S)}")
    if pd.notna(top.get("world_size")):
        N = int(top["world_size"])
    else:
        stated = pd.notna(top.get("nodes"))
        m = int(top["nodes"]) if stated else int(assume["nodes"])
        N = m * g
        notes.append(f"ranks not stated: {g} per node" + ("" if stated else f"; nodes not stated: modelled at {m}"))
    approximate = str(top.get("approximate", "")).strip() == "~"
    return S, N, float(top["value"]), approximate, "; ".join(notes)


def validation():
    """One row per recorded run of every multi-node dataset in data/: measured busbw, the model's busbw for the
    algorithm that ran (NCCL's pick unless the run forced one), the ratio, and whether the run is healthy."""
    import pandas as pd

    return pd.DataFrame(runs())


def summary(frame) -> dict:
    """How many healthy multi-node runs fall within ±10%, and the runs outside with their status."""
    multi = frame[(frame["nodes"] > 1) & (frame["scope"] == "multi-node")]
    healthy = multi[multi["status"] == "healthy"]
    return {
        "runs": int(len(frame)),
        "multi_node_runs": int(len(multi)),
        "healthy_multi_node": int(len(healthy)),
        "healthy_within_10pct": int(healthy["within_10pct"].sum()),
        "datasets": int(frame["dataset"].nunique()),
        "by_status": {k: int(v) for k, v in multi["status"].value_counts().sort_index().items()},
        "outside": {r.run: r.status for r in frame.itertuples() if not r.within_10pct},
        "pick_differs_from_stated": [
            r.run
            for r in frame.itertuples()
            if r.stated_algorithm and not r.forced and r.stated_algorithm != r.nccl_pick
        ],
    }
