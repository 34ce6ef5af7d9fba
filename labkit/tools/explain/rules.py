"""The rules behind a verdict: why a log is not a valid measurement of one job across its ranks, and the likely causes of a number.

Each rule is one small function of what is known (a `Context`) returning a `Cause` or None, so each can be tested
alone; `causes()` runs them all and ranks what they find by `score` (how strongly the evidence points at it).
Sources of the facts the rules use are cited in the text they print.
"""

from __future__ import annotations

import dataclasses
import re

from ...cluster import System
from ...collectives import bus_factor
from ...specs import spec
from .model import Expected, nic_nccl_GBps
from .runs import Run

#: At or above this share of the model's busbw a run is healthy: the model is held to ±10% on healthy published
#: runs (issue 24), and real runs spread by a further ~10% (the validation table's healthy rows: 0.85-1.06).
HEALTHY_RATIO = 0.8
#: A ring cannot beat its own bound (the NIC sum across nodes, NVLink inside one): a run above this share of the
#: model's ring was not a ring, whatever it matches. 1.10 covers the model's spread on healthy rings (validation:
#: 0.91-1.09).
RING_CEILING_RATIO = 1.10
#: Above this share the model understates the run (its facts are too low, or an in-network reduction ran).
ABOVE_RATIO = 1.15
#: A sweep that stops below this size has not reached its plateau (sjeaugey, nccl-tests#212: "256M is too small").
PLATEAU_MIN_BYTES = 256 * 2**20
#: The largest sizes a busbw of 0 makes a run invalid at (small sizes can print 0.00 legitimately).
LARGE_BYTES = 2**20

GiB, MiB, KiB = 2**30, 2**20, 2**10


def size_text(n: float) -> str:
    for unit, k in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if n >= k:
            return f"{n / k:g} {unit}"
    return f"{n:g} B"


@dataclasses.dataclass(frozen=True)
class Cause:
    id: str
    title: str
    evidence: str
    score: float  # 0..1: how strongly the evidence points at it

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Context:
    run: Run
    system: System  # the hardware the model was given (line rates per direction)
    nodes: int
    world_size: int
    size: float
    busbw: float  # measured at `size`
    algbw: float | None
    expected: Expected  # the model's, for the algorithm the verdict compares with
    pick: Expected  # what NCCL would pick (the model's)
    algorithm_stated: bool  # NCCL_ALGO (log, dataset config or --algorithm) named the algorithm
    with_nvls: Expected | None = None  # NCCL's pick had NVLS been usable (the run could not use it: see next)
    why_no_nvls: str | None = None  # NCCL_NVLS_ENABLE=0 in the run, or an NCCL older than NVLS

    @property
    def ratio(self) -> float:
        return self.busbw / self.expected.busbw_GBps

    @property
    def nic_nccl_GBps(self) -> float:
        """What NCCL reaches per NIC (model.NIC_REACH x the line rate)."""
        return nic_nccl_GBps(self.system)

    @property
    def nic_sum_GBps(self) -> float:
        return self.system.nics_per_node * self.nic_nccl_GBps

    def node_network_GBps(self) -> float | None:
        """What each node pushed into the network per direction, for the algorithm compared with: a ring's busbw
        is what crosses the NICs (sjeaugey, nccl-tests#160); a 2-node tree sends S per node (algbw), more nodes 2*S."""
        a = self.expected.algorithm
        if a == "ring":
            return self.busbw
        if self.algbw is None:
            return None
        if a in ("tree", "nvls_tree"):
            return self.algbw * (1 if self.nodes == 2 else 2)
        if a.startswith("collnet"):
            return self.algbw
        return None


# --------------------------------------------------------------------------- not one job measured across its ranks
def single_rank_tables(run: Run, runs: list[Run]) -> str | None:
    if run.world_size != 1 or run.world_size_basis != "stated":
        return None
    alone = [r for r in runs if r.world_size == 1 and r.world_size_basis == "stated"]
    if len(alone) > 1:
        hosts = sorted({h for r in alone for h in r.hosts})
        return (
            f"{len(alone)} tables, each printed by a 1-rank run (one '# Rank 0' line each, on {', '.join(hosts)}): every "
            "process ran alone instead of joining one communicator; rebuild nccl-tests with `make MPI=1` and launch "
            "it with mpirun/srun (sjeaugey, nccl-tests#182)"
        )
    return "a 1-rank run: one GPU moves nothing over a bus (busbw is 0 by definition); run with 2 or more ranks"


