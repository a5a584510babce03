"""Result objects: each wraps one JSON object that the meshplan CLI prints for the same inputs.

Every object has attributes (the JSON keys; nested objects become result objects and lists of
objects become lists of them), ``to_dict()`` (a deep copy of the JSON), and a readable ``repr``.
"""

from __future__ import annotations

import copy
import html
from typing import Any, Dict, Iterator, List, Optional, Tuple


class Record:
    """A JSON object with attribute access: ``record.step_time_s`` reads ``"step_time_s"``."""

    __slots__ = ("_data",)

    def __init__(self, data: Dict[str, Any]) -> None:
        self._data = data

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            # Private names are never JSON keys (and an object copied without __init__ has no
            # _data yet: looking it up here must not recurse).
            raise AttributeError(name)
        try:
            value = self._data[name]
        except KeyError:
            raise AttributeError(
                f"{type(self).__name__} has no attribute {name!r}; it has: {', '.join(self._data)}"
            ) from None
        return _wrap(value)

    def __getitem__(self, key: str) -> Any:
        return _wrap(self._data[key])

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __dir__(self) -> List[str]:
        return sorted(set(super().__dir__()) | set(self._data))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Record) and self._data == other._data

    def __repr__(self) -> str:
        shown = ", ".join(
            f"{key}={value!r}" for key, value in self._data.items() if not isinstance(value, (dict, list))
        )
        return f"{type(self).__name__}({shown})"

    def to_dict(self) -> Dict[str, Any]:
        """The JSON object, as the CLI prints it (a deep copy)."""
        return copy.deepcopy(self._data)


def _wrap(value: Any) -> Any:
    if isinstance(value, dict):
        return Record(value)
    if isinstance(value, list):
        return [_wrap(item) for item in value]
    return value


def _table(rows: List[tuple]) -> str:
    cells = "".join(
        f"<tr><th style='text-align:left'>{html.escape(str(name))}</th>"
        f"<td style='text-align:right'>{html.escape(str(value))}</td></tr>"
        for name, value in rows
    )
    return f"<table>{cells}</table>"


class Estimate(Record):
    """One priced run (``meshplan estimate --format json``).

    Attributes: ``run`` (model, GPU, counts and the plan), ``memory`` (the peak stage's
    ``breakdown_gib``, ``total_gib``, ``capacity_gib``, ``fits``, every stage and, with offload,
    ``host``), ``time``
    (``source``, ``step_time_s``, ``breakdown_s``), ``throughput`` (``tokens_per_sec_per_gpu``,
    ``model_tflops_per_gpu``, ``mfu_pct``, ``hfu_pct``), ``error_band`` (the 80 % band, or None),
    ``fit_suggestions`` and, with a token budget, ``whole_run``.
    """

    __slots__ = ("_inputs",)

    def __init__(self, data: Dict[str, Any], inputs: Tuple[Any, Dict[str, Any]]) -> None:
        super().__init__(data)
        self._inputs = inputs

    @property
    def step_time_s(self) -> float:
        """Seconds per optimizer step."""
        return self._data["time"]["step_time_s"]

    @property
    def tokens_per_sec_per_gpu(self) -> float:
        """Training tokens per second per GPU."""
        return self._data["throughput"]["tokens_per_sec_per_gpu"]

    @property
    def mfu_pct(self) -> float:
        """Model FLOPs utilisation, percent of the dense peak of the plan's GEMM precision."""
        return self._data["throughput"]["mfu_pct"]

    @property
    def peak_memory_gib(self) -> float:
        """The peak stage's memory, GiB."""
        return self._data["memory"]["total_gib"]

    @property
    def fits(self) -> bool:
        """Whether the plan fits: the peak stage in the GPU's memory, any offloaded activations in
        the host memory each GPU of the server has."""
        return self._data["memory"]["fits"]

    def _repr_html_(self) -> str:
        run = self._data["run"]
        return _table(
            [
                ("model", run["model_display_name"]),
                ("GPUs", f"{run['num_gpus']} x {run['gpu_display_name']}"),
                ("step time (s)", f"{self.step_time_s:.3f}"),
                ("tokens/s/GPU", f"{self.tokens_per_sec_per_gpu:,.0f}"),
                ("MFU (%)", f"{self.mfu_pct:.1f}"),
                ("peak memory (GiB)", f"{self.peak_memory_gib:.1f}"),
                ("fits", self.fits),
            ]
        )


class Simulation(Record):
    """One simulated step under the plan's pipeline schedule (``meshplan simulate --format
    json``): ``schedule``, ``microbatches``, ``step_time_s``, ``breakdown_s``, ``stages`` and,
    with a token budget, the drawn whole runs."""

    @property
    def step_time_s(self) -> float:
        """Seconds per optimizer step, simulated."""
        return self._data["step_time_s"]


class SearchResult(Record):
    """A plan search (``meshplan search --format json``): ``plans`` (the best first, each with
    ``rank``, ``description``, ``plan``, ``step_time_s``, ``tokens_per_sec_per_gpu``,
    ``mfu_pct``, ``peak_memory_gib``), the candidates ``considered``, ``priced`` and
    ``simulated``, and ``rejected`` (every reason with its count and an example)."""

    __slots__ = ("_plan_toml", "_report_html")

    def __init__(self, data: Dict[str, Any], plan_toml: Optional[str], report_html: Optional[str]) -> None:
        super().__init__(data)
        self._plan_toml = plan_toml
        self._report_html = report_html

    @property
    def best(self) -> Optional[Record]:
        """The best plan, or None when no plan fits."""
        plans = self._data["plans"]
        return Record(plans[0]) if plans else None

    @property
    def plan_toml(self) -> Optional[str]:
        """The best plan as a plan file (what ``--save-plan`` writes), for ``export``."""
        return self._plan_toml

    def to_pandas(self) -> Any:
        """The plans as a pandas DataFrame, one row per plan (the plan's fields flattened);
        needs pandas."""
        try:
            import pandas
        except ImportError as error:  # pragma: no cover - exercised without pandas only
            raise ImportError("to_pandas() needs pandas: pip install pandas") from error
        rows = []
        for plan in self._data["plans"]:
            row = {key: value for key, value in plan.items() if key not in ("plan", "equivalents")}
            row.update({f"plan.{key}": value for key, value in plan["plan"].items()})
            rows.append(row)
        return pandas.DataFrame(rows)

    def _repr_html_(self) -> str:
        if self._report_html is not None:
            return self._report_html
        return _table([(plan["rank"], plan["description"]) for plan in self._data["plans"]])


class Validation(Record):
    """The accuracy of meshplan on a CSV of published runs (``meshplan validate --format
    json``): ``accuracy`` (out-of-sample and in-sample errors, rank agreement, band coverage),
    ``summary``, ``by_source``, ``by_gpu``, ``by_kind``, ``rows`` and ``over_capacity``."""
