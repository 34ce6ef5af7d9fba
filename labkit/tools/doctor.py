"""`labkit doctor`: what this machine has, with plain-language findings from every part of labkit that reads it.

The findings are composed here, in the tools layer: `labkit.system.diagnose` (software, CUDA, PCIe
links, NUMA) and what the topics read from the same environment — peer access between GPUs, with the
likely cause per pair (`labkit.p2p.diagnosis.doctor_findings`) and GPU pairs across CPU sockets.
Nothing is measured: `labkit bench` does that.
"""

from __future__ import annotations

from .. import system
from ..p2p.diagnosis import doctor_findings
from ..system import Finding, environment, parse_topology


def diagnose(env: dict) -> list[Finding]:
    """Every finding about this machine's environment (`labkit.system.environment()`), in report order."""
    out = system.diagnose(env)
    # Peer access, pair by pair, with the likely cause read from the topology.
    out += doctor_findings(env)
    if (env.get("cuda_device_count") or 0) >= 2:
        out.append(
            Finding(
                "info",
                "peer access says a path exists, not how fast it is: `labkit bench p2p` measures "
                "every pair and flags pairs slower than their link type promises",
            )
        )
    if env.get("topology"):
        try:
            topo = parse_topology(env["topology"])
            gpus = [d for d in topo.index if d.startswith("GPU")]
            sys_pairs = [f"{a}-{b}" for i, a in enumerate(gpus) for b in gpus[i + 1 :] if topo.loc[a, b] == "SYS"]
            # With peer access known, doctor_findings has already named each SYS pair with its access.
            if sys_pairs and not env.get("peer_access"):
                out.append(
                    Finding(
                        "info",
                        f"GPU pairs across CPU sockets (SYS): {', '.join(sys_pairs)}; keep tensor-"
                        "parallel groups off these pairs.",
                    )
                )
        except ValueError as e:
            out.append(Finding("info", f"could not parse `nvidia-smi topo -m`: {e}"))
    return out


def _numa_text(node) -> str:
    # sysfs reports -1 (read as None here) when the platform does not say, e.g. in many VMs.
    return "unknown (not reported by the platform)" if node is None or node == -1 else str(node)


def report(env: dict | None = None) -> str:
    """The text `labkit doctor` prints: the machine, its GPUs and topology, then every finding."""
    env = env or environment()
    lines = [
        f"labkit {env['labkit']} on {env['host']} — {env['platform']}",
        f"CPU: {env['cpu']} ({env['cpu_count']} logical CPUs); NUMA nodes: {len(env.get('numa_nodes') or {}) or 'unknown'}",
        f"torch {env.get('torch')} (CUDA build: {env.get('cuda_build') or 'none'}); python {env['python']}",
    ]
    for g in env.get("gpus", []):
        lines.append(
            f"GPU{g['index']}: {g.get('name')}  bus {g.get('bus_id')}  NUMA {_numa_text(g.get('numa_node'))}  "
            f"PCIe Gen{g.get('pcie_gen_current')}/{g.get('pcie_gen_max')} "
            f"x{g.get('pcie_width_current')}/{g.get('pcie_width_max')} (current/max)  driver {g.get('driver')}"
        )
    if env.get("topology"):
        lines += ["", "nvidia-smi topo -m:", env["topology"].rstrip()]
    lines.append("")
    marks = {"ok": "OK  ", "info": "NOTE", "warn": "WARN"}
    for f in diagnose(env):
        lines.append(f"[{marks[f.level]}] {f.message}")
    return "\n".join(lines)