def repeated_ranks(run: Run, runs: list[Run]) -> str | None:
    """The same rank number on several hosts: each node started its own job (nccl-tests#213's output)."""
    hosts_of: dict[int, set[str]] = {}
    for rank, host in run.rank_hosts:
        hosts_of.setdefault(rank, set()).add(host)
    twice = sorted(r for r, h in hosts_of.items() if len(h) > 1)
    if not twice:
        return None
    hosts = sorted(hosts_of[twice[0]])
    return (
        f"rank {twice[0]} is listed on {len(hosts)} hosts ({', '.join(hosts)}): each node ran its own job instead of "
        "one communicator across them; build nccl-tests with `make MPI=1` and launch one rank per GPU with mpirun/srun"
    )


def jobs_alone(run: Run, runs: list[Run]) -> str | None:
    """Several processes each ran nccl-tests as rank 0 of its own job, at once (nccl-tests#182, #213, #306's output):
    each job measured only its own GPUs."""
    if run.jobs_at_once < 2 or run.world_size == 1:  # one rank per job: single_rank_tables says it
        return None
    gpus = run.world_size or len({rank for rank, _host in run.rank_hosts})  # each job numbers its GPUs from 0
    if len(run.hosts) == 1 and gpus:
        what = f"this table is {run.hosts[0]}'s {gpus} GPU(s) by themselves"
    else:
        what = "each job's table holds only its own GPUs"
    return (
        f"each node measured alone: {run.jobs_at_once} nccl-tests jobs ran at once (the log prints nccl-tests' "
        f"parameter line '# nThread ...' {run.jobs_at_once} times before this table, and a job prints it from its "
        f"rank 0 only: nccl-tests src/common.cu), so {what}, an intra-node figure, not the cluster's. For one job "
        "across the nodes, build nccl-tests with `make MPI=1` (after `make clean`), check that the binary links MPI "
        "(`ldd all_reduce_perf | grep mpi`) and launch it with mpirun/srun (kwen2501, nccl-tests#27; kiskra-nvidia, "
        "nccl-tests#213)"
    )


def wrong_results(run: Run, runs: list[Run]) -> str | None:
    if not run.wrong_is_count:
        return None
    bad = [(n, w) for n, _p, _a, _b, w in run.points if str(w or "").isdigit() and int(w) > 0]
    if not bad:
        return None
    n, w = bad[0]
    return f"#wrong is {w} at {size_text(n)} ({len(bad)} rows with wrong results): the numbers do not count; fix that first"


def zero_busbw(run: Run, runs: list[Run]) -> str | None:
    zero = [n for n, _p, _a, b, _w in run.points if n >= LARGE_BYTES and b == 0]
    if not zero or run.world_size == 1:
        return None
    return f"busbw is 0 at {size_text(max(zero))}: the ranks did not run one collective together (a 1-rank job per process?)"


def out_of_bounds(run: Run, runs: list[Run]) -> str | None:
    oob = (run.out_of_bounds or "").strip()
    if not oob or re.match(r"^0\b", oob):
        return None
    return f"nccl-tests printed '# Out of bounds values : {oob}': results failed validation"


INVALID_RULES = (single_rank_tables, repeated_ranks, jobs_alone, wrong_results, zero_busbw, out_of_bounds)


def invalid_reasons(run: Run, runs: list[Run]) -> list[str]:
    return [why for rule in INVALID_RULES if (why := rule(run, runs))]


