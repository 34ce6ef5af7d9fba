"""Reference datasets: every shipped one validates; broken ones fail naming the file and field."""

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from labkit import reference, schema
from labkit.schema import DatasetError

GOOD_META = {
    "schema_version": 1,
    "name": "toy",
    "kind": "copy_sweep",
    "title": "toy sweep",
    "system": "test rig",
    "gpu": "none",
    "gpu_count": 0,
    "nodes": 1,
    "interconnect": "none",
    "software": "none",
    "date": "2026-11",
    "method": "synthetic",
    "source": "tests",
    "source_file": "none",
    "caveats": "made for tests",
    "quality": "C",
    "bandwidth_direction": "unidirectional",
    "provenance": "measured",
}
GOOD_CSV = "direction,memory,nbytes,bandwidth_GBps\nh2d,pinned,1024,1.5\nh2d,pinned,2048,2.5\n"


@pytest.fixture
def toy(tmp_path):
    (tmp_path / "toy.csv").write_text(GOOD_CSV)
    (tmp_path / "toy.meta.json").write_text(json.dumps(GOOD_META))
    return tmp_path


def test_every_shipped_dataset_loads_with_provenance():
    names = reference.list_datasets()
    assert len(names) >= 10, f"only {len(names)} shipped datasets"
    for name in names:
        ds = reference.load(name)
        assert ds.meta["source"] and ds.meta["caveats"] and ds.meta["quality"] in "ABC"
        assert ds.meta["source_file"]
        assert len(ds.frame) > 0
        assert ds.label.startswith(("recorded:", "measured here:"))


def test_toy_loads(toy):
    ds = reference.load("toy", toy)
    assert ds.frame["nbytes"].tolist() == [1024, 2048]
    assert reference.list_datasets(toy) == ["toy"]
    assert reference.list_datasets(toy, kind="p2p_matrix") == []


def _corrupt_meta(toy, **changes):
    meta = {**GOOD_META, **changes}
    meta = {k: v for k, v in meta.items() if v is not ...}
    (toy / "toy.meta.json").write_text(json.dumps(meta))


@pytest.mark.parametrize(
    "changes,field",
    [
        ({"source": ...}, "source"),
        ({"quality": "Z"}, "quality"),
        ({"kind": "mystery"}, "kind"),
        ({"schema_version": 99}, "schema_version"),
        ({"bandwidth_direction": "both"}, "bandwidth_direction"),
        ({"name": "other"}, "name"),
    ],
)
def test_bad_metadata_names_file_and_field(toy, changes, field):
    _corrupt_meta(toy, **changes)
    with pytest.raises(DatasetError) as e:
        reference.load("toy", toy)
    assert "toy.meta.json" in str(e.value) and field in str(e.value)


@pytest.mark.parametrize(
    "csv,field",
    [
        ("direction,memory,nbytes\nh2d,pinned,1024\n", "bandwidth_GBps"),  # column missing
        ("direction,memory,nbytes,bandwidth_GBps\nh2d,pinned,1024,fast\n", "bandwidth_GBps"),  # not a number
        ("direction,memory,nbytes,bandwidth_GBps\nsideways,pinned,1024,1\n", "direction"),  # bad category
        ("direction,memory,nbytes,bandwidth_GBps\nh2d,pinned,,1\n", "nbytes"),  # empty required cell
        ("direction,memory,nbytes,bandwidth_GBps\nh2d,pinned,-5,1\n", "nbytes"),  # negative
        ("direction,memory,nbytes,bandwidth_GBps\n", "no rows"),  # truncated to the header
    ],
)
def test_bad_csv_names_file_and_field(toy, csv, field):
    (toy / "toy.csv").write_text(csv)
    with pytest.raises(DatasetError) as e:
        reference.load("toy", toy)
    assert "toy.csv" in str(e.value) and field in str(e.value)


def test_truncated_json_and_missing_files(toy):
    (toy / "toy.meta.json").write_text('{"schema_version": 1, "name": "to')
    with pytest.raises(DatasetError, match="not valid JSON"):
        reference.load("toy", toy)
    (toy / "toy.meta.json").write_text(json.dumps(GOOD_META))
    (toy / "toy.csv").unlink()
    with pytest.raises(DatasetError, match="toy.csv"):
        reference.load("toy", toy)


def test_unknown_name_lists_known_ones():
    with pytest.raises(DatasetError, match="labkit ref list"):
        reference.load("no_such_dataset")


