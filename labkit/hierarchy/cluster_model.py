"""Cluster-scale all-reduce: a model of what NCCL's algorithms cost on multi-GPU, multi-NIC nodes.

Everything here is a *model* (label it so wherever it is drawn). Pure Python; no labkit imports,
so it can move into `labkit.models` / the hierarchy topic as it is.

Units: bytes, seconds, GB/s = 1e9 B/s. Every bandwidth is **per direction** (a link or NIC sends
and receives at once). nccl-tests semantics for what comes out: algbw = S / t and
busbw = algbw * 2(N-1)/N for every algorithm, because nccl-tests cannot see which algorithm ran
(nccl-tests doc/PERFORMANCE.md; sjeaugey, NVIDIA/nccl-tests#212 and #274). busbw therefore equals a
link rate only for the ring; tree at two nodes, NVLS and SHARP report busbw above the link rates
they use, and the caps below say by how much it can.

Symbols: g GPUs per node, m nodes, N = g*m ranks, S bytes (the nccl-tests "size").
B  = intra-node bandwidth one GPU can drive, per direction (NVLink through NVSwitch, or the direct
     NVLinks of a GH200 node), at NCCL's efficiency;
Nn = node network bandwidth = NICs used x per-NIC rate x NCCL's network efficiency, per direction.

Bandwidth terms (what bounds each algorithm; each fact cites its source where it is stated):

  ring        every GPU sends 2(N-1)/N*S; NCCL runs several rings (channels), each leaving the node
              on its own NIC (rail-aligned by default, NCCL_CROSS_NIC), so a node pushes
              2(N-1)/N*S into the network spread over all its NICs  ->  busbw = min(B, Nn).
  tree        NCCL's tree: a chain inside the node, a double binary tree between nodes, a tree pair
              per NIC. Every GPU sends ~2*S inside the node; a node sends S into the network at
              m = 2 (each node is root of one tree and leaf of the other) but 2*S at m > 2
              ->  algbw = min(B/2, Nn/1 or Nn/2);  at two nodes busbw reaches up to
              2(N-1)/N * Nn, about twice the NIC sum ("the two-node tree effect").
  hierarchical reduce-scatter inside ((g-1)/g*S per GPU), ring all-reduce of S/g across the m nodes
              (2(m-1)/m*S per node over all its NICs), all-gather inside. Its gains over a flat
              ring are the network bytes 2(m-1)/m*S instead of 2(N-1)/N*S per node, and the
              latency term (2(g-1) intra + 2(m-1) inter steps instead of 2(N-m) + 2(m-1)) -- not
              "x g": a flat ring already uses every NIC.
  nvls        NVLink SHARP inside one NVSwitch node: the switch adds. Each GPU sends its S once
              into the switch and receives the sum once (plus its own 1/N shard each way), i.e.
              S*(N+1)/N per direction instead of 2(N-1)/N*S  ->  algbw = e_nvls*B*N/(N+1)
              (sjeaugey: "algobw = busbw * n / (n+1)", NVIDIA/nccl-tests PR #239).
  nvls_tree   NVLS inside each node + tree between nodes (NCCL's NVLSTree, multi-node).
  collnet     IB SHARP in the fabric (NCCL's CollNet; chain inside the node, or NVLS inside):
              a node sends S into the switches and gets S back, instead of 2(N-1)/N*S for a
              ring  ->  algbw = min(B/2 or e_nvls*B*g/(g+1), Nn).

Latency terms (alpha) follow the form of NCCL's own tuning model (src/graph/tuning.cc) with its
constants, copied in NCCL_LAT_US below. They are NCCL's *model constants*, not measurements.
Time = alpha + S / algbw_peak; the model ignores the protocol switch at small sizes except through
`protocol` ("simple" for bandwidth, "ll" for the smallest messages) and ignores everything NCCL
does to reach peak (channels per SM, chunking): expect recorded mid-size points below the model.
"""

from __future__ import annotations

from typing import Iterable

from .cluster_presets import PRESETS, preset  # noqa: F401 (re-exported: the model's one entry point)
from .cluster_system import (  # noqa: F401 (re-exported)
    ALGORITHMS,
    GB,
    NCCL_ALGORITHMS,
    NCCL_BASE_LAT_US,
    NCCL_HW_LAT_US,
    NCCL_NET_OVERHEAD_US,
    NCCL_NVLINK_GBPS_PER_LINK,
    NET_EFFICIENCY,
    NVLS_EFFICIENCY,
    NVLS_MIN_GPUS_DEFAULT,
    PROTOCOLS,
    Estimate,
    System,
    _base,
    _estimate,
    _fraction,
    _lat,
    _layout,
    _log2_floor,
    _positive,
    _protocol,
    check_layout,
    hierarchical_latency_s,
    ring_latency_s,
    simple_system,
    tree_latency_s,
)