# --------------------------------------------------------------------------- likely causes
def nics_worth(c: Context) -> Cause | None:
    """The node pushed only a few NICs' worth into the network (the plateau is k NICs' rate, not the NIC sum)."""
    net = c.node_network_GBps()
    if c.nodes < 2 or net is None or c.ratio >= HEALTHY_RATIO or c.system.nics_per_node < 1:
        return None
    per_nic, k_all = c.nic_nccl_GBps, c.system.nics_per_node
    k = net / per_nic
    if k > 0.8 * k_all:
        return None
    what = "one NIC's worth" if 0.75 <= k < 1.5 else f"about {k:.1f} NICs' worth" if k >= 1.5 else f"{k:.1f} of one NIC"
    if c.expected.algorithm == "ring":
        how = "a ring's busbw is what crosses the NICs; sjeaugey, nccl-tests#160"
    elif c.expected.algorithm.startswith("collnet"):
        how = "with SHARP a node sends S into the fabric: its algbw is the NIC traffic"
    else:  # tree / NVLSTree: S per node per direction at 2 nodes, 2*S beyond (docs/design.md; sjeaugey, nccl-tests#196)
        per = "S per node, so its algbw" if c.nodes == 2 else "2*S per node, so twice its algbw"
        how = f"a {c.nodes}-node {c.expected.algorithm} sends {per} is the NIC traffic; sjeaugey, nccl-tests#196"
    ndr = " (46-48 GB/s per NDR 400 NIC: AddyLaddy, nccl-tests#290)" if abs(c.system.nic_GBps - 50) < 1 else ""
    text = (
        f"each node pushed {net:.1f} GB/s per direction into the network ({how}) = {k:.1f} x the "
        f"{per_nic:.1f} GB/s one NIC moves{ndr}, not the {c.nic_sum_GBps:.3g} GB/s of its {k_all} NIC(s). "
        "Check that NCCL uses every NIC (NCCL_DEBUG=INFO: one NET/IB line per NIC, "
        "NCCL_IB_HCA), their link speed (ibstat), and ACS/IOMMU settings (AddyLaddy, nccl-tests#319)"
    )
    if c.algbw and c.expected.algorithm == "ring" and abs(c.algbw / per_nic - 1) < 0.06:
        text += (
            f". Its algbw {c.algbw:.1f} happens to equal one NIC's rate; algbw (S/t) is not the NIC traffic of a ring, "
            "which sends 2(N-1)/N x S per node"
        )
    return Cause(
        "nics_worth", f"the network plateau is {what} of the node's {k_all} NICs", text, 0.9 if k < k_all / 2 else 0.6
    )


def pcie_not_nvlink(c: Context) -> Cause | None:
    """A single-node plateau at PCIe speed on GPUs whose model says NVLink."""
    gen5 = spec("PCIe Gen5 x16").per_direction_GBps()
    if c.nodes != 1 or c.system.nvlink_GBps < 2 * gen5 or c.busbw > gen5 or c.ratio >= HEALTHY_RATIO:
        return None
    gen4 = spec("PCIe Gen4 x16").per_direction_GBps()
    return Cause(
        "pcie_not_nvlink",
        "the plateau is a PCIe figure, not NVLink",
        f"{c.busbw:.1f} GB/s is at or below one PCIe x16 link per direction (Gen4 {gen4:g}, Gen5 {gen5:g} GB/s, "
        f"PCI-SIG) while the GPUs' NVLink is {c.system.nvlink_GBps:g} GB/s per direction: traffic is not on NVLink "
        "(NCCL_P2P_DISABLE / NCCL_P2P_LEVEL set, a VM without NVLink passthrough, or PCIe cards); "
        "check `nvidia-smi topo -m` for NV# links",
        0.85,
    )


def p2p_off(c: Context) -> Cause | None:
    """The run turns GPU peer-to-peer off (NCCL_P2P_DISABLE=1 or NCCL_P2P_LEVEL=LOC): copies go through host memory."""
    env = c.run.env
    set_ = [f"{k}={env[k]}" for k, off in (("NCCL_P2P_DISABLE", "1"), ("NCCL_P2P_LEVEL", "LOC")) if env.get(k) == off]
    if not set_:
        return None
    return Cause(
        "p2p_off",
        "GPU peer-to-peer turned off",
        f"the run sets {' '.join(set_)}: NCCL moves data between the GPUs through host memory (SHM) or the network "
        "instead of NVLink/PCIe P2P; unset it unless a P2P fault forced it",
        0.9 if c.ratio < HEALTHY_RATIO else 0.4,
    )


