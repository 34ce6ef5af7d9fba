"""`labkit compare`: several profiles side by side — plateau bandwidth and n½ of like-for-like series.

What is compared with what
- A *source* is a profile folder written by `labkit record` (profile.json + datasets), or one
  dataset: a shipped reference name (`labkit ref list`) or the path of a `<name>.csv`.
- Profiles alone are paired by dataset name (`labkit record` writes fixed names); as soon as one
  source is a single dataset, datasets are paired by kind.
- Inside a pair, rows are split into *series* by the kind's key columns (copy_sweep: direction,
  memory; allreduce_sweep: world_size, nodes, config; p2p_matrix: matrix, p2p) and matched point by
  point on the size (or the GPU pair) — only sizes every series measured are summarised.
- Numbers are compared only in the same value column (its unit is in its name) and with the same
  bandwidth direction. Anything else is refused with a `CompareError` naming both datasets; a
  series that only one source has is listed under "not compared", never dropped silently.

Summaries follow the design's rule: a sweep is summarised by its plateau (median of the largest
common sizes) and its half-bandwidth size n½ from the α-β fit, never by an average over all sizes.

Here: the whole comparison (its table, JSON and figure files). compare_inputs reads sources and splits
series, compare_groups summarises one group, compare_figures draws them.
"""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path

from ..fileio import atomic_write_bytes
from ..schema import Dataset
from .compare_figures import plot_kind
from .compare_groups import PLATEAU_SIZES, Group, compare_group
from .compare_inputs import RULES, CompareError, Series, Source, key_text, load_source, series_of


@dataclasses.dataclass(frozen=True)
class Comparison:
    sources: tuple[Source, ...]
    groups: tuple[Group, ...]
    not_compared: tuple[str, ...]

    def to_frame(self):
        import pandas as pd

        return pd.DataFrame([r for g in self.groups for r in g.rows])

    def to_dict(self) -> dict:
        return {
            "sources": [
                {
                    "name": s.name,
                    "host": s.host,
                    "date": s.date,
                    "path": s.path,
                    "datasets": [d.name for d in s.datasets],
                    "profile": s.is_profile,
                }
                for s in self.sources
            ],
            "method": {
                "plateau": f"median of the {PLATEAU_SIZES} largest sizes every series measured",
                "n_half": "α·β of t = α + n/β fitted (labkit.models.fit_alpha_beta) on the common sizes",
                "vs_first_pct": "plateau (sweeps) or median (matrices, tables) relative to the first source",
            },
            "comparisons": [dict(r) for g in self.groups for r in g.rows],
            "not_compared": list(self.not_compared),
        }

    def table(self) -> str:
        """Plain text: the sources, then one block per group with one line per series."""
        import pandas as pd

        out = (
            ["sources:"]
            + [f"  {s.name} — {s.host}, {s.date}" + (f"  ({s.path})" if s.path != s.name else "") for s in self.sources]
            + [""]
        )
        for g in self.groups:
            q, unit = g.quantity
            head = f"{g.title} · {g.direction} · {g.value_column}"
            out.append(head + (f" · dataset {g.slot}" if g.slot != g.kind else ""))
            first = g.rows[0]
            if g.rule.sweep:
                n_top = min(PLATEAU_SIZES, len(g.common))
                out.append(
                    f"  compared at {first['common']}; plateau = median of the {n_top} largest "
                    f"({first['plateau_sizes']})"
                    if n_top > 1
                    else f"  compared at {first['common']}; plateau = the value there"
                )
                cols = {
                    "source": "source",
                    "dataset": "dataset",
                    "series": "series",
                    "plateau": f"plateau {q} ({unit})",
                    "n_half": "n½",
                    "vs_first_pct": "vs first",
                }
            else:
                out.append(f"  compared at {first['common']}")
                cols = {
                    "source": "source",
                    "dataset": "dataset",
                    "series": "series",
                    "median": f"median {q} ({unit})",
                    "min": "min",
                    "max": "max",
                    "vs_first_pct": "vs first",
                }
            f = pd.DataFrame([{k: r.get(k) for k in cols} for r in g.rows])
            if not f["series"].astype(bool).any():
                f = f.drop(columns="series")
            if (f["dataset"] == f["source"]).all():
                f = f.drop(columns="dataset")
            for c in ("plateau", "median", "min", "max"):
                if c in f:
                    f[c] = f[c].map(lambda v: f"{v:.4g}")
            f["vs_first_pct"] = f["vs_first_pct"].map(lambda v: "—" if v is None or pd.isna(v) else f"{v:+.1f}%")
            if "n_half" in f:
                f["n_half"] = f["n_half"].fillna("—")
            out += ["  " + line for line in f.rename(columns=cols).to_string(index=False).splitlines()]
            notes = [n for r in g.rows for n in r["notes"]]
            for n in dict.fromkeys(notes):
                who = [r["source"] for r in g.rows if n in r["notes"]]
                out.append(f"  note: {n}" + ("" if len(who) == len(g.rows) else f" ({', '.join(who)})"))
            out.append("")
        if self.not_compared:
            out.append("not compared:")
            out += [f"  - {n}" for n in self.not_compared]
        return "\n".join(out).rstrip() + "\n"

    def figures(self) -> dict:
        """kind → matplotlib Figure: one panel per group, one line per source."""
        return {
            kind: plot_kind([g for g in self.groups if g.kind == kind])
            for kind in dict.fromkeys(g.kind for g in self.groups)
        }


