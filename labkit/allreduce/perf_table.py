"""The nccl-tests table of a collective sweep: its `#` header, one row per size, and the closing lines.

The layout is nccl-tests' (src/common.cu: `size count type redop root`, then `time algbw busbw
#wrong` out of place and in place, `# Out of bounds values` and `# Avg bus bandwidth`), so what
`labkit bench collectives` prints reads back with labkit.logs (`parse_log`) like a real
`*_perf` log. A first line says that it is labkit on torch.distributed, not nccl-tests.
"""

from __future__ import annotations

from .. import __version__

#: Decimal places printed: time in µs; bandwidths in GB/s (4, not nccl-tests' 2: gloo on a CPU at
#: small sizes is well below 0.01 GB/s).
TIME_DECIMALS, BW_DECIMALS = 2, 4
_GROUP = ("oop", "ip")


def header(op: str, *, ranks: list[dict], backend: str, launcher: str, cfg, torch_version: str = "") -> list[str]:
    """The lines before the rows of one collective (nccl-tests' preamble and column header)."""
    nodes = len({r["node"] for r in ranks})
    hosts = len({r["host"] for r in ranks})
    sizes = cfg.sizes
    ratios = {b / a for a, b in zip(sizes, sizes[1:])}
    step = f"{ratios.pop():g}(factor)" if len(ratios) == 1 else "0(bytes)" if not ratios else "listed(sizes)"
    lines = [
        f"# labkit {__version__} bench collectives: torch.distributed {backend}"
        + (f" (torch {torch_version})" if torch_version else "")
        + f", launched by {launcher}; an nccl-tests-style table, not nccl-tests",
        f"# Collective test starting: {op}_perf",
        f"# nThread 1 nGpus {1 if backend == 'nccl' else 0} minBytes {sizes[0]} maxBytes {sizes[-1]} "
        f"step: {step} warmup iters: {cfg.warmup} iters: {cfg.iters} agg iters: 1 "
        f"validation: {int(cfg.check)} graph: 0",
        "#",
        f"# collective {op}, world size {len(ranks)}, nodes {nodes} ({launcher} agents; {hosts} host name"
        f"{'s' if hosts != 1 else ''}), backend {backend}; time: the slowest rank's mean over {cfg.iters} "
        "back-to-back calls",
    ]
    if op in ("all_reduce", "broadcast", "reduce"):
        lines.append(
            f"# out-of-place: torch.distributed has no out-of-place {op}; timed as a local copy then the in-place call"
        )
    if op in ("alltoall", "sendrecv"):
        lines.append(
            f"# in-place: torch.distributed's {op} may not write into the buffer it reads; timed as a copy of the "
            "buffer aside then the out-of-place call into it"
        )
    lines += ["# Using devices"]
    for r in sorted(ranks, key=lambda r: r["rank"]):
        lines.append(
            f"#  Rank {r['rank']:2d} Group  0 Pid {r['pid']:6d} on {r['host']:>10s} device {r['local_rank']:2d} "
            f"[{r['bus_id']}] {r['name']}"
        )
    lines += [
        "#",
        f"# {'':>10s}  {'':>12s}  {'':>8s}  {'':>6s}  {'':>6s}  {'out-of-place':^33s}  {'in-place':^33s}",
        f"# {'size':>10s}  {'count':>12s}  {'type':>8s}  {'redop':>6s}  {'root':>6s}"
        + f"  {'time':>8s}  {'algbw':>8s}  {'busbw':>8s}  {'#wrong':>6s}" * 2,
        f"# {'(B)':>10s}  {'(elements)':>12s}  {'':>8s}  {'':>6s}  {'':>6s}"
        + f"  {'(us)':>8s}  {'(GB/s)':>8s}  {'(GB/s)':>8s}  {'':>6s}" * 2,
    ]
    return lines


def row(rec: dict) -> str:
    """One size: nccl-tests' row."""
    text = f"{rec['nbytes']:12d}  {rec['count']:12d}  {rec['dtype']:>8s}  {rec['redop']:>6s}  {rec['root']:6d}"
    for g in _GROUP:
        wrong = "N/A" if rec[f"{g}_wrong"] is None else str(rec[f"{g}_wrong"])
        text += (
            f"  {rec[f'{g}_time_us']:8.{TIME_DECIMALS}f}  {rec[f'{g}_algbw_GBps']:8.{BW_DECIMALS}f}"
            f"  {rec[f'{g}_busbw_GBps']:8.{BW_DECIMALS}f}  {wrong:>6s}"
        )
    return text


def footer(op: str, records: list[dict]) -> list[str]:
    """nccl-tests' closing lines: wrong values over every row, the mean busbw over rows and placements."""
    checked = [rec[f"{g}_wrong"] for rec in records for g in _GROUP if rec[f"{g}_wrong"] is not None]
    wrong = sum(checked)
    busbws = [rec[f"{g}_busbw_GBps"] for rec in records for g in _GROUP]
    avg = sum(busbws) / len(busbws) if busbws else 0.0
    oob = f"{wrong} {'OK' if wrong == 0 else 'FAILED'}" if checked else "N/A (validation off)"
    return [
        f"# Out of bounds values : {oob}",
        f"# Avg bus bandwidth    : {avg:.{BW_DECIMALS}f} ",
        "#",
        f"# Collective test concluded: {op}_perf",
        "",
    ]
