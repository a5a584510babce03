#!/usr/bin/env python3
"""Measures, on one GPU, the kernel speeds meshplan's cost model assumes.

Writes one JSON file with every figure and how it was taken: bf16 and fp8 GEMMs by shape and
layout (forward, input gradient, weight gradient of the linear layers of real models), fused
attention by sequence length and head dimension, grouped GEMMs at the routed-expert shapes of
real MoE models, memory-bound kernels (copy, RMSNorm, SwiGLU, token permute/unpermute), the
host launch cost of a kernel, whole transformer layers (dense and MoE) forward + backward, and
Mamba-2's chunked scan (mamba_ssm's Triton kernels, staged by scripts/stage-device-packages.sh)
and Mamba-1's selective scan (mamba_ssm's CUDA kernels, built on the device from the staged
sources).

Usage: python3 scripts/measure_kernels.py OUT.json [--smoke]
`--smoke` runs tiny shapes (on the CPU when no GPU is present) to check the script itself.
Timing: CUDA events around `reps` back-to-back calls after warm-up, median of 5 such groups;
random normal data (zeros run faster on Hopper, so they would flatter the GPU).
"""

import json
import math
import platform
import statistics
import sys
import time

import torch
import torch.nn.functional as F

SMOKE = "--smoke" in sys.argv
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
BF16 = torch.bfloat16
STARTED = time.monotonic()
# Seconds each section may use before it skips the rest of its shapes (the whole run must stay
# well inside the device tool's 10-minute limit).
SECTION_BUDGET = {"gemm_bf16": 120.0, "gemm_depth": 60.0, "grouped_split": 70.0, "gemm_fp8": 50.0, "gemm_fp8_blockwise": 60.0, "attention": 60.0, "grouped_gemm": 70.0,
                  "layers": 45.0, "host": 60.0, "memory": 20.0, "launch": 20.0, "host_copy": 40.0,
                  "ssd_scan": 90.0, "selective_scan": 90.0}


def sync():
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def measure(fn, target_s=0.03, groups=5):
    """Median seconds per call of `fn`, timed in groups of back-to-back calls."""
    fn()
    sync()
    start = time.perf_counter()
    fn()
    sync()
    once = max(time.perf_counter() - start, 1e-6)
    reps = max(1, min(200, int(target_s / once)))
    for _ in range(min(reps, 3)):
        fn()
    samples = []
    for _ in range(groups):
        if DEVICE == "cuda":
            begin = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            begin.record()
            for _ in range(reps):
                fn()
            end.record()
            end.synchronize()
            samples.append(begin.elapsed_time(end) / 1e3 / reps)
        else:
            t0 = time.perf_counter()
            for _ in range(reps):
                fn()
            samples.append((time.perf_counter() - t0) / reps)
    return statistics.median(samples)


class Section:
    """Collects the rows of one section and stops it when its time budget is spent."""

    def __init__(self, name):
        self.name = name
        self.rows = []
        self.errors = []
        self.skipped = 0
        self.start = time.monotonic()

    def over_budget(self):
        if time.monotonic() - self.start > SECTION_BUDGET[self.name] * (0.2 if SMOKE else 1.0):
            self.skipped += 1
            return True
        return False

    def record(self, row):
        self.rows.append(row)

    def error(self, what, exc):
        self.errors.append(f"{what}: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}")

    def result(self):
        return {
            "rows": self.rows,
            "errors": self.errors,
            "skipped_for_time": self.skipped,
            "seconds": round(time.monotonic() - self.start, 1),
        }


def randn(*shape, dtype=BF16):
    return torch.randn(*shape, device=DEVICE, dtype=torch.float32).to(dtype)


# Linear layers of real models: (name, hidden, query width, kv width, ffn), gated MLPs.
DENSE_MODELS = [
    ("llama3-8b", 4096, 4096, 1024, 14336),
    ("llama3-70b", 8192, 8192, 1024, 28672),
    ("llama3-405b", 16384, 16384, 1024, 53248),
    ("gpt3-175b", 12288, 12288, 12288, 49152),
]
if SMOKE:
    DENSE_MODELS = [("tiny", 256, 256, 64, 512)]


