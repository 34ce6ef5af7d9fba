"""The seven torch.distributed collectives swept like nccl-tests' `*_perf`: sizes, buffers, a timed loop and a real #wrong check.

Runs on an initialised process group (one launched by labkit.launch, or one torchrun started):
every rank calls `sweep(cfg, rank, world_size, device)` and gets the same records, one per size.
What nccl-tests does, and what this keeps (nccl-tests src/common.cu and the `*GetCollByteCount` of
each src/*.cu):

- size and count: the `size` of a row is the bytes of the largest buffer (all_gather: the gathered
  output; reduce_scatter and alltoall: the whole input), `count` is the per-rank parameter count
  (all_gather / reduce_scatter / alltoall: size / n / element size), as nccl-tests prints them;
- time: `warmup` untimed calls, a barrier, `iters` calls back to back, one wait; time per call is
  the slowest rank's (nccl-tests averages the ranks by default: see docs/measure-your-cluster.md);
- algbw = size / time, busbw = algbw × `labkit.collectives.bus_factor(op, n)`;
- #wrong: a separate call on a known input pattern, every element compared with the reduction
  computed independently here, summed over ranks (nccl-tests' count of wrong elements).

torch.distributed has no out-of-place all_reduce, broadcast or reduce: their out-of-place column
is a local copy into the output buffer followed by the in-place call (timed together). Its
alltoall and sendrecv may not write into the buffer they read (on gloo an aliased call returns
wrong data, which #wrong shows): their in-place column copies the buffer aside first, then makes the
out-of-place call into it (timed together). all_gather and reduce_scatter have both forms.
"""

from __future__ import annotations

import dataclasses
import os
import socket
from typing import Iterator

from ..collectives import OPS, UNIT_ROUNDOFF, algbw, bus_factor, slowest_rank, summation_tolerance
from ..launch import rank_info
from ..timing import time_collectives

#: nccl-tests' type names (its -d flag) → torch dtype names. Torch names are accepted too.
TYPES = {
    "int8": "int8",
    "uint8": "uint8",
    "int32": "int32",
    "int64": "int64",
    "half": "float16",
    "float": "float32",
    "double": "float64",
    "bfloat16": "bfloat16",
}
TORCH_TO_TYPE = {v: k for k, v in TYPES.items()}
REDOPS = ("sum", "prod", "min", "max", "avg")
#: Collectives that reduce (take --op) and those with a root (take --root).
REDUCING = ("all_reduce", "reduce_scatter", "reduce")
ROOTED = ("broadcast", "reduce")
#: Collectives torch.distributed offers only in place: their out-of-place time includes a local copy.
IN_PLACE_ONLY = ("all_reduce", "broadcast", "reduce")
#: Collectives whose output may not alias their input in torch.distributed (gloo gives wrong results):
#: their in-place time includes a local copy of the buffer aside.
OUT_OF_PLACE_ONLY = ("alltoall", "sendrecv")
PLACEMENTS = ("out-of-place", "in-place")
#: Output elements the #wrong check compares at a time.
CHECK_CHUNK = 1 << 22


@dataclasses.dataclass(frozen=True)
class PerfConfig:
    """One sweep: collectives × sizes, as the flags of `labkit bench collectives` give it."""

    ops: tuple[str, ...] = ("all_reduce",)
    sizes: tuple[int, ...] = (1 << 20,)
    dtype: str = "float"  # nccl-tests' name
    redop: str = "sum"
    root: int = 0
    iters: int = 20
    warmup: int = 5
    check: bool = True

    def __post_init__(self):
        bad = [o for o in self.ops if o not in OPS]
        if bad or not self.ops:
            raise ValueError(f"unknown collective {bad[0] if bad else '(none)'!r}; choose from {', '.join(OPS)}")
        if self.dtype not in TYPES:
            raise ValueError(f"unknown type {self.dtype!r}; choose from {', '.join(TYPES)}")
        if self.redop not in REDOPS:
            raise ValueError(f"unknown reduction {self.redop!r}; choose from {', '.join(REDOPS)}")
        if self.redop == "avg" and TYPES[self.dtype] not in UNIT_ROUNDOFF:
            raise ValueError("--op avg needs a floating-point type (half, bfloat16, float, double)")
        if self.iters < 1 or self.warmup < 0:
            raise ValueError(f"iters must be >= 1 and warmup >= 0, got {self.iters} and {self.warmup}")