# --------------------------------------------------------------------------- the algorithms
def ring_allreduce(nbytes: float, nodes: int, system: System, *, protocol: str = "simple") -> Estimate:
    """Flat ring over all N GPUs, NCCL-style: several rings (channels), each crossing between nodes on
    its own NIC, rail-aligned unless `system.rail_aligned` is False.

    Assumes: ranks numbered node by node; every channel carries an equal share; a node pushes the
    ring's 2(N-1)/N*S per direction into the network spread over `system.ring_nics()` NICs; every
    GPU sends 2(N-1)/N*S over its intra-node links. busbw = min(B, Nn): the intra-node links cap it,
    not one NIC.
    """
    S, m, g, N = _layout(nbytes, nodes, system)
    f = 2 * (N - 1) / N
    B = system.intra_Bps
    if m == 1:
        busbw, bound, cap = B, "intra-node links", system.intra_GBps
    else:
        Nn = system.node_net_Bps(system.ring_nics())
        busbw, bound = (B, "intra-node links") if B <= Nn else (Nn, f"node NIC sum ({system.ring_nics()} NICs)")
        cap = min(system.intra_GBps, system.node_net_line_GBps())
    return _estimate(
        "ring", S, m, N, busbw / f, cap, bound, ring_latency_s(N, m, system, protocol), f * S, f * S if m > 1 else 0.0
    )


def tree_allreduce(nbytes: float, nodes: int, system: System, *, protocol: str = "simple") -> Estimate:
    """NCCL's tree: a chain through the g GPUs of each node, a double binary tree between nodes
    (one tree pair per NIC), reduce then broadcast, pipelined.

    Assumes: every GPU sends ~2*S inside the node (sjeaugey, NVIDIA/nccl#457); a node sends S per
    direction into the network at m = 2 (root of one tree, leaf of the other) and 2*S at m > 2.
    So at exactly two nodes busbw can reach 2(N-1)/N * NIC sum -- about twice what a ring gets from
    the same NICs -- when the intra-node links have room (sjeaugey, NVIDIA/nccl#946).
    """
    S, m, g, N = _layout(nbytes, nodes, system)
    B = system.intra_Bps
    limits = [(B / 2, "intra-node chain (2*S per GPU)", system.intra_GBps / 2)]
    net_bytes = 0.0
    if m > 1:
        per_node = 1.0 if m == 2 else 2.0
        net_bytes = per_node * S
        limits.append(
            (
                system.node_net_Bps() / per_node,
                f"node NIC sum ({'S' if m == 2 else '2*S'} per node per direction)",
                system.node_net_line_GBps() / per_node,
            )
        )
    alg, bound, _ = min(limits, key=lambda x: x[0])
    cap_alg = min(x[2] for x in limits)
    return _estimate(
        "tree",
        S,
        m,
        N,
        alg,
        cap_alg * 2 * (N - 1) / N,
        bound,
        tree_latency_s(g, m, system, protocol),
        2 * S,
        net_bytes,
        note="at 2 nodes busbw may exceed the NIC sum (busbw assumes a ring)" if m == 2 else "",
    )