def linear_shapes():
    """(model, layer, tp, n, k): the output width and input width of each linear at each tp."""
    for model, h, q, kv, ffn in DENSE_MODELS:
        for tp in (1, 2, 4, 8):
            if model == "gpt3-175b":
                layers = [("qkv", (q + 2 * kv) // tp, h), ("fc1", ffn // tp, h), ("fc2", h, ffn // tp)]
            else:
                layers = [
                    ("qkv", (q + 2 * kv) // tp, h),
                    ("proj", h, q // tp),
                    ("fc1", 2 * ffn // tp, h),
                    ("fc2", h, ffn // tp),
                ]
            for name, n, k in layers:
                yield model, name, tp, n, k


def gemm_section():
    """bf16 GEMMs of linear layers: y = x W^T, dx = dy W, dW = dy^T x."""
    section = Section("gemm_bf16")
    # Square sweeps: the plateau and the small-size fall-off.
    for size in ((256, 512, 1024, 2048, 4096, 8192, 16384) if not SMOKE else (64, 128)):
        if section.over_budget():
            continue
        try:
            a, b = randn(size, size), randn(size, size)
            seconds = measure(lambda: torch.mm(a, b))
            section.record({
                "model": "square", "layer": "square", "tp": 1, "role": "forward",
                "m": size, "n": size, "k": size, "seconds": seconds,
                "tflops": 2.0 * size ** 3 / seconds / 1e12,
            })
        except Exception as exc:  # noqa: BLE001
            section.error(f"square {size}", exc)
    tokens = (1024, 4096, 16384) if not SMOKE else (128,)
    seen = set()
    for model, layer, tp, n, k in linear_shapes():
        for m in tokens:
            if section.over_budget():
                continue
            try:
                x = randn(m, k)
                w = randn(n, k)
                dy = randn(m, n)
                cases = [
                    ("forward", m, n, k, lambda: torch.mm(x, w.t())),
                    ("data_grad", m, k, n, lambda: torch.mm(dy, w)),
                    ("weight_grad", n, k, m, lambda: torch.mm(dy.t(), x)),
                ]
                for role, gm, gn, gk, fn in cases:
                    key = (role, gm, gn, gk)
                    if key in seen:
                        continue
                    seen.add(key)
                    seconds = measure(fn, target_s=0.01)
                    flops = 2.0 * gm * gn * gk
                    section.record({
                        "model": model, "layer": layer, "tp": tp, "role": role,
                        "m": gm, "n": gn, "k": gk, "seconds": seconds,
                        "tflops": flops / seconds / 1e12,
                    })
                del x, w, dy
            except Exception as exc:  # noqa: BLE001 - record and go on
                section.error(f"{model} {layer} tp{tp} m{m}", exc)
    return section.result()


def fp8_shapes():
    """The linear layers the fp8 sections time: (model, layer, tp, m, n, k) at tp 1 and 8, for
    4k and 16k tokens."""
    for model, layer, tp, n, k in linear_shapes():
        if tp in (1, 8):
            for m in (4096, 16384):
                yield model, layer, tp, m, n, k


def fp8_section():
    """fp8 (e4m3) GEMMs through torch._scaled_mm with per-tensor and per-row scales."""
    section = Section("gemm_fp8")
    if DEVICE != "cuda":
        section.errors.append("fp8 needs a GPU")
        return section.result()
    fp8 = torch.float8_e4m3fn
    for model, layer, tp, m, n, k in fp8_shapes():
        if section.over_budget():
            continue
        try:
            a = randn(m, k).to(fp8)
            w = randn(n, k).to(fp8)
            one = torch.ones((), device=DEVICE, dtype=torch.float32)
            row_a = torch.ones((m, 1), device=DEVICE, dtype=torch.float32)
            row_w = torch.ones((1, n), device=DEVICE, dtype=torch.float32)
            scalings = [
                ("tensorwise", lambda: torch._scaled_mm(a, w.t(), one, one, out_dtype=BF16)),
                ("rowwise", lambda: torch._scaled_mm(a, w.t(), row_a, row_w, out_dtype=BF16)),
            ]
            for scaling, fn in scalings:
                try:
                    seconds = measure(fn)
                except Exception as exc:  # noqa: BLE001
                    section.error(f"{scaling} {model} {layer} tp{tp} m{m}", exc)
                    continue
                section.record({
                    "model": model, "layer": layer, "tp": tp, "role": "forward",
                    "scaling": scaling, "m": m, "n": n, "k": k, "seconds": seconds,
                    "tflops": 2.0 * m * n * k / seconds / 1e12,
                })
            del a, w
        except Exception as exc:  # noqa: BLE001
            section.error(f"{model} {layer} tp{tp} m{m}", exc)
    return section.result()


def fp8_blockwise_section():
    """fp8 GEMMs with DeepSeek-V3-style block scales (1 x 128 activation blocks, 128 x 128 weight
    blocks) through `torch.nn.functional.scaled_mm`, beside the same shapes with one scale per
    tensor: what block scaling costs on the GPU's FP8 path."""
    section = Section("gemm_fp8_blockwise")
    if DEVICE != "cuda" or not hasattr(F, "scaled_mm"):
        section.errors.append("needs a GPU and torch.nn.functional.scaled_mm")
        return section.result()
    from torch.nn.functional import ScalingType

    fp8 = torch.float8_e4m3fn
    shapes = sorted({(m, n, k) for _, _, _, m, n, k in fp8_shapes()})
    for m, n, k in shapes:
        if section.over_budget():
            continue
        try:
            a = randn(m, k).to(fp8)
            w = randn(n, k).to(fp8)
            one = torch.ones((), device=DEVICE, dtype=torch.float32)
            def ones(rows, cols, transposed):
                if transposed:
                    return torch.ones(cols, rows, device=DEVICE, dtype=torch.float32).t()
                return torch.ones(rows, cols, device=DEVICE, dtype=torch.float32)

            def tensorwise():
                return F.scaled_mm(a, w.t(), one, ScalingType.TensorWise, one,
                                   ScalingType.TensorWise, output_dtype=BF16)

            # The scale layouts the kernels accept are not documented: try each, keep the first.
            layouts = [(ta, sb, tb) for ta in (True, False) for sb in ("kn", "nk")
                       for tb in (True, False)]
            blockwise, layout_errors = None, []
            for ta, sb, tb in layouts:
                scale_a = ones(m, k // 128, ta)
                shape_b = (k // 128, n // 128) if sb == "kn" else (n // 128, k // 128)
                scale_w = ones(*shape_b, tb)

                def attempt(scale_a=scale_a, scale_w=scale_w):
                    return F.scaled_mm(a, w.t(), scale_a, ScalingType.BlockWise1x128, scale_w,
                                       ScalingType.BlockWise128x128, output_dtype=BF16)

                try:
                    attempt()
                    blockwise = attempt
                    break
                except Exception as exc:  # noqa: BLE001
                    layout_errors.append(f"{ta},{sb},{tb}: {str(exc).splitlines()[0][:120]}")
            if blockwise is None:
                section.errors.extend(layout_errors[:3])
                blockwise = attempt

            row = {"m": m, "n": n, "k": k}
            for name, fn in (("tensorwise", tensorwise), ("blockwise", blockwise)):
                try:
                    seconds = measure(fn, target_s=0.01)
                    row[f"{name}_seconds"] = seconds
                    row[f"{name}_tflops"] = 2.0 * m * n * k / seconds / 1e12
                except Exception as exc:  # noqa: BLE001
                    section.error(f"{name} {m}x{n}x{k}", exc)
            section.record(row)
            del a, w
        except Exception as exc:  # noqa: BLE001
            section.error(f"{m}x{n}x{k}", exc)
    return section.result()


def attention_section():
    """Causal fused attention forward and backward by backend, sequence length and head dim."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    section = Section("attention")
    backends = [("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)]
    if DEVICE != "cuda":
        backends = [("math", SDPBackend.MATH)]
    tokens = 32768 if not SMOKE else 256
    lengths = (1024, 2048, 4096, 8192, 16384, 32768) if not SMOKE else (64, 128)
    # (head dim of q/k, head dim of v, heads): Llama-style 128, GPT-2-style 64, DeepSeek MLA.
    dims = [(128, 128, 32), (64, 64, 32), (192, 128, 16)]
    for name, backend in backends:
        for dqk, dv, heads in dims:
            for seq in lengths:
                if section.over_budget():
                    continue
                batch = max(1, tokens // seq)
                try:
                    q = randn(batch, heads, seq, dqk).requires_grad_()
                    k = randn(batch, heads, seq, dqk).requires_grad_()
                    v = randn(batch, heads, seq, dv).requires_grad_()
                    with sdpa_kernel([backend]):
                        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                        grad = torch.randn_like(out)

                        def forward():
                            with torch.no_grad():
                                F.scaled_dot_product_attention(q, k, v, is_causal=True)

                        def both():
                            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                            o.backward(grad)

                        fwd = measure(forward)
                        total = measure(both)
                    # Causal: half of the s x s score matrix; QK^T and PV.
                    flops = 2.0 * batch * heads * seq * seq * (dqk + dv) / 2.0
                    section.record({
                        "backend": name, "head_dim_qk": dqk, "head_dim_v": dv, "heads": heads,
                        "batch": batch, "seq": seq, "forward_seconds": fwd,
                        "backward_seconds": total - fwd, "forward_flops": flops,
                        "forward_tflops": flops / fwd / 1e12,
                        "backward_tflops_at_2_5x": 2.5 * flops / (total - fwd) / 1e12,
                    })
                    del q, k, v, out, grad
                except Exception as exc:  # noqa: BLE001
                    section.error(f"{name} d{dqk}/{dv} s{seq}", exc)
    return section.result()


# Routed experts: (name, hidden, expert ffn, experts, top-k, [ep values]); gated experts.
MOE_MODELS = [
    ("qwen3-30b-a3b", 2048, 768, 128, 8, (1, 8)),
    ("qwen3-235b-a22b", 4096, 1536, 128, 8, (8, 32)),
    ("deepseek-v3", 7168, 2048, 256, 8, (8, 32, 64)),
    ("gpt-oss-120b", 2880, 2880, 128, 4, (1, 8)),
    ("mixtral-8x7b", 4096, 14336, 8, 2, (1, 8)),
]
if SMOKE:
    MOE_MODELS = [("tiny-moe", 128, 64, 8, 2, (1, 4))]


def grouped_mm(x, w_t, offsets):
    """torch._grouped_mm where the GPU has it, else a loop (the smoke run on a CPU)."""
    if DEVICE == "cuda":
        return torch._grouped_mm(x, w_t, offs=offsets)
    outs, start = [], 0
    for g, end in enumerate(offsets.tolist()):
        outs.append(x[start:end] @ w_t[g])
        start = end
    return torch.cat(outs)


def grouped_cases(section):
    """The routed-expert GEMMs of `MOE_MODELS` one rank computes after a balanced dispatch, each
    expert's rows padded to 16 as torchtitan does: (model, layer, ep, groups, tokens, rows per
    group, rows, offsets, n, k) for each expert projection, until the section's time is spent."""
    token_counts = (4096, 8192) if not SMOKE else (64,)
    for model, h, ffn, experts, top_k, eps in MOE_MODELS:
        for ep in eps:
            groups = experts // ep
            for tokens in token_counts:
                if section.over_budget():
                    continue
                rows = tokens * top_k
                per_group = int(math.ceil(rows / groups / 16.0) * 16)
                total = per_group * groups
                offsets = torch.arange(1, groups + 1, device=DEVICE, dtype=torch.int32) * per_group
                for layer, n, k in (("fc1", 2 * ffn, h), ("fc2", h, ffn)):
                    yield model, layer, ep, groups, tokens, per_group, total, offsets, n, k


def grouped_section():
    """Routed-expert grouped GEMMs (torch._grouped_mm, bf16) forward and backward, balanced
    routing, tokens per expert padded to 16 rows as torchtitan does; and the same experts as a
    loop of plain GEMMs for comparison."""
    section = Section("grouped_gemm")
    for case in grouped_cases(section):
        model, layer, ep, groups, tokens, per_group, total, offsets, n, k = case
        try:
            x = randn(total, k).requires_grad_()
            w = randn(groups, n, k).requires_grad_()
            w_t = w.transpose(-2, -1)
            out = grouped_mm(x, w_t, offsets)
            grad = torch.randn_like(out)

            def forward():
                with torch.no_grad():
                    grouped_mm(x, w_t, offsets)

            def both():
                grouped_mm(x, w_t, offsets).backward(grad)

            fwd = measure(forward)
            fb = measure(both)
            x_d, w_d = x.detach(), w.detach()

            def loop():
                for g in range(groups):
                    torch.mm(x_d[g * per_group:(g + 1) * per_group], w_d[g].t())

            looped = measure(loop)
            flops = 2.0 * total * n * k
            section.record({
                "model": model, "layer": layer, "ep": ep, "groups": groups,
                "tokens": tokens, "rows_per_group": per_group, "n": n, "k": k,
                "forward_seconds": fwd, "backward_seconds": fb - fwd,
                "loop_forward_seconds": looped, "forward_flops": flops,
                "forward_tflops": flops / fwd / 1e12,
                "backward_tflops": 2.0 * flops / (fb - fwd) / 1e12,
                "loop_forward_tflops": flops / looped / 1e12,
            })
            del x, w, w_t, out, grad
        except Exception as exc:  # noqa: BLE001
            section.error(f"{model} {layer} ep{ep} t{tokens}", exc)
    return section.result()


def depth_section():
    """bf16 GEMMs at a fixed output size by reduction depth k (the cost of a tile's prologue and
    epilogue), and at a fixed depth by output width n (how partial waves of tiles cost)."""
    section = Section("gemm_depth")
    sizes = (4096, 8192) if not SMOKE else (128,)
    depths = (64, 128, 256, 512, 768, 1024, 1536, 2048, 4096, 8192) if not SMOKE else (32, 64)
    cases = [(m, m, k, "depth") for m in sizes for k in depths]
    widths = range(128, 4097, 128) if not SMOKE else (32, 64)
    cases += [(8192 if not SMOKE else 128, n, 8192 if not SMOKE else 128, "width") for n in widths]
    for m, n, k, sweep in cases:
        if section.over_budget():
            continue
        try:
            a, b = randn(m, k), randn(n, k)
            seconds = measure(lambda: torch.mm(a, b.t()), target_s=0.01)
            section.record({"sweep": sweep, "m": m, "n": n, "k": k, "seconds": seconds,
                            "tflops": 2.0 * m * n * k / seconds / 1e12})
            del a, b
        except Exception as exc:  # noqa: BLE001
            section.error(f"{sweep} {m}x{n}x{k}", exc)
    return section.result()


def grouped_split_section():
    """Routed-expert grouped GEMMs with the backward split into the input gradient (only the
    tokens need a gradient) and the weight gradient (only the weights do)."""
    section = Section("grouped_split")
    for case in grouped_cases(section):
        model, layer, ep, groups, tokens, per_group, total, offsets, n, k = case
        try:
            x = randn(total, k)
            w = randn(groups, n, k)
            grad = randn(total, n)
            times = {}
            for role, needs_x, needs_w in (("data_grad", True, False),
                                            ("weight_grad", False, True)):
                xr = x.clone().requires_grad_(needs_x)
                wr = w.clone().requires_grad_(needs_w)

                def forward():
                    with torch.no_grad():
                        grouped_mm(xr, wr.transpose(-2, -1), offsets)

                def both():
                    grouped_mm(xr, wr.transpose(-2, -1), offsets).backward(grad)

                fwd = measure(forward)
                times["forward"] = fwd
                times[role] = measure(both) - fwd
                del xr, wr
            flops = 2.0 * total * n * k
            section.record({
                "model": model, "layer": layer, "ep": ep, "groups": groups,
                "tokens": tokens, "rows_per_group": per_group, "n": n, "k": k,
                "forward_seconds": times["forward"],
                "data_grad_seconds": times["data_grad"],
                "weight_grad_seconds": times["weight_grad"], "flops": flops,
                "forward_tflops": flops / times["forward"] / 1e12,
                "data_grad_tflops": flops / times["data_grad"] / 1e12,
                "weight_grad_tflops": flops / times["weight_grad"] / 1e12,
            })
            del x, w, grad
        except Exception as exc:  # noqa: BLE001
            section.error(f"{model} {layer} ep{ep} t{tokens}", exc)
    return section.result()


def memory_section():
    """Memory-bound kernels: achieved bytes per second (bytes read + written)."""
    section = Section("memory")
    n = (1 << 28) if not SMOKE else (1 << 16)  # 256 Mi elements: 512 MiB in bf16, 10x the L2
    try:
        a = randn(n)
        b = torch.empty_like(a)
        seconds = measure(lambda: b.copy_(a))
        section.record({"kernel": "copy", "bytes": 4 * n, "seconds": seconds,
                        "gbps": 4 * n / seconds / 1e9})
        seconds = measure(lambda: torch.add(a, a, out=b))
        section.record({"kernel": "add", "bytes": 6 * n, "seconds": seconds,
                        "gbps": 6 * n / seconds / 1e9})
        del a, b
    except Exception as exc:  # noqa: BLE001
        section.error("copy", exc)
    tokens = 16384 if not SMOKE else 64
    for h in ((4096, 8192) if not SMOKE else (128,)):
        try:
            x = randn(tokens, h).requires_grad_()
            weight = torch.ones(h, device=DEVICE, dtype=BF16, requires_grad=True)
            grad = randn(tokens, h)

            def norm_forward():
                with torch.no_grad():
                    F.rms_norm(x, (h,), weight)

            def norm_both():
                F.rms_norm(x, (h,), weight).backward(grad)

            fwd = measure(norm_forward)
            both = measure(norm_both)
            size = 2 * tokens * h
            section.record({"kernel": "rms_norm_forward", "hidden": h, "bytes": 2 * size,
                            "seconds": fwd, "gbps": 2 * size / fwd / 1e9})
            section.record({"kernel": "rms_norm_backward", "hidden": h, "bytes": 3 * size,
                            "seconds": both - fwd, "gbps": 3 * size / (both - fwd) / 1e9})
            del x, weight, grad
        except Exception as exc:  # noqa: BLE001
            section.error(f"rms_norm {h}", exc)
    for ffn in ((14336,) if not SMOKE else (256,)):
        try:
            gate_up = randn(tokens, 2 * ffn)

            def swiglu():
                g, u = gate_up.chunk(2, dim=-1)
                return F.silu(g) * u

            seconds = measure(swiglu)
            size = 2 * tokens * ffn
            section.record({"kernel": "swiglu_eager", "ffn": ffn, "bytes": 3 * size,
                            "seconds": seconds, "gbps": 3 * size / seconds / 1e9})
            del gate_up
        except Exception as exc:  # noqa: BLE001
            section.error("swiglu", exc)
    # Token permute (gather rows by expert) and unpermute (weighted scatter-add back).
    for h, top_k in (((2048, 8), (7168, 8)) if not SMOKE else ((128, 2),)):
        try:
            x = randn(tokens, h)
            index = torch.randint(0, tokens, (tokens * top_k,), device=DEVICE)
            rows = x.index_select(0, index)
            out = torch.zeros_like(x)
            seconds = measure(lambda: x.index_select(0, index))
            size = 2 * tokens * top_k * h
            section.record({"kernel": "permute_index_select", "hidden": h, "top_k": top_k,
                            "bytes": 2 * size, "seconds": seconds,
                            "gbps": 2 * size / seconds / 1e9})
            seconds = measure(lambda: out.index_add_(0, index, rows))
            section.record({"kernel": "unpermute_index_add", "hidden": h, "top_k": top_k,
                            "bytes": 2 * size, "seconds": seconds,
                            "gbps": 2 * size / seconds / 1e9})
            del x, index, rows, out
        except Exception as exc:  # noqa: BLE001
            section.error(f"permute {h}", exc)
    return section.result()


def launch_section():
    """Host cost of launching one small kernel eagerly, and the same kernels in a CUDA graph."""
    section = Section("launch")
    x = torch.zeros(1, device=DEVICE)
    count = 2000 if not SMOKE else 20

    def eager():
        for _ in range(count):
            x.add_(1.0)

    sync()
    start = time.perf_counter()
    eager()
    sync()
    eager_s = (time.perf_counter() - start) / count
    eager_s = min(eager_s, measure(eager, groups=3) / count)
    section.record({"kernel": "add_1_element_eager", "seconds_per_kernel": eager_s})
    if DEVICE == "cuda":
        try:
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                eager()
            torch.cuda.current_stream().wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                eager()
            seconds = measure(graph.replay, groups=3) / count
            section.record({"kernel": "add_1_element_cuda_graph", "seconds_per_kernel": seconds})
        except Exception as exc:  # noqa: BLE001
            section.error("cuda graph", exc)
        # A device-to-host read of a small tensor (what a dropless MoE does to size its
        # all-to-all), from an idle GPU.
        counts = torch.zeros(128, device=DEVICE, dtype=torch.int64)
        samples = []
        for _ in range(50):
            sync()
            t0 = time.perf_counter()
            counts.tolist()
            samples.append(time.perf_counter() - t0)
        section.record({"kernel": "small_device_to_host_read", "seconds": statistics.median(samples)})
    return section.result()


def attention_block(h, q_heads, kv_heads, head_dim):
    """The first half of a Llama-style layer in eager PyTorch: RMSNorm, QKV, RoPE-free SDPA (GQA),
    output projection, residual, and the second RMSNorm. Returns its parameters and a function
    giving (residual stream, normed input of the MLP)."""
    p = {
        "n1": torch.ones(h, device=DEVICE, dtype=BF16),
        "qkv": randn((q_heads + 2 * kv_heads) * head_dim, h) * 0.02,
        "o": randn(h, q_heads * head_dim) * 0.02,
        "n2": torch.ones(h, device=DEVICE, dtype=BF16),
    }

    def run(x):
        b, s, _ = x.shape
        y = F.rms_norm(x, (h,), p["n1"])
        qkv = F.linear(y, p["qkv"])
        q, k, v = qkv.split([q_heads * head_dim, kv_heads * head_dim, kv_heads * head_dim], -1)
        q = q.view(b, s, q_heads, head_dim).transpose(1, 2)
        k = k.view(b, s, kv_heads, head_dim).transpose(1, 2)
        v = v.view(b, s, kv_heads, head_dim).transpose(1, 2)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        x = x + F.linear(a.transpose(1, 2).reshape(b, s, -1), p["o"])
        return x, F.rms_norm(x, (h,), p["n2"])

    return p, run


def dense_layer(h, q_heads, kv_heads, ffn, head_dim=128):
    """A Llama-style layer in eager PyTorch: `attention_block`, then a SwiGLU MLP and residual."""
    p, attention = attention_block(h, q_heads, kv_heads, head_dim)
    p["fc1"] = randn(2 * ffn, h) * 0.02
    p["fc2"] = randn(h, ffn) * 0.02
    for t in p.values():
        t.requires_grad_()

    def run(x):
        x, y = attention(x)
        g, u = F.linear(y, p["fc1"]).chunk(2, -1)
        return x + F.linear(F.silu(g) * u, p["fc2"])

    return run


def moe_layer(h, q_heads, kv_heads, ffn, experts, top_k, head_dim=128, host_sync=False):
    """A Qwen3-MoE-style layer in eager PyTorch as torchtitan runs it on one GPU:
    `attention_block`, then router, top-k, sort by expert, gather, grouped GEMMs, weighted
    scatter."""
    p, attention = attention_block(h, q_heads, kv_heads, head_dim)
    p["router"] = randn(experts, h) * 0.02
    p["w1"] = randn(experts, 2 * ffn, h) * 0.02
    p["w2"] = randn(experts, h, ffn) * 0.02
    for t in p.values():
        t.requires_grad_()

    def run(x):
        b, s, _ = x.shape
        x, y = attention(x)
        y = y.view(b * s, h)
        scores = F.linear(y, p["router"]).float().softmax(-1)
        weights, chosen = scores.topk(top_k, dim=-1)
        flat = chosen.view(-1)
        order = flat.argsort(stable=True)
        counts = torch.bincount(flat, minlength=experts)
        if host_sync:
            # Dropless MoE in Megatron-LM reads the per-expert counts on the host to size its
            # all-to-all and grouped GEMM: the host waits here for the GPU.
            counts.tolist()
        offsets = counts.cumsum(0).to(torch.int32)
        rows = y.index_select(0, order // top_k)
        g, u = grouped_mm(rows, p["w1"].transpose(-2, -1), offsets).chunk(2, -1)
        out = grouped_mm(F.silu(g) * u, p["w2"].transpose(-2, -1), offsets)
        out = out * weights.view(-1)[order].unsqueeze(-1).to(out.dtype)
        combined = torch.zeros_like(y).index_add(0, order // top_k, out)
        return x + combined.view(b, s, h)

    return run


def layer_section():
    """Whole layers forward and forward + backward at mbs 1, one GPU (tp = ep = 1)."""
    section = Section("layers")
    if SMOKE:
        cases = [("tiny-dense", 1, 64, dense_layer(128, 2, 1, 256, 64), 128),
                 ("tiny-moe", 1, 64, moe_layer(128, 2, 1, 64, 8, 2, 64), 128)]
    else:
        cases = [
            ("llama3-8b", 1, 8192, dense_layer(4096, 32, 8, 14336), 4096),
            ("qwen3-30b-a3b", 1, 4096, moe_layer(2048, 32, 4, 768, 128, 8), 2048),
            ("qwen3-30b-a3b", 1, 8192, moe_layer(2048, 32, 4, 768, 128, 8), 2048),
            ("qwen3-30b-a3b-host-sync", 1, 4096,
             moe_layer(2048, 32, 4, 768, 128, 8, host_sync=True), 2048),
            ("mixtral-8x7b", 1, 4096, moe_layer(4096, 32, 8, 14336, 8, 2), 4096),
        ]
    for name, batch, seq, run, h in cases:
        if section.over_budget():
            continue
        try:
            x = randn(batch, seq, h).requires_grad_()
            grad = randn(batch, seq, h)

            def forward():
                with torch.no_grad():
                    run(x)

            def both():
                run(x).backward(grad)

            fwd = measure(forward, target_s=0.1)
            fb = measure(both, target_s=0.1)
            section.record({"layer": name, "batch": batch, "seq": seq,
                            "forward_seconds": fwd, "backward_seconds": fb - fwd})
            del x, grad
        except Exception as exc:  # noqa: BLE001
            section.error(name, exc)
    return section.result()


def host_section():
    """Host (CPU) time to issue one layer's kernels, forward and forward + backward: the wall time
    of the call alone, started on an idle GPU and stopped before the synchronization (a call
    returns once its kernels are queued; `backward` once the autograd engine has queued its
    own). Also the number of GPU kernels each launches (profiler). Short sequences keep the
    queue far from full."""
    from torch.profiler import ProfilerActivity, profile

    section = Section("host")
    seq = 128 if not SMOKE else 16
    cases = [
        ("llama3-8b", 4096, dense_layer(4096, 32, 8, 14336)),
        ("qwen3-30b-a3b", 2048, moe_layer(2048, 32, 4, 768, 128, 8)),
        ("qwen3-30b-a3b-host-sync", 2048, moe_layer(2048, 32, 4, 768, 128, 8, host_sync=True)),
    ]
    if SMOKE:
        cases = [("tiny-dense", 128, dense_layer(128, 2, 1, 256, 64)),
                 ("tiny-moe", 128, moe_layer(128, 2, 1, 64, 8, 2, 64, host_sync=True))]
    for name, h, run in cases:
        try:
            x = randn(1, seq, h).requires_grad_()
            grad = randn(1, seq, h)

            def forward():
                with torch.no_grad():
                    run(x)

            def both():
                run(x).backward(grad)

            timings = {}
            for phase, fn in (("forward", forward), ("forward_backward", both)):
                for _ in range(5):
                    fn()
                sync()
                walls = []
                for _ in range(20):
                    sync()
                    t0 = time.perf_counter()
                    fn()
                    walls.append(time.perf_counter() - t0)
                    sync()
                timings[phase] = statistics.median(walls)
                activities = [ProfilerActivity.CPU]
                if DEVICE == "cuda":
                    activities.append(ProfilerActivity.CUDA)
                with profile(activities=activities) as prof:
                    fn()
                    sync()
                kernels = sum(1 for e in prof.events()
                              if e.device_type == torch.autograd.DeviceType.CUDA)
                timings[phase + "_kernels"] = kernels
            section.record({"layer": name, "seq": seq, "forward_seconds": timings["forward"],
                            "forward_backward_seconds": timings["forward_backward"],
                            "forward_kernels": timings["forward_kernels"],
                            "forward_backward_kernels": timings["forward_backward_kernels"]})
            del x, grad
        except Exception as exc:  # noqa: BLE001
            section.error(name, exc)
    return section.result()


def host_copy_section():
    """Copies between GPU memory and pinned host memory (what activation offloading moves):
    device-to-host, host-to-device, and both at once on two streams."""
    section = Section("host_copy")
    sizes = (1 << 26, 1 << 28, 1 << 30) if not SMOKE else (1 << 16,)
    for size in sizes:
        try:
            pin = DEVICE == "cuda"
            device = torch.empty(size, dtype=torch.uint8, device=DEVICE)
            host = torch.empty(size, dtype=torch.uint8, pin_memory=pin)
            device_b = torch.empty(size, dtype=torch.uint8, device=DEVICE)
            host_b = torch.empty(size, dtype=torch.uint8, pin_memory=pin)
            d2h = measure(lambda: host.copy_(device, non_blocking=True))
            h2d = measure(lambda: device.copy_(host, non_blocking=True))
            section.record({"copy": "device_to_host", "bytes": size, "seconds": d2h,
                            "gbps": size / d2h / 1e9})
            section.record({"copy": "host_to_device", "bytes": size, "seconds": h2d,
                            "gbps": size / h2d / 1e9})
            if DEVICE == "cuda":
                out_stream, in_stream = torch.cuda.Stream(), torch.cuda.Stream()

                def both():
                    current = torch.cuda.current_stream()
                    out_stream.wait_stream(current)
                    in_stream.wait_stream(current)
                    with torch.cuda.stream(out_stream):
                        host.copy_(device, non_blocking=True)
                    with torch.cuda.stream(in_stream):
                        device_b.copy_(host_b, non_blocking=True)
                    current.wait_stream(out_stream)
                    current.wait_stream(in_stream)

                seconds = measure(both)
                section.record({"copy": "both_directions", "bytes": 2 * size,
                                "seconds": seconds, "gbps": 2 * size / seconds / 1e9})
            del device, host, device_b, host_b
        except Exception as exc:  # noqa: BLE001
            section.error(f"host copy {size}", exc)
    return section.result()


def ssd_scan_section():
    """Mamba-2's chunked scan as Megatron-Core's Mamba mixer runs it in training (mamba_ssm's
    `mamba_split_conv1d_scan_combined` calls the same Triton scan, with the gate z, a per-head
    D, a dt bias and softplus): `mamba_chunk_scan_combined` forward alone and forward +
    backward, at the mixer shapes of Nemotron 3 Nano / Super and Nemotron-H 8B / 56B. mamba_ssm
    is not installed on the device machine: `scripts/stage-device-packages.sh` stages its Triton
    kernels under `.carry/`, which the run carries and puts on PYTHONPATH. Without it the section
    records why and stops."""
    section = Section("ssd_scan")
    try:
        from mamba_ssm.ops.triton.ssd_combined import mamba_chunk_scan_combined
    except Exception as exc:  # noqa: BLE001
        section.error("import mamba_ssm (run scripts/stage-device-packages.sh, carry .carry, "
                      "PYTHONPATH=.carry)", exc)
        return section.result()
    if DEVICE != "cuda":
        section.error("ssd_scan", RuntimeError("Triton kernels need a GPU"))
        return section.result()
    # (model, heads, head_dim, state, groups, chunk)
    mixers = [("nemotron-3-nano", 64, 64, 128, 8, 128), ("nemotron-3-super", 128, 64, 128, 8, 128),
              ("nemotronh-8b", 128, 64, 128, 8, 128), ("nemotronh-56b", 256, 64, 256, 8, 128)]
    # (batch, seqlen): one 8K sequence, four, and one 32K sequence.
    batches = [(1, 8192), (4, 8192), (1, 32768)]
    for name, heads, head_dim, state, groups, chunk in mixers:
        for batch, seqlen in batches:
            if section.over_budget():
                break
            try:
                x = randn(batch, seqlen, heads, head_dim).requires_grad_()
                dt = randn(batch, seqlen, heads).requires_grad_()
                b = randn(batch, seqlen, groups, state).requires_grad_()
                c = randn(batch, seqlen, groups, state).requires_grad_()
                a = -(torch.rand(heads, device=DEVICE, dtype=torch.float32) * 8 + 1)
                a.requires_grad_()
                d = torch.ones(heads, device=DEVICE, dtype=torch.float32).requires_grad_()
                dt_bias = torch.zeros(heads, device=DEVICE, dtype=torch.float32).requires_grad_()
                z = randn(batch, seqlen, heads, head_dim).requires_grad_()
                grad = randn(batch, seqlen, heads, head_dim)

                def run():
                    return mamba_chunk_scan_combined(x, dt, a, b, c, chunk, D=d, z=z,
                                                     dt_bias=dt_bias, dt_softplus=True)

                def forward():
                    with torch.no_grad():
                        run()

                def both():
                    run().backward(grad)

                f = measure(forward)
                fb = measure(both)
                section.record({"model": name, "batch": batch, "seqlen": seqlen,
                                "heads": heads, "head_dim": head_dim, "state": state,
                                "groups": groups, "chunk": chunk, "forward_seconds": f,
                                "forward_backward_seconds": fb, "backward_seconds": fb - f})
                del x, dt, b, c, a, d, dt_bias, z, grad
            except Exception as exc:  # noqa: BLE001
                section.error(f"{name} {batch}x{seqlen}", exc)
    return section.result()


def selective_scan_section():
    """Mamba-1's selective scan, the CUDA kernels Jamba trains with (mamba_ssm's
    `selective_scan_cuda.fwd` and `.bwd`, as `selective_scan_fn` calls them: variable B and C of
    one group, the gate z, D, a dt bias and softplus), at the mixer widths of Jamba-v0.1 (8192
    channels; 4096 per rank at tp 2) and Jamba-1.5-Large at tp 8 (2048), state 16. meshplan
    prices it from its FP32 instructions, exponentials and atomic bytes
    (`src/model/mamba1.rs`); this measures it. The extension is built here with
    torch.utils.cpp_extension from the sources `scripts/stage-device-packages.sh` stages under
    `.carry/csrc/selective_scan` (nvcc is on the device machine; the build takes minutes and is
    not counted in the section's budget). Without them the section records why and stops."""
    if DEVICE != "cuda":
        section = Section("selective_scan")
        section.error("selective_scan", RuntimeError("the CUDA kernels need a GPU"))
        return section.result()
    import pathlib

    source = pathlib.Path(__file__).resolve().parents[1] / ".carry" / "csrc" / "selective_scan"
    built = time.monotonic()
    try:
        from torch.utils.cpp_extension import load

        major, minor = torch.cuda.get_device_capability()
        arch = f"{major}{minor}"
        ext = load(
            name="selective_scan_cuda",
            sources=[str(source / "selective_scan.cpp")]
            + sorted(str(path) for path in source.glob("selective_scan_*.cu")),
            extra_include_paths=[str(source)],
            extra_cflags=["-O3", "-std=c++17"],
            extra_cuda_cflags=["-O3", "-std=c++17", "-U__CUDA_NO_HALF_OPERATORS__",
                               "-U__CUDA_NO_HALF_CONVERSIONS__",
                               "-U__CUDA_NO_BFLOAT16_OPERATORS__",
                               "-U__CUDA_NO_BFLOAT16_CONVERSIONS__",
                               "-U__CUDA_NO_BFLOAT162_OPERATORS__",
                               "-U__CUDA_NO_BFLOAT162_CONVERSIONS__",
                               "--expt-relaxed-constexpr", "--expt-extended-lambda",
                               "--use_fast_math", f"-gencode=arch=compute_{arch},code=sm_{arch}"],
        )
    except Exception as exc:  # noqa: BLE001
        section = Section("selective_scan")
        section.error("build selective_scan_cuda from .carry/csrc/selective_scan (run "
                      "scripts/stage-device-packages.sh, carry .carry)", exc)
        return section.result()
    build_seconds = time.monotonic() - built
    section = Section("selective_scan")
    # (model, channels on one rank, state)
    mixers = [("jamba-v0.1", 8192, 16), ("jamba-v0.1 tp2", 4096, 16),
              ("jamba-1.5-large tp8", 2048, 16)]
    batches = [(1, 4096), (1, 8192), (2, 8192)]
    for name, dim, state in mixers:
        for batch, seqlen in batches:
            if section.over_budget():
                break
            try:
                u = randn(batch, dim, seqlen)
                delta = randn(batch, dim, seqlen)
                a = -(torch.rand(dim, state, device=DEVICE, dtype=torch.float32) + 0.5)
                b = randn(batch, 1, state, seqlen)
                c = randn(batch, 1, state, seqlen)
                d = torch.ones(dim, device=DEVICE, dtype=torch.float32)
                z = randn(batch, dim, seqlen)
                delta_bias = torch.zeros(dim, device=DEVICE, dtype=torch.float32)
                dout = randn(batch, dim, seqlen)
                out, x, _ = ext.fwd(u, delta, a, b, c, d, z, delta_bias, True)

                def forward():
                    ext.fwd(u, delta, a, b, c, d, z, delta_bias, True)

                def backward():
                    ext.bwd(u, delta, a, b, c, d, z, delta_bias, dout, x, out, None, True, False)

                f = measure(forward)
                bwd = measure(backward)
                section.record({"model": name, "batch": batch, "seqlen": seqlen, "channels": dim,
                                "state": state, "forward_seconds": f, "backward_seconds": bwd,
                                "build_seconds": build_seconds})
                del u, delta, a, b, c, d, z, delta_bias, dout, out, x
            except Exception as exc:  # noqa: BLE001
                section.error(f"{name} {batch}x{seqlen}", exc)
    return section.result()


def main():
    if len(sys.argv) < 2 or sys.argv[1].startswith("--"):
        sys.exit("usage: measure_kernels.py OUT.json [--smoke]")
    torch.manual_seed(0)
    meta = {
        "script": "scripts/measure_kernels.py",
        "smoke": SMOKE,
        "device": torch.cuda.get_device_name() if DEVICE == "cuda" else platform.processor(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "date": time.strftime("%Y-%m-%d"),
        "timing": "CUDA events, median of 5 groups of back-to-back calls after warm-up; "
                  "random normal data",
    }
    if DEVICE == "cuda":
        props = torch.cuda.get_device_properties(0)
        meta["sm_count"] = props.multi_processor_count
        meta["memory_bytes"] = props.total_memory
        torch.backends.cuda.matmul.allow_tf32 = False
    try:
        import subprocess

        query = "name,power.limit,clocks.max.sm,clocks.max.mem,driver_version"
        meta["nvidia_smi"] = subprocess.run(
            ["nvidia-smi", f"--query-gpu={query}", "--format=csv"],
            capture_output=True, text=True, timeout=30).stdout.strip()
    except Exception as exc:  # noqa: BLE001
        meta["nvidia_smi"] = f"unavailable: {exc}"
    result = {"meta": meta}
    sections = [("launch", launch_section), ("memory", memory_section), ("gemm_bf16", gemm_section),
                ("gemm_fp8", fp8_section), ("attention", attention_section),
                ("grouped_gemm", grouped_section), ("layers", layer_section),
                ("gemm_depth", depth_section), ("grouped_split", grouped_split_section),
                ("host", host_section), ("gemm_fp8_blockwise", fp8_blockwise_section),
                ("host_copy", host_copy_section), ("ssd_scan", ssd_scan_section),
                ("selective_scan", selective_scan_section)]
    # Section names after OUT.json run only those sections.
    only = [a for a in sys.argv[2:] if not a.startswith("--")]
    for name, fn in sections:
        if only and name not in only:
            continue
        print(f"[{time.monotonic() - STARTED:6.1f}s] {name}", flush=True)
        try:
            result[name] = fn()
        except Exception as exc:  # noqa: BLE001
            result[name] = {"rows": [], "errors": [f"section failed: {exc!r}"]}
        if DEVICE == "cuda":
            torch.cuda.empty_cache()
        print(f"    rows {len(result[name]['rows'])} errors {len(result[name]['errors'])}",
              flush=True)
        with open(sys.argv[1], "w") as out:
            json.dump(result, out, indent=1)
    print(f"[{time.monotonic() - STARTED:6.1f}s] done", flush=True)


if __name__ == "__main__":
    main()
