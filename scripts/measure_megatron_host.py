#!/usr/bin/env python3
"""Measures the host (CPU) time Megatron-Core spends issuing one layer's kernels, forward and
backward, for its attention + MLP layer, its MoE layer and its Mamba layer.

Why: meshplan prices each layer from its kernels' GPU time. When a layer's GPU work is short
(small models, micro-batch 1, fast GPUs), the Python that issues the kernels can take longer than
the kernels, and the GPU waits. `measurements/h100-sxm-kernels.json` (section `host`) has this
for plain eager PyTorch layers; Megatron-Core's layers (router, token dispatcher, bias-dropout-add
fusions, process groups) issue more from Python, and nothing measured them yet.

What runs: Megatron-Core's own modules (the "local" spec: no Transformer Engine, which is not on
the device machine), one process, world size 1, bf16, on one GPU. The MoE layer uses the
alltoall token dispatcher (dropless, which reads the tokens per expert on the host) and the
sequential expert MLP, at 4, 8 and 16 local experts, so the per-expert cost and the rest can be
told apart. The Mamba layer runs Megatron-Core's mixer with mamba_ssm's Triton scan, without the
causal-conv1d extension (its unfused path: `use_mamba_mem_eff_path = False`).

Timing: the wall time of the forward call and of the backward call alone, each started on an
idle GPU and stopped before synchronizing (a call returns once its kernels are queued), median of
20; short sequences keep the queue far from full. Kernel counts from the profiler.

Usage (the device machine cannot reach the network: stage the packages first, here, with
scripts/stage-device-packages.sh, and carry `.carry`):
    PYTHONPATH=.carry python3 scripts/measure_megatron_host.py OUT.json [--smoke]
`--smoke` builds tiny layers (on the CPU when no GPU is present; the MoE and Mamba layers then
record why they cannot run) to check the script itself.
"""

import json
import os
import statistics
import sys
import time

import torch

SMOKE = "--smoke" in sys.argv
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
DTYPE = torch.bfloat16 if DEVICE == "cuda" else torch.float32
SEQ = 16 if SMOKE else 128


def sync():
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def init_megatron():
    import torch.distributed as dist

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29561")
    dist.init_process_group("nccl" if DEVICE == "cuda" else "gloo", rank=0, world_size=1)
    from megatron.core import parallel_state
    from megatron.core.tensor_parallel.random import model_parallel_cuda_manual_seed

    parallel_state.initialize_model_parallel(1, 1)
    if DEVICE == "cuda":
        model_parallel_cuda_manual_seed(0)


def config(**fields):
    from megatron.core.transformer import TransformerConfig

    base = dict(num_layers=1, normalization="RMSNorm", add_bias_linear=False, hidden_dropout=0.0,
                attention_dropout=0.0, bf16=DEVICE == "cuda", params_dtype=DTYPE,
                pipeline_dtype=DTYPE, use_cpu_initialization=True)
    base.update(fields)
    return TransformerConfig(**base)


def gpt_layer(cfg, experts):
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.transformer.spec_utils import build_module

    spec = get_gpt_layer_local_spec(num_experts=experts, moe_grouped_gemm=False,
                                    normalization="RMSNorm")
    return build_module(spec, config=cfg, layer_number=1).to(DEVICE)


def mamba_layer(cfg, heads, head_dim, state, groups):
    from megatron.core.process_groups_config import ProcessGroupCollection
    from megatron.core.ssm.mamba_layer import MambaLayer, MambaLayerSubmodules
    from megatron.core.ssm.mamba_mixer import MambaMixer, MambaMixerSubmodules
    from megatron.core.tensor_parallel import ColumnParallelLinear, RowParallelLinear
    from megatron.core.fusions.fused_bias_dropout import get_bias_dropout_add
    from megatron.core.transformer.spec_utils import ModuleSpec, build_module
    from megatron.core.transformer.torch_norm import WrappedTorchNorm

    spec = ModuleSpec(
        module=MambaLayer,
        submodules=MambaLayerSubmodules(
            norm=WrappedTorchNorm,
            mixer=ModuleSpec(module=MambaMixer, submodules=MambaMixerSubmodules(
                in_proj=ColumnParallelLinear, out_proj=RowParallelLinear)),
            mamba_bda=get_bias_dropout_add))
    cfg.mamba_num_heads = heads
    cfg.mamba_head_dim = head_dim
    cfg.mamba_state_dim = state
    cfg.mamba_num_groups = groups
    cfg.use_mamba_mem_eff_path = False
    pgs = ProcessGroupCollection.use_mpu_process_groups()
    return build_module(spec, config=cfg, layer_number=1, pg_collection=pgs).to(DEVICE)


