"""A recorder for tests: writes one dataset, then sleeps so the test can interrupt `record` midway."""

import os
import time

import pandas as pd

from labkit.provenance import measured_meta
from labkit.reference import write_dataset


def record(folder, quick, env):
    frame = pd.DataFrame({"direction": ["host"], "memory": ["host"], "nbytes": [64], "bandwidth_GBps": [1.0]})
    write_dataset(
        folder,
        "half_done",
        frame,
        measured_meta(env, kind="copy_sweep", title="test", method="test", bandwidth_direction="unidirectional"),
    )
    print("READY", flush=True)
    time.sleep(float(os.environ.get("SLOW_RECORDER_SLEEP", "60")))
    return ["half_done"]
