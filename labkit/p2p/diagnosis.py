"""What a P2P matrix diagnoses, in plain words: peer access not in effect, slow pairs and GPUs, contention, NUMA.

`diagnose(data)` reads a recorded or live matrix (and its topology); `doctor_findings(env)` reads only
what `labkit doctor` collected (peer access, GPU names, `nvidia-smi topo -m`). Both return
`labkit.system.Finding`s. `check_pair` scores the "which pair looks wrong" exercise.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Iterable

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
from .wording import fmt, fmt_range, likely_causes, pair_text, range_text, what

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


@dataclasses.dataclass(frozen=True)
class Evidence:
    """What the rules read: the matrices by (kind, p2p), the topology, NUMA nodes, pairs without peer access."""

    src: object  # labkit.p2p.matrices.Source: the frame, GPU name and context
    topo: object  # the parsed `nvidia-smi topo -m`, or None
    mats: dict  # (kind, p2p) → square DataFrame
    numa: dict  # GPU index → NUMA node
    blocked: frozenset  # (src, dst) pairs where peer access is not in effect

    @property
    def on(self):
        return self.mats.get(("bandwidth_uni", "enabled"))

    @property
    def off(self):
        return self.mats.get(("bandwidth_uni", "disabled"))

    def staged(self, i, j) -> float:
        """The staged (P2P off) unidirectional bandwidth of a pair, NaN where not measured."""
        off = self.off
        return off.loc[i, j] if off is not None and i in off.index and j in off.columns else float("nan")


def evidence(data, topology: str | None = None, access=None) -> Evidence:
    """Read the matrices once; a pair is blocked where `access` says no or P2P 'on' is no faster than staged."""
    import numpy as np

    src = as_source(data, topology)
    topo = src.topology_or_none()
    if access is None and isinstance(data, P2PRun):
        access = {
            (a, b): data.peer_access[x][y] for x, a in enumerate(data.indices) for y, b in enumerate(data.indices)
        }
    mats = {km: matrix(src.frame, *km) for km in metrics(src.frame)}
    ev = Evidence(src, topo, mats, numa_of(topo), frozenset())
    blocked = {p for p, ok in (access or {}).items() if p[0] != p[1] and not ok}
    if ev.on is not None and ev.off is not None:
        blocked |= {
            (i, j)
            for i, j, v in off_diagonal(ev.on)
            if np.isfinite(ev.staged(i, j)) and v < SAME_PATH_RATIO * ev.staged(i, j)
        }
    return dataclasses.replace(ev, blocked=frozenset(blocked))


def _per_pair_group(
    rule: str, pairs: Iterable[tuple[int, int]], say: Callable[[str, tuple], str], level: str = "warn"
) -> list[Finding]:
    """One Finding of `rule` per group `pair_text` makes of `pairs` (GPUi↔GPUj or GPUi→GPUj), worded by
    say(group's text, group's pairs)."""
    return [Finding(level, say(text, group), rule=rule, pairs=group) for text, group in pair_text(pairs)]


def peer_access_not_in_effect(ev: Evidence) -> list[Finding]:
    """1. Peer access not in effect: P2P 'on' no faster than staged, or can_device_access_peer says no."""
    import numpy as np

    def say(text: str, pairs: tuple[tuple[int, int], ...]) -> str:
        got = [ev.on.loc[p] for p in pairs if ev.on is not None and np.isfinite(ev.on.loc[p])]
        staged = [ev.staged(*p) for p in pairs if np.isfinite(ev.staged(*p))]
        numbers = (
            f": with P2P 'on' the copy reaches {range_text(got)} GB/s, no more than staged through host memory "
            f"({range_text(staged)} GB/s, unidirectional)"
            if got and staged
            else " (can_device_access_peer says no)"
        )
        cause = likely_causes(link_label(ev.topo, *pairs[0]), ev.src.gpu, ev.src.context)
        return (
            f"{text}: peer access is not in effect{numbers} — every copy between them is staged through host "
            f"memory. Likely cause: {cause}."
        )

    return _per_pair_group("peer_access", ev.blocked, say)


def p2p_slower_than_staged(ev: Evidence) -> list[Finding]:
    """2. The direct P2P copy slower than staging through host memory."""
    import numpy as np

    on = ev.on
    if on is None or ev.off is None:
        return []
    slower = [(i, j) for i, j, v in off_diagonal(on) if np.isfinite(ev.staged(i, j)) and v < 0.9 * ev.staged(i, j)]
    return _per_pair_group(
        "p2p_slower_than_staged",
        slower,
        lambda text, pairs: (
            f"{text}: the direct P2P copy ({range_text([on.loc[p] for p in pairs])} GB/s, unidirectional) is slower "
            f"than staging through host memory ({range_text([ev.staged(*p) for p in pairs])} GB/s) — the "
            "platform's peer path is poor (often across CPU sockets); NCCL_P2P_LEVEL keeps NCCL off it."
        ),
    )


def nvlink_below_promise(ev: Evidence) -> list[Finding]:
    """3. An NVLink pair far below what its link count promises even on first-generation NVLink."""
    out = []
    for kind in ("bandwidth_uni", "bandwidth_bi"):
        m = ev.mats.get((kind, "enabled"))
        if m is None or ev.topo is None:
            continue
        per_pair = 2 if kind == "bandwidth_bi" else 1

        def floor(i, j):
            return per_pair * NVLINK_MIN_PER_LINK_GBps * nvlink_count(link_label(ev.topo, i, j))

        weak = [
            (i, j)
            for i, j, v in off_diagonal(m)
            if (i, j) not in ev.blocked and floor(i, j) and v < PROMISE_FRACTION * floor(i, j)
        ]
        for text, pairs in pair_text(weak):
            label = link_label(ev.topo, *pairs[0])
            out.append(
                Finding(
                    "warn",
                    f"{text}: the topology says {label}, which carries at least {fmt(floor(*pairs[0]))} GB/s "
                    f"({DIRECTION[kind]}) even on first-generation NVLink, but the copy reaches "
                    f"{range_text([m.loc[p] for p in pairs])} GB/s: the NVLink path is not in use (peer access off "
                    "in software, or links down — `nvidia-smi nvlink -s`).",
                    rule="nvlink_promise",
                    pairs=pairs,
                )
            )
    return out


def _matrices(ev: Evidence):
    """(kind, p2p, matrix, its off-diagonal cells, whether lower is better, unit) in KINDS × P2P_STATES order."""
    for (kind, p2p), m in sorted(ev.mats.items(), key=lambda kv: (KINDS.index(kv[0][0]), kv[0][1])):
        lower_is_better = not is_bandwidth(kind)
        yield kind, p2p, m, off_diagonal(m), lower_is_better, "µs" if lower_is_better else "GB/s"


def _worse(a, b, lower_is_better: bool) -> float:
    """How far a is below b, as a fraction ≤ 1 when a is the worse one."""
    return (b / a) if lower_is_better else (a / b)


def _slow_gpus(cells, lower_is_better: bool) -> dict:
    """GPU → (median of its pairs, median of pairs without it), for GPUs slow with every peer (≥ 4 GPUs).

    A finding names them only when they are at most half the GPUs; outlier_pairs leaves their pairs out either way.
    """
    import numpy as np

    gpus = sorted({i for i, _, _ in cells} | {j for _, j, _ in cells})
    slow = {}
    if len(gpus) >= 4:
        for g in gpus:
            mine = [v for i, j, v in cells if g in (i, j)]
            rest = [v for i, j, v in cells if g not in (i, j)]
            if (
                len(mine) >= 2
                and len(rest) >= 2
                and _worse(np.median(mine), np.median(rest), lower_is_better) < SLOW_GPU_FRACTION
            ):
                slow[g] = (float(np.median(mine)), float(np.median(rest)))
    return slow


def slow_gpus(ev: Evidence) -> list[Finding]:
    """4. GPUs slow with every peer: one finding per matrix, naming them all."""
    out = []
    for kind, p2p, _, cells, lower_is_better, unit in _matrices(ev):
        slow = _slow_gpus(cells, lower_is_better)
        gpus = {i for i, _, _ in cells} | {j for _, j, _ in cells}
        if not slow or len(slow) > len(gpus) // 2:
            continue
        names = ", ".join(f"GPU{g}" for g in slow)
        nodes = {ev.numa.get(g) for g in slow}
        numa_note = (
            f" They share NUMA node {nodes.pop()}, unlike the others: perhaps the process issuing the copies "
            "ran on the other socket."
            if len(nodes) == 1 and None not in nodes and nodes != {ev.numa.get(g) for g in gpus if g not in slow}
            else ""
        )
        vals = "; ".join(f"GPU{g} {fmt(a)} vs {fmt(b)} {unit}" for g, (a, b) in slow.items())
        out.append(
            Finding(
                "info",
                f"{names}: {'higher latency' if lower_is_better else 'lower bandwidth'} with every peer "
                f"({what(kind, p2p)}; median of its pairs vs pairs without it: {vals}) — such a GPU may sit under the "
                "other CPU socket, behind a busier PCIe switch, or on a narrower or slower link (`labkit doctor` shows "
                f"width and generation).{numa_note}",
                rule="slow_gpu",
                pairs=tuple((i, j) for i, j, _ in cells if i in slow or j in slow),
            )
        )
    return out


def _comparable(ev: Evidence, p2p: str, i: int, j: int) -> str:
    """Which pairs a pair is compared with: the same link label (P2P), the same NUMA relation (staged)."""
    if p2p == "enabled":
        label = link_label(ev.topo, i, j)
        return f"with the same link ({label})" if label else ""
    if ev.numa.get(i) is not None and ev.numa.get(j) is not None:
        return "on the same NUMA node" if ev.numa[i] == ev.numa[j] else "across NUMA nodes"
    return ""


def outlier_pairs(ev: Evidence) -> list[Finding]:
    """5. Single pairs far below comparable pairs (slow GPUs and blocked pairs have their own findings)."""
    import numpy as np

    out = []
    for kind, p2p, m, cells, lower_is_better, unit in _matrices(ev):
        slow = set(_slow_gpus(cells, lower_is_better))
        groups: dict[str, list[tuple[int, int, float]]] = {}
        for i, j, v in cells:
            groups.setdefault(_comparable(ev, p2p, i, j), []).append((i, j, v))
        hint = (
            " (A staged copy climbs to host memory and back: GPUs behind one PCIe switch share its uplink.)"
            if p2p == "disabled"
            else " Check that pair's links (`nvidia-smi nvlink -s`, `nvidia-smi topo -m`)."
        )
        for where, members in groups.items():
            if len(members) < 4:
                continue
            med = float(np.median([v for _, _, v in members]))
            flagged = [
                (i, j)
                for i, j, v in members
                if _worse(v, med, lower_is_better) < OUTLIER_FRACTION
                and not ({i, j} & slow)
                and (i, j) not in ev.blocked
            ]
            others = [v for i, j, v in members if (i, j) not in flagged]
            out += _per_pair_group(
                "outlier_pair",
                flagged,
                lambda text, pairs: (
                    f"{text} {'takes' if lower_is_better else 'reaches'} {range_text([m.loc[p] for p in pairs])} "
                    f"{unit} ({what(kind, p2p)}) vs {fmt_range(others)} {unit} for the other pairs"
                    f"{' ' + where if where else ''}.{hint}"
                ),
            )
    return out


def bidirectional_below_unidirectional(ev: Evidence) -> list[Finding]:
    """6. Both directions at once well below one direction alone: the directions contend."""
    import numpy as np

    out = []
    for p2p in P2P_STATES:
        uni, bi = ev.mats.get(("bandwidth_uni", p2p)), ev.mats.get(("bandwidth_bi", p2p))
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
        out += _per_pair_group(
            "bidirectional_below_unidirectional",
            below,
            lambda text, pairs: (
                f"{text} ({P2P_TEXT[p2p].split(' (')[0]}): both directions at once reach "
                f"{range_text([bi.loc[p] for p in pairs])} GB/s in total, less than one direction alone "
                f"({range_text([uni.loc[p] for p in pairs])} GB/s) — the two directions contend for something they "
                "share, typically a PCIe switch uplink or the host memory they are staged through."
            ),
            level="warn" if p2p == "enabled" else "info",
        )
    return out


def staged_across_numa(ev: Evidence) -> list[Finding]:
    """7. Staged copies between GPUs on different NUMA nodes clearly slower than within one node."""
    import numpy as np

    if ev.off is None or len(set(ev.numa.values()) - {"N/A"}) <= 1:
        return []
    within = [v for i, j, v in off_diagonal(ev.off) if ev.numa.get(i) == ev.numa.get(j)]
    across = [v for i, j, v in off_diagonal(ev.off) if ev.numa.get(i) != ev.numa.get(j)]
    if not (within and across and np.median(across) < SLOW_GPU_FRACTION * np.median(within)):
        return []
    return [
        Finding(
            "info",
            f"Staged copies between GPUs on different NUMA nodes reach a median {fmt(np.median(across))} GB/s vs "
            f"{fmt(np.median(within))} GB/s within one node: the staging buffer sits on one socket, so the "
            "other GPU's half of the copy crosses the socket link.",
            rule="numa",
            pairs=(),
        )
    ]


#: diagnose's rules, in the order their findings are listed (warnings first, stably).
RULES = (
    peer_access_not_in_effect,
    p2p_slower_than_staged,
    nvlink_below_promise,
    slow_gpus,
    outlier_pairs,
    bidirectional_below_unidirectional,
    staged_across_numa,
)


def diagnose(data, *, topology: str | None = None, access=None) -> list[Finding]:
    """Plain-language findings from a p2p matrix and its topology: every rule of RULES, warnings first.

    `data`: a recorded Dataset, a live P2PRun, or a tidy DataFrame in the p2p_matrix schema;
    `topology`: `nvidia-smi topo -m` text (default: the one the data carries, if any);
    `access`: {(src, dst): bool} (a live P2PRun brings its own).
    """
    ev = evidence(data, topology, access)
    out = [finding for rule in RULES for finding in rule(ev)]
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
    for text, pairs in pair_text(blocked):
        i, j = pairs[0]
        label = link_label(topo, i, j)
        out.append(
            Finding(
                "warn",
                f"{text}{f' ({label})' if label else ''}: peer access unavailable — GPU↔GPU copies "
                f"are staged through host memory. Likely cause: {likely_causes(label, gpu, '')}.",
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
