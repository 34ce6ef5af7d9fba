"""What a P2P matrix diagnoses, in plain words: peer access not in effect, slow pairs and GPUs, contention, NUMA.

`diagnose(data)` reads a recorded or live matrix (and its topology); `doctor_findings(env)` reads only
what `labkit doctor` collected (peer access, GPU names, `nvidia-smi topo -m`). Both return
`labkit.system.Finding`s. `check_pair` scores the "which pair looks wrong" exercise.
"""

from __future__ import annotations

import re
from typing import Iterable, Sequence

from .. import check
from ..system import Finding
from .matrices import (
    DIRECTION,
    KINDS,
    P2P_STATES,
    P2P_TEXT,
    P2PRun,
    as_source,
    gpu_topology,
    is_bandwidth,
    link_label,
    matrix,
    metrics,
    numa_of,
    nvlink_count,
    off_diagonal,
)

# Diagnosis thresholds — each says when a number is worth a sentence.
#: A pair at < 75% of the median of comparable pairs is an outlier worth a warning.
OUTLIER_FRACTION = 0.75


#: A GPU whose pairs are all < 90% of the others' is worth a note (a slow slot, a remote socket).
SLOW_GPU_FRACTION = 0.90


#: 'P2P on' within 25% of 'staged through host' means peer access is not really in effect.
SAME_PATH_RATIO = 1.25


#: Both directions at once below 90% of one direction alone is contention, not noise.
BIDIR_FLOOR_FRACTION = 0.90


#: NVLink 1 (P100) carries 20 GB/s per link per direction, the slowest generation (P100
#: whitepaper: 4 links, 160 GB/s bidirectional). So NV# promises at least #·20 GB/s each way.
NVLINK_MIN_PER_LINK_GBps = 20.0


#: Report an NVLink pair below half of that floor: no working NVLink is that slow.
PROMISE_FRACTION = 0.5


_CONSUMER_RE = re.compile(r"GeForce|RTX\s*[2-5]0[5-9]0(?!.*(PRO|Ada|A\d000))|TITAN", re.I)


_VM_RE = re.compile(r"\bVM\b|virtual machine|hypervisor|Standard_ND|\bND\d", re.I)


def _fmt(v: float) -> str:
    return f"{v:.0f}" if abs(v) >= 100 else f"{v:.1f}" if abs(v) >= 10 else f"{v:.2f}"


def _fmt_range(vals: Sequence[float]) -> str:
    import numpy as np

    lo, hi = np.percentile(vals, [10, 90]) if len(vals) >= 5 else (min(vals), max(vals))
    return f"~{_fmt(lo)}" if _fmt(lo) == _fmt(hi) else f"~{_fmt(lo)}–{_fmt(hi)}"


def _pair_text(pairs: Iterable[tuple[int, int]]) -> list[tuple[str, tuple[tuple[int, int], ...]]]:
    """Collapse (i, j) and (j, i) into 'GPUi↔GPUj'; a lone direction stays 'GPUi→GPUj'."""
    pairs = set(pairs)
    out, seen = [], set()
    for i, j in sorted(pairs):
        if (i, j) in seen:
            continue
        if (j, i) in pairs:
            a, b = min(i, j), max(i, j)
            out.append((f"GPU{a}↔GPU{b}", ((a, b), (b, a))))
            seen |= {(i, j), (j, i)}
        else:
            out.append((f"GPU{i}→GPU{j}", ((i, j),)))
            seen.add((i, j))
    return out


def _what(kind: str, p2p: str) -> str:
    what = {
        "bandwidth_uni": "unidirectional",
        "bandwidth_bi": "bidirectional",
        "latency_gpu": "latency",
        "latency_cpu": "host-side latency",
    }[kind]
    return f"{what}, {P2P_TEXT[p2p].split(' (')[0]}"


def _likely_causes(label: str | None, gpu: str, context: str) -> str:
    causes = []
    if _CONSUMER_RE.search(gpu or ""):
        causes.append(
            "consumer (GeForce) GPUs — the driver does not offer PCIe peer-to-peer on most of "
            "them (both recorded GeForce pairs print 'CANNOT Access Peer')"
        )
    if _VM_RE.search(context or ""):
        causes.append("a virtual machine — the hypervisor must expose the PCIe topology and allow peer traffic")
    if label in ("PIX", "PXB"):
        causes.append(
            f"the pair shares a PCIe switch ({label}), so the hardware path exists: check that the IOMMU "
            "is off or in passthrough and that ACS does not redirect peer traffic to the root complex"
        )
    elif label == "SYS":
        causes.append(
            "the GPUs sit under different CPU sockets (SYS): many platforms do not route PCIe "
            "peer traffic across the socket link"
        )
    elif label in ("PHB", "NODE"):
        causes.append(
            f"the path crosses the CPU's host bridge ({label}): the platform must support "
            "peer-to-peer through its root complex, and IOMMU/ACS must allow it"
        )
    elif label and nvlink_count(label):
        causes.append(
            f"the topology shows {label}, so the NVLink path exists: peer access may be off in "
            "software, or links are down (`nvidia-smi nvlink -s`)"
        )
    if not causes:
        causes.append(
            "consumer GPUs, IOMMU/ACS on the PCIe path, a virtual machine, or GPUs under different "
            "CPU sockets — `nvidia-smi topo -p2p r` says which pairs the driver allows"
        )
    return "; ".join(causes)