def nvls_off(c: Context) -> Cause | None:
    """NVLS (NVLink SHARP) is off: the run says so, or it matches the ring where the model expects NVLS."""
    if c.with_nvls is not None:  # NCCL_NVLS_ENABLE=0 in the log or config, or an NCCL without NVLS
        return Cause(
            "nvls_off",
            "NVLS (NVLink SHARP) not available to this run",
            f"{c.why_no_nvls}, so it is compared with NCCL's pick without NVLS ({c.pick.algorithm}, "
            f"{c.pick.busbw_GBps:.1f} GB/s); with NVLS the model expects {c.with_nvls.algorithm} at "
            f"{c.with_nvls.busbw_GBps:.1f} GB/s",
            0.8 if c.with_nvls.busbw_GBps > c.busbw / HEALTHY_RATIO else 0.3,
        )
    if not c.system.nvls or c.pick.algorithm not in ("nvls", "nvls_tree") or c.ratio >= HEALTHY_RATIO:
        return None
    if not 0.85 <= c.busbw / c.pick.ring_busbw_GBps <= 1.1:
        return None
    return Cause(
        "nvls_off",
        "NVLS (NVLink SHARP) evidently off",
        f"{c.busbw:.1f} GB/s matches the model's ring over NVLink ({c.pick.ring_busbw_GBps:.1f}), not "
        f"{c.pick.algorithm} ({c.pick.busbw_GBps:.1f}); NVLS needs NVSwitch multicast (fabric manager running, "
        "a CUDA driver and NCCL >= 2.17 that support it) and enough GPUs; NCCL_NVLS_ENABLE=0 turns it off",
        0.8,
    )


def _channel_lines(text: str) -> tuple[int, int]:
    """(NCCL channel lines over a NIC plugin — NET/IB, NET/AWS Libfabric, ... — and how many say GDRDMA)."""
    net = [m for m in re.findall(r"via NET/[^\n]*", text) if not m.startswith("via NET/Socket")]
    return len(net), sum("GDRDMA" in s for s in net)


def gdr_off(c: Context) -> Cause | None:
    """NCCL's channel lines show InfiniBand without GPUDirect RDMA (or the log turns it off)."""
    if c.nodes < 2:
        return None
    level = c.run.env.get("NCCL_NET_GDR_LEVEL", "")
    ib, gdr = _channel_lines(c.run.log_text)
    if level.upper() in ("0", "LOC"):
        evidence = f"the log sets NCCL_NET_GDR_LEVEL={level}"
    elif ib and not gdr:
        evidence = f"{ib} 'via NET/...' channel lines in the log, none tagged GDRDMA"
    else:
        return None
    return Cause(
        "gdr_off",
        "GPUDirect RDMA evidently off",
        f"{evidence}: NIC traffic goes through host memory. Check that GPU memory can be registered with the NIC "
        "(DMA-BUF, which NVIDIA's GPU Operator docs recommend, or the legacy nvidia-peermem module) and that the "
        "inter-node channel connections are tagged GDRDMA (AddyLaddy, nccl-tests#319)",
        0.85 if c.ratio < HEALTHY_RATIO else 0.4,
    )


def socket_transport(c: Context) -> Cause | None:
    """NCCL fell back to TCP sockets instead of InfiniBand/RoCE."""
    env = c.run.env
    if env.get("NCCL_NET", "").lower() == "socket" or env.get("NCCL_IB_DISABLE") == "1":
        why = "the run sets " + " ".join(f"{k}={env[k]}" for k in ("NCCL_NET", "NCCL_IB_DISABLE") if k in env)
    elif re.search(r"NET/Socket|Using network Socket", c.run.log_text):
        why = "the log shows NCCL's Socket transport (NET/Socket): the IB plugin or devices were not found"
    else:
        return None
    if c.nodes < 2:
        return None
    return Cause(
        "socket_transport",
        "NCCL used TCP sockets, not InfiniBand/RoCE",
        f"{why} (NCCL_IB_DISABLE, NCCL_NET=Socket, missing rdma-core/libibverbs in the container, or NCCL_IB_HCA "
        "naming no device): sockets cost CPU and rarely reach a NIC's RDMA rate",
        0.95,
    )