def hierarchical_allreduce(
    nbytes: float, nodes: int, system: System, *, protocol: str = "simple", pipelined: bool = False
) -> Estimate:
    """Hand-written hierarchical all-reduce: reduce-scatter inside each node, ring all-reduce of the
    S/g shard across the m nodes (GPU i of every node together: one rail), all-gather inside.

    Assumes: phases run one after another (pipelined=True: fully overlapped, time of the slowest);
    the middle phase uses every NIC of the node (each GPU its shard, its rail). Network bytes per node
    2(m-1)/m*S instead of the flat ring's 2(N-1)/N*S; latency 2(g-1) intra + 2(m-1) inter steps.
    """
    S, m, g, N = _layout(nbytes, nodes, system)
    B = system.intra_Bps
    t_inside = (g - 1) / g * S / B  # each of reduce-scatter and all-gather
    t_across = 2 * (m - 1) / m * S / system.node_net_Bps() if m > 1 else 0.0
    if pipelined:
        t_bw = max(2 * t_inside, t_across)
    else:
        t_bw = 2 * t_inside + t_across
    bound = "network (middle phase)" if t_across >= 2 * t_inside else "intra-node phases"
    # line-rate cap: same formula at line rates, fully overlapped (the most it could ever reach)
    t_line = max(
        2 * (g - 1) / g * S / (system.intra_GBps * GB),
        2 * (m - 1) / m * S / (system.node_net_line_GBps() * GB) if m > 1 else 0.0,
    )
    cap = S / t_line / GB * 2 * (N - 1) / N
    return _estimate(
        "hierarchical",
        S,
        m,
        N,
        S / t_bw,
        cap,
        bound,
        hierarchical_latency_s(g, m, system, protocol),
        2 * (g - 1) / g * S,
        2 * (m - 1) / m * S if m > 1 else 0.0,
        note="pipelined phases" if pipelined else "phases one after another",
    )


def nvls_allreduce(nbytes: float, nodes: int, system: System) -> Estimate:
    """NVLink SHARP inside one NVSwitch node: the switch reads every GPU's data, adds it and multicasts
    the sum (NCCL's NVLS). Needs `system.nvls` and nodes == 1.

    Assumes: each GPU sends S into the switch (to_switch_bytes_per_gpu == S) and per direction moves
    S*(N+1)/N in all, so algbw = e_nvls * B * N/(N+1) (sjeaugey, NVIDIA/nccl-tests PR #239);
    e_nvls is NCCL's own nvlsEfficiency. busbw (a ring formula) then exceeds the link rate.
    A large-message algorithm: NCCL's model charges it 25 us, against a few us for LL rings.
    """
    S, m, g, N = _layout(nbytes, nodes, system)
    if not system.nvls:
        raise ValueError(f"{system.name}: no NVLink SHARP (system.nvls is False)")
    if m != 1:
        raise ValueError(f"nvls is the single-node algorithm; nodes must be 1, got {m} (use nvls_tree or collnet)")
    alg = system.nvls_efficiency * system.intra_Bps * N / (N + 1)
    cap = system.intra_GBps * N / (N + 1) * 2 * (N - 1) / N
    return _estimate(
        "nvls",
        S,
        m,
        N,
        alg,
        cap,
        "NVSwitch reduction (NVLink)",
        _lat("nvlink", "nvls", "simple"),
        S * (N + 1) / N,
        0.0,
        to_switch=S,
    )


def nvls_tree_allreduce(nbytes: float, nodes: int, system: System) -> Estimate:
    """NCCL's NVLSTree: NVLS inside each node, a tree between nodes. Needs `system.nvls`, nodes > 1.

    Assumes: inside, algbw <= e_nvls * B * g/(g+1); across, a node sends S (m = 2) or 2*S (m > 2)
    per direction over all its NICs -- the two-node tree effect applies here too (tuning.cc doubles
    the inter-node bandwidth of NVLSTree at <= 2 nodes).
    """
    S, m, g, N = _layout(nbytes, nodes, system)
    if not system.nvls:
        raise ValueError(f"{system.name}: no NVLink SHARP (system.nvls is False)")
    if m < 2 or g < 2:
        raise ValueError(f"nvls_tree needs nodes >= 2 and >= 2 GPUs per node, got nodes={m}, gpus_per_node={g}")
    per_node = 1.0 if m == 2 else 2.0
    limits = [
        (
            system.nvls_efficiency * system.intra_Bps * g / (g + 1),
            "NVSwitch reduction inside the node",
            system.intra_GBps * g / (g + 1),
        ),
        (
            system.node_net_Bps() / per_node,
            f"node NIC sum ({'S' if m == 2 else '2*S'} per node per direction)",
            system.node_net_line_GBps() / per_node,
        ),
    ]
    alg, bound, _ = min(limits, key=lambda x: x[0])
    cap = min(x[2] for x in limits) * 2 * (N - 1) / N
    lat = _lat("nvlink", "nvls_tree", "simple") + 2 * _log2_floor(m) * _lat("net", "nvls_tree", "simple")
    return _estimate("nvls_tree", S, m, N, alg, cap, bound, lat, S * (g + 1) / g, per_node * S, to_switch=S)