def _range_text(vals: Sequence[float]) -> str:
    lo, hi = min(vals), max(vals)
    return _fmt(lo) if _fmt(lo) == _fmt(hi) else f"{_fmt(lo)}–{_fmt(hi)}"


def diagnose(data, *, topology: str | None = None, access=None) -> list[Finding]:
    """Plain-language findings from a p2p matrix and its topology.

    `data`: a recorded Dataset, a live P2PRun, or a tidy DataFrame in the p2p_matrix schema;
    `topology`: `nvidia-smi topo -m` text (default: the one the data carries, if any).

    Rules: peer access not in effect (P2P on ≈ staged, or `access` says no); P2P slower than
    staging; an NVLink pair far below what its link count promises; GPUs slow with every peer;
    single pairs far below comparable pairs (same link label for P2P, same NUMA relation for staged
    copies); both directions at once well below one direction alone; staged copies across NUMA
    nodes. `access` is {(src, dst): bool} (a live P2PRun brings its own). Warnings come first.
    """
    import numpy as np

    src = as_source(data, topology)
    f = src.frame
    topo = src.topology_or_none()
    if access is None and isinstance(data, P2PRun):
        access = {
            (a, b): data.peer_access[x][y] for x, a in enumerate(data.indices) for y, b in enumerate(data.indices)
        }
    mats = {km: matrix(f, *km) for km in metrics(f)}
    numa = numa_of(topo)
    out: list[Finding] = []

    # 1. peer access not in effect
    blocked: set[tuple[int, int]] = {p for p, ok in (access or {}).items() if p[0] != p[1] and not ok}
    on, off = mats.get(("bandwidth_uni", "enabled")), mats.get(("bandwidth_uni", "disabled"))

    def staged_value(i, j):
        return off.loc[i, j] if off is not None and i in off.index and j in off.columns else np.nan

    if on is not None and off is not None:
        blocked |= {
            (i, j)
            for i, j, v in off_diagonal(on)
            if np.isfinite(staged_value(i, j)) and v < SAME_PATH_RATIO * staged_value(i, j)
        }
    for text, pairs in _pair_text(blocked):
        i, j = pairs[0]
        got = [on.loc[p] for p in pairs if on is not None and np.isfinite(on.loc[p])]
        staged = [staged_value(*p) for p in pairs if np.isfinite(staged_value(*p))]
        numbers = (
            f": with P2P 'on' the copy reaches {_range_text(got)} GB/s, no more than staged through host memory "
            f"({_range_text(staged)} GB/s, unidirectional)"
            if got and staged
            else " (can_device_access_peer says no)"
        )
        out.append(
            Finding(
                "warn",
                f"{text}: peer access is not in effect{numbers} — every copy between them is staged through host "
                f"memory. Likely cause: {_likely_causes(link_label(topo, i, j), src.gpu, src.context)}.",
                rule="peer_access",
                pairs=pairs,
            )
        )

    # 2. P2P slower than staging
    if on is not None and off is not None:
        slower = [
            (i, j) for i, j, v in off_diagonal(on) if np.isfinite(staged_value(i, j)) and v < 0.9 * staged_value(i, j)
        ]
        for text, pairs in _pair_text(slower):
            out.append(
                Finding(
                    "warn",
                    f"{text}: the direct P2P copy ({_range_text([on.loc[p] for p in pairs])} GB/s, unidirectional) is slower "
                    f"than staging through host memory ({_range_text([staged_value(*p) for p in pairs])} GB/s) — the "
                    "platform's peer path is poor (often across CPU sockets); NCCL_P2P_LEVEL keeps NCCL off it.",
                    rule="p2p_slower_than_staged",
                    pairs=pairs,
                )
            )

    # 3. NVLink promise
    for kind in ("bandwidth_uni", "bandwidth_bi"):
        m = mats.get((kind, "enabled"))
        if m is None or topo is None:
            continue
        per_pair = 2 if kind == "bandwidth_bi" else 1
        weak = [
            (i, j)
            for i, j, v in off_diagonal(m)
            if (i, j) not in blocked
            and nvlink_count(link_label(topo, i, j))
            and v < PROMISE_FRACTION * per_pair * NVLINK_MIN_PER_LINK_GBps * nvlink_count(link_label(topo, i, j))
        ]
        for text, pairs in _pair_text(weak):
            label = link_label(topo, *pairs[0])
            floor = per_pair * NVLINK_MIN_PER_LINK_GBps * nvlink_count(label)
            out.append(
                Finding(
                    "warn",
                    f"{text}: the topology says {label}, which carries at least {_fmt(floor)} GB/s ({DIRECTION[kind]}) even on "
                    f"first-generation NVLink, but the copy reaches {_range_text([m.loc[p] for p in pairs])} GB/s: the NVLink "
                    "path is not in use (peer access off in software, or links down — `nvidia-smi nvlink -s`).",
                    rule="nvlink_promise",
                    pairs=pairs,
                )
            )

    for (kind, p2p), m in sorted(mats.items(), key=lambda kv: (KINDS.index(kv[0][0]), kv[0][1])):
        cells = off_diagonal(m)
        gpus = sorted({i for i, _, _ in cells} | {j for _, j, _ in cells})
        lower_is_better = not is_bandwidth(kind)
        unit = "µs" if lower_is_better else "GB/s"

        def worse(a, b):  # how far a is below b, as a fraction ≤ 1 when a is the worse one
            return (b / a) if lower_is_better else (a / b)

        # 4. GPUs slow with every peer (one finding per matrix, naming them all)
        slow = {}
        if len(gpus) >= 4:
            for g in gpus:
                mine = [v for i, j, v in cells if g in (i, j)]
                rest = [v for i, j, v in cells if g not in (i, j)]
                if len(mine) >= 2 and len(rest) >= 2 and worse(np.median(mine), np.median(rest)) < SLOW_GPU_FRACTION:
                    slow[g] = (float(np.median(mine)), float(np.median(rest)))
        if slow and len(slow) <= len(gpus) // 2:
            names = ", ".join(f"GPU{g}" for g in slow)
            nodes = {numa.get(g) for g in slow}
            numa_note = (
                f" They share NUMA node {nodes.pop()}, unlike the others: perhaps the process issuing the copies "
                "ran on the other socket."
                if len(nodes) == 1 and None not in nodes and nodes != {numa.get(g) for g in gpus if g not in slow}
                else ""
            )
            vals = "; ".join(f"GPU{g} {_fmt(a)} vs {_fmt(b)} {unit}" for g, (a, b) in slow.items())
            out.append(
                Finding(
                    "info",
                    f"{names}: {'higher latency' if lower_is_better else 'lower bandwidth'} with every peer "
                    f"({_what(kind, p2p)}; median of its pairs vs pairs without it: {vals}) — such a GPU may sit under the "
                    "other CPU socket, behind a busier PCIe switch, or on a narrower or slower link (`labkit doctor` shows "
                    f"width and generation).{numa_note}",
                    rule="slow_gpu",
                    pairs=tuple((i, j) for i, j, _ in cells if i in slow or j in slow),
                )
            )

        # 5. single pairs far below comparable pairs
        def group_of(i, j):
            if p2p == "enabled":
                label = link_label(topo, i, j)
                return f"with the same link ({label})" if label else ""
            if numa.get(i) is not None and numa.get(j) is not None:
                return "on the same NUMA node" if numa[i] == numa[j] else "across NUMA nodes"
            return ""

        groups: dict[str, list[tuple[int, int, float]]] = {}
        for i, j, v in cells:
            groups.setdefault(group_of(i, j), []).append((i, j, v))
        for where, members in groups.items():
            if len(members) < 4:
                continue
            med = float(np.median([v for _, _, v in members]))
            flagged = [
                (i, j)
                for i, j, v in members
                if worse(v, med) < OUTLIER_FRACTION and not ({i, j} & set(slow)) and (i, j) not in blocked
            ]
            others = [v for i, j, v in members if (i, j) not in flagged]
            hint = (
                " (A staged copy climbs to host memory and back: GPUs behind one PCIe switch share its uplink.)"
                if p2p == "disabled"
                else " Check that pair's links (`nvidia-smi nvlink -s`, `nvidia-smi topo -m`)."
            )
            for text, pairs in _pair_text(flagged):
                out.append(
                    Finding(
                        "warn",
                        f"{text} {'takes' if lower_is_better else 'reaches'} {_range_text([m.loc[p] for p in pairs])} {unit} "
                        f"({_what(kind, p2p)}) vs {_fmt_range(others)} {unit} for the other pairs"
                        f"{' ' + where if where else ''}.{hint}",
                        rule="outlier_pair",
                        pairs=pairs,
                    )
                )

    # 6. both directions at once well below one direction alone
    for p2p in P2P_STATES:
        uni, bi = mats.get(("bandwidth_uni", p2p)), mats.get(("bandwidth_bi", p2p))
        if uni is None or bi is None:
            continue
        below = [
            (i, j)
            for i, j, v in off_diagonal(bi)
            if i in uni.index
            and j in uni.columns
            and np.isfinite(uni.loc[i, j])
            and v < BIDIR_FLOOR_FRACTION * uni.loc[i, j]
        ]
        for text, pairs in _pair_text(below):
            out.append(
                Finding(
                    "warn" if p2p == "enabled" else "info",
                    f"{text} ({P2P_TEXT[p2p].split(' (')[0]}): both directions at once reach "
                    f"{_range_text([bi.loc[p] for p in pairs])} GB/s in total, less than one direction alone "
                    f"({_range_text([uni.loc[p] for p in pairs])} GB/s) — the two directions contend for something they "
                    "share, typically a PCIe switch uplink or the host memory they are staged through.",
                    rule="bidirectional_below_unidirectional",
                    pairs=pairs,
                )
            )

    # 7. staged copies that cross NUMA nodes
    if off is not None and len(set(numa.values()) - {"N/A"}) > 1:
        within = [v for i, j, v in off_diagonal(off) if numa.get(i) == numa.get(j)]
        across = [v for i, j, v in off_diagonal(off) if numa.get(i) != numa.get(j)]
        if within and across and np.median(across) < SLOW_GPU_FRACTION * np.median(within):
            out.append(
                Finding(
                    "info",
                    f"Staged copies between GPUs on different NUMA nodes reach a median {_fmt(np.median(across))} GB/s vs "
                    f"{_fmt(np.median(within))} GB/s within one node: the staging buffer sits on one socket, so the "
                    "other GPU's half of the copy crosses the socket link.",
                    rule="numa",
                    pairs=(),
                )
            )
    out.sort(key=lambda x: x.level != "warn")
    return out


