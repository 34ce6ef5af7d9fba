"""cuda-samples `p2pBandwidthLatencyTest` output → one `p2p_matrix` dataset per run.

Reads the device list (`Device: i, name, pciBusID: ...`), the `CAN / CANNOT Access Peer` lines,
the P2P connectivity matrix, and every matrix the tool prints: unidirectional and bidirectional
bandwidth with P2P off and on, the latency matrices (GPU-timed block and CPU block), and the
`(P2P Writes)` / `(P2P Reads)` variants (`--p2p_read`). An `nvidia-smi topo -m` table in the same
input is kept verbatim in the meta (`topology`).

Direction, from the sample's source (Samples/5_Domain_Specific/p2pBandwidthLatencyTest, NVIDIA/
cuda-samples @c94ff366, performP2PCopy calls in outputBandwidthMatrix / outputLatencyMatrix): in a
write (and every unlabelled) matrix row i copies *to* column j, so src = row; in a `(P2P Reads)`
matrix row i reads *from* column j, so the data flows column → row and src = column. The
bidirectional matrices time both directions at once and print their sum.

A run is the matrices after one `[P2P (Peer-to-Peer) GPU Bandwidth Latency Test]` banner; a
matrix title seen twice, or a different GPU count, also starts a new run (pages that quote
matrices from several machines). A matrix cut short (`...`) keeps its complete rows and the rest
is reported in `skipped`.
"""

from __future__ import annotations

import re

from ._model import LogDataset
from ._text import Line, Skipped, common_indent, incomplete, is_number

TOOL = "p2pbandwidthlatencytest"
COLUMNS = ("matrix", "p2p", "src", "dst", "bandwidth_GBps", "latency_us", "mode", "bandwidth_direction")
CAVEATS = (
    "cuda-samples p2pBandwidthLatencyTest: GB/s with 1 GB = 1e9 B; 'Unidirectional' matrices time one "
    "direction at a time, 'Bidirectional' matrices run both directions at once and print the sum "
    "(bandwidth_direction column). The diagonal (src == dst) is a copy inside one GPU's memory, not a link. "
    "'P2P=Disabled' copies are staged through host memory. mode='write'/'read' marks the matrices the tool "
    "labels '(P2P Writes)'/'(P2P Reads)' (reads: data flows from the column GPU to the row GPU, so src is "
    "the column); unlabelled matrices are empty. latency_gpu / latency_cpu are the tool's 'GPU' and 'CPU' "
    "blocks. The tool prints no transfer size unless --numElems is on its command line."
)

_BANNER = re.compile(r"\[P2P \(Peer-to-Peer\) GPU Bandwidth Latency Test\]")
_TITLE = re.compile(
    r"^(Unidirectional|Bidirectional)?\s*P2P=(Enabled|Disabled)\s+(Bandwidth|Latency)"
    r"(?:\s*\(P2P (Writes|Reads)\))?\s+Matrix\s*\((GB/s|us)\)"
)
#: What a matrix title starts with, for the lines that are not a whole title: cut off, or led by a line number that an
#: editor or viewer added ('  1 P2P=Disabled Latency Matrix (us)').
_TITLE_START = re.compile(r"^(\d+\s+)?(?:(?:Uni|Bi)directional\s+)?P2P=(?:Enabled|Disabled)\b")
_DEVICE = re.compile(
    r"Device:\s*(\d+),\s*([^,;]+?),\s*pciBusID:\s*([0-9a-fA-F]+)"
    r"(?:,\s*pciDeviceID:\s*([0-9a-fA-F]+))?(?:,\s*pciDomainID:\s*([0-9a-fA-F]+))?"
)
_ACCESS = re.compile(r"Device=(\d+) (CAN|CANNOT) Access Peer Device=(\d+)")
_BLOCK = {"D\\D": None, "GPU": "latency_gpu", "CPU": "latency_cpu"}
#: Every matrix value is printed with printf("%6.02f ") (outputBandwidthMatrix / outputLatencyMatrix of the sample), so a
#: value without exactly two decimals is not as the tool printed it: a line cut off mid-number ('375.6' of '375.61').
_PRINTED_VALUE = re.compile(r"^-?\d+\.\d\d$")
_TOPO_HEAD = re.compile(r"^\s*GPU0(\s+GPU\d+)*(\s+(NIC\d+|mlx\S+))*\s+(CPU Affinity|NUMA Affinity)?")


