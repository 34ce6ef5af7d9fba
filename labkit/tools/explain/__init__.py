"""`labkit explain`: is my nccl-tests number normal? A verdict, the model's expectation and the likely causes.

    results = explain("all_reduce_perf.log", nodes=2, system="h100_ndr_8nic")   # or a dataset name
    results[0]["verdict"]            # 'healthy' | 'below_expected' | 'invalid'

What the log states (collective, ranks, hosts → nodes, GPU, NCCL version, NCCL_ALGO) is read by labkit.logs; the
rest comes from the caller (`--nodes`, `--nic-bandwidth`, ... or `--system NAME`), and a given fact that contradicts
the log is refused naming both. The expectation is the cluster model's (a model, not a measurement); the causes are
small rules (labkit.tools.explain.rules), ranked by how strongly the run's numbers point at each.
"""

from __future__ import annotations

import re

from ... import cluster, collectives
from ...cluster.views import H290
from . import model, rules
from .runs import Run, derive_world_size, load_runs

__all__ = ["context", "explain", "explain_run", "load_runs", "Run"]

UNITS = "busbw: nccl-tests' bus bandwidth per rank, GB/s = 1e9 B/s, unidirectional (per direction)"


def _refuse_contradiction(flag: str, given, stated, what: str, run: Run) -> None:
    if given is not None and stated is not None and given != stated:
        raise ValueError(f"{flag} {given} contradicts the log: {run.label} states {what} {stated}")


def _algorithm(run: Run, given: str | None) -> tuple[str | None, str]:
    """(the model's name of the algorithm the run used, or None; where that comes from)."""
    stated = model.NCCL_ALGO_NAMES.get((run.algo_env or "").lower())
    if given is not None:
        name = model.NCCL_ALGO_NAMES.get(given.lower())
        if name is None:
            raise ValueError(f"--algorithm {given!r}: use an NCCL_ALGO value ({', '.join(model.NCCL_ALGO_NAMES)})")
        _refuse_contradiction("--algorithm", name, stated, "NCCL_ALGO =", run)
        return name, f"--algorithm {given}"
    if stated:
        return stated, f"NCCL_ALGO={run.algo_env} in the {'log' if run.log_text else 'dataset config'}"
    return None, "not stated: the model's guess at NCCL's pick"


#: GPU names of PCIe cards as NVIDIA prints them ('NVIDIA A100-PCIE-40GB', 'NVIDIA A100 80GB PCIe', 'NVIDIA H100 NVL'):
#: the SXM part's token (A100, H100) without its NVLink/NVSwitch.
_PCIE_CARD = re.compile(r"PCIE|\bNVL\b", re.IGNORECASE)


