"""cuda-samples `bandwidthTest` output → one `copy_sweep` dataset per run.

Reads quick, range and shmoo modes, the readable tables (`Transfer Size (Bytes)  Bandwidth(GB/s)`)
and the `--csv` lines (`bandwidthTest-H2D-Pinned, Bandwidth = 0.4 GB/s, Time = 0.00000 s, Size =
1000 bytes, NumDevsUsed = 1`), pinned, pageable and write-combined memory, the device names,
`--device=all` (cumulative) runs and the `Result = PASS|FAIL` line. A run starts at the
`[CUDA Bandwidth Test] - Starting...` banner (or at the first table when a page left it out).

Units, from the sample's source (Samples/1_Utilities/bandwidthTest/bandwidthTest.cu, NVIDIA/
cuda-samples @ceab6e8b, the last version before it was removed in 7d1730f3): sizes are printed in
bytes (`%u`) and the sizes the tool picks are decimal (quick mode 32e6 B, shmoo 1e3 .. 64e6 B in
1e3/1e6 steps: DEFAULT_SIZE and SHMOO_* defines, lines 52-72); bandwidth is GB/s with 1 GB = 1e9 B
(`/ (double)1e9`, lines 723 and 832) printed with one decimal; a device-to-device copy counts its
bytes twice, read + write (`2.0f * memSize`, line 914); the `--csv` Time is not measured but
computed from size and bandwidth (line 997) — and in the CUDA 10.1 version (b458dafc, line 918)
with 2^20 in place of 1e9, so those Times are ~954x too large. With `--device=all` the bandwidths
of all devices are summed. Tables printed in MB/s (older CUDA SDK samples, whose "MB" was 2^20 B
or 1,024,000 B depending on the release) are not converted: they are reported in `skipped`.
"""

from __future__ import annotations

import re

from ._model import LogDataset
from ._text import Line, Skipped, is_integer, is_number

TOOL = "bandwidthtest"
COLUMNS = ("direction", "memory", "nbytes", "bandwidth_GBps", "time_s")
CAVEATS = (
    "cuda-samples bandwidthTest: GB/s with 1 GB = 1e9 B, printed with one decimal; sizes are the printed "
    "byte counts (the tool's own sizes are decimal: quick mode = 32000000 B). H2D and D2H are one "
    "direction at a time (unidirectional). A device-to-device (d2d, memory='device'; the tool labels it "
    "'PINNED') bandwidth counts every byte twice (read + write). --csv Time is computed by the tool from "
    "size and bandwidth, not measured (and ~954x too large in the CUDA 10.1 sample)."
)

_BANNER = re.compile(r"\[CUDA Bandwidth Test\] - Starting")
_KIND = re.compile(r"^(Host to Device|Device to Host|Device to Device) Bandwidth,\s*(\d+) Device\(s\)")
_MEMORY = re.compile(r"^(PINNED|PAGEABLE) Memory Transfers")
_TABLE_HEAD = re.compile(r"Transfer Size \(Bytes\)\s*Bandwidth\((\w+/s)\)")
_CSV = re.compile(
    r"^bandwidthTest-(H2D|D2H|D2D)(?:-(Pinned|Paged))?(-WriteCombined)?,\s*Bandwidth = (\S+) (\w+/s),"
    r"\s*Time = (\S+) s,\s*Size = (\d+) bytes,\s*NumDevsUsed = (\d+)"
)
_DEVICE = re.compile(r"^Device (\d+): (.+)$")
_MODE = re.compile(r"^(Quick|Range|Shmoo) Mode$")
_RESULT = re.compile(r"^Result = (PASS|FAIL|WAIVED)")
_DIRECTION = {
    "Host to Device": "h2d",
    "Device to Host": "d2h",
    "Device to Device": "d2d",
    "H2D": "h2d",
    "D2H": "d2h",
    "D2D": "d2d",
}
_MEM = {"PINNED": "pinned", "PAGEABLE": "pageable", "Pinned": "pinned", "Paged": "pageable"}


def parse(lines: list[Line]) -> tuple[list[LogDataset], list[Skipped]]:
    runs, skipped = [], []
    cur = _new(0)
    table = None  # (direction, memory, unit, line) of the table being read
    command = None  # a command line seen since the last run's rows: it started the next run
    for ln in lines:
        t = ln.text
        if _BANNER.search(t):
            if cur["rows"] or cur["device_names"]:
                runs.append(cur)
            cur, table = _new(ln.no, banner=True), None
            cur["command"], command = command, None
            continue
        if m := _KIND.match(t):
            table = {
                "direction": _DIRECTION[m.group(1)],
                "devices": int(m.group(2)),
                "memory": None,
                "unit": None,
                "line": ln.no,
            }
            if cur["rows"] and _seen(cur, table["direction"], None) and not cur["banner"]:
                runs.append(cur)
                cur = _new(ln.no)
            continue
        if (m := _MEMORY.match(t)) and table is not None:
            table["memory"] = "device" if table["direction"] == "d2d" else _MEM[m.group(1)]
            cur["write_combined"] |= "Write-Combined" in t
            if m2 := _TABLE_HEAD.search(t):
                table["unit"] = m2.group(1)
            continue
        if "Write-Combined Memory Writes are Enabled" in t:
            cur["write_combined"] = True
        if m := _TABLE_HEAD.search(t):
            if table is not None:
                table["unit"] = m.group(1)
            continue
        if m := _CSV.match(t):
            _csv_row(m, ln, cur, skipped)
            continue
        toks = ln.tokens
        if table is not None and table["unit"] and len(toks) == 2 and is_integer(toks[0]):
            command = _table_row(ln, table, cur, skipped, command)
            continue
        if table is not None and toks and is_integer(toks[0]) and table["unit"]:
            skipped.append(Skipped(ln.no, ln.raw, f"{len(toks)} columns in a size/bandwidth table (expected 2)"))
            continue
        command = _run_fact(t, cur, command)
    if cur["rows"]:
        runs.append(cur)
    return [_dataset(r, k) for k, r in enumerate(runs)], skipped