def doctor_findings(env: dict) -> list[Finding]:
    """Peer-access findings for `labkit doctor`, with the likely cause per pair.

    Uses only what `labkit.system.environment()` collected (no measurement): `peer_access`,
    the GPU names and `nvidia-smi topo -m`.
    """
    peers = env.get("peer_access") or {}
    if not peers:
        return []
    topo = None
    if env.get("topology"):
        try:
            topo = gpu_topology(env["topology"])
        except ValueError:
            topo = None
    names = env.get("cuda_devices") or [g.get("name") for g in env.get("gpus") or []]
    gpu = ", ".join(sorted({str(n) for n in names if n}))
    blocked = []
    for key, ok in peers.items():
        i, j = (int(x) for x in key.split("->"))
        if not ok:
            blocked.append((i, j))
    out = []
    for text, pairs in _pair_text(blocked):
        i, j = pairs[0]
        label = link_label(topo, i, j)
        out.append(
            Finding(
                "warn",
                f"{text}{f' ({label})' if label else ''}: peer access unavailable — GPU↔GPU copies "
                f"are staged through host memory. Likely cause: {_likely_causes(label, gpu, '')}.",
                rule="peer_access",
                pairs=pairs,
            )
        )
    if not blocked:
        out.append(Finding("ok", "peer access available between every GPU pair", rule="peer_access"))
    if topo is not None:
        cross = [
            (i, j)
            for i in range(len(topo))
            for j in range(i + 1, len(topo))
            if link_label(topo, i, j) == "SYS" and peers.get(f"{i}->{j}")
        ]
        if cross:
            out.append(
                Finding(
                    "info",
                    "peer access across CPU sockets (SYS) for "
                    + ", ".join(f"GPU{i}↔GPU{j}" for i, j in cross)
                    + ": it works but crosses the socket link "
                    "— measure it (`labkit bench p2p`) before putting these pairs in one tensor-parallel "
                    "group.",
                    rule="numa",
                    pairs=tuple(cross),
                )
            )
    return out


def check_pair(name: str, answer, flagged: Iterable[tuple[int, int]], *, hint: str = ""):
    """Self-check for 'which GPU pair looks wrong': any orientation of a flagged pair is right."""
    if answer is None or answer is Ellipsis:
        return check.choice(name, None, None)
    flagged = {tuple(sorted(p)) for p in flagged}
    try:
        got = tuple(sorted(int(g) for g in answer))
    except (TypeError, ValueError):
        return check.choice(name, repr(answer), "a pair of GPU indices", hint="answer with a pair such as (2, 3)")
    if got in flagged:
        return check.choice(name, got, got)
    return check.choice(name, got, sorted(flagged)[0] if flagged else None, hint=hint)