NAMES = [
    "bandwidthtest_t4_aliyun_vm",
    "h100_vm_labkit_gpu_copy_sweep",
    "h100_vm_labkit_pin_cost",
    "nccl_allreduce_busbw_azure_ndh100v5",
    "nccl_expected_a100_nvlink_issue149_points",
    "nvbandwidth_sm_azure_ndh200v5_points",
    "p2p_2xrtx2080ti_pcie3_nop2p_autodl",
    "p2p_uni_writes_8xa100_nvswitch_mlengineering",
    "wrx90_rtxpro6000_p2p_host_dma_points",
]


def test_closest_offers_a_close_name_first():
    assert reference.closest("h100_vm_labkit_pin_cots", NAMES).startswith("did you mean: h100_vm_labkit_pin_cost")


def test_closest_offers_no_far_name_but_still_shows_what_there_is():
    # with difflib's cutoff at 0 'nvidia' was answered "did you mean: bandwidthtest_t4_aliyun_vm, ...?"
    far = reference.closest("nvidia", NAMES)
    assert "did you mean" not in far and far.startswith(f"none of the {len(NAMES)} names is close (e.g. ")
    # a fragment of many names: those that hold it, not ones that merely share letters
    part = reference.closest("h100", NAMES)
    assert "did you mean" not in part and part.startswith("3 name(s) contain 'h100': ")
    assert {n.strip(" .") for n in part.split(": ", 1)[1].split(",")} == {n for n in NAMES if "h100" in n}
    # a short list is named whole
    assert reference.closest("nvidia", schema.KINDS) == f"choose from: {', '.join(schema.KINDS)}"
    assert reference.closest("x", []) == "there are none"


def test_write_dataset_roundtrip_and_validation(tmp_path):
    frame = pd.DataFrame({"direction": ["host"], "memory": ["host"], "nbytes": [64], "bandwidth_GBps": [3.0]})
    meta = {k: v for k, v in GOOD_META.items() if k not in ("name", "schema_version")}
    reference.write_dataset(tmp_path, "mine", frame, meta)
    assert reference.load("mine", tmp_path).frame["nbytes"].tolist() == [64]
    with pytest.raises(DatasetError):
        reference.write_dataset(tmp_path, "broken", frame.drop(columns=["nbytes"]), meta)
    assert not (tmp_path / "broken.csv").exists()


def test_profile_from_newer_schema_is_refused(tmp_path, toy):
    (toy / "profile.json").write_text(json.dumps({"schema_version": 7}))
    with pytest.raises(DatasetError, match="newer labkit"):
        reference.resolve_reference(toy, "copy_sweep")


def test_resolve_reference_folder_puts_profile_first(toy):
    shutil.copy(toy / "toy.csv", toy / "toy.csv.bak")
    got = reference.resolve_reference(toy, "copy_sweep")
    assert got[0].name == "toy" and len(got) >= 1
    with pytest.raises(DatasetError):
        reference.resolve_reference(Path(toy) / "nowhere", "copy_sweep")


# ----------------------------------------------------------------- shipped profiles and import
def test_import_profile_renames_and_relabels_without_touching_numbers(tmp_path):
    from labkit.tools.record import record

    prof = record(tmp_path / "node7", quick=True, only=["copy"], progress=lambda *_: None)
    dest = tmp_path / "catalogue"
    names = reference.import_profile(prof, "node7", dest=dest, caveat="classroom machine")
    assert names == ["node7_host_copy_sweep"]
    new, old = reference.load(names[0], dest), reference.load("host_copy_sweep", prof)
    assert new.meta["provenance"] == "recorded" and old.meta["provenance"] == "measured"
    assert new.label.startswith("recorded:") and "node7" in new.meta["source"]
    assert new.meta["caveats"].endswith("classroom machine")
    assert new.meta["environment"] == old.meta["environment"]
    pd.testing.assert_frame_equal(new.frame, old.frame)
    with pytest.raises(FileExistsError, match="force"):
        reference.import_profile(prof, "node7", dest=dest)
    with pytest.raises(ValueError, match="prefix"):
        reference.import_profile(prof, "Node 7!", dest=dest)
    with pytest.raises(schema.DatasetError, match="profile"):
        reference.import_profile(dest, "x", dest=tmp_path / "other")


@pytest.mark.parametrize("name", reference.list_profiles())
def test_shipped_profiles_load_and_replay_by_name(name):
    folder = reference.profile_path(name)
    info = reference.check_profile(folder)
    assert info["environment"]["gpus"], "a shipped profile records its GPUs"
    for ds_name in (n for names in info["experiments"].values() for n in names):
        ds = reference.load(ds_name, folder)
        assert ds.meta["provenance"] == "measured" and ds.meta["environment"]["date"]
    got = reference.resolve_reference(name, "copy_sweep")  # reference="<profile name>" in a notebook
    assert got[0].path.parent == folder