def compare(specs, kinds=None) -> Comparison:
    """Compare profiles / datasets (see the module docstring); raises CompareError on unlike numbers."""
    sources = _with_unique_labels([load_source(s) for s in specs])
    if len(sources) < 2:
        raise CompareError(
            "give at least two profiles or datasets to compare (e.g. two `labkit record` folders, "
            "or a profile and a reference name from `labkit ref list`)"
        )
    by_name = all(s.is_profile for s in sources)
    slots: dict[str, list[tuple[Source, Dataset]]] = {}
    for s in sources:
        for ds in s.datasets:
            if kinds and ds.kind not in kinds:
                continue
            slots.setdefault(ds.name if by_name else ds.kind, []).append((s, ds))
    groups, skipped = [], []
    for slot, members in slots.items():
        holders = list(dict.fromkeys(s.label for s, _ in members))
        if len(holders) < 2:
            what = f"dataset {slot!r}" if by_name else f"kind {slot!r}"
            skipped.append(f"{what}: only in {', '.join(holders)}")
            continue
        kinds_here = {ds.kind for _, ds in members}
        if len(kinds_here) > 1:
            (sa, a), (sb, b) = members[0], next(m for m in members if m[1].kind != members[0][1].kind)
            raise CompareError(
                f"cannot compare dataset {a.name!r} of {sa.path!r} (kind {a.kind!r}) with "
                f"{b.name!r} of {sb.path!r} (kind {b.kind!r}): different kinds"
            )
        kind = kinds_here.pop()
        if kind not in RULES:
            skipped.append(f"{slot}: kind {kind!r} has no comparison rule (compare handles {', '.join(RULES)})")
            continue
        groups += _compare_slot(kind, slot, [x for s, ds in members for x in series_of(s, ds)], skipped)
    if not groups:
        have = "".join(f"\n  - {s.label}: {', '.join(sorted({d.kind for d in s.datasets}))}" for s in sources)
        raise CompareError(
            "nothing to compare: no series is held by two sources with the same key columns"
            + "".join(f"\n  - {n}" for n in skipped)
            + f"\nkinds per source:{have}"
        )
    return Comparison(tuple(sources), tuple(groups), tuple(skipped))


def _compare_slot(kind: str, slot: str, series: list[Series], skipped: list[str]) -> list[Group]:
    rule = RULES[kind]
    by_key: dict[tuple, list[Series]] = {}
    for s in series:
        by_key.setdefault(s.key, []).append(s)
    groups = []
    for key, ss in by_key.items():
        labels = list(dict.fromkeys(s.source.label for s in ss))
        if len(labels) < 2:
            skipped.append(f"{kind} {key_text(rule, key)} ({ss[0].dataset.name}): only in {labels[0]}")
            continue
        # never uni vs bi: two sources whose rows for this key share no bandwidth direction are refused;
        # where they share some, each shared direction is compared and the others are listed
        dirs = {lab: sorted({s.direction for s in ss if s.source.label == lab}) for lab in labels}
        for i, la in enumerate(labels):
            for lb in labels[i + 1 :]:
                if not set(dirs[la]) & set(dirs[lb]):
                    a = next(s for s in ss if s.source.label == la)
                    b = next(s for s in ss if s.source.label == lb)
                    raise CompareError(
                        f"cannot compare {key_text(rule, key)} ({kind}): {a.where} is {' + '.join(dirs[la])} "
                        f"but {b.where} is {' + '.join(dirs[lb])} — bandwidths of different directions "
                        "(unidirectional; bidirectional = both directions summed; aggregate = several links "
                        "summed) are not the same quantity"
                    )
        for direction in dict.fromkeys(d for lab in labels for d in dirs[lab]):
            sub = [s for s in ss if s.direction == direction]
            holders = list(dict.fromkeys(s.source.label for s in sub))
            if len(holders) < 2:
                skipped.append(
                    f"{kind} {key_text(rule, key)} ({direction}, {sub[0].dataset.name}): only in {holders[0]}"
                )
                continue
            groups.append(compare_group(kind, slot, key, direction, sub))
    return groups


def _with_unique_labels(sources: list[Source]) -> list[Source]:
    out, seen = [], set()
    for i, s in enumerate(sources):
        if s.label in seen:
            s = dataclasses.replace(s, name=s.path)
        if s.label in seen:
            s = dataclasses.replace(s, name=f"{s.path} (#{i + 1})")
        seen.add(s.label)
        out.append(s)
    return out


def save_figures(result: Comparison, path) -> list[Path]:
    """Write one PNG per kind: `path` itself for one kind, else `<stem>_<kind><suffix>` next to it."""
    import matplotlib.pyplot as plt

    path = Path(path)
    figs = result.figures()
    path.parent.mkdir(parents=True, exist_ok=True)
    written = []
    for kind, fig in figs.items():
        out = path if len(figs) == 1 else path.with_name(f"{path.stem}_{kind}{path.suffix or '.png'}")
        buf = io.BytesIO()
        fig.savefig(buf, format=out.suffix[1:] or "png", dpi=110, bbox_inches="tight")
        plt.close(fig)
        atomic_write_bytes(out, buf.getvalue())  # labkit.fileio: a reader never sees half a figure
        written.append(out)
    return written
