"""doctor's findings on synthetic environments: link below max, remote NUMA, no P2P, no CUDA."""

import os

from labkit.system import Finding, environment
from labkit.tools import doctor

BASE = {
    "torch": "2.13.0",
    "cuda_build": "12.8",
    "cuda_available": True,
    "cuda_device_count": 1,
    "nccl": "2.27.5",
    "gpus": [],
    "numa_nodes": {},
    "topology": None,
    "labkit": "0",
    "host": "h",
    "platform": "p",
    "cpu": "c",
    "cpu_count": 2,
    "python": "3.11",
}


def gpu(**kw):
    return {
        "index": 0,
        "name": "NVIDIA H100",
        "pcie_gen_current": 5,
        "pcie_gen_max": 5,
        "pcie_width_current": 16,
        "pcie_width_max": 16,
        "numa_node": None,
        "bus_id": "00000000:C2:00.0",
        "driver": "570",
        **kw,
    }


def diagnose(env):
    """(level, message) of every finding `labkit doctor` makes about `env`."""
    found = doctor.diagnose(env)
    assert all(isinstance(f, Finding) for f in found)
    return [(f.level, f.message) for f in found]


def levels(env):
    return {msg.split(":")[0] + ":" + level for level, msg in diagnose(env)}


def test_healthy_link_is_ok():
    out = diagnose({**BASE, "gpus": [gpu()]})
    assert ("ok", "GPU0 (NVIDIA H100): PCIe Gen5 x16, at its maximum") in out
    assert not [m for lvl, m in out if lvl == "warn"]


def test_narrow_link_is_a_warning_and_low_gen_a_note():
    out = diagnose({**BASE, "gpus": [gpu(pcie_width_current=8, pcie_gen_current=3)]})
    warns = [m for lvl, m in out if lvl == "warn"]
    notes = [m for lvl, m in out if lvl == "info"]
    assert any("x8 but supports x16" in m for m in warns)
    assert any("Gen3, max Gen5" in m and "idle" in m for m in notes)


def test_remote_numa_node_is_flagged():
    mine = sorted(os.sched_getaffinity(0))
    other = max(mine) + 100
    env = {**BASE, "gpus": [gpu(numa_node=1)], "numa_nodes": {0: f"{mine[0]}-{mine[-1]}", 1: f"{other}-{other + 3}"}}
    warns = [m for lvl, m in diagnose(env) if lvl == "warn"]
    assert any("NUMA node 1" in m and "numactl" in m for m in warns)


def test_missing_peer_access_is_explained():
    env = {**BASE, "cuda_device_count": 2, "gpus": [gpu(), gpu(index=1)], "peer_access": {"0->1": False, "1->0": False}}
    warns = " ".join(m for lvl, m in diagnose(env) if lvl == "warn")
    assert "peer access unavailable" in warns and "IOMMU" in warns and "virtual machine" in warns


def test_no_cuda_points_to_reference_mode():
    env = {**BASE, "cuda_available": False, "cuda_build": None, "nvml_problem": "NVML is unavailable"}
    warns = " ".join(m for lvl, m in diagnose(env) if lvl == "warn")
    assert "no CUDA" in warns and "mode='auto'" in warns and "CPU-only build" in warns


def test_sys_pairs_from_topology_are_reported():
    topo = "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\nGPU0\t X \tSYS\t0-3\t0\nGPU1\tSYS\t X \t4-7\t1\n"
    infos = " ".join(m for lvl, m in diagnose({**BASE, "topology": topo}) if lvl == "info")
    assert "GPU0-GPU1" in infos


def test_report_on_this_machine_runs():
    text = doctor.report(environment())
    assert "labkit" in text and ("[OK  ]" in text or "[WARN]" in text)


def test_doctor_names_the_pair_link_and_likely_cause_from_topology():
    topo = "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\nGPU0\t X \tPHB\t0-3\t0\nGPU1\tPHB\t X \t0-3\t0\n"
    env = {
        **BASE,
        "cuda_device_count": 2,
        "cuda_devices": ["NVIDIA GeForce RTX 4090"] * 2,
        "gpus": [gpu(), gpu(index=1)],
        "peer_access": {"0->1": False, "1->0": False},
        "topology": topo,
    }
    out = diagnose(env)
    warns = [m for lvl, m in out if lvl == "warn" and "peer access" in m]
    assert len(warns) == 1 and warns[0].startswith("GPU0↔GPU1 (PHB)") and "GeForce" in warns[0]
    assert any("labkit bench p2p" in m for lvl, m in out if lvl == "info")
    healthy = diagnose({**env, "peer_access": {"0->1": True, "1->0": True}})
    assert ("ok", "peer access available between every GPU pair") in healthy


def test_sys_pairs_are_reported_once_when_peer_access_is_known():
    topo = "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\nGPU0\t X \tSYS\t0-3\t0\nGPU1\tSYS\t X \t4-7\t1\n"
    env = {
        **BASE,
        "cuda_device_count": 2,
        "gpus": [gpu(), gpu(index=1)],
        "topology": topo,
        "peer_access": {"0->1": True, "1->0": True},
    }
    sys_lines = [m for lvl, m in diagnose(env) if "SYS" in m]
    assert len(sys_lines) == 1 and "GPU0↔GPU1" in sys_lines[0]
