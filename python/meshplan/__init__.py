"""meshplan: plan and price distributed training runs before a GPU is booked.

The Rust library of the ``meshplan`` command line, in this process::

    import meshplan
    e = meshplan.estimate(model="llama3.1-70b", gpu="h100-sxm", gpus=64,
                          seq_len=8192, global_batch=128, tp=8, pp=4)
    e.step_time_s, e.mfu_pct, e.memory.breakdown_gib.activations
    best = meshplan.search(model="llama3.1-70b", gpu="h100-sxm", gpus=64,
                           seq_len=8192, global_batch=128)
    print(meshplan.export(best, engine="torchtitan"))

Every result is the JSON the CLI prints for the same inputs, with attributes and ``to_dict()``.
Bad input raises :class:`InputError` with every problem at once.
"""

from ._api import (
    InputError,
    MeshplanError,
    estimate,
    export,
    gpus,
    models,
    search,
    simulate,
    stacks,
    validate,
)
from ._native import __version__
from ._results import Estimate, Record, SearchResult, Simulation, Validation

__all__ = [
    "Estimate",
    "InputError",
    "MeshplanError",
    "Record",
    "SearchResult",
    "Simulation",
    "Validation",
    "__version__",
    "estimate",
    "export",
    "gpus",
    "models",
    "search",
    "simulate",
    "stacks",
    "validate",
]
