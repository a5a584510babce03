"""The functions: each builds the meshplan command line for its arguments, runs it inside this
process (the Rust library, with the GIL released) and wraps the JSON it prints.

Arguments mirror the CLI's flags with underscores: ``seq_len=8192`` is ``--seq-len 8192``,
``sequence_parallel=False`` is ``--sequence-parallel=false``, ``recompute_modules=["mlp",
"moe_act"]`` is ``--recompute-modules mlp,moe_act``. ``None`` leaves a flag out.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Union

from . import _native
from ._results import Estimate, Record, SearchResult, Simulation, Validation

#: A model: a preset name, a model TOML or Hugging Face ``config.json`` path, or the dict that
#: ``transformers.AutoConfig.from_pretrained(...).to_dict()`` returns.
ModelInput = Union[str, "os.PathLike[str]", Mapping[str, Any]]

# The whole-run options of estimate, simulate and search (not a plan's: export leaves them out).
_WHOLE_RUN = {
    "train_tokens",
    "train_steps",
    "failure_rate",
    "checkpoint",
    "checkpoint_interval",
    "storage_write",
    "storage_read",
    "storage_per_node",
    "restart_time",
    "spare_nodes",
    "repair_time",
    "in_memory_checkpoints",
    "price_per_gpu_hour",
    "save_plan",
}

# Flags that take no value: present when True.
_SWITCHES = {"in_memory_checkpoints", "allow_over_capacity", "recipe"}


class MeshplanError(Exception):
    """meshplan could not finish (not an input problem): the message says why."""


class InputError(ValueError):
    """The input is wrong. ``problems`` lists every problem at once, each a dict with ``field``,
    ``value``, ``message`` and ``hint`` (the list the CLI prints)."""

    def __init__(self, message: str, problems: List[Dict[str, str]]) -> None:
        super().__init__(message)
        self.problems = problems


def _run(words: List[str], interruptible: bool = False) -> str:
    try:
        return _native.run(words, interruptible)
    except _native.NativeInputError as error:
        message, problems = error.args
        raise InputError(message.strip(), list(problems)) from None
    except _native.NativeError as error:
        raise MeshplanError(str(error.args[0]).strip()) from None


def _flag_words(options: Mapping[str, Any]) -> List[str]:
    words: List[str] = []
    for name, value in options.items():
        if value is None:
            continue
        flag = "--" + name.replace("_", "-")
        if name in _SWITCHES:
            if value:
                words.append(flag)
        elif isinstance(value, bool):
            words.append(f"{flag}={'true' if value else 'false'}")
        elif isinstance(value, (list, tuple)):
            words += [flag, ",".join(str(item) for item in value)]
        else:
            words += [flag, os.fspath(value) if isinstance(value, os.PathLike) else str(value)]
    return words


class _Call:
    """One command line and the temporary files it needs (a model dict, plan files), in a
    directory made only when a file is needed and removed when the call ends."""

    def __init__(self) -> None:
        self._directory: Optional[tempfile.TemporaryDirectory] = None

    @property
    def path(self) -> Path:
        if self._directory is None:
            self._directory = tempfile.TemporaryDirectory(prefix="meshplan-")
        return Path(self._directory.name)

    def __enter__(self) -> "_Call":
        return self

    def __exit__(self, *exc: object) -> None:
        if self._directory is not None:
            self._directory.cleanup()

    def model(self, model: Optional[ModelInput]) -> Optional[str]:
        """The ``--model`` value: a dict is written as ``NAME/config.json``."""
        if model is None or isinstance(model, (str, os.PathLike)):
            return None if model is None else os.fspath(model)
        name = str(model.get("_name_or_path") or model.get("model_type") or "model")
        name = name.rstrip("/").split("/")[-1] or "model"
        folder = self.path / name
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps(dict(model)), encoding="utf-8")
        return str(folder / "config.json")


def _command(command: str, call: _Call, model: Optional[ModelInput], options: Dict[str, Any]) -> List[str]:
    return [command, "--format", "json"] + _flag_words({"model": call.model(model), **options})


def estimate(model: Optional[ModelInput] = None, **options: Any) -> Estimate:
    """Prices one run: memory per GPU, step time, throughput (``meshplan estimate``).

    ``estimate()`` with no arguments prices the built-in example. Options are ``estimate``'s
    flags: ``gpu``, ``gpus``, ``seq_len``, ``global_batch``, ``micro_batch``, ``precision``,
    ``tp``, ``pp``, ``vp``, ``cp``, ``ep``, ``etp``, ``zero``, ``fsdp``, ``recompute``,
    ``schedule``, ``engine``, ``stack``, ``train_tokens``, ... Raises :class:`InputError`
    listing every problem of the input.
    """
    with _Call() as call:
        data = json.loads(_run(_command("estimate", call, model, options)))
        return Estimate(data, (model, dict(options)))


def simulate(model: Optional[ModelInput] = None, **options: Any) -> Simulation:
    """Simulates one step under the plan's pipeline schedule (``meshplan simulate``); with
    ``train_tokens`` also draws ``runs`` whole runs from ``seed``."""
    with _Call() as call:
        return Simulation(json.loads(_run(_command("simulate", call, model, options))))


def search(model: Optional[ModelInput] = None, *, report: bool = False, **options: Any) -> SearchResult:
    """Searches the plans of a model on a cluster for the fastest that fits (``meshplan
    search``): ``top``, ``engine``, ``max_tp``, ``max_pp``, ``max_cp``, ``memory_headroom``,
    ``max_gpus``, ``objective`` and the run's flags (any plan flag given is held fixed). With
    ``report=True`` the result also holds the HTML report (``--report``), which Jupyter shows.
    Releases the GIL while it runs; Ctrl-C interrupts it."""
    with _Call() as call:
        plan_file = call.path / "best.toml"
        words = _command("search", call, model, options) + ["--save-plan", str(plan_file)]
        report_file = call.path / "report.html"
        if report:
            words += ["--report", str(report_file)]
        data = json.loads(_run(words, interruptible=True))
        plan_toml = plan_file.read_text(encoding="utf-8") if plan_file.exists() else None
        report_html = report_file.read_text(encoding="utf-8") if report_file.exists() else None
        return SearchResult(data, plan_toml, report_html)


def export(
    plan: Union[Estimate, SearchResult, str, "os.PathLike[str]", None] = None,
    engine: str = "megatron",
    model: Optional[ModelInput] = None,
    **options: Any,
) -> str:
    """The plan as ``engine``'s launch configuration (``megatron``, ``torchtitan`` or
    ``deepspeed``): a search's best plan, an estimate's run, a plan file path, or the run given
    by ``model`` and ``options`` (``meshplan export``). Returns the configuration text."""
    with _Call() as call:
        words = ["export", "--to", engine]
        if isinstance(plan, SearchResult):
            if plan.plan_toml is None:
                raise InputError("the search found no plan to export", [])
            path = call.path / "plan.toml"
            path.write_text(plan.plan_toml, encoding="utf-8")
            words += ["--plan", str(path)]
        elif isinstance(plan, Estimate):
            # The estimate's own run, without the whole-run options export has no use for.
            model_given, given = plan._inputs
            run = {key: value for key, value in given.items() if key not in _WHOLE_RUN}
            words += _flag_words({"model": call.model(model_given), **run})
        elif plan is not None:
            words += ["--plan", os.fspath(plan)]
        words += _flag_words({"model": call.model(model), **options})
        return _run(words)


def validate(csv: Union[str, "os.PathLike[str]"]) -> Validation:
    """Predicts every row of a CSV of published runs (the calibration file's columns) and
    reports the accuracy, out of sample first (``meshplan validate``)."""
    words = ["validate", os.fspath(csv), "--format", "json"]
    return Validation(json.loads(_run(words, interruptible=True)))


def _presets() -> Dict[str, Any]:
    return json.loads(_run(["presets", "--format", "json"]))


def models() -> List[Record]:
    """Every built-in model preset: name, shape, parameter counts and source."""
    return [Record(model) for model in _presets()["models"]]


def gpus() -> List[Record]:
    """Every built-in GPU preset: peaks, memory, links, calibration and source."""
    return [Record(gpu) for gpu in _presets()["gpus"]]


def stacks() -> List[Record]:
    """Every built-in software stack (``--stack``) with its source."""
    return [Record(stack) for stack in _presets()["stacks"]]