def two_node_tree(c: Context) -> Cause | None:
    """At two nodes a tree's busbw above the NIC sum is normal, up to 2(N-1)/N x the NIC sum."""
    line_sum = c.system.nics_per_node * c.system.nic_GBps
    if c.nodes != 2 or c.busbw <= c.nic_sum_GBps:
        return None
    if c.algorithm_stated and c.expected.algorithm == "ring":
        # a stated ring sends its busbw through the NICs: the tree's 2-node allowance does not apply, and a ring at
        # or below the NICs' line rate is no finding (AddyLaddy, nccl-tests#252: 95.3 GB/s over 4 NICs "looks great")
        if c.busbw <= line_sum * 1.02:
            return None
        return Cause(
            "ring_above_nic_sum",
            "a ring above the NIC sum: the NIC facts are understated",
            f"{c.busbw:.1f} GB/s from a ring, whose busbw is what crosses the NICs (sjeaugey, nccl-tests#160), is "
            f"above the {c.system.nics_per_node} x {c.system.nic_GBps:g} = {line_sum:.0f} GB/s given: more or faster NICs",
            0.8,
        )
    ceiling = bus_factor("all_reduce", c.world_size) * line_sum
    above = c.busbw > ceiling * 1.02
    return Cause(
        "two_node_tree_above_ceiling" if above else "two_node_tree",
        "above even the 2-node tree ceiling: the NIC facts are understated"
        if above
        else "busbw above the NIC sum is normal at 2 nodes",
        f"{c.busbw:.1f} GB/s vs the NIC sum {line_sum:.0f} (line): at 2 nodes NCCL's tree/NVLSTree sends S per node, "
        f"and busbw (computed as for a ring) can reach 2(N-1)/N x NIC sum = {ceiling:.0f} GB/s, a ceiling, not a wire "
        "rate (sjeaugey, nccl-tests#196). Benchmark the network with NCCL_ALGO=RING (AddyLaddy, nccl-tests#290)",
        0.7 if above else 0.5,
    )


def ring_not_pick(c: Context) -> Cause | None:
    """The log names no algorithm, and the run matches the ring rather than the model's pick."""
    if c.algorithm_stated or c.pick.algorithm == "ring" or c.expected.algorithm != "ring":
        return None
    return Cause(
        "ring_not_pick",
        "matches a ring; the model's pick would be faster",
        f"{c.busbw:.1f} GB/s is within {1 - HEALTHY_RATIO:.0%} of the model's ring ({c.pick.ring_busbw_GBps:.1f}); the "
        f"model's pick {c.pick.algorithm} would reach {c.pick.busbw_GBps:.1f}. NCCL may have chosen ring at this size "
        "(read NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING), or the pick is out of reach on this cluster",
        0.5,
    )


def small_sweep(c: Context) -> Cause | None:
    if c.size >= PLATEAU_MIN_BYTES or c.ratio >= HEALTHY_RATIO:
        return None
    return Cause(
        "small_sweep",
        "the sweep stops before the plateau",
        f"the largest size is {size_text(c.size)}: too small to reach peak bandwidth (sjeaugey, nccl-tests#212: "
        "'256M is too small'); rerun with -e 8G",
        # above the causes read from the numbers (NIC share, PCIe, a matched ring), which presume a plateau
        0.91,
    )


def above_model(c: Context) -> Cause | None:
    if c.ratio <= ABOVE_RATIO or c.nodes == 2 and c.busbw > c.nic_sum_GBps:
        return None
    return Cause(
        "above_model",
        "faster than the model",
        f"{c.ratio:.2f} x the model: the facts given are too low (more or faster NICs, NVLS or SHARP on), or the "
        "model misses what this cluster does; check the flags",
        0.6,
    )


def curve_dips(c: Context) -> Cause | None:
    curve = [(n, b) for n, b in c.run.curve() if n >= c.size / 1024]
    peak_n, peak = max(curve, key=lambda x: x[1])
    after = [(n, b) for n, b in curve if n > peak_n and b < 0.9 * peak]
    if not after:
        return None
    low = min(b for _, b in after)
    worst = f", {low:.1f} at worst" if low < after[0][1] else ""
    return Cause(
        "curve_falls_off",
        "busbw falls after its peak",
        f"{peak:.1f} GB/s at {size_text(peak_n)}, then {after[0][1]:.1f} at {size_text(after[0][0])}"
        f"{worst}: a larger buffer "
        "should not be slower (network congestion, adaptive routing, an algorithm/protocol switch: NCCL_DEBUG_SUBSYS=TUNING)",
        0.4,
    )


CAUSE_RULES = (
    socket_transport,
    nics_worth,
    pcie_not_nvlink,
    p2p_off,
    nvls_off,
    gdr_off,
    small_sweep,
    two_node_tree,
    ring_not_pick,
    above_model,
    curve_dips,
)


def causes(c: Context) -> list[Cause]:
    """Every rule's finding, most likely first (stable for equal scores: CAUSE_RULES order)."""
    found = [cause for rule in CAUSE_RULES if (cause := rule(c))]
    return sorted(found, key=lambda x: -x.score)
