"""nvbandwidth output, plain text or `--json` → one dataset per printed matrix.

Reads the header (`nvbandwidth Version`, `Built from Git version`, CUDA runtime / driver versions,
the host name and the `Device i: name (bus id)` list) and every testcase: `Running <testcase>.`,
the matrix description (`memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)`), the matrix, and its
`SUM` / `COEFFICIENT_OF_VARIATION` lines; `Waiving`/`Waived` testcases are listed in the meta. The
`--json` form (a `{"nvbandwidth": ...}` object, possibly between other lines) gives the same.

What each matrix becomes, from the tool's own source (NVIDIA/nvbandwidth @66746a3 = v0.8,
testcase.h descriptions and testcases_ce.cpp / testcases_sm.cpp):
- GPU↔GPU copies → `p2p_matrix` (p2p='enabled'). The printed arrow is not the data direction: a
  `read` testcase copies from the column GPU into the row GPU (src = column), a `write` testcase
  from the row GPU into the column GPU (src = row) — DeviceToDeviceReadCE / WriteCE::run. The
  diagonal (N/A, or 0.00 in old versions) is not a measurement and has no row.
- `*_bidirectional_*` GPU↔GPU: since v0.6 three matrices — `Read1`/`Write1` (column → row) and
  `Read2`/`Write2` (row → column), each ONE direction's bandwidth while the opposite copy runs
  (matrix='bandwidth_uni', mode '<ce|sm>_<read|write>_duplex', bandwidth_direction
  'unidirectional'), and `Total`, their sum ('bandwidth_bi', 'bidirectional'). Before v0.6 one
  matrix: CE printed the measured direction only (USE_FIRST_BW → `_duplex`), SM the sum (TOTAL_BW
  → 'bandwidth_bi').
- GPU↔GPU latency (ns) → `p2p_matrix` 'latency_gpu' in µs (the decimal point moved three places).
- host↔device, all-to-host, host-to-all, all-to-one, one-to-all, device-local copies and the host
  latency → `point` rows, one per GPU, labelled with the testcase and `GPU j`. The buffer size is
  not printed (so these cannot be a `copy_sweep`). `*_bidirectional_*` host testcases report one
  direction while the other runs ("Only the host to device copy bandwidth is reported"), so they
  are 'unidirectional'; all_to_one / one_to_all are a GPU's total over all peers ('aggregate').
"""

from __future__ import annotations

import json
import re

from ._model import LogDataset
from ._text import Line, Skipped, incomplete, is_number, shift_decimal

TOOL = "nvbandwidth"
CAVEATS = (
    "nvbandwidth: GB/s with 1 GB = 1e9 B; each value is the median of --testSamples runs (default 3) "
    "of a batch of copies timed with CUDA events; the buffer size (--bufferSize, default 512 MiB since "
    "v0.4) is not printed. CE = copy engine (cuMemcpyAsync), SM = copy kernel."
)
P2P_COLUMNS = ("matrix", "p2p", "src", "dst", "bandwidth_GBps", "latency_us", "mode", "bandwidth_direction")
POINT_COLUMNS = ("quantity", "value", "unit", "bandwidth_direction", "note", "testcase", "gpu")
#: Host-side testcases: (what one value is, direction tag). Keyed by the name without _ce/_sm.
HOST = {
    "host_to_device_memcpy": ("CPU -> GPU, alone", "unidirectional"),
    "device_to_host_memcpy": ("GPU -> CPU, alone", "unidirectional"),
    "host_to_device_bidirectional_memcpy": (
        "CPU -> GPU while GPU -> CPU runs (only CPU -> GPU reported)",
        "unidirectional",
    ),
    "device_to_host_bidirectional_memcpy": (
        "GPU -> CPU while CPU -> GPU runs (only GPU -> CPU reported)",
        "unidirectional",
    ),
    "all_to_host_memcpy": ("GPU -> CPU while every other GPU copies to the CPU", "unidirectional"),
    "all_to_host_bidirectional_memcpy": (
        "GPU -> CPU while CPU -> GPU runs and every other GPU copies both ways",
        "unidirectional",
    ),
    "host_to_all_memcpy": ("CPU -> GPU while the CPU copies to every other GPU", "unidirectional"),
    "host_to_all_bidirectional_memcpy": (
        "CPU -> GPU while GPU -> CPU runs and every other GPU copies both ways",
        "unidirectional",
    ),
    "all_to_one_write": (
        "copies from all peers into this GPU at once: total inbound bandwidth (nvbandwidth's words)",
        "aggregate",
    ),
    "all_to_one_read": (
        "copies from all peers into this GPU at once, read by this GPU ('total outbound bandwidth' "
        "in nvbandwidth's words)",
        "aggregate",
    ),
    "one_to_all_write": (
        "copies from this GPU to all peers at once: total outbound bandwidth (nvbandwidth's words)",
        "aggregate",
    ),
    "one_to_all_read": (
        "copies from this GPU to all peers at once, read by the peers ('total inbound bandwidth' in "
        "nvbandwidth's words)",
        "aggregate",
    ),
    "device_local_copy": ("copy inside this GPU's memory", "none"),
    "host_device_latency": ("pointer-chase latency of this GPU reading host memory", "none"),
}