def type_name(dtype: str) -> str:
    """nccl-tests' type name of a torch or nccl-tests dtype name ('float32' → 'float')."""
    if dtype in TYPES:
        return dtype
    if dtype in TORCH_TO_TYPE:
        return TORCH_TO_TYPE[dtype]
    raise ValueError(f"unknown type {dtype!r}; choose from {', '.join(TYPES)} (or {', '.join(TORCH_TO_TYPE)})")


def sweep_sizes(min_bytes: int, max_bytes: int, factor: float = 2.0) -> list[int]:
    """nccl-tests' -b/-e/-f: min_bytes, × factor, … up to max_bytes included."""
    if min_bytes < 1 or max_bytes < min_bytes:
        raise ValueError(f"need 1 <= min-bytes <= max-bytes, got {min_bytes} and {max_bytes}")
    if min_bytes == max_bytes:
        return [int(min_bytes)]
    if factor <= 1:
        raise ValueError(f"step factor must be > 1, got {factor}")
    out, size = [], float(min_bytes)
    while size <= max_bytes:
        out.append(int(size))
        size *= factor
    return out


def layout(op: str, nbytes: int, world_size: int, itemsize: int) -> dict:
    """What nccl-tests makes of a requested size: printed size and count, elements sent and received per rank."""
    n, c = int(world_size), int(nbytes) // itemsize
    if op in ("all_reduce", "broadcast", "reduce", "sendrecv"):
        return {"size": c * itemsize, "count": c, "send": c, "recv": c}
    per = c // n
    if op == "all_gather":
        return {"size": per * n * itemsize, "count": per, "send": per, "recv": per * n}
    if op == "reduce_scatter":
        return {"size": per * n * itemsize, "count": per, "send": per * n, "recv": per}
    if op == "alltoall":
        return {"size": per * n * itemsize, "count": per, "send": per * n, "recv": per * n}
    raise ValueError(f"unknown collective {op!r}")


# --------------------------------------------------------------------------- the known input and its result
def _pattern(torch, redop: str, rank: int, world_size: int, index, unsigned: bool):
    """Rank `rank`'s input at global element `index` (int64): small integers, different on every rank."""
    if redop == "prod":  # one rank holds a 2, the others 1: the product is 2 everywhere, exactly
        return 1 + (index % world_size == rank).long()
    return (rank * 7 + index) % 11 - (0 if unsigned else 5)


def _reduce(torch, redop: str, values: list):
    out = values[0].clone()
    for v in values[1:]:
        if redop in ("sum", "avg"):
            out += v
        elif redop == "prod":
            out *= v
        elif redop == "min":
            out = torch.minimum(out, v)
        else:
            out = torch.maximum(out, v)
    return out


class _Check:
    """The inputs of one collective on one rank and what its output must be."""

    def __init__(self, torch, op, cfg, rank, n, lay, dtype, device):
        self.torch, self.op, self.cfg, self.rank, self.n, self.lay = torch, op, cfg, rank, n, lay
        self.dtype, self.device = dtype, device
        self.unsigned = dtype == torch.uint8
        self.floating = dtype.is_floating_point
        self.per = lay["count"]

    def values(self, rank, start, count):
        t = self.torch
        idx = t.arange(start, start + count, dtype=t.int64)
        return _pattern(t, self.cfg.redop, rank, self.n, idx, self.unsigned)

    def input(self):
        """This rank's input: all_gather sends its own block; the others index the whole buffer."""
        start = self.rank * self.per if self.op == "all_gather" else 0
        return self.values(self.rank, start, self.lay["send"]).to(self.dtype).to(self.device)

    def sources(self, start: int, stop: int):
        """(source rank, index in that rank's input) of output elements [start, stop) — None: a reduction over all."""
        t, op, r, n, per = self.torch, self.op, self.rank, self.n, max(self.per, 1)
        j = t.arange(start, stop, dtype=t.int64)
        if op in ("all_reduce", "reduce"):
            return None, j
        if op == "reduce_scatter":  # my output is block r of everyone's input, reduced
            return None, r * self.per + j
        if op == "all_gather":  # block q is rank q's input, which holds its own block of the index range
            return j // per, j
        if op == "alltoall":  # block q of my output is block r of rank q's input
            return j // per, r * self.per + j % per
        if op == "broadcast":
            return t.full_like(j, self.cfg.root), j
        return t.full_like(j, (r - 1) % n), j  # sendrecv: from rank r-1

    def expected(self, start: int, stop: int):
        """(expected output elements [start, stop) as int64/float64 on the CPU, Σ|inputs| there or None)."""
        t, redop = self.torch, self.cfg.redop
        src, idx = self.sources(start, stop)
        if src is not None:
            return _pattern(t, redop, src, self.n, idx, self.unsigned), None
        exact = abs_sum = None
        for q in range(self.n):  # one rank at a time: memory stays a few copies of the chunk
            v = _pattern(t, redop, q, self.n, idx, self.unsigned)
            v = v.double() if self.floating else v
            exact = v if exact is None else _reduce(t, redop, [exact, v])
            if self.floating:
                abs_sum = v.abs() if abs_sum is None else abs_sum + v.abs()
        if redop == "avg":
            exact, abs_sum = exact / self.n, abs_sum / self.n
        return exact, abs_sum

    def wrong(self, result) -> int:
        """Elements of this rank's output that differ from the expected reduction (0 where it has none to check).

        Compared CHECK_CHUNK elements at a time, so checking a large buffer needs little extra memory."""
        if self.op == "reduce" and self.rank != self.cfg.root:
            return 0  # only the root receives the reduction
        flat, bad = result.detach().reshape(-1), 0
        for a in range(0, flat.numel(), CHECK_CHUNK):
            b = min(a + CHECK_CHUNK, flat.numel())
            exact, abs_sum = self.expected(a, b)
            got = flat[a:b].cpu()
            if self.floating and self.cfg.redop in ("sum", "avg") and self.op in REDUCING:
                name = str(self.dtype).replace("torch.", "")
                # any summation order is correct (labkit.collectives.summation_tolerance); the result is
                # rounded to the dtype once more, half an ulp of its magnitude
                tol = summation_tolerance(abs_sum, self.n, name) + UNIT_ROUNDOFF[name] * exact.abs()
                bad += int(((got.double() - exact).abs() > tol).sum())
            else:
                bad += int((got != exact.to(self.dtype)).sum())  # int64 → int8/uint8 wraps as the dtype's sum does
        return bad


