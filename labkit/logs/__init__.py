"""Read the real tools' logs: nccl-tests, nvbandwidth, cuda-samples bandwidthTest and
p2pBandwidthLatencyTest output (as a file, or text pasted from a terminal, a web page or an issue).

    parsed = parse_log("all_reduce_perf.log")           # or the text itself
    for ds in parsed:                                    # LogDataset: .kind .frame .meta .missing
        ...
    parsed.skipped                                       # [(line, text, why)] of what was not read

Each dataset is a tidy frame in the data/README.md schema of its kind, numbers exactly as printed,
with a meta dict of what the log states (tool, versions, GPUs, hosts, command line, env) and
nothing it does not state. `LogDataset.filled(...)` supplies what the log left empty and
`LogDataset.dataset_meta(...)` builds the meta that `labkit.reference.write_dataset` takes, so an
importer is a thin call. This package is core: it imports only the standard library, pandas and
labkit.units (nothing else from labkit).
"""

from __future__ import annotations

import re

from . import bandwidth_test, checks, nccl_tests, nvbandwidth, p2p_latency_test
from ._model import LogDataset, ParsedLog
from ._text import LogFormatError, Skipped, lines_of, read_input

__all__ = [
    "FORMATS",
    "LogDataset",
    "LogFormatError",
    "ParsedLog",
    "Skipped",
    "checks",
    "detect_format",
    "detect_formats",
    "parse_log",
]

#: Format names, as `--format` takes them, with the reader of each.
READERS = {
    "nccl-tests": nccl_tests,
    "nvbandwidth": nvbandwidth,
    "bandwidthtest": bandwidth_test,
    "p2pbandwidthlatencytest": p2p_latency_test,
}
FORMATS = tuple(READERS)
#: Lines that only one tool prints; the first one found in the input names the tool.
SIGNATURES = {
    "nccl-tests": re.compile(
        r"#\s*nThread\s+\d+\s+nGpus|#\s*nccl-tests version|Collective test starting:|"
        r"#?\s*size\s+(count\s+type\s+)?.*\btime\s+algbw\s+busbw\b|#\s*Avg bus bandwidth\s*:|"
        r"^#\s*\(B\)\s+\(elements\)"  # the units line under the header: a paste may begin there
    ),
    "nvbandwidth": re.compile(
        r"nvbandwidth Version:|^Running \w+_(ce|sm)\.|^memcpy (CE|SM) (CPU|GPU)\(row\)|"
        r"\"nvbandwidth\"\s*:"
    ),
    "bandwidthtest": re.compile(
        r"\[CUDA Bandwidth Test\]|Transfer Size \(Bytes\)\s*Bandwidth\(|"
        r"^bandwidthTest-(H2D|D2H|D2D)"
    ),
    "p2pbandwidthlatencytest": re.compile(
        r"\[P2P \(Peer-to-Peer\) GPU Bandwidth Latency Test\]|"
        r"P2P=(Enabled|Disabled)\s+(Bandwidth|Latency).*Matrix"
    ),
}


_ALIASES = {
    "nccltests": "nccl-tests",
    "nvbandwidth": "nvbandwidth",
    "bandwidthtest": "bandwidthtest",
    "p2pbandwidthlatencytest": "p2pbandwidthlatencytest",
    "p2p": "p2pbandwidthlatencytest",
}


def _canonical(fmt: str) -> str:
    key = fmt.lower().replace("_", "").replace("-", "")
    if key not in _ALIASES:
        raise ValueError(f"unknown log format {fmt!r}; use auto or one of {', '.join(FORMATS)}")
    return _ALIASES[key]


def detect_formats(text) -> list[str]:
    """Every tool whose output the text (or its `lines_of`) holds, in the order each first appears."""
    first: dict[str, int] = {}
    for ln in lines_of(text) if isinstance(text, str) else text:
        for fmt, sig in SIGNATURES.items():
            if fmt not in first and ln.text and sig.search(ln.text):
                first[fmt] = ln.no
    return sorted(first, key=first.get)


def detect_format(text: str) -> str:
    """The tool whose output comes first in `text`; LogFormatError (naming the first line) if none."""
    found = detect_formats(text)
    if not found:
        lines = [ln for ln in lines_of(text) if ln.text]
        where = lines[0] if lines else None
        raise LogFormatError(
            where.no if where else 1,
            "no nccl-tests, nvbandwidth, bandwidthTest or "
            "p2pBandwidthLatencyTest output found" + (f" (first line: {where.text[:60]!r})" if where else ""),
        )
    return found[0]


def parse_log(path_or_text, format: str = "auto") -> ParsedLog:
    """Read a tool log (a path, or the text itself) into datasets.

    format: 'auto' (every tool found in the input) or one of FORMATS. A partial log gives what is
    complete and lists the rest in `.skipped`; input with nothing readable raises LogFormatError
    naming the line.
    """
    text, source = read_input(path_or_text)
    lines = lines_of(text)
    try:
        formats = detect_formats(lines) if format == "auto" else [_canonical(format)]
        if not formats:
            detect_format(text)
    except LogFormatError as e:
        raise LogFormatError(e.line, e.reason, source) from None
    datasets, skipped = [], []
    for fmt in formats:
        ds, sk = READERS[fmt].parse(lines)
        datasets += ds
        skipped += sk
    if not datasets:
        if skipped:
            first = min(skipped, key=lambda s: s.line)
            raise LogFormatError(first.line, f"no complete {' / '.join(formats)} table; {first.reason}", source)
        sig = next((ln for ln in lines for f in formats if ln.text and SIGNATURES[f].search(ln.text)), None)
        raise LogFormatError(
            sig.no if sig else 1, f"{' / '.join(formats)} output without a complete result table", source
        )
    datasets.sort(key=lambda d: d.lines[0])
    return ParsedLog(source, tuple(formats), tuple(datasets), tuple(sorted(skipped, key=lambda s: s.line)))
