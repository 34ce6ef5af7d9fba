"""Tensor-parallel placement: which GPUs should form a group, ranked by their worst link in `nvidia-smi topo -m`."""

from __future__ import annotations

import dataclasses
import itertools
from typing import Sequence

from .. import check
from ..system import link_rank
from .matrices import gpu_topology, link_label, numa_of, nvlink_count


@dataclasses.dataclass(frozen=True)
class GroupScore:
    """A candidate tensor-parallel group and how good its worst links are."""

    gpus: tuple[int, ...]
    links: tuple[str, ...]  # the group's pair labels, worst first
    numa_nodes: int  # distinct NUMA nodes the group spans (1 = all on one socket)

    @property
    def worst_link(self) -> str:
        return self.links[0] if self.links else "X"

    @property
    def key(self) -> tuple:
        """Sort key, smaller = better: the worst link first (a ring runs at its slowest hop), then the
        next worst, ..., then the NUMA spread."""
        return (tuple(_link_cost(x) for x in self.links), self.numa_nodes)

    def __str__(self) -> str:
        return f"GPUs {list(self.gpus)}: worst link {self.worst_link}, NUMA nodes {self.numa_nodes}"


def _link_cost(label: str) -> tuple[int, int]:
    return (link_rank(label), -nvlink_count(label))


def _topology_frame(topology):
    topo = gpu_topology(topology) if isinstance(topology, str) else topology
    if topo is None or len(topo) == 0:
        raise ValueError("no GPU topology: pass `nvidia-smi topo -m` text or labkit.system.parse_topology(...)")
    return topo


def score_group(topology, gpus: Sequence[int]) -> GroupScore:
    topo = _topology_frame(topology)
    labels = [link_label(topo, a, b) for a, b in itertools.combinations(sorted(gpus), 2)]
    if any(x is None for x in labels):
        raise ValueError(f"GPUs {list(gpus)} are not all in the topology ({list(topo.index)})")
    numa = numa_of(topo)
    nodes = {numa.get(g, "?") for g in gpus}
    return GroupScore(tuple(sorted(gpus)), tuple(sorted(labels, key=_link_cost, reverse=True)), len(nodes))


def rank_tp_groups(topology, size: int, *, include: Sequence[int] = ()) -> list[GroupScore]:
    """Every group of `size` GPUs, best first: ranked by its worst link (NV# > PIX > PXB > PHB > NODE > SYS,
    more NVLinks better), then its next-worst links, then how many NUMA nodes it spans.

    `include` keeps only groups containing those GPUs (e.g. "the group of GPU0").
    """
    topo = _topology_frame(topology)
    gpus = sorted(int(d[3:]) for d in topo.index)
    if not 1 <= size <= len(gpus):
        raise ValueError(f"group size must be between 1 and {len(gpus)} GPUs, got {size}")
    groups = [score_group(topo, c) for c in itertools.combinations(gpus, size) if set(include) <= set(c)]
    return sorted(groups, key=lambda g: (g.key, g.gpus))


def tp_partition(topology, size: int) -> list[GroupScore]:
    """Split all GPUs into disjoint tensor-parallel groups of `size`, the worst group as good as possible.

    Exhaustive over partitions up to 12 GPUs (at most 15,400 of them); greedy (best remaining
    group first) beyond that.
    """
    topo = _topology_frame(topology)
    gpus = sorted(int(d[3:]) for d in topo.index)
    if size < 1 or len(gpus) % size:
        raise ValueError(f"{len(gpus)} GPUs cannot be split into groups of {size}")
    if len(gpus) > 12:
        left, out = list(gpus), []
        while left:
            best = min(
                (score_group(topo, c) for c in itertools.combinations(left, size)), key=lambda g: (g.key, g.gpus)
            )
            out.append(best)
            left = [g for g in left if g not in best.gpus]
        return out

    def partitions(left):
        if not left:
            yield []
            return
        first, rest = left[0], left[1:]
        for others in itertools.combinations(rest, size - 1):
            remaining = [g for g in rest if g not in others]
            for tail in partitions(remaining):
                yield [score_group(topo, (first, *others))] + tail

    def cost(p):
        return sorted((g.key for g in p), reverse=True)

    return min(partitions(gpus), key=cost)


