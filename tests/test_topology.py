"""parse_topology reads every `nvidia-smi topo -m` table in the reference sources and in the data."""

import re
from pathlib import Path

import pytest

from labkit.system import link_rank, parse_topology

#: The published logs behind data/, in the project (data/raw/README.md): nothing here needs ../shared.
SOURCES = Path(__file__).resolve().parents[1] / "data" / "raw"


def _topo_sources():
    table = re.compile(r"^\s*GPU0\s+X\s", re.M)  # a printed table, not a mention of the command
    return [p for p in sorted(SOURCES.glob("*.txt")) if table.search(p.read_text())]


@pytest.mark.parametrize("path", _topo_sources(), ids=lambda p: p.name[:40])
def test_every_reference_topology_parses(path):
    text = path.read_text()
    df = parse_topology(text)
    # square, self on the diagonal, symmetric link labels
    assert list(df.index) == list(df.columns)
    for d in df.index:
        assert df.loc[d, d] == "X"
        for e in df.index:
            assert df.loc[d, e] == df.loc[e, d]
    gpus = [d for d in df.index if d.startswith("GPU")]
    assert gpus, "no GPU rows"
    # every GPU row has CPU and NUMA affinity
    assert set(df.attrs["cpu_affinity"]) >= set(gpus)
    assert set(df.attrs["numa_affinity"]) >= set(gpus)


def test_sources_cover_nvlink_pcie_and_nics():
    found = {p.name: parse_topology(p.read_text()) for p in _topo_sources()}
    assert len(found) >= 3, sorted(found)
    labels = {v for df in found.values() for v in df.to_numpy().ravel()}
    assert any(label.startswith("NV") for label in labels)
    assert "PIX" in labels and "SYS" in labels
    assert any(any(d.startswith("NIC") for d in df.index) for df in found.values())


A100 = """\
        GPU0    GPU1    GPU2    GPU3    NIC0    CPU Affinity    NUMA Affinity   GPU NUMA ID
GPU0     X      NV12    SYS     SYS     PXB     0-63            0               N/A
GPU1    NV12     X      SYS     SYS     PXB     0-63            0               N/A
GPU2    SYS     SYS      X      NV12    SYS     64-127          1               N/A
GPU3    SYS     SYS     NV12     X      SYS     64-127          1               N/A
NIC0    PXB     PXB     SYS     SYS      X

Legend:

  X    = Self
  NV#  = Connection traversing a bonded set of # NVLinks

NIC Legend:

  NIC0: mlx5_0
"""


def test_parse_synthetic_table_with_nics_and_numa():
    df = parse_topology(A100)
    assert df.shape == (5, 5)
    assert df.loc["GPU0", "GPU1"] == "NV12" and df.loc["GPU0", "GPU2"] == "SYS"
    assert df.loc["NIC0", "GPU0"] == "PXB"
    assert df.attrs["numa_affinity"] == {"GPU0": "0", "GPU1": "0", "GPU2": "1", "GPU3": "1"}
    assert df.attrs["nic_names"] == {"NIC0": "mlx5_0"}
    assert (
        link_rank("NV4") < link_rank("PIX") < link_rank("PXB") < link_rank("PHB") < link_rank("NODE") < link_rank("SYS")
    )


def test_old_style_table_without_affinity_columns():
    df = parse_topology("\tGPU0\tGPU1\nGPU0\t X \tPHB\nGPU1\tPHB\t X \n")
    assert df.loc["GPU1", "GPU0"] == "PHB" and df.attrs["cpu_affinity"] == {}


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "no table here",
        "        GPU0    GPU1\nGPU0     X      NV12\n",  # GPU1 row missing
        "        GPU0    GPU1\nGPU0     X      FOO\nGPU1    FOO     X\n",  # unknown label
    ],
)
def test_bad_tables_are_rejected(bad):
    with pytest.raises(ValueError):
        parse_topology(bad)


def test_every_topology_stored_with_a_dataset_parses():
    from labkit import reference

    stored = [reference.load(n) for n in reference.list_datasets(kind="p2p_matrix")]
    stored = [d for d in stored if d.meta.get("topology")]
    assert len(stored) >= 3
    for d in stored:
        df = parse_topology(d.meta["topology"])
        gpus = [x for x in df.index if x.startswith("GPU")]
        assert len(gpus) == d.meta["gpu_count"], d.name


def test_single_gpu_vm_table_with_ansi_underline():
    # Captured on a one-H100 virtual machine (driver 580.159.04): the header is wrapped in ANSI
    # underline escapes, there is one device and a 'GPU NUMA ID' column reading N/A.
    text = (Path(__file__).resolve().parent / "fixtures" / "topo_1xh100_pcie_vm_ansi.txt").read_text()
    assert "\x1b[4m" in text
    df = parse_topology(text)
    assert list(df.index) == list(df.columns) == ["GPU0"]
    assert df.loc["GPU0", "GPU0"] == "X"
    assert df.attrs["cpu_affinity"] == {"GPU0": "0-15"}
    assert df.attrs["numa_affinity"] == {"GPU0": "0"}
    assert df.attrs["gpu_numa_id"] == {"GPU0": "N/A"}
