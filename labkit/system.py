"""System: what this machine is — versions, GPUs, PCIe links (NVML), NUMA, topology — and its findings.

Everything is read lazily and defensively: a missing driver, NVML or nvidia-smi becomes a
plain-language finding, never an exception at import time.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

from . import __version__

#: Link labels of `nvidia-smi topo -m`, from the closest to the farthest (after NV#).
LINK_LABELS = ("X", "PIX", "PXB", "PHB", "NODE", "SYS")
_LABEL_RE = re.compile(r"^(X|NV\d+|PIX|PXB|PHB|NODE|SYS|OK|NS|CNS|TNS|GNS|NA|N/A)$")
_DEVICE_RE = re.compile(r"^(GPU\d+|NIC\d+|mlx\d+_\d+|CPU\d+|NVS\d+)$")
_AFFINITY_HEADERS = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")
_ANSI_RE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


# --------------------------------------------------------------------------- topology
def parse_topology(text: str):
    """Parse `nvidia-smi topo -m` output into a square DataFrame of link labels.

    Rows and columns are the devices in the header (GPU0…, NIC0…); cells are labels such as
    'X', 'NV12', 'PIX', 'PXB', 'PHB', 'NODE', 'SYS'. The affinity columns, when present, go to
    `df.attrs['cpu_affinity']`, `['numa_affinity']` and `['gpu_numa_id']` (dicts by device), and the
    NIC legend (NIC0 → mlx5_0) to `df.attrs['nic_names']`. Prompts, blank lines and the legend
    around the table are ignored.
    """
    import pandas as pd

    # nvidia-smi underlines the header with ANSI escapes when stdout is a terminal (and some
    # drivers do so always): drop them before reading the table.
    text = _ANSI_RE.sub("", str(text))
    lines = [ln.rstrip() for ln in text.splitlines()]
    header_idx, devices = None, []
    for i, ln in enumerate(lines):
        toks = ln.split()
        if (
            toks
            and _DEVICE_RE.match(toks[0])
            and all(_DEVICE_RE.match(t) for t in toks[: _count_devices(toks)])
            and (len(toks) == _count_devices(toks) or toks[_count_devices(toks)] in ("CPU", "NUMA", "GPU"))
        ):
            # a header line: device names, then optional affinity headings
            if i + 1 < len(lines) and lines[i + 1].split()[:1] == [toks[0]]:
                header_idx, devices = i, toks[: _count_devices(toks)]
                break
    if header_idx is None:
        raise ValueError(
            "no `nvidia-smi topo -m` table found: expected a header line such as "
            "'GPU0 GPU1 ... CPU Affinity' followed by one row per device"
        )
    header = lines[header_idx]
    affinity_cols = [h for h in _AFFINITY_HEADERS if h in header]
    matrix, cpu_aff, numa_aff, gpu_numa = {}, {}, {}, {}
    for ln in lines[header_idx + 1 :]:
        toks = ln.split()
        if not toks:
            if matrix:
                continue
            continue
        if toks[0] not in devices:
            if toks[0].startswith(("Legend", "NIC")) or matrix:
                break
            continue
        dev, cells = toks[0], toks[1 : 1 + len(devices)]
        if len(cells) != len(devices):
            raise ValueError(f"topology row {dev!r} has {len(cells)} link labels, expected {len(devices)}")
        for c in cells:
            if not _LABEL_RE.match(c):
                raise ValueError(f"topology row {dev!r}: unknown link label {c!r}")
        matrix[dev] = cells
        rest = toks[1 + len(devices) :]
        for col, val in zip(affinity_cols, rest):
            {"CPU Affinity": cpu_aff, "NUMA Affinity": numa_aff, "GPU NUMA ID": gpu_numa}[col][dev] = val
    missing = [d for d in devices if d not in matrix]
    if missing:
        raise ValueError(f"topology table is incomplete: no row for {', '.join(missing)}")
    df = pd.DataFrame.from_dict(matrix, orient="index", columns=devices).loc[devices]
    df.attrs.update(
        cpu_affinity=cpu_aff,
        numa_affinity=numa_aff,
        gpu_numa_id=gpu_numa,
        nic_names=dict(re.findall(r"(NIC\d+):\s*(\S+)", str(text))),
    )
    return df


def _count_devices(toks: list[str]) -> int:
    n = 0
    for t in toks:
        if not _DEVICE_RE.match(t):
            break
        n += 1
    return n


def link_rank(label: str) -> int:
    """Order link labels from fastest path (NV#, smaller is not better: more links is) to slowest.

    Returns 0 for NVLink, then 1..5 for PIX, PXB, PHB, NODE, SYS; 'X' (self) is -1.
    """
    if label == "X":
        return -1
    if label.startswith("NV"):
        return 0
    try:
        return LINK_LABELS.index(label)
    except ValueError:
        raise ValueError(f"unknown link label {label!r}") from None


# --------------------------------------------------------------------------- environment
def _run(cmd: list[str], timeout: float = 10.0) -> str | None:
    if shutil.which(cmd[0]) is None:
        return None
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout if out.returncode == 0 else None


def _numa_node_of_pci(bus_id: str) -> int | None:
    # NVML bus ids look like 00000000:C2:00.0; sysfs wants 0000:c2:00.0
    m = re.match(r"^(?:[0-9A-Fa-f]{4})?([0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])$", bus_id)
    if not m:
        return None
    p = Path("/sys/bus/pci/devices") / m.group(1).lower() / "numa_node"
    try:
        node = int(p.read_text().strip())
    except (OSError, ValueError):
        return None
    return node if node >= 0 else None


def nvml_gpus() -> tuple[list[dict], str | None]:
    """Per-GPU facts from NVML (name, bus id, memory, PCIe gen/width current and max, NUMA node).

    Returns (gpus, problem): problem is a plain sentence when NVML is unavailable.
    """
    try:
        import pynvml
    except ImportError:
        return [], "NVML bindings (nvidia-ml-py) are not installed"
    try:
        pynvml.nvmlInit()
    except Exception as e:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
        return [], f"NVML is unavailable ({e}): no NVIDIA driver on this machine"
    gpus = []
    try:
        driver = pynvml.nvmlSystemGetDriverVersion()
        driver = driver.decode() if isinstance(driver, bytes) else driver
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            g = {"index": i, "driver": driver}

            def get(key, fn, *args):
                try:
                    v = fn(h, *args) if args else fn(h)
                    g[key] = v.decode() if isinstance(v, bytes) else v
                except Exception:
                    g[key] = None

            get("name", pynvml.nvmlDeviceGetName)
            get("pcie_gen_current", pynvml.nvmlDeviceGetCurrPcieLinkGeneration)
            get("pcie_gen_max", pynvml.nvmlDeviceGetMaxPcieLinkGeneration)
            get("pcie_width_current", pynvml.nvmlDeviceGetCurrPcieLinkWidth)
            get("pcie_width_max", pynvml.nvmlDeviceGetMaxPcieLinkWidth)
            try:
                g["pcie_gen_gpu_max"] = pynvml.nvmlDeviceGetGpuMaxPcieLinkGeneration(h)
            except Exception:
                g["pcie_gen_gpu_max"] = None
            try:
                pci = pynvml.nvmlDeviceGetPciInfo(h)
                bus = pci.busId.decode() if isinstance(pci.busId, bytes) else pci.busId
                g["bus_id"] = bus
                g["numa_node"] = _numa_node_of_pci(bus)
            except Exception:
                g["bus_id"], g["numa_node"] = None, None
            try:
                g["memory_total_bytes"] = int(pynvml.nvmlDeviceGetMemoryInfo(h).total)
            except Exception:
                g["memory_total_bytes"] = None
            gpus.append(g)
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass
    return gpus, None


def no_nvidia_driver() -> bool:
    """True where no CUDA device can exist: Linux with no NVIDIA kernel driver loaded (no
    /proc/driver/nvidia, no /dev/nvidia*, no WSL GPU /dev/dxg), or macOS. Answered without importing
    torch (about 2 s), which a notebook replaying recorded data on a laptop then never pays."""
    if sys.platform == "darwin":
        return True
    if not sys.platform.startswith("linux"):
        return False
    dev = Path("/dev")
    return not (Path("/proc/driver/nvidia").exists() or (dev / "dxg").exists() or any(dev.glob("nvidia[0-9]*")))


def _torch_facts_without_import() -> dict | None:
    """torch's version and CUDA build read from its installed files, or None (then torch is imported)."""
    import ast
    import importlib.metadata
    import importlib.util

    try:
        spec = importlib.util.find_spec("torch")
        if spec is None or spec.origin is None:
            return {"torch": None, "cuda_available": False}
        version_py = Path(spec.origin).parent / "version.py"
        values = {}
        for node in ast.parse(version_py.read_text()).body:
            target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None
            if isinstance(node, ast.AnnAssign):
                target = node.target
            if isinstance(target, ast.Name) and isinstance(node.value, ast.Constant):
                values[target.id] = node.value.value
        return {
            "torch": values.get("__version__") or importlib.metadata.version("torch"),
            "cuda_build": values["cuda"],
            "cuda_available": False,
            "cuda_device_count": 0,
            "nccl": None,
            "gloo": None,  # not checked: torch was not imported
            "torch_facts": "read from torch's files without importing it (no NVIDIA driver here)",
        }
    except Exception:
        return None


def torch_facts() -> dict:
    if "torch" not in sys.modules and no_nvidia_driver():
        facts = _torch_facts_without_import()
        if facts is not None:
            return facts
    try:
        import torch
    except ImportError:
        return {"torch": None, "cuda_available": False}
    facts = {
        "torch": torch.__version__,
        "cuda_build": torch.version.cuda,
        "cuda_available": False,
        "cuda_device_count": 0,
        "nccl": None,
        "gloo": torch.distributed.is_available(),
    }
    try:
        facts["cuda_available"] = bool(torch.cuda.is_available())
        if facts["cuda_available"]:
            facts["cuda_device_count"] = torch.cuda.device_count()
            facts["cuda_devices"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
            v = torch.cuda.nccl.version()
            facts["nccl"] = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
            n = facts["cuda_device_count"]
            facts["peer_access"] = {
                f"{i}->{j}": bool(torch.cuda.can_device_access_peer(i, j)) for i in range(n) for j in range(n) if i != j
            }
    except Exception as e:
        facts["cuda_error"] = str(e)
    return facts


def numa_nodes() -> dict[int, str]:
    """NUMA node → CPU list, from sysfs (empty where sysfs has none)."""
    out = {}
    for p in sorted(Path("/sys/devices/system/node").glob("node[0-9]*")):
        try:
            out[int(p.name[4:])] = (p / "cpulist").read_text().strip()
        except (OSError, ValueError):
            continue
    return out


def _cpulist(text: str) -> set[int]:
    cpus = set()
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            a, b = part.split("-")
            cpus.update(range(int(a), int(b) + 1))
        else:
            cpus.add(int(part))
    return cpus


def cpu_model() -> str:
    try:
        for ln in Path("/proc/cpuinfo").read_text().splitlines():
            if ln.startswith("model name"):
                return ln.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def environment(command: str | None = None, parameters: dict | None = None) -> dict:
    """Everything a measurement must carry: host, versions, GPUs, PCIe links, NUMA, topology, date."""
    gpus, nvml_problem = nvml_gpus()
    topo = _run(["nvidia-smi", "topo", "-m"])
    env = {
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
        "labkit": __version__,
        **torch_facts(),
        "gpus": gpus,
        "nvml_problem": nvml_problem,
        "numa_nodes": numa_nodes(),
        "topology": _ANSI_RE.sub("", topo) if topo else topo,  # recorded as plain text
        "command": command if command is not None else " ".join(sys.argv),
        "parameters": parameters or {},
    }
    try:
        import numpy

        env["numpy"] = numpy.__version__
    except ImportError:
        pass
    return env


def describe_gpu(env: dict) -> str:
    """'NVIDIA H100 80GB HBM3 (PCIe Gen5 x16)' or 'no GPU' — for figure labels."""
    if not env.get("gpus"):
        names = env.get("cuda_devices") or []
        return names[0] if names else "no GPU"
    g = env["gpus"][0]
    link = ""
    if g.get("pcie_gen_max") and g.get("pcie_width_max"):
        link = f" (PCIe Gen{g['pcie_gen_max']} x{g['pcie_width_max']})"
    more = f" ×{len(env['gpus'])}" if len(env["gpus"]) > 1 else ""
    return f"{g.get('name')}{more}{link}"


# --------------------------------------------------------------------------- findings
LEVELS = ("ok", "info", "warn")


@dataclasses.dataclass(frozen=True)
class Finding:
    """One plain-language observation: about this machine (`diagnose`, `labkit doctor`) or about a
    measurement (`labkit.p2p.diagnosis.diagnose`). `rule` names the check that produced it; `pairs` are the
    (src, dst) GPU indices it is about, if any."""

    level: str  # one of LEVELS
    message: str
    rule: str = ""
    pairs: tuple[tuple[int, int], ...] = ()

    def __post_init__(self):
        if self.level not in LEVELS:
            raise ValueError(f"a finding's level is one of {LEVELS}, got {self.level!r}")

    def __str__(self) -> str:
        return f"[{self.level}] {self.message}"

    def _repr_markdown_(self) -> str:
        return f"{_MARKS[self.level]} {self.message}"


_MARKS = {"warn": "⚠️", "info": "ℹ️", "ok": "✅"}


def diagnose(env: dict) -> list[Finding]:
    """This machine's software, CUDA, PCIe links and NUMA placement, in plain language (no measurement).

    `labkit doctor` (labkit.tools.doctor) adds what the topics read from the same environment (peer access).
    """
    out: list[Finding] = []
    if env.get("torch") is None:
        out.append(Finding("warn", "torch is not installed: `pip install -e .` installs it"))
    if not env.get("cuda_available"):
        reason = env.get("cuda_error") or env.get("nvml_problem") or "torch sees no CUDA device"
        build = env.get("cuda_build")
        if env.get("torch") and not build:
            reason += "; this torch is a CPU-only build (reinstall torch from the CUDA index on a GPU machine)"
        out.append(
            Finding(
                "warn",
                f"no CUDA: {reason}. Notebooks run with mode='auto' or 'reference' "
                "and replay recorded systems; host-memory and gloo experiments still run live.",
            )
        )
    else:
        out.append(
            Finding(
                "ok",
                f"CUDA: {env.get('cuda_device_count')} device(s), torch {env.get('torch')} "
                f"built for CUDA {env.get('cuda_build')}, NCCL {env.get('nccl')}",
            )
        )
    for g in env.get("gpus", []):
        name = f"GPU{g['index']} ({g.get('name')})"
        gc, gm, wc, wm = (
            g.get(k) for k in ("pcie_gen_current", "pcie_gen_max", "pcie_width_current", "pcie_width_max")
        )
        if wc and wm and wc < wm:
            out.append(
                Finding(
                    "warn",
                    f"{name}: PCIe link runs at x{wc} but supports x{wm} — the card is in a "
                    "narrower slot, a riser limits it, or the link trained down; bandwidth "
                    f"is capped at {wc}/{wm} of the spec. Reseat the card or check the slot.",
                )
            )
        if gc and gm and gc < gm:
            out.append(
                Finding(
                    "info",
                    f"{name}: PCIe link is at Gen{gc}, max Gen{gm}. An idle GPU lowers its link "
                    "generation to save power; check again under load (run a copy) before "
                    "blaming the slot or BIOS.",
                )
            )
        if gc and gm and wc and wm and gc == gm and wc == wm:
            out.append(Finding("ok", f"{name}: PCIe Gen{gc} x{wc}, at its maximum"))
        node = g.get("numa_node")
        nodes = env.get("numa_nodes") or {}
        if node is not None and len(nodes) > 1:
            try:
                mine = os.sched_getaffinity(0)
            except AttributeError:
                mine = set()
            gpu_cpus = _cpulist(nodes.get(node, ""))
            if mine and gpu_cpus and not (mine & gpu_cpus):
                out.append(
                    Finding(
                        "warn",
                        f"{name} is on NUMA node {node}, but this process runs on other CPUs: "
                        "host↔GPU copies cross the socket link. Pin the process "
                        f"(`numactl --cpunodebind={node} --membind={node}`).",
                    )
                )
            elif mine and gpu_cpus and not mine <= gpu_cpus:
                out.append(
                    Finding(
                        "info",
                        f"{name} is on NUMA node {node}; this process may also run on other "
                        f"nodes. For stable numbers bind it: `numactl --cpunodebind={node} --membind={node}`.",
                    )
                )
    return out