def _hardware(run: Run, nodes: int, g: int, facts: dict):
    """(the System, how the user named it) from --system or the hardware flags; refuses what contradicts the log."""
    log_gpu = model.gpu_token(run.gpu)
    if facts.get("system"):
        given = [f for f in ("gpu", "nvlink_GBps", "nic_GBps", "nics_per_node") if facts.get(f) is not None]
        given += ["pcie_only"] if facts.get("pcie_only") else []
        if given:
            flags = ", ".join("--" + f.replace("_GBps", "-bandwidth").replace("_", "-") for f in given)
            raise ValueError(f"give either --system or the hardware flags ({flags}), not both")
        name = facts["system"]
        system = model.preset(name)
        if nodes == 1 and g < system.gpus_per_node:  # a run on some of one node's GPUs
            name = f"{name} ({g} of its {system.gpus_per_node} GPUs)"
            system = model.subset(system, g)
        system = model.switched_on(system, nvls=bool(facts.get("nvls")), sharp=bool(facts.get("sharp")))
        if system.gpu and log_gpu and system.gpu != log_gpu:
            raise ValueError(
                f"--system {facts['system']} is a {system.gpu} system, but {run.label} states GPU {run.gpu}"
            )
        if system.gpus_per_node != g:
            raise ValueError(
                f"--system {facts['system']} has {system.gpus_per_node} GPUs per node, but {run.label} has {g} "
                f"({nodes} node(s)): give the hardware flags instead (--gpus-per-node, --nic-bandwidth, ...)"
            )
        return system, name
    gpu = facts.get("gpu")
    named = run.gpu and "Graphics Device" not in run.gpu  # pre-release drivers print no model name
    if gpu and named and (model.gpu_token(gpu) or str(gpu).upper()) != (log_gpu or run.gpu.upper()):
        if not (log_gpu is None and str(gpu).upper() in run.gpu.upper()):
            raise ValueError(f"--gpu {gpu} contradicts the log: {run.label} states GPU {run.gpu}")
    given_link = facts.get("pcie_only") or facts.get("nvlink_GBps") is not None
    if not given_link and _PCIE_CARD.search(run.gpu or ""):  # --gpu names the part, not how its cards are joined
        raise ValueError(
            f"{run.label} names {run.gpu.strip()}, a PCIe card: its GPUs talk over PCIe, or over NVLink bridges "
            "joining pairs of cards, and the log does not say which; give --pcie-only, or --nvlink-bandwidth GB/s "
            "per GPU per direction for bridged pairs (the model of the SXM part would expect NVLink between them all)"
        )
    nic, k = facts.get("nic_GBps"), facts.get("nics_per_node")
    if nodes > 1 and (nic is None or k is None):
        raise ValueError(
            f"{run.label} spans {nodes} nodes: give --nic-bandwidth (GB/s per NIC per direction, e.g. 50 for NDR 400) "
            "and --nics-per-node, or --system NAME (labkit explain --list-systems)"
        )
    system = model.system_from_facts(
        gpus_per_node=g,
        gpu=model.gpu_token(gpu) or log_gpu or gpu,
        nvlink_GBps=facts.get("nvlink_GBps"),
        nics_per_node=k if k is not None else 0,  # one node: the NICs play no part
        nic_GBps=nic if nic is not None else 0.0,
        nvls=bool(facts.get("nvls")),
        sharp=bool(facts.get("sharp")),
        pcie_only=bool(facts.get("pcie_only")),
        gpu_printed=run.gpu,
    )
    return system, "given"