# --------------------------------------------------------------------------- the calls
def _calls(dist, torch, op, cfg, rank, n, x, out, device) -> dict:
    """{placement: (call, its input buffer, its output buffer)} of one collective; `x` is the out-of-place input."""
    redop = getattr(
        dist.ReduceOp, {"sum": "SUM", "prod": "PRODUCT", "min": "MIN", "max": "MAX", "avg": "AVG"}[cfg.redop]
    )
    root = cfg.root
    gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
    per = out.numel() if op == "reduce_scatter" else x.numel() if op == "all_gather" else 0
    big = torch.empty(max(x.numel(), out.numel()), dtype=x.dtype, device=device)  # the in-place buffer

    def copy_then(fn, only_root=False):
        def call():
            if not only_root or rank == root:
                out.copy_(x)
            fn(out)

        return call

    spare = torch.empty_like(big) if op in OUT_OF_PLACE_ONLY else None

    def copied(fn):  # an in-place call emulated: the buffer is copied aside, then the out-of-place call
        def call():
            spare.copy_(big)
            fn(spare)

        return call

    def sendrecv(src, dst):
        def call():
            reqs = dist.batch_isend_irecv(
                [dist.P2POp(dist.isend, src, (rank + 1) % n), dist.P2POp(dist.irecv, dst, (rank - 1) % n)]
            )
            for q in reqs:
                q.wait()

        return call

    if op == "all_reduce":
        oop, ip = copy_then(lambda b: dist.all_reduce(b, op=redop)), lambda: dist.all_reduce(big, op=redop)
    elif op == "broadcast":
        oop, ip = copy_then(lambda b: dist.broadcast(b, root), only_root=True), lambda: dist.broadcast(big, root)
    elif op == "reduce":
        oop, ip = copy_then(lambda b: dist.reduce(b, root, op=redop)), lambda: dist.reduce(big, root, op=redop)
    elif op == "all_gather":
        oop, ip = lambda: gather(out, x), lambda: gather(big, big[rank * per : (rank + 1) * per])
    elif op == "reduce_scatter":
        oop = lambda: scatter(out, x, op=redop)  # noqa: E731
        ip = lambda: scatter(big[rank * per : (rank + 1) * per], big, op=redop)  # noqa: E731
    elif op == "alltoall":
        oop, ip = lambda: dist.all_to_all_single(out, x), copied(lambda s: dist.all_to_all_single(big, s))
    else:  # sendrecv: to rank+1, from rank-1 (nccl-tests' sendrecv_perf)
        oop, ip = sendrecv(x, out), copied(lambda s: sendrecv(s, big)())
    in_place_out = {
        "all_gather": big,
        "reduce_scatter": big[rank * per : (rank + 1) * per],
    }.get(op, big)
    in_place_in = big[rank * per : (rank + 1) * per] if op == "all_gather" else big
    return {"out-of-place": (oop, x, out), "in-place": (ip, in_place_in, in_place_out)}