def collnet_allreduce(nbytes: float, nodes: int, system: System, *, intra: str = "chain") -> Estimate:
    """IB SHARP (NCCL CollNet): the fabric's switches add the nodes' partial sums. Needs `system.sharp`.

    intra="chain" (CollNetChain): a chain through the node's GPUs, ~2*S per GPU inside;
    intra="nvls" (NVLS + IB SHARP, NCCL's multi-node "NVLS"): NVSwitch reduction inside.
    Assumes: a node sends S into the network per direction and receives S back (not 2(N-1)/N*S),
    so busbw can exceed the NIC sum; the intra-node part usually binds (CoreWeave 8x8 H100).
    """
    S, m, g, N = _layout(nbytes, nodes, system)
    if not system.sharp:
        raise ValueError(f"{system.name}: no IB SHARP (system.sharp is False)")
    if m < 2:
        raise ValueError(f"collnet is a multi-node algorithm; nodes must be >= 2, got {m}")
    if intra == "chain":
        inside = (system.intra_Bps / 2, "intra-node chain (2*S per GPU)", system.intra_GBps / 2)
        intra_bytes, lat = (
            2 * S,
            2 * (g - 1) * _lat(system.intra_kind, "collnet", "simple") + _lat("net", "collnet", "simple"),
        )
    elif intra == "nvls":
        if not system.nvls:
            raise ValueError(f"{system.name}: intra='nvls' needs system.nvls")
        inside = (
            system.nvls_efficiency * system.intra_Bps * g / (g + 1),
            "NVSwitch reduction inside the node",
            system.intra_GBps * g / (g + 1),
        )
        intra_bytes, lat = S * (g + 1) / g, _lat("nvlink", "nvls", "simple") + _lat("net", "nvls", "simple")
    else:
        raise ValueError(f"intra must be 'chain' or 'nvls', got {intra!r}")
    limits = [inside, (system.node_net_Bps(), "node NIC sum (S per node per direction)", system.node_net_line_GBps())]
    alg, bound, _ = min(limits, key=lambda x: x[0])
    cap = min(x[2] for x in limits) * 2 * (N - 1) / N
    return _estimate(
        "collnet", S, m, N, alg, cap, bound, lat, intra_bytes, S, to_switch=S, note=f"IB SHARP, {intra} inside the node"
    )


# --------------------------------------------------------------------------- every algorithm, and NCCL's pick
def estimates(
    system: System, nbytes: float, nodes: int, *, protocol: str = "simple", algorithms: Iterable[str] = ALGORITHMS
) -> list[Estimate]:
    """Every algorithm that applies to this system and layout, modelled at `nbytes`.

    ring, tree and hierarchical always; nvls on one NVSwitch node; nvls_tree on several; collnet
    where the fabric has IB SHARP. The list does not say which NCCL would run: see `nccl_choice`.
    """
    S, m, g, N = _layout(nbytes, nodes, system)
    out = []
    for a in algorithms:
        if a not in ALGORITHMS:
            raise ValueError(f"unknown algorithm {a!r}; choose from {ALGORITHMS}")
        if a == "ring":
            out.append(ring_allreduce(S, m, system, protocol=protocol))
        elif a == "tree":
            out.append(tree_allreduce(S, m, system, protocol=protocol))
        elif a == "hierarchical":
            out.append(hierarchical_allreduce(S, m, system, protocol=protocol))
        elif a == "nvls" and system.nvls and m == 1 and g >= 2:
            out.append(nvls_allreduce(S, m, system))
        elif a == "nvls_tree" and system.nvls and m > 1 and g >= 2:
            out.append(nvls_tree_allreduce(S, m, system))
        elif a == "collnet" and system.sharp and m > 1:
            out.append(collnet_allreduce(S, m, system, intra="nvls" if system.nvls else "chain"))
    return out


