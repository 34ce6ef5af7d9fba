"""The Slurm recipe of docs/measure-your-cluster.md, submitted to a real Slurm on this machine.

The test starts `munged`, `slurmctld` and two `slurmd` (Debian's slurm-wlm, 22.05): each Slurm node is a
network namespace of its own (`labkit.hierarchy.slowlink.NetnsCluster`: veth pairs and a bridge), with its
own host name (a UTS namespace) and an /etc/hosts that names both nodes (a mount namespace), so torchrun's
c10d rendezvous and gloo find each other by the names Slurm gives them, as on a real cluster. It takes the
sbatch block out of the document, makes only the changes the document's table lists for nodes without
GPUs, submits it with `sbatch --wait`, and imports the log the job wrote with `labkit ref import-log`:
every row of every collective has `#wrong` 0. Everything it started is stopped, and psutil confirms it.

Needs root (namespaces; slurmd starts jobs as their user), `ip`, `nsenter`, `unshare`, and Slurm and munge
(installed with apt-get when missing). Marked `install`: CI runs it after the suite (`.ci/run`).
"""

from __future__ import annotations

import csv
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from labkit.hierarchy import slowlink

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "measure-your-cluster.md"
#: The test venv's torchrun and labkit: the job inherits this PATH (sbatch's default --export=ALL).
VENV_BIN = Path(sys.executable).parent
IN_CI = os.environ.get("CI", "").lower() == "true"
#: Debian packages behind the daemons and commands the test runs (`.ci/run` installs the same).
DEBIAN_PACKAGES = ["munge", "slurmctld", "slurmd", "slurm-client"]
NEEDED = ["munged", "slurmctld", "slurmd", "sbatch", "sinfo", "scontrol", "scancel"]
NODES = ("node0", "node1")
#: The changes the document's table allows for nodes without GPUs: 2 cores, 2 gloo processes per node,
#: a sweep up to 64 KiB (gloo over TCP on 2 cores: the job takes about 40 s).
CPUS, RANKS_PER_NODE, MAX_BYTES = 2, 2, "64K"
NODES_UP_TIMEOUT_S = 60
JOB_TIMEOUT_S = 240

pytestmark = [pytest.mark.install, pytest.mark.slow]


def _missing_tools() -> list[str]:
    return [t for t in ["ip", "tc", "nsenter", "unshare", "mount", *NEEDED] if shutil.which(t) is None]


def _skip_or_fail(reason: str):
    if IN_CI:
        pytest.fail(f"{reason} (CI=true: the Slurm test must run in CI; .ci/run installs {' '.join(DEBIAN_PACKAGES)})")
    pytest.skip(reason)


def _ensure_slurm() -> None:
    """Install Debian's Slurm and munge when they are missing (root and apt-get only)."""
    if os.name != "posix" or os.geteuid() != 0:
        _skip_or_fail("needs root: network namespaces, and slurmd starting jobs")
    if any(shutil.which(t) is None for t in NEEDED) and shutil.which("apt-get"):
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        install = ["apt-get", "install", "-y", "-qq", *DEBIAN_PACKAGES]
        if subprocess.run(install, env=env, capture_output=True, timeout=900).returncode != 0:
            subprocess.run(["apt-get", "update", "-qq"], env=env, capture_output=True, timeout=600)
            subprocess.run(install, env=env, capture_output=True, timeout=900)
    missing = _missing_tools()
    if missing:
        _skip_or_fail(f"not found: {', '.join(missing)} (apt-get install {' '.join(DEBIAN_PACKAGES)} iproute2)")
    ok, why = slowlink.available()
    if not ok:
        _skip_or_fail(f"cannot build network namespaces: {why}")


# --- the template, as the document writes it ---------------------------------------------------------------


def doc_template() -> str:
    """The ```bash block of the document's '## Slurm' section, verbatim."""
    text = DOC.read_text()
    section = text[text.index("\n## Slurm\n") :]
    return re.search(r"```bash\n(.*?)```", section, re.S).group(1)


def doc_table() -> str:
    """The table under the template that lists what a site changes."""
    text = DOC.read_text()
    section = text[text.index("\n## Slurm\n") :]
    return section[: section.index("\n## ", 1)]