_VERSION = re.compile(r"^nvbandwidth Version:\s*(\S+)")
#: The command line a paste often shows above the output ('$ ./nvbandwidth -t ... -b 512'); not 'nvbandwidth Version:'.
_COMMAND = re.compile(r"^(?:\S*[$#>]\s*)?(?:\S*/)?nvbandwidth(?:\s+-.*)?$")
#: -b / --bufferSize, in MiB ('-b [ --bufferSize ] arg (=512) Memcpy buffer size in MiB', nvbandwidth README / -h).
_BUFFER = re.compile(r"(?:^|\s)(?:-b|--bufferSize)(?:\s+|=)?(\d+)\b")
_GIT = re.compile(r"^Built from Git version:\s*(\S*)")
_CUDA = re.compile(r"^(CUDA Runtime Version|CUDA Driver Version(?: \(API\))?|Driver Version):\s*(.+)$")
_DEVICE = re.compile(r"^Device (\d+): (.+?)(?: \(([0-9a-fA-F:.]+)\))?$")
_RUNNING = re.compile(r"^(Running|Waiving) (\w+)\.")
_DESC = re.compile(r"^(memcpy|memory latency|Device to Device Latency|multicast)\b.*\((GB/s|ns)\)\s*$")
_SUM = re.compile(r"^(SUM|COEFFICIENT_OF_VARIATION|&&&& PERF)\s+(\w+)\s+(\S+)")
_SUM_SUFFIX = re.compile(r"_(read1|read2|write1|write2|total)$")
_QUALIFIER = re.compile(r"\b(Read1|Read2|Write1|Write2|Total)\b")


