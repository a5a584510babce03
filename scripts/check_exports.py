"""Exported configs checked by the real engines (issue #6); run by scripts/check-exports.sh.

Owns the table of plans below (CASES) and what each engine's check asserts. For every case it
runs `meshplan export`, then loads the file with the engine's own code:

- torchtitan: `ConfigManager().parse_args(["--job.config_file", PATH])` (unknown keys are errors,
  tyro's type warnings count as rejections), `ParallelDims` (degrees against the world size),
  torch's `get_schedule_class` and torchtitan's `generate_llm_fqn_per_model_part` (the stages
  and the layers each holds), plus the config-only preconditions of torchtitan's trainer, model
  parallelization and quantization converters, transcribed from torchtitan 0.2.2 and labelled
  "mirror" where they run (those code paths need GPUs and a process group).
- DeepSpeed: `DeepSpeedConfig(PATH, mpu=...)` with the data-parallel size of the plan (its own
  batch assertion, its pydantic sections that forbid unknown keys); every top-level key must be
  one DeepSpeedConfig reads, and the sub-keys of sections it reads loosely must be its own.
- Megatron-LM: the real `megatron.training.arguments` parser when the installed package has it;
  otherwise each flag is checked against reference/formats-and-hardware.md section 2 (name,
  value choices, arity) and the values go through megatron-core's own config validation
  (TransformerConfig, DistributedDataParallelConfig, ConstantNumMicroBatchesCalculator). The
  header says which check ran.

Then the parsed values are compared with what meshplan was asked for (degrees, batch split,
schedule and stages, sharding, recompute, precision). Any rejection or mismatch fails the case;
the last line is "engines: N passed, N failed, N skipped" and the exit code is 1 on any failure.
Skips are printed with their reason (MoE cases until `meshplan export` accepts --ep).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib.metadata
import io
import json
import logging
import math
import os
import re
import shlex
import socket
import subprocess
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT.parent / "shared" / "reference" / "formats-and-hardware.md"


# ---------------------------------------------------------------------------------------------
# The plans. One row per export; `plan` holds meshplan's flags (underscores for dashes). Every
# parallel degree and the sharding are given explicitly so that no meshplan default decides
# what is checked. Add a row to check another shape; MoE rows carry `ep`.
# ---------------------------------------------------------------------------------------------

CASES = [
    # torchtitan: FSDP2, HSDP, tp+pp, interleaved pp, cp, float8 and MXFP8.
    dict(name="tt-fsdp", engine="torchtitan", model="llama3.1-8b", gpus=8,
         plan=dict(fsdp=True, recompute="op", global_batch=32)),
    dict(name="tt-hsdp-tp", engine="torchtitan", model="llama3.1-70b", gpus=256,
         plan=dict(tp=8, fsdp=True, hybrid_shard=8, recompute="full", global_batch=256)),
    dict(name="tt-tp-pp", engine="torchtitan", model="llama3.1-70b", gpus=64,
         plan=dict(tp=8, pp=4, fsdp=True, recompute="full", global_batch=128)),
    dict(name="tt-interleaved-fp8", engine="torchtitan", model="llama3.1-405b", gpus=512,
         plan=dict(tp=8, pp=8, vp=4, fsdp=True, pipeline_split="embedding-and-loss",
                   precision="fp8-current", recompute="full", tp_comm_overlap=True,
                   global_batch=256)),
    dict(name="tt-gpipe", engine="torchtitan", model="llama3.1-8b", gpus=16,
         plan=dict(tp=2, pp=4, fsdp=True, schedule="gpipe", global_batch=32)),
    dict(name="tt-cp", engine="torchtitan", model="llama3.1-8b", gpus=64,
         plan=dict(cp=8, fsdp=True, seq_len=131072, recompute="full", global_batch=8)),
    dict(name="tt-mxfp8", engine="torchtitan", model="llama3.1-70b", gpu="b200", gpus=64,
         plan=dict(tp=4, fsdp=True, precision="mxfp8", global_batch=128)),
    dict(name="tt-ddp", engine="torchtitan", model="llama3.1-8b", gpus=8,
         plan=dict(zero=0, global_batch=64)),
    # Plans the engine's code refuses: meshplan must refuse them too, naming the reason.
    dict(name="tt-bf16-reduce", engine="torchtitan", model="llama3.1-8b", gpus=8,
         plan=dict(fsdp=True, grad_reduce_in_fp32=False, global_batch=32),
         refused="reduces gradients in float32 only"),
    dict(name="tt-ddp-tp-pp", engine="torchtitan", model="llama3.1-8b", gpus=16,
         plan=dict(tp=2, pp=4, zero=0, global_batch=32),
         refused="DDP (no FSDP) runs only when data parallelism is the only parallelism"),
    # DeepSpeed: ZeRO-1/2/3, ZeRO++ hierarchical partitioning, AutoTP + pipeline, fp16.
    dict(name="ds-zero3", engine="deepspeed", model="llama3.1-8b", gpus=8,
         plan=dict(zero=3, global_batch=64)),
    dict(name="ds-zero3-hpz", engine="deepspeed", model="llama3.1-70b", gpus=128,
         plan=dict(fsdp=True, hybrid_shard=8, recompute="full", global_batch=128)),
    dict(name="ds-zero2-fp16", engine="deepspeed", model="mpt-1b", gpu="v100-sxm2", gpus=8,
         plan=dict(zero=2, precision="fp16", micro_batch=2, seq_len=2048, global_batch=64)),
    dict(name="ds-zero1-tp-pp", engine="deepspeed", model="llama3.1-8b", gpus=16,
         plan=dict(tp=4, pp=2, zero=1, recompute="full", sequence_parallel=False,
                   global_batch=32)),
    # Ulysses context parallelism (Arctic Long Sequence Training) beside ZeRO-3.
    dict(name="ds-ulysses", engine="deepspeed", model="llama3.1-8b", gpus=16,
         plan=dict(cp=2, cp_comm="all-to-all", zero=3, global_batch=32)),
    # AutoTP all-reduces each tensor-parallel output (module_inject/layers.py): no sequence
    # parallelism.
    dict(name="ds-autotp-sp", engine="deepspeed", model="llama3.1-8b", gpus=16,
         plan=dict(tp=4, zero=1, sequence_parallel=True, global_batch=32),
         refused="no sequence parallelism"),
    # Megatron-LM: tp+pp, interleaved (vp), cp with tp-comm overlap, Megatron-FSDP, recompute.
    dict(name="mg-tp-pp", engine="megatron", model="gpt3-175b", gpu="a100-80gb", gpus=1024,
         plan=dict(tp=8, pp=16, zero=1, recompute="selective", seq_len=2048,
                   global_batch=1536)),
    dict(name="mg-interleaved-fp8", engine="megatron", model="llama3.1-70b", gpus=64,
         plan=dict(tp=8, pp=4, vp=5, zero=1, precision="fp8-delayed", global_batch=128)),
    dict(name="mg-cp", engine="megatron", model="llama3.1-405b", gpus=1024,
         plan=dict(tp=8, pp=8, vp=8, cp=2, zero=1, pipeline_split="embedding-and-loss",
                   tp_comm_overlap=True, precision="fp8-blockwise", global_batch=512)),
    dict(name="mg-fsdp", engine="megatron", model="llama3.1-8b", gpus=8,
         plan=dict(fsdp=True, global_batch=64)),
    dict(name="mg-recompute-full", engine="megatron", model="nemotron4-15b", gpus=64,
         plan=dict(tp=4, pp=2, zero=0, recompute="full", recompute_num_layers=8, seq_len=4096,
                   global_batch=256)),
    # Mixture of experts with expert parallelism: run once `meshplan export` accepts --ep.
    dict(name="tt-moe-ep", engine="torchtitan", model="qwen3-30b-a3b", gpus=64,
         plan=dict(fsdp=True, ep=8, global_batch=128)),
    dict(name="ds-moe-ep", engine="deepspeed", model="mixtral-8x7b", gpus=32,
         plan=dict(zero=2, ep=8, global_batch=128)),
    dict(name="mg-moe-ep", engine="megatron", model="mixtral-8x7b", gpus=64,
         plan=dict(tp=2, pp=4, ep=8, zero=1, global_batch=256)),
    dict(name="mg-moe-mla-layout", engine="megatron", model="deepseek-v3", gpu="h800", gpus=2048,
         plan=dict(pp=16, ep=64, zero=1, pipeline_split="balanced", seq_len=4096,
                   global_batch=4096)),
    # Context-parallel exchanges beyond the ring, and DeepEP's deduplicated expert dispatch.
    dict(name="mg-cp-ulysses", engine="megatron", model="llama3.1-70b", gpus=64,
         plan=dict(tp=2, cp=4, zero=1, cp_comm="all-to-all", seq_len=32768, global_batch=32)),
    # Transformer Engine's a2a needs each TP rank's key/value heads (8 / tp 4 = 2) to divide by
    # cp (context_parallel.py, AttnFuncWithCPAndQKVOA2A).
    dict(name="mg-cp-ulysses-kv", engine="megatron", model="llama3.1-70b", gpus=64,
         plan=dict(tp=4, cp=4, zero=1, cp_comm="all-to-all", seq_len=32768, global_batch=32),
         refused="needs them to divide"),
    dict(name="mg-cp-hierarchical", engine="megatron", model="llama3.1-70b", gpus=64,
         plan=dict(tp=2, cp=8, zero=1, cp_comm="hierarchical", seq_len=65536, global_batch=16)),
    dict(name="mg-moe-deepep", engine="megatron", model="qwen3-235b-a22b", gpus=256,
         plan=dict(pp=8, vp=2, ep=32, zero=1, expert_dispatch="deduplicated",
                   pipeline_split="balanced", seq_len=4096, global_batch=1024)),
    dict(name="tt-moe-deepep", engine="torchtitan", model="qwen3-30b-a3b", gpus=64,
         plan=dict(fsdp=True, ep=16, expert_dispatch="deduplicated", global_batch=128)),
]

EXTENSION = {"torchtitan": "toml", "deepspeed": "json", "megatron": "args"}


@dataclasses.dataclass
class Plan:
    """What meshplan is asked for, with meshplan's documented defaults for what a row omits."""

    gpus: int
    tp: int = 1
    pp: int = 1
    vp: int = 1
    cp: int = 1
    ep: int = 1
    zero: int = 1
    fsdp: bool = False
    hybrid_shard: int | None = None
    micro_batch: int = 1
    global_batch: int = 128
    seq_len: int = 8192
    precision: str = "bf16"
    recompute: str = "none"
    recompute_num_layers: int | None = None
    schedule: str | None = None
    pipeline_split: str = "even"
    tp_comm_overlap: bool = False
    sequence_parallel: bool | None = None
    grad_reduce_in_fp32: bool = True
    cp_comm: str = "ring"
    expert_dispatch: str = "all-to-all"

    def __post_init__(self):
        if self.schedule is None:
            self.schedule = "interleaved" if self.vp > 1 else "1f1b"

    @property
    def dp(self) -> int:
        return self.gpus // (self.tp * self.pp * self.cp)

    @property
    def zero_stage(self) -> int:
        return 3 if self.fsdp else self.zero

    @property
    def shard_group(self) -> int:
        return self.hybrid_shard or self.dp

    @property
    def microbatches(self) -> int:
        """Micro-batches per data-parallel rank and step."""
        return self.global_batch // (self.micro_batch * self.dp)

    def flags(self) -> list[str]:
        out = ["--tp", str(self.tp), "--pp", str(self.pp), "--vp", str(self.vp),
               "--cp", str(self.cp), "--micro-batch", str(self.micro_batch),
               "--global-batch", str(self.global_batch), "--seq-len", str(self.seq_len),
               "--precision", self.precision, "--recompute", self.recompute,
               "--schedule", self.schedule, "--pipeline-split", self.pipeline_split,
               "--tp-comm-overlap", str(self.tp_comm_overlap).lower(),
               "--grad-reduce-in-fp32", str(self.grad_reduce_in_fp32).lower()]
        out += ["--fsdp"] if self.fsdp else ["--zero", str(self.zero)]
        if self.sequence_parallel is not None:
            out += ["--sequence-parallel", str(self.sequence_parallel).lower()]
        if self.hybrid_shard:
            out += ["--hybrid-shard", str(self.hybrid_shard)]
        if self.recompute_num_layers is not None:
            out += ["--recompute-num-layers", str(self.recompute_num_layers)]
        if self.ep > 1:
            out += ["--ep", str(self.ep), "--expert-dispatch", self.expert_dispatch]
        if self.cp > 1:
            out += ["--cp-comm", self.cp_comm]
        return out

    def stage_layers(self, num_layers: int) -> list[int]:
        """Layers of each of the pp x vp model chunks, first to last, as meshplan splits them."""
        chunks = self.pp * self.vp
        if self.pipeline_split == "embedding-and-loss":
            units = (num_layers + 2) // chunks
            return [units - 1] + [units] * (chunks - 2) + [units - 1]
        return [num_layers // chunks] * chunks

    def rank_layers(self, num_layers: int) -> list[int]:
        """Layers each pipeline rank holds over its vp chunks (chunk i runs on rank i % pp)."""
        chunks = self.stage_layers(num_layers)
        return [sum(chunks[rank::self.pp]) for rank in range(self.pp)]


class Rejected(Exception):
    """The engine (or a check transcribed from it) refused the exported file."""


class Done(Exception):
    """The case needs no engine check (an expected refusal)."""


class Checks:
    """Collects the problems of one case; `expect` compares a parsed value with the intent."""

    def __init__(self):
        self.problems: list[str] = []
        self.notes: list[str] = []

    def expect(self, what: str, parsed, intended):
        if parsed != intended:
            self.problems.append(f"{what}: parsed {parsed!r}, meshplan intended {intended!r}")

    def reject(self, message: str):
        self.problems.append(message)


# ---------------------------------------------------------------------------------------------
# meshplan
# ---------------------------------------------------------------------------------------------

def model_shapes(meshplan: str) -> dict[str, dict[str, int]]:
    """Layers, hidden, ffn, heads/kv and vocab of every preset, from `meshplan presets`."""
    text = subprocess.run([meshplan, "presets"], check=True, capture_output=True,
                          text=True).stdout
    shapes, header = {}, None
    for line in text.splitlines():
        if not line.startswith("|") or set(line) <= set("|-"):
            if header and not line.startswith("|"):
                break
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if header is None:
            header = cells
            continue
        row = dict(zip(header, cells))
        heads, kv = row["heads/kv"].split("/")
        shapes[row["model"]] = dict(layers=int(row["layers"]), hidden=int(row["hidden"]),
                                    ffn=int(row["ffn"]), heads=int(heads), kv=int(kv),
                                    vocab=int(row["vocab"]))
        # MoE presets (once meshplan has them) list "experts/top-k"; dense rows show "-".
        experts = row.get("experts/top-k", "-")
        if "/" in experts:
            count, top_k = experts.split("/")
            shapes[row["model"]].update(experts=int(count), top_k=int(top_k))
    return shapes


def export_argv(meshplan: str, case: dict, plan: Plan, path: Path) -> list[str]:
    # The table checks what the engines' parsers accept, not whether a plan fits: some plans
    # are chosen for their options and exceed the GPU's memory, which export refuses by default.
    return [meshplan, "export", "--to", case["engine"], "--model", case["model"],
            "--gpu", case.get("gpu", "h100-sxm"), "--gpus", str(plan.gpus), *plan.flags(),
            "--allow-over-capacity", "--output", str(path)]


def expect_refusal(meshplan: str, case: dict, plan: Plan, out: Path, checks: Checks):
    path = out / f"{case['name']}.refused"
    argv = export_argv(meshplan, case, plan, path)
    print(f"  $ {shlex.join(argv[1:])}")
    result = subprocess.run(argv, capture_output=True, text=True)
    if result.returncode != 2 or case["refused"] not in result.stderr:
        checks.reject(f"meshplan should refuse this plan (exit 2, naming "
                      f"{case['refused']!r}); it exited {result.returncode}: "
                      f"{result.stderr.strip() or 'no message'}")
    else:
        checks.notes.append(f"refused as expected: {case['refused']}")


def export(meshplan: str, case: dict, plan: Plan, out: Path) -> Path:
    path = out / f"{case['name']}.{EXTENSION[case['engine']]}"
    argv = export_argv(meshplan, case, plan, path)
    print(f"  $ {shlex.join(argv[1:])}")
    result = subprocess.run(argv, capture_output=True, text=True)
    if result.returncode != 0:
        raise Rejected(f"meshplan refused the export (exit {result.returncode}): "
                       f"{result.stderr.strip()}")
    return path


# ---------------------------------------------------------------------------------------------
# torchtitan
# ---------------------------------------------------------------------------------------------

TORCHTITAN_SCHEDULES = {"1f1b": "Schedule1F1B", "interleaved": "ScheduleInterleaved1F1B",
                        "gpipe": "ScheduleGPipe"}


def check_torchtitan(path: Path, plan: Plan, shape: dict, checks: Checks):
    from torch.distributed.pipelining.schedules import (PipelineScheduleSingle,
                                                        get_schedule_class)
    from torchtitan.config import ConfigManager
    from torchtitan.distributed import ParallelDims
    from torchtitan.distributed.pipeline_parallel import generate_llm_fqn_per_model_part
    from torchtitan.protocols.model_converter import _registry_model_converter_cls

    # The parser: unknown sections or keys raise; tyro warns when a value is not of the
    # field's type (e.g. outside a Literal), which counts as a rejection here.
    records = []
    handler = _ListHandler(records)
    logging.getLogger().addHandler(handler)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                cfg = ConfigManager().parse_args(["--job.config_file", str(path)])
            except (ValueError, TypeError, SystemExit) as error:
                raise Rejected(f"torchtitan ConfigManager rejected it: {error}") from None
    finally:
        logging.getLogger().removeHandler(handler)
    for w in caught:
        if "/tyro/" in w.filename or "/torchtitan/" in w.filename:
            checks.reject(f"torchtitan's parser (tyro) warned: {w.message}")
    for message in sorted(set(records) - _LOGGED):
        _LOGGED.add(message)
        checks.notes.append(f"torchtitan log (shown once): {message}")

    par, train = cfg.parallelism, cfg.training
    checks.expect("parallelism.tensor_parallel_degree", par.tensor_parallel_degree, plan.tp)
    checks.expect("parallelism.pipeline_parallel_degree", par.pipeline_parallel_degree, plan.pp)
    checks.expect("parallelism.context_parallel_degree", par.context_parallel_degree, plan.cp)
    checks.expect("parallelism.expert_parallel_degree", par.expert_parallel_degree, plan.ep)
    if plan.fsdp:
        checks.expect("parallelism.data_parallel_shard_degree", par.data_parallel_shard_degree,
                      plan.shard_group)
        checks.expect("parallelism.data_parallel_replicate_degree",
                      par.data_parallel_replicate_degree, plan.dp // plan.shard_group)
        checks.expect("parallelism.fsdp_reshard_after_forward", par.fsdp_reshard_after_forward,
                      "always" if plan.pp == 1 else "never")
    else:
        checks.expect("parallelism.data_parallel_shard_degree", par.data_parallel_shard_degree, 1)
        checks.expect("parallelism.data_parallel_replicate_degree",
                      par.data_parallel_replicate_degree, plan.dp)

    # torchtitan's own degree check against the world size.
    try:
        dims = ParallelDims(dp_replicate=par.data_parallel_replicate_degree,
                            dp_shard=par.data_parallel_shard_degree, cp=par.context_parallel_degree,
                            tp=par.tensor_parallel_degree, pp=par.pipeline_parallel_degree,
                            ep=par.expert_parallel_degree, etp=par.expert_tensor_parallel_degree,
                            world_size=plan.gpus)
    except AssertionError as error:
        raise Rejected(f"torchtitan ParallelDims rejected the degrees: {error}") from None
    checks.expect("data-parallel degree (ParallelDims dp_replicate x dp_shard)",
                  dims.dp_replicate * dims.dp_shard, plan.dp)
    # ParallelDims.build_mesh: experts take ep x etp of the dp_shard x cp x tp ranks (mirror).
    if dims.ep > 1 and (dims.dp_shard * dims.cp * dims.tp) % (dims.etp * dims.ep) != 0:
        checks.reject(f"mirror of ParallelDims.build_mesh: ep {dims.ep} x etp {dims.etp} does not "
                      f"divide dp_shard x cp x tp = {dims.dp_shard * dims.cp * dims.tp}")

    # Batch: Trainer.__init__ (train.py) and build_pipeline_schedule (mirror, torchtitan 0.2.2).
    checks.expect("training.global_batch_size", train.global_batch_size, plan.global_batch)
    checks.expect("training.seq_len", train.seq_len, plan.seq_len)
    batch_degree = dims.dp_replicate * dims.dp_shard
    if train.global_batch_size % (train.local_batch_size * batch_degree) != 0:
        checks.reject("mirror of Trainer.__init__: global batch is not a multiple of local batch "
                      "x data-parallel degree")
    accumulation = train.global_batch_size // (train.local_batch_size * batch_degree)
    if plan.pp > 1:
        if train.local_batch_size % par.pipeline_parallel_microbatch_size != 0:
            checks.reject("mirror of build_pipeline_schedule: local batch is not divisible by "
                          "pipeline_parallel_microbatch_size")
        per_microbatch = par.pipeline_parallel_microbatch_size
        pipeline_microbatches = train.local_batch_size // per_microbatch
    else:
        per_microbatch, pipeline_microbatches = train.local_batch_size, 1
    checks.expect("sequences per micro-batch", per_microbatch, plan.micro_batch)
    checks.expect("micro-batches per rank and step (accumulation x pipeline micro-batches)",
                  accumulation * pipeline_microbatches, plan.microbatches)
    # parallelize_llama: seq_len divisible by tp x 2cp (mirror).
    if train.seq_len % dims.seq_len_divisor != 0:
        checks.reject(f"mirror of parallelize_llama: seq_len {train.seq_len} is not divisible by "
                      f"tp x 2 x cp = {dims.seq_len_divisor}")
    # parallelize_llama: plain DDP only when data parallelism is the only parallelism (mirror).
    if not dims.fsdp_enabled and dims.dp_replicate_enabled and dims.dp_replicate != plan.gpus:
        checks.reject("mirror of parallelize_llama: \"DDP has not supported > 1D parallelism\" "
                      f"(data_parallel_replicate_degree {dims.dp_replicate} without FSDP on "
                      f"{plan.gpus} GPUs)")

    # Pipeline: the schedule class and the stages it builds (pipeline_llm, mirror of its stage
    # count; generate_llm_fqn_per_model_part is torchtitan's own).
    if plan.pp > 1:
        try:
            schedule = get_schedule_class(par.pipeline_parallel_schedule)
        except ValueError as error:
            raise Rejected(f"torch rejected pipeline_parallel_schedule: {error}") from None
        checks.expect("pipeline schedule class", schedule.__name__,
                      TORCHTITAN_SCHEDULES.get(plan.schedule, plan.schedule))
        single = issubclass(schedule, PipelineScheduleSingle)
        first = par.pipeline_parallel_first_stage_less_layers
        last = par.pipeline_parallel_last_stage_less_layers
        layers = shape["layers"]
        per_stage = par.pipeline_parallel_layers_per_stage
        if per_stage is not None:
            stages = math.ceil((layers + first + last) / per_stage)
        else:
            stages = plan.pp * (1 if single else 2)
        if stages % plan.pp != 0:
            checks.reject(f"mirror of pipeline_llm: {stages} stages do not divide over "
                          f"pp {plan.pp}")
        elif single and stages != plan.pp:
            checks.reject(f"mirror of pipeline_llm: single-stage schedule with {stages // plan.pp} "
                          "stages per rank")
        elif not single and stages // plan.pp < 2:
            checks.reject("mirror of pipeline_llm: multi-stage schedule with one stage per rank")
        checks.expect("stages per pipeline rank", stages // plan.pp, plan.vp)
        try:
            parts = generate_llm_fqn_per_model_part(stages, layers, first, last)
        except ValueError as error:
            raise Rejected(f"torchtitan generate_llm_fqn_per_model_part: {error}") from None
        held = [sum(1 for m in part if m.startswith("layers.")) for part in parts]
        order = [m for part in parts for m in part if m.startswith("layers.")]
        if order != [f"layers.{i}" for i in range(layers)]:
            checks.reject("torchtitan's stages do not hold every layer once, in order")
        checks.expect("layers per stage (torchtitan split)", held, plan.stage_layers(layers))

    # Activation checkpointing: meshplan's per-op recompute is torchtitan's selective mode with
    # per-op SAC.
    ac = cfg.activation_checkpoint
    mode = "selective" if plan.recompute == "op" else plan.recompute
    checks.expect("activation_checkpoint.mode", ac.mode, mode)
    if plan.recompute == "op":
        checks.expect("activation_checkpoint.selective_ac_option", ac.selective_ac_option, "op")

    # Mixed precision, async TP and the quantization converters.
    checks.expect("training.mixed_precision_param", train.mixed_precision_param, "bfloat16")
    checks.expect("training.mixed_precision_reduce", train.mixed_precision_reduce,
                  "float32" if plan.grad_reduce_in_fp32 else "bfloat16")
    checks.expect("parallelism.enable_async_tensor_parallel", par.enable_async_tensor_parallel,
                  plan.tp_comm_overlap and plan.tp > 1)
    model_compiled = cfg.compile.enable and "model" in cfg.compile.components
    if par.enable_async_tensor_parallel and not model_compiled:
        checks.reject("mirror of maybe_enable_async_tp: async TP needs compile.enable and "
                      "\"model\" in compile.components")
    converters = list(cfg.model.converters)
    for name in converters:
        if name not in _registry_model_converter_cls:
            checks.reject(f"model.converters: {name!r} is not a registered torchtitan converter")
    intended = {"bf16": [], "fp8-current": ["quantize.linear.float8"],
                "mxfp8": ["quantize.linear.mx"]}[plan.precision]
    checks.expect("model.converters", converters, intended)
    if "quantize.linear.float8" in converters:
        f8 = cfg.quantize.linear.float8
        if f8.recipe_name not in (None, "tensorwise"):
            checks.reject(f"quantize.linear.float8.recipe_name {f8.recipe_name!r} is not "
                          "tensorwise scaling")
        if f8.recipe_name is not None and f8.enable_fsdp_float8_all_gather:
            checks.reject("mirror of Float8LinearConverter.__init__: enable_fsdp_float8_all_gather "
                          "together with recipe_name is not supported")
        checks.expect("quantize.linear.float8.enable_fsdp_float8_all_gather",
                      f8.enable_fsdp_float8_all_gather, plan.fsdp)
    if "quantize.linear.mx" in converters:
        checks.expect("quantize.linear.mx.recipe_name", cfg.quantize.linear.mx.recipe_name,
                      "mxfp8_cublas")
        if model_compiled and par.tensor_parallel_degree > 1:
            checks.reject("mirror of MXLinearConverter.__init__: TP not yet supported with "
                          "torch.compile for mxfp8")


_LOGGED: set[str] = set()


class _ListHandler(logging.Handler):
    def __init__(self, records):
        super().__init__(logging.WARNING)
        self.records = records

    def emit(self, record):
        self.records.append(record.getMessage())


# ---------------------------------------------------------------------------------------------
# DeepSpeed
# ---------------------------------------------------------------------------------------------

class _ReadKeys(dict):
    """A config dict that records which top-level keys DeepSpeedConfig reads."""

    def __init__(self, *args, read=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.read = set() if read is None else read

    def __getitem__(self, key):
        self.read.add(key)
        return super().__getitem__(key)

    def get(self, key, default=None):
        self.read.add(key)
        return super().get(key, default)

    def __contains__(self, key):
        self.read.add(key)
        return super().__contains__(key)

    def keys(self):
        return _ReadKeySet(super().keys(), self.read)

    def __copy__(self):
        return _ReadKeys(self, read=self.read)


class _ReadKeySet(set):
    def __init__(self, keys, read):
        super().__init__(keys)
        self.read = read

    def __contains__(self, key):
        self.read.add(key)
        return super().__contains__(key)


class _DataParallel:
    """The one thing DeepSpeedConfig asks of an mpu: the data-parallel world size."""

    def __init__(self, size):
        self.size = size

    def get_data_parallel_world_size(self):
        return self.size


_DEEPSPEED_READY = False


def _deepspeed_process_group():
    """DeepSpeedConfig reads the world size only once deepspeed.comm is initialized: a
    single-process gloo group on the loopback address."""
    global _DEEPSPEED_READY
    if _DEEPSPEED_READY:
        return
    import deepspeed
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK="0", LOCAL_RANK="0",
                      WORLD_SIZE="1")
    with contextlib.redirect_stdout(io.StringIO()):
        deepspeed.init_distributed(dist_backend="gloo", auto_mpi_discovery=False,
                                   distributed_port=port, rank=0, world_size=1, verbose=False)
    _DEEPSPEED_READY = True


def check_deepspeed(path: Path, plan: Plan, shape: dict, checks: Checks):
    from deepspeed.module_inject.auto_ep_config import AutoEPConfig
    from deepspeed.runtime.activation_checkpointing.config import (
        DeepSpeedActivationCheckpointingConfig)
    from deepspeed.runtime.config import DeepSpeedConfig, get_pipeline_config

    _deepspeed_process_group()
    # DeepSpeed's data-parallel ranks: AutoTP, pipeline stages and Ulysses' sequence-parallel
    # groups divide the world.
    dp = plan.gpus // (plan.tp * plan.pp * plan.cp)
    try:
        cfg = DeepSpeedConfig(str(path), mpu=_DataParallel(dp))
    except Exception as error:  # AssertionError, pydantic ValidationError, DeepSpeedConfigError
        raise Rejected(f"DeepSpeedConfig rejected it: {type(error).__name__}: {error}") from None

    # Every top-level key must be one DeepSpeedConfig reads; it ignores the others silently.
    raw = json.loads(path.read_text())
    tracked = _ReadKeys(raw)
    DeepSpeedConfig(tracked, mpu=_DataParallel(dp))
    # `sequence_parallel_size` is read by DeepSpeedConfig only without an mpu (Hugging Face's
    # zero.init); Arctic Long Sequence Training's script passes the mpu UlyssesSPAttentionHF
    # returns, built with the same size (docs/_tutorials/ulysses-alst-sequence-parallelism.md).
    ulysses = {"sequence_parallel_size"} if plan.cp > 1 else set()
    for key in sorted(set(raw) - tracked.read - ulysses):
        checks.reject(f"top-level key {key!r} is never read by DeepSpeedConfig")
    checks.expect("sequence_parallel_size", raw.get("sequence_parallel_size", 1), plan.cp)
    if plan.cp > 1:
        # Mirror of UlyssesSPAttentionHF.__init__ and its data loader adapter: the query heads
        # divide by the size, the key/value heads divide it or by it, and so do the sequences.
        heads, kv = shape["heads"], shape["kv"]
        if heads % plan.cp or (kv % plan.cp and plan.cp % kv) or plan.seq_len % plan.cp:
            checks.reject(f"mirror of UlyssesSPAttentionHF: heads {heads}, kv heads {kv}, "
                          f"seq {plan.seq_len} against sequence_parallel_size {plan.cp}")
        checks.expect("Ulysses beside AutoTP or pipeline stages", plan.tp * plan.pp, 1)
    # Sections DeepSpeed reads key by key (no pydantic model forbidding extras): their own keys.
    loose = {
        "pipeline": set(get_pipeline_config({})),
        "activation_checkpointing": set(vars(DeepSpeedActivationCheckpointingConfig({}))),
        "expert_parallel": {f.name for f in dataclasses.fields(AutoEPConfig)}
        if dataclasses.is_dataclass(AutoEPConfig) else set(vars(AutoEPConfig())),
    }
    for section, known in loose.items():
        for key in sorted(set(raw.get(section, {})) - known):
            checks.reject(f"{section}.{key} is not a key DeepSpeed reads ({sorted(known)})")

    checks.expect("data-parallel world size (DeepSpeedConfig.world_size)", cfg.world_size, dp)
    checks.expect("train_batch_size", cfg.train_batch_size, plan.global_batch)
    checks.expect("train_micro_batch_size_per_gpu", cfg.train_micro_batch_size_per_gpu,
                  plan.micro_batch)
    checks.expect("gradient_accumulation_steps", cfg.gradient_accumulation_steps,
                  plan.global_batch // (plan.micro_batch * dp))
    checks.expect("zero_optimization.stage", int(cfg.zero_optimization_stage), plan.zero_stage)
    checks.expect("zero_optimization.overlap_comm", cfg.zero_config.overlap_comm, True)
    hpz = plan.shard_group if plan.fsdp and plan.shard_group != plan.dp else 1
    checks.expect("zero_optimization.zero_hpz_partition_size",
                  cfg.zero_config.zero_hpz_partition_size, hpz)
    checks.expect("bf16.enabled", cfg.bfloat16_config.enabled, plan.precision == "bf16")
    checks.expect("fp16.enabled", cfg.float16_config.enabled, plan.precision == "fp16")
    checks.expect("tensor_parallel.autotp_size", cfg.tensor_parallel_config.autotp_size,
                  plan.tp if plan.tp > 1 else 0)
    if plan.pp > 1:
        checks.expect("pipeline.stages", cfg.pipeline["stages"], plan.pp)
        # PipelineEngine.__init__: "ZeRO-2 and ZeRO-3 are incompatible with pipeline
        # parallelism" (mirror).
        if cfg.zero_optimization_stage >= 2:
            checks.reject("mirror of PipelineEngine: ZeRO-2/3 with pipeline parallelism")
    else:
        checks.expect("pipeline section", "pipeline" in raw, False)
    act = cfg.activation_checkpointing_config
    if plan.recompute == "full":
        checks.expect("activation_checkpointing.number_checkpoints", act.number_checkpoints,
                      plan.recompute_num_layers or min(plan.rank_layers(shape["layers"])))
        checks.expect("activation_checkpointing.partition_activations",
                      act.partition_activations, plan.tp > 1)
    else:
        checks.expect("activation_checkpointing section", "activation_checkpointing" in raw,
                      False)
    ep = cfg.expert_parallel_config
    checks.expect("expert_parallel.enabled", bool(ep.enabled), plan.ep > 1)
    if plan.ep > 1:
        checks.expect("expert_parallel.autoep_size", ep.autoep_size, plan.ep)
        # Reference section 4.3: autoep_size must divide world_size / pp_size.
        if (plan.gpus // plan.pp) % ep.autoep_size != 0:
            checks.reject(f"autoep_size {ep.autoep_size} does not divide world/pp "
                          f"{plan.gpus // plan.pp}")


# ---------------------------------------------------------------------------------------------
# Megatron-LM
# ---------------------------------------------------------------------------------------------

# Value choices, transcribed from reference section 2 (checked against the reference's text at
# start-up, so the two cannot drift apart unnoticed).
MEGATRON_CHOICES = {
    "--normalization": ["LayerNorm", "RMSNorm"],
    "--position-embedding-type": ["learned_absolute", "rope", "mrope", "relative", "none"],
    "--fp8-format": ["e4m3", "hybrid"],
    "--fp8-recipe": ["tensorwise", "delayed", "mxfp8", "blockwise"],
    "--fp4-format": ["e2m1"],
    "--cp-comm-type": ["p2p", "a2a", "allgather", "a2a+p2p"],
    "--data-parallel-sharding-strategy": ["no_shard", "optim", "optim_grads",
                                          "optim_grads_params"],
    "--recompute-granularity": ["full", "selective"],
    "--recompute-method": ["uniform", "block"],
    "--moe-token-dispatcher-type": ["allgather", "alltoall", "flex"],
    "--moe-router-load-balancing-type": ["aux_loss", "seq_aux_loss", "global_aux_loss",
                                         "sinkhorn", "none"],
    "--moe-router-score-function": ["softmax", "sigmoid"],
}
# Flags that take no value (reference section 2 marks them "flag"; the shape and precision
# switches are argparse store_true/store_false in arguments.py).
MEGATRON_SWITCHES = {
    "--group-query-attention", "--swiglu", "--untie-embeddings-and-output-weights",
    "--disable-bias-linear", "--bf16", "--fp16", "--account-for-embedding-in-pipeline-split",
    "--account-for-loss-in-pipeline-split", "--sequence-parallel", "--use-distributed-optimizer",
    "--use-megatron-fsdp", "--use-torch-fsdp2", "--overlap-grad-reduce", "--overlap-param-gather",
    "--tp-comm-overlap", "--moe-grouped-gemm", "--multi-latent-attention",
    "--moe-router-enable-expert-bias", "--fp8-param-gather", "--first-last-layers-bf16",
    "--recompute-activations", "--distribute-saved-activations",
    "--overlap-moe-expert-parallel-comm",
    # store_true in arguments.py (not in reference section 2); megatron-core field moe_enable_deepep.
    "--moe-enable-deepep",
}
MEGATRON_LISTS = {"--cp-comm-type", "--hierarchical-context-parallel-sizes",
                  "--recompute-modules", "--rampup-batch-size"}
MEGATRON_FLOATS = {"--moe-expert-capacity-factor", "--moe-aux-loss-coeff"}
MEGATRON_STRINGS = set(MEGATRON_CHOICES) | {"--moe-layer-freq", "--pipeline-model-parallel-layout",
                                            "--moe-token-drop-policy"}
# argparse destinations that are not the flag's own name (arguments.py), and store_false flags.
MEGATRON_DEST = {"--disable-bias-linear": "add_bias_linear", "--fp8-format": "fp8",
                 "--fp4-format": "fp4"}
MEGATRON_STORE_FALSE = {"--disable-bias-linear"}


def reference_section_2() -> str:
    text = REFERENCE.read_text()
    start = text.index("## 2. Megatron-LM")
    return text[start:text.index("\n## 3.", start)]


def megatron_reference_flags(section: str) -> set[str]:
    flags = set()
    for code in re.findall(r"`([^`]*)`", section):
        flags.update(re.findall(r"(--[a-z0-9][a-z0-9-]*)", code))
    return flags


def megatron_reference_consistency(section: str):
    """Every transcribed choice must stand on a line of the reference that names its flag."""
    for flag, choices in MEGATRON_CHOICES.items():
        lines = [line for line in section.splitlines() if f"`{flag}" in line or f"{flag} " in line
                 or f"{flag}`" in line]
        for choice in choices:
            if not any(choice in line for line in lines):
                raise SystemExit(f"check_exports.py: choice {choice!r} of {flag} is not in "
                                 f"{REFERENCE} section 2; update MEGATRON_CHOICES")


def megatron_config_fields() -> set[str]:
    # megatron-core's import warns that Transformer Engine and Apex are absent (it falls back to
    # local kernels; config validation uses neither). Those import-time messages are summarized.
    captured = io.StringIO()
    with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(captured), \
            contextlib.redirect_stderr(captured):
        warnings.simplefilter("always")
        import megatron.core.optimizer  # noqa: F401
        import megatron.core.distributed  # noqa: F401
        import megatron.core.transformer.transformer_config  # noqa: F401
        import megatron.core.models.gpt.gpt_layer_specs  # noqa: F401
    absent = sum("Transformer Engine and Apex are not installed" in str(w.message) for w in caught)
    print(f"megatron-core import: {len(caught)} warnings ({absent} say Transformer Engine and "
          f"Apex are not installed) and {len(captured.getvalue().splitlines())} printed lines, "
          "held back")
    from megatron.core.distributed import DistributedDataParallelConfig
    from megatron.core.optimizer import OptimizerConfig
    from megatron.core.transformer.transformer_config import (MLATransformerConfig,
                                                              TransformerConfig)
    return {f.name for cls in (TransformerConfig, MLATransformerConfig,
                               DistributedDataParallelConfig, OptimizerConfig)
            for f in dataclasses.fields(cls)}


def megatron_arguments_module():
    try:
        import megatron.training.arguments as arguments  # noqa: F401
        return arguments
    except ImportError:
        return None


def parse_megatron_fallback(text: str, reference_flags: set[str], fields: set[str],
                            checks: Checks) -> dict:
    """Flags as argparse would store them, each checked against reference section 2."""
    ns: dict = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        # One flag per line, as lines of a launch script: shell quoting applies.
        tokens = shlex.split(line)
        flag, values = tokens[0], tokens[1:]
        if not re.fullmatch(r"--[a-z0-9][a-z0-9-]*", flag):
            checks.reject(f"line {number}: {line!r} does not start with a --flag")
            continue
        dest = MEGATRON_DEST.get(flag, flag[2:].replace("-", "_"))
        if flag not in reference_flags:
            if dest in fields:
                if flag not in _LOGGED:
                    _LOGGED.add(flag)
                    checks.notes.append(f"{flag}: not in reference section 2; its destination "
                                        f"{dest!r} is a megatron-core config field (shown once)")
            else:
                checks.reject(f"{flag}: not a Megatron-LM flag of reference section 2, and "
                              f"{dest!r} is no megatron-core config field")
                continue
        if dest in ns:
            checks.reject(f"{flag} given twice")
        if flag in MEGATRON_SWITCHES:
            if values:
                checks.reject(f"{flag} takes no value, got {values}")
            ns[dest] = flag not in MEGATRON_STORE_FALSE
            continue
        if not values:
            checks.reject(f"{flag} needs a value")
            continue
        if flag not in MEGATRON_LISTS and len(values) != 1:
            checks.reject(f"{flag} takes one value, got {values}")
            continue
        if flag in MEGATRON_CHOICES:
            for value in values:
                if value not in MEGATRON_CHOICES[flag]:
                    checks.reject(f"{flag} {value}: not one of {MEGATRON_CHOICES[flag]}")
        if flag in MEGATRON_STRINGS:
            value = values if flag in MEGATRON_LISTS else values[0]
        else:
            kind = float if flag in MEGATRON_FLOATS else int
            try:
                converted = [kind(v) for v in values]
            except ValueError:
                checks.reject(f"{flag} {values}: not {kind.__name__}")
                continue
            value = converted if flag in MEGATRON_LISTS else converted[0]
        ns[dest] = value
    return ns


def megatron_core_validation(ns: dict, plan: Plan, checks: Checks):
    """The parsed values through megatron-core's own configs, built as Megatron-LM's
    core_transformer_config_from_args builds them: every argument named like a field."""
    import torch
    import torch.nn.functional as F
    from megatron.core.distributed import DistributedDataParallelConfig
    from megatron.core.num_microbatches_calculator import ConstantNumMicroBatchesCalculator
    from megatron.core.transformer.transformer_config import (MLATransformerConfig,
                                                              TransformerConfig)

    args = dict(ns)
    dtype = torch.bfloat16 if args.get("bf16") else torch.float16 if args.get("fp16") else None
    if dtype is not None:
        args.update(params_dtype=dtype, pipeline_dtype=dtype)
    if args.get("swiglu"):
        args.update(gated_linear_unit=True, activation_func=F.silu)
    if not args.get("group_query_attention"):
        args.pop("num_query_groups", None)
    if "num_experts" in args:
        args["num_moe_experts"] = args["num_experts"]
    if "num_virtual_stages_per_pipeline_rank" in args:
        args["virtual_pipeline_model_parallel_size"] = args["num_virtual_stages_per_pipeline_rank"]
    # core_transformer_config_from_args: one --cp-comm-type applies to every layer.
    if isinstance(args.get("cp_comm_type"), list) and len(args["cp_comm_type"]) == 1:
        args["cp_comm_type"] = args["cp_comm_type"][0]
    freq = args.get("moe_layer_freq")
    if isinstance(freq, str):
        args["moe_layer_freq"] = eval(freq, {"__builtins__": {}}) if freq[:1] in "([" else int(freq)
    cls = MLATransformerConfig if args.get("multi_latent_attention") else TransformerConfig
    kwargs = {f.name: args[f.name] for f in dataclasses.fields(cls) if f.name in args}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            config = cls(**kwargs)
    except (ValueError, AssertionError, TypeError) as error:
        raise Rejected(f"megatron-core {cls.__name__} rejected the arguments: {error}") from None
    # The decoder layers each (pp rank, vp stage) builds, and the MoE layer pattern, as
    # megatron-core's GPT block spec computes them (no weights are made).
    try:
        held = megatron_core_stage_layers(config)
    except (ValueError, AssertionError, TypeError) as error:
        raise Rejected(f"megatron-core's layer split rejected the arguments: {error}") from None
    ddp = {f.name: args[f.name] for f in dataclasses.fields(DistributedDataParallelConfig)
           if f.name in args}
    try:
        DistributedDataParallelConfig(**ddp)
    except (ValueError, AssertionError, TypeError) as error:
        raise Rejected(f"megatron-core DistributedDataParallelConfig rejected: {error}") from None

    # Reference 2.1: data_parallel_size = world_size // (TP x PP x CP), then the micro-batches.
    model_parallel = (args.get("tensor_model_parallel_size", 1)
                      * args.get("pipeline_model_parallel_size", 1)
                      * args.get("context_parallel_size", 1))
    if plan.gpus % model_parallel != 0:
        checks.reject(f"{plan.gpus} GPUs are not a multiple of tp x pp x cp = {model_parallel}")
        return None
    dp = plan.gpus // model_parallel
    try:
        calculator = ConstantNumMicroBatchesCalculator(
            args["global_batch_size"], args["micro_batch_size"], dp, False, 1)
    except (AssertionError, KeyError) as error:
        raise Rejected(f"megatron-core ConstantNumMicroBatchesCalculator: {error}") from None
    checks.expect("data-parallel size", dp, plan.dp)
    checks.expect("micro-batches per step (megatron-core)", calculator.get(), plan.microbatches)
    return held


def megatron_core_stage_layers(config) -> list[int]:
    """Decoder layers of each model chunk, in pipeline order (vp stage v of rank r is chunk
    v x pp + r), from megatron-core's get_gpt_decoder_block_spec. The pipeline rank and virtual
    size it would read from its process groups are set with parallel_state's own setters."""
    from megatron.core import parallel_state
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_decoder_block_spec

    pp = config.pipeline_model_parallel_size
    vp = config.virtual_pipeline_model_parallel_size or 1
    parallel_state.set_pipeline_model_parallel_world_size(pp)
    parallel_state.set_virtual_pipeline_model_parallel_world_size(vp if vp > 1 else None)
    held = []
    try:
        for stage in range(vp):
            for rank in range(pp):
                parallel_state.set_pipeline_model_parallel_rank(rank)
                spec = get_gpt_decoder_block_spec(config, use_transformer_engine=False,
                                                  vp_stage=stage if vp > 1 else None,
                                                  pp_rank=rank)
                held.append(len(spec.layer_specs))
    finally:
        parallel_state.set_pipeline_model_parallel_world_size(None)
        parallel_state.set_virtual_pipeline_model_parallel_world_size(None)
        parallel_state.set_pipeline_model_parallel_rank(None)
    return held


def check_megatron(path: Path, plan: Plan, shape: dict, context: dict, checks: Checks):
    text = path.read_text()
    if context["arguments"] is not None:
        ns = parse_megatron_real(context["arguments"], text)
    else:
        ns = parse_megatron_fallback(text, context["reference_flags"], context["fields"], checks)
    held = megatron_core_validation(ns, plan, checks)
    if held is not None:
        if plan.pipeline_split == "balanced":
            # meshplan's balanced split: the embedding (first chunk), the loss and each MTP module
            # (last chunk) count as units beside the layers, and chunks differ by at most one unit.
            checks.expect("layers over all chunks (megatron-core)", sum(held), shape["layers"])
            units = list(held)
            units[0] += 1
            units[-1] += 1 + int(ns.get("mtp_num_layers") or 0)
            if max(units) - min(units) > 1:
                checks.reject(f"balanced split: chunks hold {held} layers, {units} units "
                              "(megatron-core)")
        else:
            checks.expect("layers per model chunk (megatron-core)", held,
                          plan.stage_layers(shape["layers"]))

    for flag_dest, key in [("num_layers", "layers"), ("hidden_size", "hidden"),
                           ("ffn_hidden_size", "ffn"), ("num_attention_heads", "heads"),
                           ("vocab_size", "vocab")]:
        checks.expect(f"--{flag_dest.replace('_', '-')}", ns.get(flag_dest), shape[key])
    if shape["kv"] != shape["heads"]:
        checks.expect("--num-query-groups", ns.get("num_query_groups"), shape["kv"])
    checks.expect("--tensor-model-parallel-size", ns.get("tensor_model_parallel_size"), plan.tp)
    checks.expect("--pipeline-model-parallel-size", ns.get("pipeline_model_parallel_size"),
                  plan.pp)
    checks.expect("--num-virtual-stages-per-pipeline-rank",
                  ns.get("num_virtual_stages_per_pipeline_rank"), plan.vp if plan.vp > 1 else None)
    checks.expect("--context-parallel-size", ns.get("context_parallel_size", 1), plan.cp)
    checks.expect("--expert-model-parallel-size", ns.get("expert_model_parallel_size", 1), plan.ep)
    if "experts" in shape:
        checks.expect("--num-experts", ns.get("num_experts"), shape["experts"])
        checks.expect("--moe-router-topk", ns.get("moe_router_topk"), shape["top_k"])
    checks.expect("--sequence-parallel", ns.get("sequence_parallel", False), plan.tp > 1)
    checks.expect("--tp-comm-overlap", ns.get("tp_comm_overlap", False),
                  plan.tp_comm_overlap and plan.tp > 1)
    checks.expect("--micro-batch-size", ns.get("micro_batch_size"), plan.micro_batch)
    checks.expect("--global-batch-size", ns.get("global_batch_size"), plan.global_batch)
    checks.expect("--seq-length", ns.get("seq_length"), plan.seq_len)
    embedding_and_loss = plan.pipeline_split == "embedding-and-loss"
    checks.expect("--account-for-embedding-in-pipeline-split",
                  ns.get("account_for_embedding_in_pipeline_split", False), embedding_and_loss)
    checks.expect("--account-for-loss-in-pipeline-split",
                  ns.get("account_for_loss_in_pipeline_split", False), embedding_and_loss)
    sharding = {0: (False, None), 1: (True, None), 2: (False, "optim_grads"),
                3: (False, "optim_grads_params")}[plan.zero_stage]
    checks.expect("--use-distributed-optimizer", ns.get("use_distributed_optimizer", False),
                  sharding[0])
    checks.expect("--use-megatron-fsdp", ns.get("use_megatron_fsdp", False),
                  sharding[1] is not None)
    checks.expect("--data-parallel-sharding-strategy", ns.get("data_parallel_sharding_strategy"),
                  sharding[1])
    checks.expect("--recompute-granularity", ns.get("recompute_granularity"),
                  None if plan.recompute == "none" else plan.recompute)
    if plan.recompute == "full":
        checks.expect("--recompute-num-layers", ns.get("recompute_num_layers"),
                      plan.recompute_num_layers or min(plan.rank_layers(shape["layers"])))
    recipe = {"fp8-delayed": "delayed", "fp8": "delayed", "fp8-current": "tensorwise",
              "fp8-blockwise": "blockwise", "mxfp8": "mxfp8"}.get(plan.precision)
    checks.expect("--fp16", ns.get("fp16", False), plan.precision == "fp16")
    checks.expect("--bf16", ns.get("bf16", False), plan.precision != "fp16")
    checks.expect("--fp8-format", ns.get("fp8"), "hybrid" if recipe else None)
    checks.expect("--fp8-recipe", ns.get("fp8_recipe"), recipe)


def parse_megatron_real(arguments, text: str) -> dict:
    """Megatron-LM's own parser, when the installed package ships megatron/training. (Not the
    case for the pinned megatron-core; kept so that a pin that ships it is used at once.)"""
    argv = [token for line in text.splitlines() if line.strip() for token in shlex.split(line)]
    saved = sys.argv
    sys.argv = ["pretrain_gpt.py", *argv]
    try:
        ns = arguments.parse_args(ignore_unknown_args=False)
    except SystemExit as error:
        raise Rejected(f"Megatron-LM parse_args rejected the arguments "
                       f"(exit {error.code})") from None
    finally:
        sys.argv = saved
    return {k: v for k, v in vars(ns).items() if v is not None}


# ---------------------------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------------------------

def version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--meshplan", default=str(ROOT / "target/release/meshplan"))
    parser.add_argument("--out", default=str(ROOT / "target/engine-exports"))
    parser.add_argument("--only", action="append", help="run only these case names")
    options = parser.parse_args()
    started = time.monotonic()
    out = Path(options.out)
    out.mkdir(parents=True, exist_ok=True)

    print("engines: torch {} / torchtitan {} / deepspeed {} / megatron-core {}".format(
        *(version(p) for p in ("torch", "torchtitan", "deepspeed", "megatron-core"))))
    help_text = subprocess.run([options.meshplan, "export", "--help"], check=True,
                               capture_output=True, text=True).stdout
    accepts_ep = re.search(r"--ep\b", help_text) is not None
    shapes = model_shapes(options.meshplan)

    section = reference_section_2()
    megatron_reference_consistency(section)
    context = dict(arguments=megatron_arguments_module(),
                   reference_flags=megatron_reference_flags(section),
                   fields=megatron_config_fields())
    if context["arguments"] is not None:
        print("Megatron-LM check: megatron.training.arguments.parse_args (Megatron-LM's own "
              "parser), then megatron-core's config validation")
    else:
        print(f"Megatron-LM check: megatron-core {version('megatron-core')} ships no "
              "megatron/training/arguments.py, so each flag is checked against the flag list, "
              f"choices and arity of {REFERENCE.relative_to(ROOT.parent)} section 2 "
              f"({len(context['reference_flags'])} flags), and the values go through "
              "megatron-core's TransformerConfig, DistributedDataParallelConfig and "
              "ConstantNumMicroBatchesCalculator")

    passed, failed, skipped = 0, 0, 0
    for case in CASES:
        if options.only and case["name"] not in options.only:
            continue
        plan = Plan(gpus=case["gpus"], **case["plan"])
        title = f"[{case['engine']}] {case['name']}: {case['model']} on {plan.gpus} GPUs"
        if plan.ep > 1 and not accepts_ep:
            print(f"SKIP {title}: `meshplan export --help` has no --ep yet; this MoE case runs "
                  "once it does")
            skipped += 1
            continue
        print(title)
        checks = Checks()
        try:
            if case["model"] not in shapes:
                raise Rejected(f"model {case['model']!r} is not among `meshplan presets`")
            shape = shapes[case["model"]]
            if "refused" in case:
                expect_refusal(options.meshplan, case, plan, out, checks)
                raise Done
            path = export(options.meshplan, case, plan, out)
            if case["engine"] == "torchtitan":
                check_torchtitan(path, plan, shape, checks)
            elif case["engine"] == "deepspeed":
                check_deepspeed(path, plan, shape, checks)
            else:
                check_megatron(path, plan, shape, context, checks)
        except Rejected as error:
            checks.reject(str(error))
        except Done:
            pass
        for note in checks.notes:
            print(f"  note: {note}")
        if checks.problems:
            failed += 1
            for problem in checks.problems:
                print(f"  FAIL: {problem}")
            print(f"FAIL {case['name']}")
        else:
            passed += 1
            print(f"PASS {case['name']}")
    print(f"checked in {time.monotonic() - started:.0f} s; exported files in {out}")
    print(f"engines: {passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