def _table_row(ln: Line, table: dict, cur: dict, skipped: list, command):
    """One size/bandwidth row of a readable table, into `cur` (or `skipped`); returns the command line still
    waiting for its run (a run whose banner the page left out takes it with its first row)."""
    toks = ln.tokens
    if table["unit"] != "GB/s":
        skipped.append(
            Skipped(
                ln.no,
                ln.raw,
                f"bandwidth printed in {table['unit']} (an older bandwidthTest "
                "whose MB was 2^20 or 1,024,000 bytes): not converted",
            )
        )
    elif not is_number(toks[1]):
        skipped.append(Skipped(ln.no, ln.raw, f"bandwidth {toks[1]!r} is not a number"))
    else:
        cur["rows"].append(
            {
                "direction": table["direction"],
                "memory": table["memory"],
                "nbytes": int(toks[0]),
                "bandwidth_GBps": toks[1],
                "time_s": None,
            }
        )
        cur["devices_used"].add(table["devices"])
        cur["last"] = ln.no
        if cur["command"] is None and command is not None:  # a run whose banner the page left out
            cur["command"], command = command, None
    return command


def _run_fact(t: str, cur: dict, command):
    """A line that states something about the run (a device, the mode, the result, cumulative bandwidth) or is the
    command line that starts the next run; returns the command line still waiting for its run."""
    if m := _DEVICE.match(t):
        cur["device_names"].append((int(m.group(1)), m.group(2).strip()))
    elif m := _MODE.match(t):
        cur["mode"] = m.group(1).lower()
    elif m := _RESULT.match(t):
        cur["result"] = m.group(1)
    elif "Cumulative Bandwidth to be computed from all the devices" in t:
        cur["cumulative"] = True
    elif "bandwidthTest" in t and ("--" in t or "./" in t):
        command = t
    return command


def _new(first: int, banner: bool = False) -> dict:
    return {
        "first": first,
        "last": first,
        "rows": [],
        "device_names": [],
        "mode": None,
        "result": None,
        "cumulative": False,
        "command": None,
        "write_combined": False,
        "devices_used": set(),
        "banner": banner,
        "csv": False,
    }


def _seen(run: dict, direction: str, memory=None) -> bool:
    return any(r["direction"] == direction for r in run["rows"])


def _csv_row(m: re.Match, ln: Line, cur: dict, skipped: list) -> None:
    kind, mem, wc, bw, unit, time_s, size, ndev = m.groups()
    if unit != "GB/s":
        skipped.append(Skipped(ln.no, ln.raw, f"bandwidth printed in {unit}: not converted"))
        return
    direction = _DIRECTION[kind]
    cur["rows"].append(
        {
            "direction": direction,
            "memory": "device" if direction == "d2d" else _MEM[mem or "Pinned"],
            "nbytes": int(size),
            "bandwidth_GBps": bw,
            "time_s": time_s,
        }
    )
    cur["write_combined"] |= bool(wc)
    cur["devices_used"].add(int(ndev))
    cur["csv"] = True
    cur["last"] = ln.no


def _dataset(run: dict, index: int) -> LogDataset:
    import pandas as pd

    cols = list(COLUMNS) if run["csv"] else list(COLUMNS[:-1])
    frame = pd.DataFrame(run["rows"], columns=list(COLUMNS))[cols]
    names = [n for _, n in sorted(run["device_names"])]
    flags = re.findall(r"--?[\w-]+(?:=\S+)?", run["command"] or "")
    used = sorted(run["devices_used"])
    meta = {
        "tool": TOOL,
        "mode": run["mode"],
        "result": run["result"],
        "cumulative": run["cumulative"],
        "write_combined": run["write_combined"],
        "devices": names,
        "devices_used": used,
        "command": run["command"],
        "options": flags,
        "gpu": " / ".join(dict.fromkeys(names)),
        "gpu_count": used[0] if len(used) == 1 else "",
        "nodes": 1,
        "software": "cuda-samples bandwidthTest",
        "method": " ".join(["cuda-samples bandwidthTest"] + flags),
        "bandwidth_direction": "unidirectional",
        "caveats": CAVEATS
        + (" --device=all: each bandwidth is the sum over all devices." if run["cumulative"] else ""),
        "title": f"bandwidthTest {run['mode'] or ''} mode on {' / '.join(dict.fromkeys(names)) or 'GPU'}",
    }
    label = f"bandwidthTest run {index + 1} (lines {run['first']}-{run['last']})"
    return LogDataset(TOOL, "copy_sweep", frame, meta, (run["first"], run["last"]), label)