#: (what the table names, the pattern in the template, its replacement for this machine's CPU-only nodes)
CPU_EDITS = [
    ("`--nodes=2`", r"^#SBATCH --nodes=2(?=\s)", f"#SBATCH --nodes={len(NODES)}"),
    ("`--gpus-per-node=8`", r"^#SBATCH --gpus-per-node=8[^\n]*\n", ""),  # "on nodes without GPUs delete the line"
    ("`--cpus-per-task=16`", r"^#SBATCH --cpus-per-task=16(?=\s)", f"#SBATCH --cpus-per-task={CPUS}"),
    ("`${SLURM_GPUS_PER_NODE:-8}`", r"\$\{SLURM_GPUS_PER_NODE:-8\}", f"${{SLURM_GPUS_PER_NODE:-{RANKS_PER_NODE}}}"),
    ("`-e 8G`", r" -e 8G ", f" -e {MAX_BYTES} "),
]


def cpu_script(template: str) -> str:
    """The template with the table's CPU-only changes, each applied exactly once; nothing else changes."""
    table = doc_table()
    for cell, pattern, replacement in CPU_EDITS:
        assert f"| {cell} |" in table, f"the test changes {cell}, which the document's table does not list"
        template, n = re.subn(pattern, replacement, template, flags=re.M)
        assert n == 1, f"{cell} appears {n} times in the template, not once"
    return template


def test_the_template_changes_only_what_the_document_lists():
    """Cheap, and runs with the install tests: the edits below are the table's rows, each found once."""
    template = doc_template()
    script = cpu_script(template)
    assert script.startswith("#!/bin/bash\n") and "--gpus-per-node" not in script
    unchanged = [
        ln for ln in template.splitlines() if not re.search(r"--nodes=|--gpus-per|--cpus-per-task=|:-8| -e 8G", ln)
    ]
    assert all(ln in script.splitlines() for ln in unchanged)
    # srun is given the job's cores explicitly: from 22.05 it does not inherit sbatch's --cpus-per-task
    assert 'srun --cpus-per-task "$SLURM_CPUS_PER_TASK"' in template


# --- a two-node Slurm in network namespaces -----------------------------------------------------------------


def _conf(d: Path, cluster: slowlink.NetnsCluster) -> str:
    nodes = "\n".join(
        f"NodeName={n} NodeAddr={cluster.address(i)} CPUs={CPUS} State=UNKNOWN" for i, n in enumerate(NODES)
    )
    return f"""\
ClusterName=labkit
SlurmctldHost={NODES[0]}({cluster.address(0)})
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={d / "munge" / "munge.socket"}
StateSaveLocation={d / "state"}
SlurmdSpoolDir={d / "spool"}/%n
SlurmctldPidFile={d / "slurmctld.pid"}
SlurmdPidFile={d / "slurmd-%n.pid"}
SlurmctldLogFile={d / "log" / "slurmctld.log"}
SlurmdLogFile={d / "log" / "slurmd-%n.log"}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
{nodes}
PartitionName=debug Nodes={",".join(NODES)} Default=YES MaxTime=INFINITE State=UP
"""


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