def parse(lines: list[Line]) -> tuple[list[LogDataset], list[Skipped]]:
    topo = topology_block(lines)
    runs: list[dict] = []
    skipped: list[Skipped] = []
    cur = _new_run(0)
    i = 0
    while i < len(lines):
        ln, t = lines[i], lines[i].text
        if _BANNER.search(t):
            cur = _start(runs, cur, ln.no)
        elif m := _TITLE.match(t):
            key = m.group(0)
            cur["first"] = cur["first"] or ln.no
            if key in cur["titles"]:
                cur = _start(runs, cur, ln.no)
            cur["titles"].add(key)
            i, rows, problems = _matrix(lines, i + 1, m)
            skipped += problems
            n = _size(rows)
            if cur["rows"] and n and cur["n"] and n != cur["n"]:
                cur = _start(runs, cur, ln.no)
                cur["titles"].add(key)
            cur["n"] = cur["n"] or n
            cur["rows"] += rows
            cur["problems"] += problems
            cur["last"] = lines[i - 1].no if i else ln.no
            continue
        elif t.startswith("P2P Connectivity Matrix"):
            i, cur["connectivity"] = _connectivity(lines, i + 1)
            continue
        else:
            for dm in _DEVICE.finditer(t):
                cur["devices"].append(
                    {
                        "index": int(dm.group(1)),
                        "gpu": dm.group(2).strip(),
                        "pci_bus_id": dm.group(3),
                        "pci_device_id": dm.group(4),
                        "pci_domain_id": dm.group(5),
                    }
                )
            for am in _ACCESS.finditer(t):
                cur["access"].append([int(am.group(1)), int(am.group(3)), am.group(2) == "CAN"])
            if "p2pBandwidthLatencyTest" in t or "--p2p_read" in t or "--numElems" in t:
                cur["command"] = t
            elif tm := _TITLE_START.match(t):
                why = (
                    f"matrix title after {tm.group(1).strip()!r} (a line number from an editor?): the matrix is not "
                    "read; paste the output as the tool printed it"
                    if tm.group(1)
                    else "matrix title cut off (or not as the tool prints it): not read"
                )
                skipped.append(Skipped(ln.no, ln.raw, why))
                cur["problems"].append(skipped[-1])  # the matrix under it is missing from this run
        i += 1
    _start(runs, cur, 0)
    return [_dataset(r, topo, k) for k, r in enumerate(runs)], skipped


def _new_run(first: int) -> dict:
    return {
        "first": first,
        "last": first,
        "titles": set(),
        "rows": [],
        "n": 0,
        "devices": [],
        "access": [],
        "command": None,
        "connectivity": None,
        "problems": [],  # rows, blocks or titles of its matrices that were cut off (also in `skipped`)
    }


def _start(runs: list, cur: dict, first: int) -> dict:
    if cur["rows"]:
        runs.append(cur)
        return _new_run(first)
    # nothing read yet: keep what the banner, devices and command said for the coming matrices
    cur["first"] = cur["first"] or first
    return cur


def _size(rows: list[dict]) -> int:
    return len({r["dst"] for r in rows} | {r["src"] for r in rows})


def _matrix(lines: list[Line], i: int, title: re.Match) -> tuple[int, list[dict], list[Skipped]]:
    """Read the block(s) after a matrix title; returns (next line index, rows, problems)."""
    direction, state, what, rw, unit = title.groups()
    p2p = state.lower()
    mode = {"Writes": "write", "Reads": "read"}.get(rw)
    rows, problems = [], []
    block, cols, read_rows, start = None, [], 0, i
    while i < len(lines):
        ln = lines[i]
        toks = ln.tokens
        if toks and toks[0] in _BLOCK and all(t.isdigit() for t in toks[1:]) and len(toks) > 1:
            if block is not None and read_rows < len(cols):
                problems.append(
                    Skipped(ln.no, ln.raw, f"{_what(block, direction)} block has {read_rows} of {len(cols)} rows")
                )
            block = _BLOCK[toks[0]] or ("bandwidth_bi" if direction == "Bidirectional" else "bandwidth_uni")
            cols, read_rows = [int(t) for t in toks[1:]], 0
        elif block is not None and toks and toks[0].isdigit() and len(toks) > 1:
            vals = toks[1:]
            cut = next((v for v in vals if is_number(v) and not _PRINTED_VALUE.match(v)), None)
            if len(vals) != len(cols) or not all(is_number(v) for v in vals):
                problems.append(
                    Skipped(
                        ln.no,
                        ln.raw,
                        f"{_what(block, direction)} row {toks[0]}: {len(vals)} values for {len(cols)} GPU columns",
                    )
                )
            elif cut is not None:
                problems.append(
                    Skipped(
                        ln.no,
                        ln.raw,
                        f"{_what(block, direction)} row {toks[0]}: value {cut!r} does not have the two decimals the "
                        "tool prints (%6.02f): the line was cut off or edited",
                    )
                )
            else:
                r = int(toks[0])
                for c, v in zip(cols, vals):
                    src, dst = (c, r) if mode == "read" else (r, c)
                    rows.append(
                        {
                            "matrix": block,
                            "p2p": p2p,
                            "src": src,
                            "dst": dst,
                            "bandwidth_GBps": v if unit == "GB/s" else None,
                            "latency_us": v if unit == "us" else None,
                            "mode": mode,
                            "bandwidth_direction": {
                                "bandwidth_uni": "unidirectional",
                                "bandwidth_bi": "bidirectional",
                            }.get(block, "none"),
                        }
                    )
            read_rows += 1
        elif ln.text or ln.fence:
            break
        i += 1
    end = lines[i].no if i < len(lines) else (lines[-1].no + 1 if lines else 0)
    if block is not None and read_rows < len(cols):
        problems.append(
            Skipped(
                end,
                lines[i].raw if i < len(lines) else "",
                f"{_what(block, direction)} block ends after {read_rows} of {len(cols)} rows",
            )
        )
    if block is None and i >= start:
        problems.append(Skipped(lines[start - 1].no, lines[start - 1].raw, "matrix title with no matrix under it"))
    return i, rows, problems