def sweep(cfg: PerfConfig, rank: int, world_size: int, device: str = "cpu") -> Iterator[dict]:
    """Every rank: one record per (collective, size), identical on every rank (times: the slowest rank's)."""
    import torch
    import torch.distributed as dist

    dev = torch.device(device)
    dtype = getattr(torch, TYPES[cfg.dtype])
    itemsize = torch.empty((), dtype=dtype).element_size()
    sync = (lambda: torch.cuda.synchronize(dev)) if dev.type == "cuda" else (lambda: None)
    barrier = (lambda: dist.barrier(device_ids=[dev.index])) if dev.type == "cuda" else dist.barrier
    for op in cfg.ops:
        if op in ROOTED and not 0 <= cfg.root < world_size:
            raise ValueError(f"--root {cfg.root} is not a rank of {world_size}")
        if op == "sendrecv" and world_size < 2 and dist.get_backend() == "gloo":
            raise ValueError("sendrecv on gloo needs at least 2 ranks (gloo cannot send to its own rank)")
        for nbytes in cfg.sizes:
            lay = layout(op, nbytes, world_size, itemsize)
            chk = _Check(torch, op, cfg, rank, world_size, lay, dtype, dev)
            x = chk.input()
            out = torch.zeros(lay["recv"], dtype=dtype, device=dev)
            calls = _calls(dist, torch, op, cfg, rank, world_size, x, out, dev)
            fns = {p: c[0] for p, c in calls.items()}

            def prepare(p, calls=calls, x=x):
                if p == "in-place":  # the in-place input lives in the output buffer: restore it
                    calls[p][1].copy_(x)

            secs = time_collectives(
                fns, repeats=1, warmup=cfg.warmup, barrier=barrier, sync=sync, prepare=prepare, inner=cfg.iters
            )
            wrong = {}
            for p, (fn, src, dst) in calls.items():
                if cfg.check:
                    dst.zero_()
                    src.copy_(x)
                    fn()
                    sync()
                    wrong[p] = chk.wrong(dst)
            mine = [secs[p][0] for p in PLACEMENTS] + [float(wrong.get(p, 0)) for p in PLACEMENTS]
            t = torch.tensor(mine, dtype=torch.float64, device=dev)
            every = [torch.zeros_like(t) for _ in range(world_size)]
            dist.all_gather(every, t)
            rows = [e.tolist() for e in every]
            rec = {
                "op": op,
                "nbytes": lay["size"],
                "requested_nbytes": int(nbytes),
                "count": lay["count"],
                "dtype": cfg.dtype,
                "redop": cfg.redop if op in REDUCING else "none",
                "root": cfg.root if op in ROOTED else -1,
                "world_size": world_size,
                "bus_factor": bus_factor(op, world_size),
            }
            for i, p in enumerate(PLACEMENTS):
                key = "oop" if p == "out-of-place" else "ip"
                s = slowest_rank([[row[i]] for row in rows])[0]
                rec[f"{key}_time_us"] = s * 1e6
                rec[f"{key}_algbw_GBps"] = algbw(lay["size"], s)
                rec[f"{key}_busbw_GBps"] = rec[f"{key}_algbw_GBps"] * rec["bus_factor"]
                rec[f"{key}_wrong"] = int(sum(row[2 + i] for row in rows)) if cfg.check else None
            yield rec


def describe_ranks(rank: int, device: str = "cpu") -> list[dict]:
    """Every rank's host, pid, node (torchrun's GROUP_RANK), device and its name, gathered on every rank."""
    import torch
    import torch.distributed as dist

    me = {
        "rank": rank,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "node": int(os.environ.get("GROUP_RANK", 0)),
        "local_rank": int(os.environ.get("LOCAL_RANK", rank)),
        "device": device,
        "bus_id": "cpu",
        "name": "CPU (gloo)",
    }
    if device.startswith("cuda"):
        props = torch.cuda.get_device_properties(torch.device(device))
        me["name"] = props.name
        bus = getattr(props, "pci_bus_id", None)
        me["bus_id"] = f"{bus:#04x}" if isinstance(bus, int) else "?"
    every: list = [None] * dist.get_world_size()
    dist.all_gather_object(every, me)
    return every


def perf_worker(rank: int, world_size: int, cfg: PerfConfig) -> dict:
    """labkit.launch worker: the rank descriptions and the sweep's records (what rank 0 prints)."""
    device = rank_info().device
    ranks = describe_ranks(rank, device)
    return {"ranks": ranks, "records": list(sweep(cfg, rank, world_size, device))}