class Slurm:
    """munged in this namespace; slurmctld and slurmd node0 in node0's network namespace, slurmd node1 in node1's."""

    def __init__(self, d: Path, cluster: slowlink.NetnsCluster):
        self.d, self.cluster = d, cluster
        self.conf = d / "slurm.conf"
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("SLURM", "PYTEST", "LABKIT_"))},
            "SLURM_CONF": str(self.conf),
            "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        }
        self.procs: list[subprocess.Popen] = []

    def _ns(self, node: int) -> list[str]:
        return ["nsenter", f"--net={slowlink.NETNS_DIR / self.cluster.nodes[node]}"]

    def _as_node(self, node: int, cmd: list[str]) -> list[str]:
        """cmd inside node's network namespace, with the node's host name and /etc/hosts (nothing else changes)."""
        setup = f'mount --bind {self.d / "hosts"} /etc/hosts && hostname {NODES[node]} && exec "$@"'
        return [*self._ns(node), "unshare", "--mount", "--uts", "sh", "-c", setup, "sh", *cmd]

    def _start(self, cmd: list[str], name: str) -> None:
        out = open(self.d / "log" / f"{name}.out", "wb")  # noqa: SIM115 - closed with the process
        self.procs.append(subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=self.env, cwd=self.d))
        out.close()

    def start(self) -> None:
        d = self.d
        for sub in ("munge", "state", "log", *(f"spool/{n}" for n in NODES)):
            (d / sub).mkdir(parents=True, exist_ok=True)
        os.chmod(d / "munge", 0o711)  # munged: the key private, the socket reachable
        key = d / "munge.key"
        key.write_bytes(os.urandom(1024))
        os.chmod(key, 0o600)
        self.conf.write_text(_conf(d, self.cluster))
        # No cgroup is used (proctrack/linuxproc, task/none), but slurmd 22.05 loads a cgroup plugin anyway, and
        # "autodetect" fails where /sys/fs/cgroup is not what it expects (containers, network namespaces entered
        # with `ip netns exec`). Naming cgroup/v1 starts slurmd with no cgroup filesystem at all (tried here).
        (d / "cgroup.conf").write_text("CgroupPlugin=cgroup/v1\n")
        hosts = [f"{self.cluster.address(i)} {n}" for i, n in enumerate(NODES)]
        (d / "hosts").write_text("\n".join(["127.0.0.1 localhost", *hosts]) + "\n")
        m = d / "munge"
        self._start(
            ["munged", "-F", "--force", f"--key-file={key}", f"--socket={m / 'munge.socket'}",
             f"--pid-file={m / 'munged.pid'}", f"--log-file={d / 'log' / 'munged.log'}", f"--seed-file={m / 'seed'}"],
            "munged",
        )  # fmt: skip
        self._wait(lambda: (m / "munge.socket").exists(), 20, "munged did not create its socket")
        self._start(self._as_node(0, ["slurmctld", "-D", "-i"]), "slurmctld")
        self._wait(lambda: self.run(["sinfo", "-h"], check=False).returncode == 0, 30, "slurmctld did not answer")
        for i, n in enumerate(NODES):
            self._start(self._as_node(i, ["slurmd", "-D"]), f"slurmd-{n}")
        self._wait(self._nodes_idle, NODES_UP_TIMEOUT_S, "the nodes did not come up idle")

    def _nodes_idle(self) -> bool:
        out = self.run(["sinfo", "-h", "-N", "-o", "%N %t"], check=False).stdout.split()
        return len(out) == 2 * len(NODES) and all(s == "idle" for s in out[1::2])

    def _wait(self, ready, timeout_s: float, what: str) -> None:
        end = time.monotonic() + timeout_s
        while not ready():
            dead = [p.args for p in self.procs if p.poll() is not None]
            if dead or time.monotonic() > end:
                raise AssertionError(f"{what} (exited: {dead})\n{self.logs()}")
            time.sleep(0.5)

    def run(self, cmd: list[str], check=True, timeout=60, cwd=None) -> subprocess.CompletedProcess:
        """A Slurm client command on node0 (the controller's network)."""
        try:
            r = subprocess.run(
                [*self._ns(0), *cmd], env=self.env, capture_output=True, text=True, timeout=timeout, cwd=cwd
            )
        except subprocess.TimeoutExpired:
            queue = subprocess.run([*self._ns(0), "squeue"], env=self.env, capture_output=True, text=True, timeout=20)
            raise AssertionError(f"{' '.join(cmd)}: no answer in {timeout} s\n{queue.stdout}\n{self.logs()}") from None
        if check:
            assert r.returncode == 0, f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}\n{self.logs()}"
        return r

    def logs(self, tail=15) -> str:
        parts = []
        for f in sorted((self.d / "log").glob("*")):
            lines = f.read_text(errors="replace").splitlines()[-tail:]
            parts.append(f"== {f.name}\n" + "\n".join(lines))
        return "\n".join(parts)

    def footprint(self) -> set[int]:
        """Live processes of this Slurm: in its namespaces, or naming its folder in their command or environment."""
        pids = set()
        for ns in self.cluster.nodes:
            out = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout
            pids |= {int(p) for p in out.split()}
        token = str(self.d)
        for p in psutil.process_iter(["pid", "cmdline", "environ"]):
            cmdline, environ = p.info["cmdline"] or (), p.info["environ"] or {}
            if any(token in a for a in cmdline) or token in environ.get("SLURM_CONF", ""):
                pids.add(p.info["pid"])
        return {p for p in pids - {os.getpid()} if _alive(p)}

    def stop(self) -> set[int]:
        """Cancel jobs, stop the daemons (SIGTERM, then SIGKILL), then kill what is left; return what was left."""
        if self.procs and self.procs[-1].poll() is None:
            try:
                self.run(["scancel", "--user", "root"], check=False, timeout=20)
            except AssertionError:
                pass  # slurmctld not answering: what is left is killed below
        for p in reversed(self.procs):  # slurmd, slurmctld, then munged
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        deadline = time.monotonic() + 10
        left = self.footprint()
        while left and time.monotonic() < deadline:  # slurmstepd may take a moment after its slurmd
            time.sleep(0.5)
            left = self.footprint()
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return left