def host_times(layer, hidden):
    """Median host seconds of the forward call and of the backward call, and kernel counts."""
    from torch.profiler import ProfilerActivity, profile

    x = torch.randn(SEQ, 1, hidden, device=DEVICE, dtype=DTYPE, requires_grad=True)

    def forward():
        out = layer(x, attention_mask=None)
        return out[0] if isinstance(out, tuple) else out

    for _ in range(5):
        forward().float().sum().backward()
    sync()
    forwards, backwards = [], []
    for _ in range(5 if SMOKE else 20):
        sync()
        t0 = time.perf_counter()
        out = forward()
        forwards.append(time.perf_counter() - t0)
        loss = out.float().sum()
        sync()
        t0 = time.perf_counter()
        loss.backward()
        backwards.append(time.perf_counter() - t0)
        sync()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if DEVICE == "cuda" else [])
    counts = {}
    for phase in ("forward", "backward"):
        out = forward()
        loss = out.float().sum()
        sync()
        with profile(activities=activities) as prof:
            if phase == "forward":
                forward()
            else:
                loss.backward()
            sync()
        counts[phase] = sum(1 for e in prof.events()
                            if e.device_type == torch.autograd.DeviceType.CUDA)
    return {"forward_seconds": statistics.median(forwards),
            "backward_seconds": statistics.median(backwards),
            "forward_kernels": counts["forward"], "backward_kernels": counts["backward"]}


def cases():
    """(name, hidden, builder) per layer measured."""
    if SMOKE:
        attention = dict(hidden_size=128, num_attention_heads=4, num_query_groups=2,
                         ffn_hidden_size=256, gated_linear_unit=True)
        return [
            ("tiny-dense", 128, lambda: gpt_layer(config(**attention), None)),
            ("tiny-moe-4", 128, lambda: gpt_layer(config(
                **attention, num_moe_experts=4, moe_router_topk=2, moe_ffn_hidden_size=64,
                moe_token_dispatcher_type="alltoall"), 4)),
            ("tiny-mamba", 128, lambda: mamba_layer(config(
                hidden_size=128, num_attention_heads=4, ffn_hidden_size=256), 4, 64, 16, 1)),
        ]
    # Llama 3 8B's layer; Qwen3-30B-A3B's attention with 4, 8 and 16 local experts of its shape
    # (top-k capped at the experts present); Nemotron 3 Nano's Mamba mixer.
    llama = dict(hidden_size=4096, num_attention_heads=32, num_query_groups=8,
                 ffn_hidden_size=14336, gated_linear_unit=True)
    qwen = dict(hidden_size=2048, num_attention_heads=32, num_query_groups=4, kv_channels=128,
                ffn_hidden_size=6144, gated_linear_unit=True, moe_ffn_hidden_size=768,
                moe_token_dispatcher_type="alltoall", moe_router_load_balancing_type="aux_loss",
                moe_aux_loss_coeff=1e-3)
    found = [("llama3-8b", 4096, lambda: gpt_layer(config(**llama), None))]
    for experts in (4, 8, 16):
        found.append((f"qwen3-30b-a3b-{experts}-experts", 2048,
                      lambda e=experts: gpt_layer(config(**qwen, num_moe_experts=e,
                                                         moe_router_topk=min(8, e)), e)))
    found.append(("nemotron-3-nano-mamba", 2688, lambda: mamba_layer(config(
        hidden_size=2688, num_attention_heads=32, ffn_hidden_size=1856), 64, 64, 128, 8)))
    return found


def main():
    if len(sys.argv) < 2 or sys.argv[1].startswith("--"):
        sys.exit("usage: measure_megatron_host.py OUT.json [--smoke]")
    torch.manual_seed(0)
    result = {"meta": {
        "script": "scripts/measure_megatron_host.py", "smoke": SMOKE,
        "device": torch.cuda.get_device_name() if DEVICE == "cuda" else "cpu",
        "torch": torch.__version__, "cuda": torch.version.cuda, "seq": SEQ,
        "date": time.strftime("%Y-%m-%d"),
        "sources": open(".carry/SOURCES").read() if os.path.exists(".carry/SOURCES") else None,
        "timing": "host wall time of the forward call and of the backward call, each from an "
                  "idle GPU, stopped before synchronizing; median of 20",
    }, "rows": [], "errors": []}
    try:
        init_megatron()
    except Exception as exc:  # noqa: BLE001
        result["errors"].append(f"megatron init: {type(exc).__name__}: {exc}")
        cases_found = []
    else:
        cases_found = cases()
    for name, hidden, build in cases_found:
        try:
            layer = build()
            row = {"layer": name, "seq": SEQ}
            row.update(host_times(layer, hidden))
            result["rows"].append(row)
            print(f"{name}: {row}", flush=True)
            del layer
        except Exception as exc:  # noqa: BLE001
            message = str(exc).splitlines()[0][:300] if str(exc) else ""
            result["errors"].append(f"{name}: {type(exc).__name__}: {message}")
            print(f"{name}: error {type(exc).__name__}: {message}", flush=True)
        if DEVICE == "cuda":
            torch.cuda.empty_cache()
    with open(sys.argv[1], "w") as out:
        json.dump(result, out, indent=1)


if __name__ == "__main__":
    main()