def test_h100_profile_sweeps_4b_to_1gib_and_catalogue_copies_are_exact():
    folder = reference.profile_path("h100_pcie5_vm_20261123")
    sweep = reference.load("gpu_copy_sweep", folder).frame
    for direction in ("h2d", "d2h"):
        for memory in ("pinned", "pageable"):
            sizes = sweep[(sweep.direction == direction) & (sweep.memory == memory)].nbytes
            assert sizes.min() == 4 and sizes.max() == 2**30, (direction, memory)
    for name in ("gpu_copy_sweep", "gpu_overlap_run", "pin_cost", "dataloader_throughput", "nonblocking_pitfall"):
        shipped = reference.load(f"h100_vm_labkit_{name}")
        assert shipped.meta["provenance"] == "recorded" and "h100_pcie5_vm_20261123" in shipped.meta["source"]
        pd.testing.assert_frame_equal(shipped.frame, reference.load(name, folder).frame)


def test_select_falls_back_to_the_shipped_datasets_and_says_why():
    shipped = reference.names_of(reference.load_all(kind="allreduce_sweep"))
    # nothing asked for: the shipped datasets, no note
    got, note = reference.select(None, "allreduce_sweep")
    assert reference.names_of(got) == shipped and note is None
    # a dataset of the right kind: that one alone
    name = "nccl_allreduce_nvls_vs_ring_vs_gpu_count_8xh200_mlengineering"
    got, note = reference.select(name, "allreduce_sweep")
    assert reference.names_of(got) == [name] and note is None
    # ... unless the notebook cannot draw it (one size against GPU count: no size sweep)
    got, note = reference.select(
        name,
        "allreduce_sweep",
        usable=lambda sets: all(d.frame.nbytes.nunique() >= 4 for d in sets),
        needs="a sweep over four or more sizes",
    )
    assert reference.names_of(got) == shipped
    assert note == (
        f"`reference={name!r}` holds no `allreduce_sweep` data this part can draw (a sweep over four or "
        "more sizes), so the shipped `allreduce_sweep` datasets are shown."
    )
    # a dataset of another kind: the shipped ones of this kind, and the note names both kinds
    got, note = reference.select("h100_vm_labkit_gpu_overlap_run", "allreduce_sweep")
    assert reference.names_of(got) == shipped
    assert "is a dataset of kind `overlap_run`; this part shows `allreduce_sweep` data" in note
    # a profile folder is judged by its own datasets, not by the shipped ones that follow them: the H100
    # profile (one GPU) has a p2p_matrix of its own, but no pair of GPUs in it
    got, note = reference.select(
        "h100_pcie5_vm_20261123",
        "p2p_matrix",
        needs="two or more GPUs",
        usable=lambda own: any(d.frame.src.nunique() > 1 for d in own),
    )
    assert reference.names_of(got) == reference.names_of(reference.load_all(kind="p2p_matrix"))
    assert "holds no `p2p_matrix` data this part can draw (two or more GPUs)" in note
    got, note = reference.select("h100_pcie5_vm_20261123", "p2p_matrix")
    assert reference.names_of(got)[0] == "p2p_matrix" and len(got) > 1 and note is None
    # a name that is nothing at all is still an error, as with resolve_reference
    with pytest.raises(DatasetError, match="no dataset named"):
        reference.select("no_such_dataset", "allreduce_sweep")


def test_a_tool_log_given_as_reference_is_drawn_like_a_dataset():
    """nb01 given a bandwidthTest log as reference= used to stop on a ParserError: the printed-digits filter read the
    log's text as a CSV. The log's copy sweeps now pass through it like a shipped CSV's."""
    from pathlib import Path

    from labkit.copies import curves as lc

    log = (
        Path(__file__).resolve().parents[1]
        / "data"
        / "raw"
        / "bandwidthTest_shmoo_pinned__V100PCIe32GB__superbench_fixture.txt"
    )
    datasets, note = reference.select(str(log), "copy_sweep", usable=lc.has_fittable_curve, needs=lc.FITTABLE)
    assert datasets and datasets[0].meta.get("your_log") and note is None
    rows = reference.precise_rows(datasets[0])
    assert len(rows) > 0 and (rows["bandwidth_GBps"] > 0).all()