@pytest.fixture
def slurm(tmp_path):
    _ensure_slurm()
    d = tmp_path / "slurm"
    d.mkdir()
    os.chmod(tmp_path, 0o755)
    with slowlink.NetnsCluster(len(NODES), 1.0) as cluster:
        s = Slurm(d, cluster)
        failed = True
        try:
            s.start()
            yield s
            failed = False
        finally:
            left = s.stop()
            gone = not s.footprint()
            if not failed:  # on a failure the first error is the one to read; the clean-up still ran
                assert not left, f"processes still running after the daemons stopped: {sorted(left)}"
                assert gone, "processes of the test's Slurm survived SIGKILL"


def test_the_documented_sbatch_template_runs_under_slurm_and_imports_with_no_wrong_element(slurm, tmp_path):
    job = tmp_path / "job"
    job.mkdir()
    script = job / "labkit-collectives.sbatch"
    script.write_text(cpu_script(doc_template()))
    r = slurm.run(["sbatch", "--wait", script.name], cwd=job, timeout=JOB_TIMEOUT_S, check=False)
    jobid = re.search(r"Submitted batch job (\d+)", r.stdout)
    outs = "\n".join(f.read_text(errors="replace")[-3000:] for f in job.glob("*.out"))
    assert r.returncode == 0 and jobid, f"sbatch --wait: {r.returncode}\n{r.stdout}\n{r.stderr}\n{outs}\n{slurm.logs()}"
    log = job / f"labkit_collectives_{jobid.group(1)}.log"
    assert log.exists(), f"the job wrote no {log.name}: {sorted(p.name for p in job.iterdir())}\n{outs}"
    text = log.read_text()
    # two Slurm nodes, two ranks each: the rank lines name both host names
    hosts = set(re.findall(r"^#\s+Rank\s+\d+ .* on\s+(\S+) device", text, re.M))
    assert hosts == set(NODES), f"ranks ran on {hosts}, not on both nodes\n{text[:2000]}"
    assert f"world size {len(NODES) * RANKS_PER_NODE}," in text

    data = tmp_path / "data"
    imp = subprocess.run(
        [VENV_BIN / "labkit", "ref", "import-log", log, "--name", "slurm_two_nodes", "--out", data],
        capture_output=True, text=True, timeout=120, env={**slurm.env, "LABKIT_DATA": str(data)},
    )  # fmt: skip
    assert imp.returncode == 0, f"import-log failed:\n{imp.stdout}\n{imp.stderr}"
    tables = sorted(data.glob("*.csv"))
    assert len(tables) == 7, f"one dataset per collective expected, got {[t.name for t in tables]}"
    for table in tables:
        with table.open() as f:
            rows = list(csv.DictReader(f))
        wrong_cols = [c for c in rows[0] if c.startswith("wrong")]
        assert rows and wrong_cols, f"{table.name}: no #wrong column in {list(rows[0])}"
        # 64K as the doc's K (binary): 8 B ... 64 KiB, out of place and in place
        assert max(int(float(r["nbytes"])) for r in rows) == 64 << 10, table.name
        bad = [r for r in rows if any(r[c] not in ("0", "0.0") for c in wrong_cols)]
        assert not bad, f"{table.name}: rows with #wrong other than 0: {bad}"