def _connectivity(lines: list[Line], i: int) -> tuple[int, list[list[int]] | None]:
    """The 0/1 'P2P Connectivity Matrix' (cudaDeviceCanAccessPeer, 1 on the diagonal) as printed."""
    rows = []
    if i < len(lines) and lines[i].tokens[:1] == ["D\\D"]:
        i += 1
        while i < len(lines) and lines[i].tokens and all(t in "01" or t.isdigit() for t in lines[i].tokens):
            rows.append([int(t) for t in lines[i].tokens[1:]])
            i += 1
    return i, rows or None


def _what(block: str, direction) -> str:
    return {
        "bandwidth_uni": "unidirectional bandwidth",
        "bandwidth_bi": "bidirectional bandwidth",
        "latency_gpu": "latency (GPU)",
        "latency_cpu": "latency (CPU)",
    }.get(block, block)


def topology_block(lines: list[Line]) -> str | None:
    """The first `nvidia-smi topo -m` table (with its command line and legends), verbatim but for
    the indentation a page added to the whole block."""
    for k, ln in enumerate(lines):
        if not _TOPO_HEAD.match(ln.text) or "GPU0" not in ln.text:
            continue
        start = k - 1 if k and "nvidia-smi topo" in lines[k - 1].text else k
        j = k + 1
        while j < len(lines) and re.match(r"^(GPU|NIC|mlx|CPU)\S*\s", lines[j].text):
            j += 1
        end = j
        while j < len(lines):  # legends: 'Legend:' / 'NIC Legend:' and their entries
            t = lines[j].text
            if t.startswith(("Legend:", "NIC Legend:")) or re.match(r"^(X|SYS|NODE|PHB|PXB|PIX|NV#|NIC\d+)\s*[=:]", t):
                end = j + 1
            elif t and not lines[j].fence:
                break
            elif lines[j].fence:
                break
            j += 1
        raws = [lines[x].raw for x in range(start, end)]
        indent = common_indent(raws)
        return "\n".join(r[indent:].rstrip() if r.strip() else "" for r in raws).strip("\n")
    return None


def _dataset(run: dict, topology: str | None, index: int) -> LogDataset:
    import pandas as pd

    frame = pd.DataFrame(run["rows"], columns=list(COLUMNS))
    names = sorted({d["gpu"] for d in run["devices"]})
    n = len(run["devices"]) or run["n"]
    m = re.search(r"--numElems=(\d+)", run["command"] or "")
    meta = {
        "tool": TOOL,
        "devices": run["devices"],
        "peer_access": run["access"],
        "command": run["command"],
        "connectivity": run["connectivity"],
        "options": re.findall(r"--\w+(?:=\S+)?", run["command"] or ""),
        "gpu": " / ".join(names),
        "gpu_count": n,
        "nodes": 1,
        "software": "cuda-samples p2pBandwidthLatencyTest",
        "method": "cuda-samples p2pBandwidthLatencyTest"
        + (" " + " ".join(re.findall(r"--\w+(?:=\S+)?", run["command"] or "")) if run["command"] else ""),
        "bandwidth_direction": "mixed",
        "caveats": CAVEATS,
        "title": f"p2pBandwidthLatencyTest on {n}x {' / '.join(names) or 'GPU (names not printed)'}",
    }
    if run["problems"]:  # a matrix cut short: what import-log reports as 'incomplete'
        meta["completeness"] = incomplete(run["problems"])
    if m:
        meta["nbytes"] = 4 * int(m.group(1))  # --numElems counts 4-byte ints (the sample copies int buffers)
    if topology:
        meta["topology"] = topology
    label = f"p2pBandwidthLatencyTest run {index + 1} (lines {run['first']}-{run['last']})"
    return LogDataset(TOOL, "p2p_matrix", frame, meta, (run["first"], run["last"]), label)