def parse(lines: list[Line]) -> tuple[list[LogDataset], list[Skipped]]:
    if (json_start := _json_start(lines)) is not None:
        return _parse_json(lines, json_start)
    head = _new_head()
    out, skipped = [], []
    testcase, i = None, 0
    started = None  # index of the 'Running' line whose testcase has printed no matrix yet
    while i < len(lines):
        ln, t = lines[i], lines[i].text
        if m := _VERSION.match(t):
            if head.get("version"):  # a second run's header (several outputs pasted one after another)
                head = _new_head()
            head["version"] = m.group(1)
        elif _COMMAND.search(t) and not _RUNNING.match(t):
            if head.get("version") or head["devices"]:  # the command of the next run
                head = _new_head()
            head["command"] = t
        elif m := _GIT.match(t):
            head["git_version"] = m.group(1)
        elif m := _CUDA.match(t):
            head[m.group(1)] = m.group(2).strip()
        elif m := _DEVICE.match(t):
            if not head["devices"] and i and lines[i - 1].tokens and len(lines[i - 1].tokens) == 1:
                head["host"] = lines[i - 1].text  # v0.6+ prints the host name above the device list
            head["devices"].append({"index": int(m.group(1)), "gpu": m.group(2).strip(), "bus_id": m.group(3)})
        elif m := _RUNNING.match(t):
            _no_result(lines, started, skipped)
            testcase = m.group(2)
            started = None if m.group(1) == "Waiving" else i
            if m.group(1) == "Waiving":
                head["waived"].append(testcase)
        elif _DESC.match(t):
            started = None
            i, grid, problems = _grid(lines, i + 1)
            skipped += problems
            sums = {}
            while i < len(lines) and (not lines[i].text or _SUM.match(lines[i].text)):
                if m := _SUM.match(lines[i].text):
                    sums[m.group(1)] = m.group(3)
                    sums.setdefault("key", m.group(2))
                i += 1
            # the SUM line under the matrix names it; 'Running <testcase>.' may be an earlier matrix's (a paste can
            # cut this one's out), so it names the matrix only where no SUM line does
            name = _SUM_SUFFIX.sub("", sums.get("key", "")) or testcase
            part = _SUM_SUFFIX.search(sums.get("key", ""))  # Read1, Read2 / Write1, Write2 come before Total
            if sums.get("key") and (part is None or part.group(1) == "total"):
                testcase = None  # its last matrix is printed: a matrix below without 'Running' is not this testcase's
            if not name:
                skipped.append(Skipped(ln.no, ln.raw, "matrix with no 'Running <testcase>.' or SUM line naming it"))
                continue
            ds = _datasets(name, t, grid, sums, head, (ln.no, lines[i - 1].no))
            if isinstance(ds, str):
                skipped.append(Skipped(ln.no, ln.raw, ds))
                continue
            for d in ds if problems else ():  # rows of this matrix were not read: what import-log calls 'incomplete'
                d.meta["completeness"] = incomplete(problems)
            out += ds
            continue
        i += 1
    _no_result(lines, started, skipped)
    return out, skipped


def _new_head() -> dict:
    """What one run's header states; a new run (its command line or version line) starts a new one, so two
    outputs pasted together do not share a device list."""
    return {"devices": [], "waived": []}


def _no_result(lines: list[Line], started: int | None, skipped: list) -> None:
    """A testcase that was started but printed no matrix (it failed: an ASSERT, a CUDA error)."""
    if started is None:
        return
    name = _RUNNING.match(lines[started].text).group(2)
    after = next((ln.text for ln in lines[started + 1 : started + 6] if ln.text), "")
    skipped.append(
        Skipped(
            lines[started].no,
            lines[started].raw,
            f"testcase {name} printed no result" + (f" ({after[:120]})" if after else ""),
        )
    )


def _grid(lines: list[Line], i: int) -> tuple[int, list[list[str]], list[Skipped]]:
    """The matrix under a description: a row of column labels, then 'label value value ...' rows."""
    grid, problems, ncols = [], [], None
    while i < len(lines) and lines[i].text:
        toks = lines[i].tokens
        if ncols is None:
            ncols = len(toks)
        elif re.fullmatch(r"\[?\.\.\.\]?", lines[i].text):
            problems.append(Skipped(lines[i].no, lines[i].raw, "elision: the rest of this output was cut"))
        elif len(toks) != ncols + 1 or not all(is_number(v) or v == "N/A" for v in toks[1:]):
            problems.append(
                Skipped(lines[i].no, lines[i].raw, f"matrix row with {len(toks) - 1} values for {ncols} columns")
            )
        else:
            grid.append(toks)  # the printed row label first: a skipped row must not shift the others
        i += 1
    return i, grid, problems


