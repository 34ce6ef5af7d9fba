"""Units: bytes internally, GB/s = 1e9 B/s, sizes labelled in binary prefixes (KiB/MiB/GiB)."""

from __future__ import annotations

import math
import re

GB = 1e9  # bandwidth unit: 1 GB/s = 1e9 B/s (nccl-tests, bandwidthTest and nvbandwidth all use it)
KiB, MiB, GiB, TiB, PiB = 1 << 10, 1 << 20, 1 << 30, 1 << 40, 1 << 50

_BINARY = {
    **{"": 1, "B": 1, "KIB": KiB, "MIB": MiB, "GIB": GiB, "TIB": TiB, "PIB": PiB},
    **{"K": KiB, "M": MiB, "G": GiB, "T": TiB, "P": PiB},
}
_DECIMAL = {"KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12, "PB": 10**15}

#: Largest single message any labkit sweep will accept: 64 GiB. Above this a typo is likelier
#: than a real request (no GPU we target has that much free memory for one buffer).
MAX_MESSAGE_BYTES = 64 * GiB

#: Largest size the cost-model calculator (`labkit model --size`) accepts: 1024 PiB. A model allocates
#: nothing, so it takes any size a user types in units up to PiB (a 70B model's bf16 gradients are 140 GB);
#: the cap only keeps the arithmetic in exact integers.
MAX_MODELLED_BYTES = 1024 * PiB

#: Largest pinned (page-locked) buffer labkit allocates: 4 GiB. Pinned pages cannot be swapped out, and
#: pinning a large share of RAM starves the OS (the source of "my machine froze" reports); raise it
#: consciously, per call (`cap=`), where a machine has the memory to spare.
PINNED_CAP_BYTES = 4 * GiB

_SIZE_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([A-Za-z]*)\s*$")


def parse_size(text: str | int, *, maximum: int = MAX_MESSAGE_BYTES) -> int:
    """Parse '4MiB', '64M', '512', '1GiB', '32MB' (decimal) into bytes, refusing more than `maximum`.

    Bare K/M/G are binary (as in nccl-tests' -b/-e flags); 'KB'/'MB'/'GB' are decimal and
    'KiB'/'MiB'/'GiB' binary, so a decimal size is never taken for a binary one.
    """
    if isinstance(text, bool):
        raise TypeError("a size must be an int or a string like '4MiB', not a bool")
    if isinstance(text, int):
        return check_size(text, maximum=maximum)
    m = _SIZE_RE.match(str(text))
    if not m:
        raise ValueError(f"cannot read size {text!r}: use bytes or a unit, e.g. '4KiB', '64MiB', '1GiB'")
    value, unit = float(m.group(1)), m.group(2).upper()
    if unit in _BINARY:
        factor = _BINARY[unit]
    elif unit in _DECIMAL:
        factor = _DECIMAL[unit]
    else:
        raise ValueError(
            f"unknown size unit {m.group(2)!r} in {text!r}: use B, KiB, MiB, GiB (or KB/MB/GB for decimal)"
        )
    nbytes = value * factor
    if nbytes > maximum:  # before int(): a long enough number is a float infinity
        return check_size(maximum + 1, maximum=maximum, shown=text)
    if nbytes != int(nbytes):
        raise ValueError(f"size {text!r} is not a whole number of bytes")
    return check_size(int(nbytes), maximum=maximum)


def parse_sizes(text: str) -> list[int]:
    """Parse a comma-separated list of sizes, e.g. '4MiB,64MiB'."""
    parts = [p for p in str(text).split(",") if p.strip()]
    if not parts:
        raise ValueError("no sizes given: pass a comma-separated list such as '4MiB,64MiB'")
    return [parse_size(p) for p in parts]


def check_size(nbytes: int, *, maximum: int = MAX_MESSAGE_BYTES, shown: str | None = None) -> int:
    """Return nbytes if it is a positive whole number of bytes no larger than `maximum`."""
    if isinstance(nbytes, bool) or not isinstance(nbytes, (int,)) and not float(nbytes).is_integer():
        raise ValueError(f"size must be a whole number of bytes, got {nbytes!r}")
    nbytes = int(nbytes)
    if nbytes <= 0:
        raise ValueError(f"size must be at least 1 byte, got {nbytes}")
    if nbytes > maximum:
        raise ValueError(
            f"size {shown or format_bytes(nbytes)} is above the limit of {format_bytes(maximum)}; "
            "check the unit (MiB vs GiB)"
        )
    return nbytes


class PinnedCapError(ValueError):
    """A pinned allocation larger than labkit's cap (PINNED_CAP_BYTES, or the `cap=` given) was asked for."""


def check_pinned_request(nbytes: int, cap: int = PINNED_CAP_BYTES) -> int:
    """Return nbytes if it may be pinned; raise PinnedCapError (saying what to do) above `cap`.

    Called before anything is allocated, so a wrong size never reaches the driver.
    """
    nbytes = check_size(nbytes)
    if nbytes > cap:
        raise PinnedCapError(
            f"refusing to pin {nbytes:,} bytes ({format_bytes(nbytes)}): above labkit's pinned-memory cap of "
            f"{cap:,} bytes ({format_bytes(cap)}) (labkit.units.PINNED_CAP_BYTES). Pinned pages cannot be "
            "swapped out, so pinning a large share of RAM can freeze the machine. Pin smaller chunks and reuse "
            "them (a staging ring), or pass a larger cap= deliberately if you know this machine has the memory "
            "to spare."
        )
    return nbytes


def format_bytes(nbytes: float) -> str:
    """'4 B', '1 KiB', '1.5 MiB', '1 GiB' — binary prefixes, trailing zeros dropped."""
    n = float(nbytes)
    for unit, factor in (("PiB", PiB), ("TiB", TiB), ("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if abs(n) >= factor:
            return f"{n / factor:.4g} {unit}"
    return f"{n:.4g} B"


def pow2_sizes(lo: int | str, hi: int | str, step: int = 1) -> list[int]:
    """Powers of two from lo to hi inclusive (each rounded to a power of two), every `step` doublings."""
    lo_b, hi_b = parse_size(lo), parse_size(hi)
    if lo_b > hi_b:
        raise ValueError(f"smallest size {format_bytes(lo_b)} is above largest {format_bytes(hi_b)}")
    if step < 1:
        raise ValueError("step must be >= 1")
    a, b = math.ceil(math.log2(lo_b)), math.floor(math.log2(hi_b))
    return [1 << e for e in range(a, b + 1, step)]


def chosen_sizes(text: str | None, lo: int | str, hi: int | str, step: int = 1) -> list[int]:
    """The sizes a `--sizes` flag names, or without one the powers of two lo..hi every `step` doublings."""
    return parse_sizes(text) if text else pow2_sizes(lo, hi, step)


def gbps(nbytes: float, seconds: float) -> float:
    """Bandwidth in GB/s (1e9 B/s) for nbytes moved in seconds."""
    if seconds <= 0:
        raise ValueError(f"time must be positive, got {seconds!r} s")
    return nbytes / seconds / GB


def gbit_per_s_to_GBps(gbit_per_s: float) -> float:
    """A line rate quoted in Gb/s (1e9 bits/s per direction, as network and PCIe specs quote it) in GB/s."""
    if not math.isfinite(gbit_per_s) or gbit_per_s < 0:
        raise ValueError(f"a rate in Gb/s must be a finite number >= 0, got {gbit_per_s!r}")
    return gbit_per_s * 1e9 / 8 / GB


def format_time(seconds: float) -> str:
    """'3.2 µs', '1.05 ms', '2.3 s'."""
    s = float(seconds)
    if s < 1e-6:
        return f"{s * 1e9:.3g} ns"
    if s < 1e-3:
        return f"{s * 1e6:.3g} µs"
    if s < 1:
        return f"{s * 1e3:.3g} ms"
    return f"{s:.3g} s"


DIRECTIONS = ("unidirectional", "bidirectional", "aggregate")


def check_direction(direction: str) -> str:
    """Every bandwidth is tagged with one of DIRECTIONS; anything else is an error."""
    if direction not in DIRECTIONS:
        raise ValueError(f"bandwidth direction must be one of {DIRECTIONS}, got {direction!r}")
    return direction
