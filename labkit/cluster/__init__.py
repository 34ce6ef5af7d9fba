"""The cluster model: what NCCL would run for a collective across GPUs and nodes, and what it reaches.

One model (issue 24). Inputs are what a user knows — GPUs per node, GPU model or NVLink rate, NICs and
their speed, NVLS / SHARP — and inside it follows NCCL's own tuning model (src/graph/tuning.cc,
search.cc, topo.h at a named commit: `labkit.cluster.nccl`). Everything that shows a cluster number
(notebook 06, `labkit model`, `labkit explain`) calls it.

- `system_from_facts(...)`, `preset(name)`, `PRESETS` (`presets`): a node type and its fabric (`System`);
- `predict(system, nodes, nbytes, op=..., algorithm=None)`: NCCL's pick (or a forced algorithm) as a
  `Prediction` (nccl-tests algbw/busbw, bound, the forced ring beside it, notes, source);
- `validation()`: every multi-node dataset in data/ against the model, one row per run;
- `views`: notebook 06's tables and figures (healthy cluster, tensor-parallel placement, scaling widget).
"""

from .model import ALGORITHMS, OPS, Prediction, alternatives, cli_records, predict
from .nccl import NCCL_COMMIT, NCCL_VERSION
from .presets import PRESETS, preset
from .system import GPUS, System, given_rates, system_from_facts
from .validation import summary as validation_summary
from .validation import validation

__all__ = [
    "ALGORITHMS",
    "GPUS",
    "NCCL_COMMIT",
    "NCCL_VERSION",
    "OPS",
    "PRESETS",
    "Prediction",
    "System",
    "alternatives",
    "cli_records",
    "given_rates",
    "predict",
    "preset",
    "system_from_facts",
    "validation",
    "validation_summary",
]