def _datasets(testcase: str, desc: str, grid: list[list[str]], sums: dict, head: dict, lines: tuple):
    """The dataset(s) one printed matrix gives (grid rows: printed label, then the values), or a
    reason it gives none."""
    import pandas as pd

    engine = "sm" if " SM " in f" {desc} " else "ce"
    unit = "ns" if desc.rstrip().endswith("(ns)") else "GB/s"
    qual = (_QUALIFIER.search(desc) or [None, None])[1]
    meta = _meta(head, testcase, desc, sums)
    label = f"nvbandwidth {testcase}" + (f" {qual}" if qual else "")
    key = re.sub(r"_(ce|sm)$", "", testcase)
    if not grid:
        return f"testcase {testcase!r} ({desc}): no complete matrix row under it (the output was cut)"
    if key not in HOST and "GPU(row)" in desc and "GPU(column)" in desc:
        rows = _p2p_rows(testcase, engine, unit, qual, grid)
        if isinstance(rows, str):
            return rows
        frame = pd.DataFrame(rows, columns=list(P2P_COLUMNS))
        dirs = set(frame["bandwidth_direction"])
        meta["bandwidth_direction"] = dirs.pop() if len(dirs) == 1 else "mixed"
        meta["gpu_count"] = meta["gpu_count"] or len(grid[0]) - 1
        return [LogDataset(TOOL, "p2p_matrix", frame, meta, lines, label)]
    if key not in HOST or len(grid) != 1:
        return f"testcase {testcase!r} ({desc}) is not one this reader knows how to tag; not read"
    what, direction = HOST[key]
    frame = pd.DataFrame(
        [
            {
                "quantity": f"nvbandwidth {testcase}, GPU {j}: {what}",
                "value": v,
                "unit": unit,
                "bandwidth_direction": direction,
                "note": f"printed matrix '{desc}', column {j}",
                "testcase": testcase,
                "gpu": j,
            }
            for j, v in enumerate(grid[0][1:])
            if v != "N/A"
        ],
        columns=list(POINT_COLUMNS),
    )
    meta["bandwidth_direction"] = direction
    meta["gpu_count"] = meta["gpu_count"] or len(grid[0]) - 1  # one column per GPU
    return [LogDataset(TOOL, "point", frame, meta, lines, label)]


def _p2p_rows(testcase: str, engine: str, unit: str, qual, grid: list[list[str]]):
    latency = unit == "ns"
    rw = "read" if "_read" in testcase else "write" if "_write" in testcase else None
    if rw is None and not latency:
        return f"GPU-to-GPU testcase {testcase!r} is neither a read nor a write test; not read"
    bidir = "bidirectional" in testcase
    if latency:
        matrix, mode, direction = "latency_gpu", f"{engine}_latency", "none"
    elif qual == "Total" or (bidir and qual is None and engine == "sm"):
        matrix, mode, direction = "bandwidth_bi", f"{engine}_{rw}", "bidirectional"
    elif bidir:
        matrix, mode, direction = "bandwidth_uni", f"{engine}_{rw}_duplex", "unidirectional"
    else:
        matrix, mode, direction = "bandwidth_uni", f"{engine}_{rw}", "unidirectional"
    # data direction: read and the '1' copies flow column -> row; write and the '2' copies row -> column
    col_to_row = (qual in ("Read1", "Write1")) or (qual is None and rw == "read")
    rows = []
    for label, *vals in grid:
        r = int(label)
        for c, v in enumerate(vals):
            if r == c or v == "N/A":
                continue
            src, dst = (c, r) if col_to_row else (r, c)
            rows.append(
                {
                    "matrix": matrix,
                    "p2p": "enabled",
                    "src": src,
                    "dst": dst,
                    "bandwidth_GBps": None if latency else v,
                    "latency_us": shift_decimal(v, -3) if latency else None,
                    "mode": mode,
                    "bandwidth_direction": direction,
                }
            )
    return rows