def nccl_choice(
    system: System, nbytes: float, nodes: int, *, collnet_enabled: bool = False, protocol: str = "simple"
) -> Estimate:
    """The algorithm NCCL would most likely run: the lowest modelled time among those NCCL would consider.

    Basis: NCCL's tuner models every algorithm x protocol and "take[s] the lowest" time (sjeaugey,
    NVIDIA/nccl#457); here the same rule on this model. Considered: ring, tree; nvls on one node
    when the GPU count reaches `system.nvls_min_gpus`; nvls_tree on several NVSwitch nodes;
    collnet only with collnet_enabled (NCCL_COLLNET_ENABLE=1 and the SHARP plugin). Not modelled:
    NCCL's own constants, protocol choice, NCCL_ALGO overrides and vendor tuner plugins (AWS's ofi
    tuner chooses per instance type) -- read NCCL_DEBUG_SUBSYS=TUNING for the truth.
    """
    S, m, g, N = _layout(nbytes, nodes, system)
    allowed = ["ring", "tree"]
    if system.nvls and m == 1 and N >= system.nvls_min_gpus:
        allowed.append("nvls")
    if system.nvls and m > 1 and g >= 2:
        allowed.append("nvls_tree")
    if collnet_enabled and system.sharp and m > 1:
        allowed.append("collnet")
    return min(estimates(system, S, m, protocol=protocol, algorithms=allowed), key=lambda e: e.seconds)


def table(system: System, nbytes: float, nodes: int, **kw) -> list[dict]:
    """Records for the CLI: one dict per algorithm (algorithm, seconds, algbw_GBps, busbw_GBps, ...),
    with `nccl_would_pick` True on the one `nccl_choice` returns."""
    pick = nccl_choice(system, nbytes, nodes, **kw).algorithm
    rows = []
    for e in estimates(system, nbytes, nodes, protocol=kw.get("protocol", "simple")):
        d = e.to_dict()
        d["nccl_would_pick"] = e.algorithm == pick
        rows.append(d)
    return rows


def healthy_scaling(system: System, nbytes: float, node_counts=(1, 2, 8), **kw) -> list[dict]:
    """The 'healthy cluster' prediction: for each node count, NCCL's likely algorithm and the ring's
    and the tree's busbw -- what 1 -> 2 -> 8 nodes should look like before anyone measures."""
    rows = []
    for m in node_counts:
        pick = nccl_choice(system, nbytes, m, **kw)
        ring = ring_allreduce(nbytes, m, system)
        tree = tree_allreduce(nbytes, m, system)
        rows.append(
            {
                "nodes": m,
                "gpus": m * system.gpus_per_node,
                "nccl_pick": pick.algorithm,
                "pick_busbw_GBps": pick.busbw_GBps,
                "ring_busbw_GBps": ring.busbw_GBps,
                "tree_busbw_GBps": tree.busbw_GBps,
            }
        )
    return rows


# --------------------------------------------------------------------------- the command line
def cli_records(
    nbytes: float,
    gpus: int,
    nodes: int,
    bandwidth_GBps: float,
    nic_bandwidth_GBps: float | None,
    nics_per_node: int | None,
    gpus_per_node: int | None = None,
    *,
    nvls: bool = False,
    sharp: bool = False,
    protocol: str = "simple",
) -> list[dict]:
    """`labkit model --nodes ...`: one record per algorithm that applies (nccl-tests semantics), the
    rates taken as given (line rates give upper bounds; NCCL-level rates, e.g. 370 per H100 and 47 per
    NDR NIC, give predictions). Bad input is refused naming the command-line flag."""
    _positive("--size", nbytes)
    N, m, g = check_layout(gpus, nodes, gpus_per_node, names=("--gpus", "--nodes", "--gpus-per-node"))
    _positive("--bandwidth", bandwidth_GBps)
    if m > 1 and (nic_bandwidth_GBps is None or nics_per_node is None):
        raise ValueError("--nic-bandwidth and --nics-per-node are needed when --nodes is above 1")
    nic = 1.0 if nic_bandwidth_GBps is None else _positive("--nic-bandwidth", nic_bandwidth_GBps)
    k = 1 if nics_per_node is None else _positive("--nics-per-node", nics_per_node, integer=True)
    system = simple_system(g, bandwidth_GBps, nic, k, nvls=nvls, sharp=sharp, nvls_min_gpus=2)
    rows = table(system, nbytes, m, protocol=protocol)
    return [
        {
            "algorithm": r["algorithm"],
            "seconds": r["seconds"],
            "algbw_GBps": r["algbw_GBps"],
            "busbw_GBps": r["busbw_GBps"],
            "nbytes": nbytes,
            "gpus": N,
            "nodes": m,
            "gpus_per_node": g,
            "latency_s": r["latency_s"],
            "bound": r["bound"],
            "nccl_would_pick": r["nccl_would_pick"],
            "model": "labkit.hierarchy.cluster_model (a model, not a measurement)",
        }
        for r in rows
        if m > 1 or r["algorithm"] != "hierarchical"
    ]
