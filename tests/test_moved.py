"""Old import paths of the modules issue 14 moved keep working for one release, with a DeprecationWarning."""

import importlib

import pytest

from labkit import _moved

#: (old module, a name it had, the module that defines the name now)
OLD_NAMES = [
    ("labkit.transfer", "gpu_copy_sweep", "labkit.copies.sweeps"),
    ("labkit.latency_curve", "curves_from_dataset", "labkit.copies.curves"),
    ("labkit.pinned", "ratio_survey", "labkit.copies.pinned_vs_pageable"),
    ("labkit.pinned", "pinned_empty", "labkit.copies.pinned"),
    ("labkit.fidelity", "raw_copy", "labkit.copies.fidelity"),
    ("labkit.transfer_record", "record", "labkit.copies.bench_copy"),
    ("labkit.overlap", "draw_gantt", "labkit.overlap.figures"),
    ("labkit.overlap", "double_buffered", "labkit.overlap.streams"),
    ("labkit.p2p", "diagnose", "labkit.p2p.diagnosis"),
    ("labkit.p2p", "rank_tp_groups", "labkit.p2p.placement"),
    ("labkit.ring", "ring_allreduce_", "labkit.allreduce.ring"),
    ("labkit.ring_sim", "draw_ring_state", "labkit.allreduce.views"),
    ("labkit.collectives_bench", "run_allreduce_bench", "labkit.allreduce.measure"),
    ("labkit.hierarchy", "run_live", "labkit.hierarchy.comparison"),
    ("labkit.hierarchy", "torchrun_command", "labkit.hierarchy.torchrun"),
    ("labkit.ladder", "spec_rungs", "labkit.hierarchy.rungs"),
    ("labkit.cluster", "cliff", "labkit.hierarchy.cluster"),
    ("labkit.hierarchy_worker", "sendrecv_rank", "labkit.hierarchy.worker"),
]


@pytest.mark.parametrize("old,name,new", OLD_NAMES, ids=lambda x: str(x))
def test_an_old_path_warns_and_gives_the_same_object(old, name, new):
    module = importlib.import_module(old)
    with pytest.warns(DeprecationWarning, match=f"{old}.{name} moved to {new}.{name}"):
        got = getattr(module, name)
    assert got is getattr(importlib.import_module(new), name)


def test_every_moved_module_names_modules_that_exist():
    for old, new in _moved.MOVED.items():
        for target in new:
            importlib.import_module(target)
        with pytest.raises(AttributeError, match="moved to"):
            _ = importlib.import_module(old).no_such_name
