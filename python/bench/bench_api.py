"""The Python API's overhead (issue #18), printed as a table:

1. 10,000 plans priced in a Python loop with ``meshplan.estimate`` against the same command
   lines handed to the Rust library from one prebuilt list (``meshplan._native.run``: the Rust
   work and the call into it, nothing of the Python API); criterion's ``estimate via the
   command line`` in ``benches/estimate.rs`` times one such call in Rust alone.
2. ``meshplan.search`` from Python against the ``meshplan search`` binary (``MESHPLAN_BIN``) for
   GPT-3 175B on 1,024 A100, the median of five runs each.

Run: ``MESHPLAN_BIN=target/release/meshplan python python/bench/bench_api.py [PLANS]``.
"""

import os
import statistics
import subprocess
import sys
import time

import meshplan
from meshplan import _native

RUN = dict(model="llama3.1-70b", gpu="h100-sxm", gpus=64, seq_len=8192, global_batch=128)
# Plans that fit (an estimate that does not fit also searches for the changes that make it fit).
PLANS = [
    dict(tp=tp, pp=pp, vp=vp, micro_batch=mb)
    for tp in (4, 8)
    for pp in (4, 8)
    for vp in (1, 2, 5)
    for mb in (1, 2)
    if (80 // pp) % vp == 0
]


def words(plan):
    flags = ["estimate", "--format", "json"]
    for name, value in {**RUN, **plan}.items():
        flags += ["--" + name.replace("_", "-"), str(value)]
    return flags


def main():
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    plans = [PLANS[i % len(PLANS)] for i in range(count)]
    started = time.perf_counter()
    for plan in plans:
        meshplan.estimate(**RUN, **plan)
    python = time.perf_counter() - started
    prebuilt = [words(plan) for plan in plans]
    started = time.perf_counter()
    for line in prebuilt:
        _native.run(line)
    native = time.perf_counter() - started
    print(f"| loop of {count} estimates | seconds | per call (us) |")
    print("|---|---|---|")
    print(f"| meshplan.estimate (Python API) | {python:.2f} | {python / count * 1e6:.0f} |")
    print(f"| the same command lines, Rust library only | {native:.2f} | {native / count * 1e6:.0f} |")
    print(f"| ratio | {python / native:.2f} | |")

    binary = os.environ.get("MESHPLAN_BIN")
    if not binary:
        print("MESHPLAN_BIN not set: the search comparison is skipped")
        return
    search = dict(model="gpt3-175b", gpu="a100-80gb", gpus=1024, seq_len=2048, global_batch=1536)
    flags = [binary, "search", "--format", "json"]
    for name, value in search.items():
        flags += ["--" + name.replace("_", "-"), str(value)]
    cli, api = [], []
    for _ in range(5):
        started = time.perf_counter()
        subprocess.run(flags, check=True, capture_output=True)
        cli.append(time.perf_counter() - started)
        started = time.perf_counter()
        meshplan.search(**search)
        api.append(time.perf_counter() - started)
    cli_s, api_s = statistics.median(cli), statistics.median(api)
    print()
    print("| search gpt3-175b 1024 a100-80gb | median of 5 (s) |")
    print("|---|---|")
    print(f"| meshplan search (binary, whole process) | {cli_s:.3f} |")
    print(f"| meshplan.search (Python) | {api_s:.3f} |")
    print(f"| Python over binary | {api_s / cli_s:.3f} |")


if __name__ == "__main__":
    main()