def _meta(head: dict, testcase: str, desc: str, sums: dict) -> dict:
    names = sorted({d["gpu"] for d in head["devices"]})
    versions = [f"nvbandwidth {head['version']}" if head.get("version") else ""]
    versions += [
        f"{k} {head[k]}"
        for k in ("CUDA Runtime Version", "CUDA Driver Version", "CUDA Driver Version (API)", "Driver Version")
        if head.get(k)
    ]
    buffer = _BUFFER.search(head.get("command") or "")
    return {
        "tool": TOOL,
        "command": head.get("command"),
        "buffer_size_MiB": int(buffer.group(1)) if buffer else None,
        **({"nbytes": int(buffer.group(1)) * 2**20} if buffer else {}),
        "testcase": testcase,
        "description": desc,
        "sum_printed": sums.get("SUM"),
        "cv_printed": sums.get("COEFFICIENT_OF_VARIATION"),
        "nvbandwidth_version": head.get("version"),
        "git_version": head.get("git_version"),
        "host": head.get("host"),
        "devices": head["devices"],
        "waived": head["waived"],
        "gpu": " / ".join(names),
        "gpu_count": len(head["devices"]) or "",
        "nodes": 1,
        "software": "; ".join(v for v in versions if v),
        "method": f"nvbandwidth -t {testcase}",
        "caveats": CAVEATS,
        "title": f"nvbandwidth {testcase}" + (f" on {' / '.join(names)}" if names else ""),
    }


# --------------------------------------------------------------------------- --json
def _json_start(lines: list[Line]) -> int | None:
    for k, ln in enumerate(lines):
        if ln.text.startswith("{") and any('"nvbandwidth"' in x.text for x in lines[k : k + 3]):
            return k
    return None


def _parse_json(lines: list[Line], k: int) -> tuple[list[LogDataset], list[Skipped]]:
    text = "\n".join(ln.raw for ln in lines[k:])
    try:
        doc, _ = json.JSONDecoder().raw_decode(text.lstrip())
    except json.JSONDecodeError as e:
        return [], [Skipped(lines[k].no + e.lineno - 1, lines[k].raw, f"--json output that is not valid JSON: {e.msg}")]
    root = doc.get("nvbandwidth", {})
    head = {
        "version": root.get("version"),
        "git_version": root.get("git_version"),
        "CUDA Runtime Version": root.get("CUDA Runtime Version"),
        "Driver Version": root.get("Driver Version"),
        "host": root.get("Hostname"),
        "waived": [],
        "devices": [],
    }
    for entry in root.get("GPU Device list", []):
        if m := re.match(r"(\d+): (.+?)(?: \(([0-9a-fA-F:.]+)\))?(?:: \((.*)\))?$", entry):
            head["devices"].append({"index": int(m.group(1)), "gpu": m.group(2), "bus_id": m.group(3)})
            head["host"] = head["host"] or m.group(4)
    out, skipped = [], []
    for tc in root.get("testcases", []):
        name, status = tc.get("name", "?"), tc.get("status")
        if status != "Passed" or "bandwidth_matrix" not in tc:
            head["waived"].append(name) if status == "Waived" else None
            continue
        desc = tc.get("bandwidth_description", "").strip()
        grid = [list(map(str, r)) for r in tc["bandwidth_matrix"]]
        blocks = _split_json(name, desc, grid)
        for qual_desc, block in blocks:
            ds = _datasets(name, qual_desc, block, {"SUM": str(tc.get("sum"))}, head, (lines[k].no, lines[-1].no))
            if isinstance(ds, str):
                skipped.append(Skipped(lines[k].no, name, ds))
            else:
                out += ds
    return out, skipped


def _split_json(name: str, desc: str, grid: list[list[str]]) -> list[tuple[str, list[list[str]]]]:
    """nvbandwidth's JSON appends every matrix of a testcase to one `bandwidth_matrix` and keeps the
    last description (json_output.cpp addTestcaseResults): a v0.6+ bidirectional GPU test holds
    Read1/Read2/Total (or Write1/Write2/Total) one after the other; split them back in that order."""
    n = len(grid[0]) if grid else 0
    labelled = lambda rows: [[str(k), *r] for k, r in enumerate(rows)]  # noqa: E731 (rows are 0..n-1 in JSON)
    if "GPU(row)" in desc and n and len(grid) == 3 * n and "Total" in desc:
        names = ("Read1", "Read2", "Total") if "_read" in name else ("Write1", "Write2", "Total")
        return [(desc.replace("Total", q), labelled(grid[b * n : (b + 1) * n])) for b, q in enumerate(names)]
    return [(desc, labelled(grid))]