def _layout(run: Run, facts: dict) -> tuple[int, int, int]:
    """(world size, nodes, GPUs per node) from the log and the flags; refuses contradictions and gaps."""
    nodes, g = facts.get("nodes"), facts.get("gpus_per_node")
    _refuse_contradiction("--nodes", nodes, run.nodes, "nodes =", run)
    nodes = run.nodes or nodes
    N = run.world_size
    if nodes is None:
        raise ValueError(f"{run.label}: the log does not say how many nodes ran it: give --nodes N")
    if N is None:
        if g is None:
            raise ValueError(
                f"{run.label}: the log does not say how many ranks ran it ({run.world_size_basis}): give --gpus-per-node G"
            )
        N = nodes * g
    if N % nodes:
        raise ValueError(f"--nodes {nodes} does not divide the {N} ranks of {run.label} ({run.world_size_basis})")
    what = f"{N} ranks ({run.world_size_basis}) on {nodes} node(s), i.e. GPUs per node ="
    _refuse_contradiction("--gpus-per-node", g, N // nodes, what, run)
    return N, nodes, N // nodes


#: NCCL releases that brought NVLS: one node from 2.17.1, across nodes (NVLS + IB SHARP, NVLSTree) from 2.18.1
#: (NCCL 2.18.1 release notes: "Add inter-node algorithms for NVLink SHARP"; nccl-tests#153: "the introduce of NVLS
#: in NCCL 2.17.1 and NCCL 2.18.1").
NVLS_SINCE = {1: (2, 17), 2: (2, 18)}


def _nvls_unavailable(run: Run, nodes: int) -> str | None:
    """Why this run could not use NVLS on hardware that has it (the log turns it off, or its NCCL predates it)."""
    if run.env.get("NCCL_NVLS_ENABLE") == "0":
        return "the run sets NCCL_NVLS_ENABLE=0"
    m = re.match(r"(\d+)\.(\d+)", run.nccl_version or "")
    since = NVLS_SINCE[min(nodes, 2)]
    if m and (int(m.group(1)), int(m.group(2))) < since:
        where = "on one node" if nodes == 1 else "across nodes"
        return f"the log's NCCL {run.nccl_version} predates NVLS {where} (NCCL {since[0]}.{since[1]})"
    return None


def context(run: Run, op: str, **facts) -> tuple[rules.Context, str, str]:
    """What the rules see of a valid run: its layout, the hardware, the model's pick and the expectation it is
    compared with. Returns (context, how the user named the hardware, where the algorithm comes from)."""
    size, busbw, algbw = run.plateau()
    N, nodes, g = _layout(run, facts)
    system, name = _hardware(run, nodes, g, facts)
    algo, basis = _algorithm(run, facts.get("algorithm"))
    with_nvls, why_no_nvls = None, _nvls_unavailable(run, nodes) if system.nvls else None
    if why_no_nvls:  # the run could not use NVLS: NCCL picks without it
        with_nvls = model.predict(system, nodes, size, op=op)
        system = model.without_nvls(system)
    pick = model.predict(system, nodes, size, op=op)
    expected = model.predict(system, nodes, size, op=op, algorithm=algo) if algo else pick
    short_of_pick = busbw < rules.HEALTHY_RATIO * pick.busbw_GBps
    ring_like = rules.HEALTHY_RATIO * pick.ring_busbw_GBps <= busbw <= rules.RING_CEILING_RATIO * pick.ring_busbw_GBps
    if not algo and short_of_pick and pick.algorithm != "ring" and ring_like:
        expected = model.predict(system, nodes, size, op=op, algorithm="ring")
        basis = "not stated; the run matches the model's ring (NCCL may pick ring at this size)"
    ctx = rules.Context(
        run, system, nodes, N, size, busbw, algbw, expected, pick, algo is not None, with_nvls, why_no_nvls
    )
    return ctx, name, basis


def explain_run(run: Run, runs: list[Run], **facts) -> dict:
    """One run's verdict, expectation and causes, as the JSON record `labkit explain --json` prints."""
    given_op = facts.get("op")
    _refuse_contradiction("--op", given_op, run.op, "the collective", run)
    op = run.op or given_op
    derive_world_size(run, op, "--op" if run.op is None else "the log's collective")
    size, busbw, algbw = run.plateau()
    out = {
        "run": run.label,
        "source": run.source,
        "op": op,
        "gpu": run.gpu or None,
        "nccl_version": run.nccl_version,
        "world_size": run.world_size,
        "world_size_basis": run.world_size_basis,
        "nodes": run.nodes,
        "size_bytes": int(size),
        "measured_busbw_GBps": busbw,
        "measured_algbw_GBps": algbw,
        "expected_busbw_GBps": None,
        "algorithm": None,
        "ratio": None,
        "units": UNITS,
    }
    invalid = rules.invalid_reasons(run, runs)
    if invalid:
        return {**out, "verdict": "invalid", "invalid_reasons": invalid, "causes": []}
    if op is None:
        raise ValueError(f"{run.label}: the log does not name its collective: give --op (e.g. --op all_reduce)")
    if op not in cluster.OPS:  # alltoall, sendrecv: NCCL runs them as point-to-point sends, outside its tuning model
        factor = collectives.BUS_FACTOR_WORDS.get(op)
        raise ValueError(
            f"{run.label}: labkit explain cannot judge {op}: NCCL runs it as point-to-point sends, which NCCL's "
            f"tuning model (labkit.cluster's) does not cover; it judges {', '.join(cluster.OPS)}."
            + (f" nccl-tests prints busbw = algbw x {factor} for it" if factor else "")
            + (
                "; across nodes compare that with one NIC's rate (sjeaugey, nccl-tests#267: 'Alltoall cannot "
                "aggregate the bandwidth of multiple NICs, so the performance you should see is the performance of "
                "a single NIC')"
                if op == "alltoall"
                else ""
            )
        )
    if size < rules.LARGE_BYTES:
        raise ValueError(
            f"{run.label}: labkit explain cannot judge a sweep that stops at {rules.size_text(size)}: below "
            f"{rules.size_text(rules.LARGE_BYTES)} a collective's time is mostly latency, not bandwidth, and its busbw "
            f"({busbw:.2f} GB/s here) is printed to two decimals; give the log of a sweep to 8 GiB (-e 8G; sjeaugey, "
            "nccl-tests#212: '256M is too small to reach peak bandwidth')"
        )
    ctx, name, basis = context(run, op, **{k: v for k, v in facts.items() if k != "op"})
    expected, pick, nodes, system = ctx.expected, ctx.pick, ctx.nodes, ctx.system
    below = [
        int(n)
        for n, b in run.curve()
        if n >= rules.LARGE_BYTES
        and b < rules.HEALTHY_RATIO * model.predict(system, nodes, n, op=op, algorithm=expected.algorithm).busbw_GBps
    ]
    verdict = "healthy" if ctx.ratio >= rules.HEALTHY_RATIO else "below_expected"
    return {
        **out,
        "world_size": ctx.world_size,
        "nodes": nodes,
        "gpus_per_node": ctx.world_size // nodes,
        "verdict": verdict,
        "expected_busbw_GBps": expected.busbw_GBps,
        "algorithm": expected.algorithm,
        "algorithm_basis": basis,
        "ratio": ctx.ratio,
        "bound": expected.bound,
        "nccl_pick": pick.algorithm,
        "nccl_pick_busbw_GBps": pick.busbw_GBps,
        "ring_busbw_GBps": expected.ring_busbw_GBps,
        "below_expected_sizes": below if verdict == "below_expected" else [],
        "causes": [c.to_dict() for c in rules.causes(ctx)],
        "system": model.record(system, name),
        "model": expected.source,
        "model_notes": list(expected.notes),
    }


def explain(source: str, *, run: int | None = None, **facts) -> list[dict]:
    """Explain every run of a log file or dataset (or only the `run`-th, 1-based)."""
    runs = load_runs(source)
    chosen = runs
    if run is not None:
        if not 1 <= run <= len(runs):
            raise ValueError(f"--run {run}: {source} holds {len(runs)} run(s); give --run 1 to {len(runs)}")
        chosen = [runs[run - 1]]
    results = []
    for r in chosen:
        try:
            results.append(explain_run(r, runs, **facts))
        except ValueError as e:
            if len(chosen) > 1:
                raise ValueError(f"{e} (run {runs.index(r) + 1} of {len(runs)}; explain one with --run N)") from None
            raise
    return results


class ExplainedRuns:
    """Notebook 06's exercise 5 through `labkit explain` (`labkit.tools.explain.explain`, the same call that reads
    a user's own nccl-tests log): every run of a recorded dataset against the model of a preset system."""

    def __init__(self, dataset: str = H290, system: str = "h100_ndr_8nic", experiment: str = "explain_issue290"):
        self.dataset, self.system, self.experiment = dataset, system, experiment
        self.rows = explain(dataset, system=system)

    def _line(self, r: dict) -> str:
        where = f"{r['nodes']} node(s), {r['algorithm'] or 'no model'}: **{r['verdict']}**"
        if r["ratio"] is None:  # an invalid run has no expectation to compare with
            return f"- {where} — {'; '.join(r.get('invalid_reasons', [])) or 'no model prediction'}"
        cause = r["causes"][0]["title"] if r["causes"] else "no cause flagged"
        return (
            f"- {where}, recorded {r['measured_busbw_GBps']:.1f} GB/s busbw = ×{r['ratio']:.2f} of the model's "
            f"{r['expected_busbw_GBps']:.0f} GB/s — {cause}"
        )

    def report(self) -> str:
        head = f"`labkit explain {self.dataset} --system {self.system}` (recorded runs against NCCL's tuning model):"
        return "\n".join([head, ""] + [self._line(r) for r in self.rows])

    def notes(self) -> dict:
        return {f"{r['nodes']}n_{r['algorithm']}": {"verdict": r["verdict"], "ratio": r["ratio"]} for r in self.rows}
