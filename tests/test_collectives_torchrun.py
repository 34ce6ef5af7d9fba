"""`labkit bench collectives`: two torchrun agents on this machine, the nccl-tests table read back by labkit.logs, a real #wrong."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from contextlib import nullcontext

import pytest

from labkit.allreduce import bench_collectives, perf, perf_table
from labkit.collectives import OPS, bus_factor
from labkit.hierarchy import slowlink
from labkit.logs import parse_log
from labkit.processes import descendants
from labkit.tools import cli

#: Printed bandwidths have BW_DECIMALS places: a relation between printed numbers holds to this.
HALF_LAST_PLACE = 0.5 * 10**-perf_table.BW_DECIMALS
AGENT_TIMEOUT_S = 120


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _processes_with(token: str) -> set[int]:
    """Live processes whose command line contains `token` (the run's unique rendezvous id)."""
    found = set()
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/cmdline", "rb") as f:
                    if token.encode() in f.read():
                        found.add(int(d))
            except OSError:
                pass
    return found


def _kill_all(procs) -> None:
    """SIGKILL every agent and everything it started (torchrun puts workers in sessions of their own)."""
    for p in procs:
        for pid in {p.pid} | descendants(p.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        p.wait()


def run_two_agents(tmp_path, bench_args: list[str], nproc=(1, 2), start=(0, 1), timeout_s=AGENT_TIMEOUT_S):
    """Torchrun agents for a two-"node" job (a network namespace each where this machine allows, else both
    on loopback), those of `start` started; every agent and worker is killed when they are done or at
    `timeout_s`. Returns (exit codes, None: killed at the timeout; stdout and stderr of each; network; rdzv id)."""
    use_netns, why = slowlink.available()
    if os.environ.get("LABKIT_TEST_NETWORK") == "loopback":
        use_netns, why = False, "LABKIT_TEST_NETWORK=loopback"
    rdzv_id = f"labkit-colls-{uuid.uuid4().hex[:8]}"
    cluster = slowlink.NetnsCluster(2, 1.0) if use_netns else nullcontext()
    procs, outs = [], []
    with cluster as cl:
        host = cl.address(0) if use_netns else "127.0.0.1"
        endpoint = f"{host}:{29500 if use_netns else _free_port()}"  # a fresh namespace has every port free
        env = dict(os.environ, PYTHONPATH=os.getcwd(), OMP_NUM_THREADS="1")
        if use_netns:
            env["GLOO_SOCKET_IFNAME"] = slowlink.IFACE
        try:
            for node in start:
                cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2"]
                cmd += ["--nproc-per-node", str(nproc[node]), "--rdzv-backend", "c10d", "--rdzv-endpoint", endpoint]
                cmd += ["--rdzv-id", rdzv_id, "--node-rank", str(node)]
                if use_netns:  # the endpoint is an address, not this host's name: say who hosts the store
                    cmd = ["ip", "netns", "exec", cl.nodes[node]] + cmd
                    cmd += ["--local-addr", cl.address(node), "--rdzv-conf", f"is_host={int(node == 0)}"]
                cmd += ["-m", "labkit", "bench", "collectives"] + bench_args
                out = open(tmp_path / f"agent{node}.out", "w+")
                err = open(tmp_path / f"agent{node}.err", "w+")
                outs.append((out, err))
                procs.append(subprocess.Popen(cmd, stdout=out, stderr=err, env=env, start_new_session=True))
            deadline = time.monotonic() + timeout_s
            while any(p.poll() is None for p in procs) and time.monotonic() < deadline:
                time.sleep(0.2)
            codes = [p.poll() for p in procs]
        finally:
            _kill_all(procs)
    texts = []
    for out, err in outs:
        out.seek(0), err.seek(0)
        texts.append((out.read(), err.read()))
        out.close(), err.close()
    network = "network namespaces (veth + bridge)" if use_netns else f"loopback ({why})"
    return codes, texts, network, rdzv_id


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_two_torchrun_agents_print_a_table_labkit_logs_reads(tmp_path):
    codes, texts, network, rdzv_id = run_two_agents(
        tmp_path, ["--collective", "all", "-b", "4KiB", "-e", "64KiB", "-f", "16", "-n", "2", "-w", "1"]
    )
    print(f"two torchrun agents over {network}")
    tails = "\n".join(f"--- agent {i} stderr ---\n{e[-3000:]}" for i, (_, e) in enumerate(texts))
    assert codes == [0, 0], f"agents exited {codes} (None: still running after {AGENT_TIMEOUT_S} s)\n{tails}"
    (out0, _), (out1, _) = texts
    assert not _processes_with(rdzv_id), "torchrun left processes behind"
    assert "size" not in out1 and not out1.strip(), "only rank 0 prints"
    parsed = parse_log(out0)
    assert not parsed.skipped, parsed.skipped
    assert [ds.meta["op"] for ds in parsed] == list(OPS)
    assert "world size 3, nodes 2 (torchrun agents" in out0 and "backend gloo" in out0
    for ds in parsed:
        op, f = ds.meta["op"], ds.frame
        assert ds.meta["tool"] == "nccl-tests" and ds.meta["program"] == f"{op}_perf"  # its layout, read as such
        assert ds.meta["rank_lines_complete"] and set(f["world_size"]) == {3}
        assert set(f["nodes"]) == {len(ds.meta["hosts"])}  # one host name: both agents run on this machine
        assert ds.meta["out_of_bounds_printed"] == "0 OK"
        assert list(f["placement"]) == ["out-of-place", "in-place"] * 2
        want = [perf.layout(op, n, 3, 4)["size"] for n in (4096, 65536)]
        assert list(f["nbytes"][::2]) == want and set(f["dtype"]) == {"float"}
        assert (f["wrong"] == "0").all(), f
        algbw, busbw, t = (f[c].astype(float) for c in ("algbw_GBps", "busbw_GBps", "time_us"))
        assert (t > 0).all()
        assert (abs(algbw - f["nbytes"] / (t * 1e3)) <= HALF_LAST_PLACE + 0.005 * algbw).all()  # time has 2 places
        factor = bus_factor(op, 3)
        assert (abs(busbw - algbw * factor) <= HALF_LAST_PLACE * (1 + factor)).all(), (op, f)
        avg = float(ds.meta["avg_busbw_printed"])
        assert abs(avg - busbw.mean()) <= HALF_LAST_PLACE * 2


@pytest.mark.timeout(120)
def test_a_node_that_never_comes_is_stopped_at_the_timeout_with_nothing_left(tmp_path):
    """Only node 0's agent starts: it waits in the rendezvous; at the bound it and its tree are killed."""
    codes, texts, network, rdzv_id = run_two_agents(tmp_path, ["-b", "4KiB", "-e", "4KiB"], start=(0,), timeout_s=4)
    assert codes == [None], f"the agent should still be waiting for node 1 ({network}): {texts[0][1][-2000:]}"
    assert not texts[0][0].strip()
    assert not _processes_with(rdzv_id), "the stopped agent left processes behind"


@pytest.mark.timeout(120)
def test_json_lines_are_the_table_labkit_logs_reads(capsys):
    """Local ranks (labkit.launch), --json: one line per size; the table of those records reads back exactly."""
    args = ["bench", "collectives", "--json", "--collective", "all_reduce,reduce_scatter", "--ranks", "2"]
    assert cli.main(args + ["-b", "1KiB", "-e", "16KiB", "-f", "4", "-n", "2", "-w", "1", "-d", "bfloat16"]) == 0
    recs = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["op"], r["requested_nbytes"]) for r in recs] == [
        (op, n) for op in ("all_reduce", "reduce_scatter") for n in (1024, 4096, 16384)
    ]
    cfg = bench_collectives.config(
        bench_collectives.argparse_defaults(collective="all_reduce", min_bytes="1KiB", max_bytes="16KiB", step_factor=4)
    )
    ranks = [dict(rank=i, node=0, host="h", pid=1, local_rank=i, bus_id="cpu", name="CPU (gloo)") for i in range(2)]
    text = []
    for op in ("all_reduce", "reduce_scatter"):
        rows = [r for r in recs if r["op"] == op]
        text += perf_table.header(op, ranks=ranks, backend="gloo", launcher="labkit.launch", cfg=cfg)
        text += [perf_table.row(r) for r in rows] + perf_table.footer(op, rows)
    parsed = parse_log("\n".join(text))
    assert not parsed.skipped and len(parsed) == 2
    for ds in parsed:
        rows = [r for r in recs if r["op"] == ds.meta["op"]]
        for rec, (oop, ip) in zip(rows, zip(ds.frame.iloc[::2].itertuples(), ds.frame.iloc[1::2].itertuples())):
            for key, got in (("oop", oop), ("ip", ip)):
                assert rec[f"{key}_wrong"] == 0 and got.wrong == "0"
                assert got.nbytes == rec["nbytes"] and got.count == rec["count"] and got.dtype == "bfloat16"
                assert got.algbw_GBps == f"{rec[f'{key}_algbw_GBps']:.{perf_table.BW_DECIMALS}f}"
                assert got.busbw_GBps == f"{rec[f'{key}_busbw_GBps']:.{perf_table.BW_DECIMALS}f}"
                assert got.time_us == f"{rec[f'{key}_time_us']:.{perf_table.TIME_DECIMALS}f}"
                assert rec[f"{key}_busbw_GBps"] == pytest.approx(rec[f"{key}_algbw_GBps"] * bus_factor(rec["op"], 2))