def check_tp_group(name: str, answer, topology, size: int, *, include: Sequence[int] = ()):
    """Self-check: is `answer` (GPU indices) one of the best groups of `size` (containing `include`)?"""
    if answer is None or answer is Ellipsis:
        return check.choice(name, None, None)
    try:
        got = tuple(sorted(int(g) for g in answer))
    except (TypeError, ValueError):
        return check.choice(name, repr(answer), "a list of GPU indices", hint="answer with a list such as [0, 1]")
    ranked = rank_tp_groups(topology, size, include=include)
    best = ranked[0]
    if len(got) != size or not set(include) <= set(got):
        return check.choice(
            name,
            list(got),
            list(best.gpus),
            hint=f"a group has {size} GPUs" + (f" and contains GPU{list(include)}" if include else ""),
        )
    mine = score_group(topology, got)
    if mine.key == best.key:
        return check.choice(name, list(got), list(got))
    return check.choice(
        name,
        list(got),
        list(best.gpus),
        hint=f"its worst link is {mine.worst_link}; a group whose worst link is {best.worst_link} exists",
    )


#: A hypothetical 8-GPU PCIe server, written for the tensor-parallel exercise — not a measurement
#: and not a published machine. Two sockets; on each, two PCIe switches with two GPUs each; NVLink
#: bridges (NV4) join GPUs across the two switches of a socket, not within one switch.
HYPOTHETICAL_PCIE_SERVER_TOPOLOGY = """\
        GPU0    GPU1    GPU2    GPU3    GPU4    GPU5    GPU6    GPU7    CPU Affinity    NUMA Affinity
GPU0     X      PIX     NV4     NODE    SYS     SYS     SYS     SYS     0-31            0
GPU1    PIX      X      NODE    NV4     SYS     SYS     SYS     SYS     0-31            0
GPU2    NV4     NODE     X      PIX     SYS     SYS     SYS     SYS     0-31            0
GPU3    NODE    NV4     PIX      X      SYS     SYS     SYS     SYS     0-31            0
GPU4    SYS     SYS     SYS     SYS      X      PIX     NV4     NODE    32-63           1
GPU5    SYS     SYS     SYS     SYS     PIX      X      NODE    NV4     32-63           1
GPU6    SYS     SYS     SYS     SYS     NV4     NODE     X      PIX     32-63           1
GPU7    SYS     SYS     SYS     SYS     NODE    NV4     PIX      X      32-63           1
"""


class AnswerKey:
    """Exercise 1's answer key, checking itself: the ranking's best groups pass, a PCIe-switch neighbour does not."""

    experiment = "tp_answer_key"

    def __init__(self, topology=HYPOTHETICAL_PCIE_SERVER_TOPOLOGY):
        self.topology = topology
        self.tp2 = list(rank_tp_groups(topology, 2, include=[0])[0].gpus)
        self.tp4 = list(rank_tp_groups(topology, 4, include=[0])[0].gpus)

    def notes(self) -> dict:
        return {
            "tp2": self.tp2,
            "tp4": self.tp4,
            "partition_tp2": [list(g.gpus) for g in tp_partition(self.topology, 2)],
        }

    def checks(self) -> dict:
        topo = self.topology
        passed = (
            check_tp_group("key", self.tp2, topo, 2, include=[0]).passed
            and check_tp_group("key", self.tp4, topo, 4, include=[0]).passed
            and not check_tp_group("key", [0, 1], topo, 2, include=[0]).passed
        )
        return {"tp_answer_key_selfcheck": passed}
