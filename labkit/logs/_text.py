"""Text handling shared by the log readers: reading the input, refusing what is not text, and
taking off what a terminal, a job launcher or a web page puts around each line.

Every reader works on `Line`s: the 1-based line number in the input, the raw text and the text
with its wrappers removed. Only wrappers are removed — never a character of the tool's output:

- mpirun `--tag-output` prefixes `[1,0]<stdout>:` and Slurm `srun --label` prefixes `0: `;
- markdown quoting `> ` (an issue or e-mail reply) and code fences (a line of ``` or ~~~);
- ANSI colour escapes; a tab shown as `>---` by an editor (vim's `listchars=tab:>-`), which
  turns back into a tab.
"""

from __future__ import annotations

import dataclasses
import os
import re
from decimal import Decimal, InvalidOperation
from pathlib import Path


class LogFormatError(ValueError):
    """Input that cannot be read as a tool log; `line` is the 1-based line the message names."""

    def __init__(self, line: int, reason: str, source: str = "<text>"):
        self.line, self.reason, self.source = line, reason, source
        super().__init__(f"{source}, line {line}: {reason}")


@dataclasses.dataclass(frozen=True)
class Line:
    no: int  # 1-based line number in the input
    raw: str  # as in the input (line ending removed)
    text: str  # wrappers removed, surrounding whitespace stripped
    fence: bool = False  # a markdown code fence line (``` or ~~~)

    @property
    def tokens(self) -> list[str]:
        return self.text.split()


@dataclasses.dataclass(frozen=True)
class Skipped:
    """A line or block a reader could not read, with why."""

    line: int
    text: str
    reason: str


def incomplete(problems: list[Skipped]) -> dict:
    """meta['completeness'] of a table some of whose printed lines were not read (a paste cut off mid-matrix):
    `labkit ref import-log` warns 'incomplete: missing ...' with these reasons, as for an nccl-tests run cut short."""
    return {"status": "incomplete", "missing": [f"{p.reason} (line {p.line})" for p in problems]}


#: A log bigger than this is refused: no tool writes that much, and reading it would be slow.
MAX_LOG_BYTES = 64 * 1024 * 1024
#: Share of control bytes (other than tab/newline/CR/ESC) above which input counts as binary.
BINARY_CONTROL_SHARE = 0.01

_MPI_TAG = re.compile(r"^\[\d+,\d+\]<(?:stdout|stderr)>:")
_SRUN_LABEL = re.compile(r"^\d+:(?: +|$)")  # '0: text' (a time '12:34' is left alone)
_QUOTE = re.compile(r"^>\s?")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_VIM_TAB = re.compile(r"(?:>+-+)+")  # vim shows a tab as '>---' (as many '-' as the tab is wide)
_FENCE = re.compile(r"^(```|~~~)")
#: Control characters other than tab, newline, carriage return, form feed and ESC (ANSI colours).
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0e-\x1a\x1c-\x1f]")


def read_input(path_or_text) -> tuple[str, str]:
    """(text, source name) of a path or of log text itself; refuses binary and oversized input."""
    if isinstance(path_or_text, (bytes, bytearray)):
        data, source = bytes(path_or_text), "<bytes>"
    elif isinstance(path_or_text, os.PathLike) or (
        isinstance(path_or_text, str)
        and "\n" not in path_or_text
        and len(path_or_text) < 4096
        and Path(path_or_text).is_file()
    ):
        p = Path(path_or_text)
        if p.stat().st_size > MAX_LOG_BYTES:
            raise LogFormatError(1, f"file is {p.stat().st_size} bytes; a tool log is far smaller", str(p))
        data, source = p.read_bytes(), str(p)
    elif isinstance(path_or_text, str):
        return check_text(path_or_text, "<text>"), "<text>"
    else:
        raise TypeError(f"parse_log takes a path or the log text, not {type(path_or_text).__name__}")
    if b"\x00" in data:
        line = data[: data.index(b"\x00")].count(b"\n") + 1
        raise LogFormatError(line, "binary data (a NUL byte): not a text log", source)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise LogFormatError(line, f"not UTF-8 text ({e.reason} at byte {e.start}): not a text log", source) from None
    return check_text(text, source), source


def check_text(text: str, source: str) -> str:
    """The text itself, or LogFormatError if it is empty or mostly control characters."""
    if not text.strip():
        raise LogFormatError(1, "empty input: no tool output to read", source)
    control = len(_CONTROL.findall(text))  # a regex: a per-character loop took 9 s on a 20 MB log
    if "\x00" in text or control > BINARY_CONTROL_SHARE * len(text):
        bad = _CONTROL.search(text).start()
        raise LogFormatError(text[:bad].count("\n") + 1, "binary data (control bytes): not a text log", source)
    return text


def unwrap(raw: str) -> tuple[str, bool]:
    """(text without launcher prefixes, markdown quoting and ANSI escapes, is-a-code-fence)."""
    s = _VIM_TAB.sub("\t", _ANSI.sub("", raw)).strip()
    for _ in range(4):  # wrappers can nest: '> [1,0]<stdout>: 0: ...'
        before = s
        s = _QUOTE.sub("", s)
        s = _MPI_TAG.sub("", s)
        s = _SRUN_LABEL.sub("", s).strip()
        if s == before:
            break
    return s, bool(_FENCE.match(s))


def lines_of(text: str) -> list[Line]:
    out = []
    for i, raw in enumerate(text.splitlines(), start=1):
        s, fence = unwrap(raw)
        out.append(Line(i, raw, "" if fence else s, fence))
    return out


# --------------------------------------------------------------------------- numbers as printed
_NUMBER = re.compile(r"^[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$")
_INTEGER = re.compile(r"^\d+(?:_\d+)*$")


def is_number(tok: str) -> bool:
    return bool(_NUMBER.match(tok))


def is_integer(tok: str) -> bool:
    """Digits, optionally grouped with '_' (a size written as 1_073_741_824)."""
    return bool(_INTEGER.match(tok))


def integer(tok: str) -> int:
    return int(tok.replace("_", ""))


def shift_decimal(text: str, places: int) -> str:
    """The printed number `text` × 10**places, written exactly (a unit change such as ns → µs).

    Only the decimal point moves, so no digit is rounded: '649.879' ns → '0.649879' µs.
    """
    try:
        d = Decimal(text).scaleb(places)
    except InvalidOperation:
        raise ValueError(f"{text!r} is not a number") from None
    return format(d, "f")


def common_indent(raws: list[str]) -> int:
    widths = [len(r) - len(r.lstrip(" \t")) for r in raws if r.strip()]
    return min(widths) if widths else 0