@pytest.mark.timeout(120)
def test_bench_allreduce_under_torchrun_prints_the_table(monkeypatch, capsys):
    """`labkit bench allreduce` in a process torchrun started (here: its environment, one rank) joins the
    group from that environment (env://) and prints dist.all_reduce in nccl-tests' table."""
    env = {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1", "GROUP_RANK": "0"}
    env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()))
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert cli.main(["bench", "allreduce", "--sizes", "4KiB,64KiB", "--repeats", "2", "--warmup", "1"]) == 0
    out = capsys.readouterr().out
    assert "launched by torchrun" in out and "world size 1, nodes 1 (torchrun agents" in out
    (ds,) = parse_log(out)
    assert ds.meta["op"] == "all_reduce" and ds.meta["parameters"]["iters"] == "2"
    assert list(ds.frame["nbytes"]) == [4096, 4096, 65536, 65536] and (ds.frame["wrong"] == "0").all()
    assert (ds.frame["busbw_GBps"].astype(float) == 0).all()  # one rank moves nothing: 2(n-1)/n = 0


# --------------------------------------------------------------------------- no processes
def test_sizes_and_counts_are_nccl_tests():
    assert perf.sweep_sizes(8, 128, 2) == [8, 16, 32, 64, 128]
    assert perf.sweep_sizes(1024, 1024, 2) == [1024]
    assert perf.layout("all_reduce", 4096, 3, 4) == {"size": 4096, "count": 1024, "send": 1024, "recv": 1024}
    # all_gather: count is per rank, size the gathered output (nccl-tests AllGatherGetCollByteCount)
    assert perf.layout("all_gather", 4096, 3, 4) == {"size": 4092, "count": 341, "send": 341, "recv": 1023}
    assert perf.layout("reduce_scatter", 4096, 3, 4) == {"size": 4092, "count": 341, "send": 1023, "recv": 341}
    assert perf.layout("alltoall", 4096, 4, 4) == {"size": 4096, "count": 256, "send": 1024, "recv": 1024}
    assert perf.type_name("float32") == "float" and perf.type_name("half") == "half"
    with pytest.raises(ValueError, match="step factor"):
        perf.sweep_sizes(8, 64, 1)
    with pytest.raises(ValueError, match="avg needs a floating"):
        perf.PerfConfig(dtype="int32", redop="avg")
    with pytest.raises(ValueError, match="unknown collective"):
        perf.PerfConfig(ops=("allreduce",))


@pytest.mark.parametrize("op", ["all_reduce", "reduce_scatter", "all_gather", "alltoall", "sendrecv", "broadcast"])
@pytest.mark.parametrize("dtype", ["float", "int8", "bfloat16"])
def test_wrong_counts_the_elements_that_differ(op, dtype, monkeypatch):
    """The #wrong check is real: the expected output passes, one changed element is one wrong."""
    import torch

    cfg = perf.PerfConfig(ops=(op,), dtype=dtype)
    tdtype = getattr(torch, perf.TYPES[dtype])
    lay = perf.layout(op, 96, 3, tdtype.itemsize)
    chk = perf._Check(torch, op, cfg, 1, 3, lay, tdtype, torch.device("cpu"))
    good = chk.expected(0, lay["recv"])[0].to(tdtype)
    assert good.numel() == lay["recv"] and chk.wrong(good) == 0
    bad = good.clone()
    bad[-1] += 1
    assert chk.wrong(bad) == 1
    assert chk.wrong(torch.zeros_like(good)) > 0
    monkeypatch.setattr(perf, "CHECK_CHUNK", 7)  # compared in pieces: the same count
    assert chk.wrong(good) == 0 and chk.wrong(bad) == 1


def test_torchrun_is_detected_from_its_environment():
    env = {"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "n0"}
    assert bench_collectives.torchrun_env(env) == {
        "rank": 3,
        "world_size": 4,
        "local_rank": 1,
        "local_world_size": 2,
        "node": 0,
    }
    assert bench_collectives.torchrun_env({k: v for k, v in env.items() if k != "MASTER_ADDR"}) is None
