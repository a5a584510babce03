#!/usr/bin/env bash
# Exported configs checked by the real engines (issue #6).
#
# Owns: the Python virtual environment the check runs in (outside the clone, under
# ~/.cache/meshplan/, keyed by the requirements and the interpreter, so every clone on a machine
# reuses it) and the exported files it checks (target/engine-exports/). It
#   1. creates the venv with Python 3.11 and installs scripts/engine-requirements.txt (torch,
#      torchtitan, deepspeed, megatron-core and their pinned dependencies) from PyPI, or reuses
#      the venv when its stamp matches the requirements file and the interpreter;
#   2. builds meshplan (cargo build --release --locked) unless $MESHPLAN names a binary;
#   3. runs scripts/check_exports.py, which exports a table of plans with meshplan and loads each
#      file with the engine's own parser and validation. Any rejection or mismatch exits non-zero.
#
# Environment: MESHPLAN_ENGINE_VENV (venv path, default ~/.cache/meshplan/engines-KEY), MESHPLAN (binary to
# check, default target/release/meshplan), PYTHON (interpreter for the venv, default python3.11).
set -euo pipefail
cd "$(dirname "$0")/.."

requirements="scripts/engine-requirements.txt"
python="${PYTHON:-python3.11}"
start=$(date +%s)

if ! command -v "$python" > /dev/null; then
    echo "check-exports: $python not found; the engine check needs Python 3.11" >&2
    exit 1
fi
# The stamp names what the venv was built from: the requirements file and the interpreter; the
# default venv lives outside the clone under a key made from it, so clones share it.
stamp="$(sha256sum "$requirements" | cut -d' ' -f1) $("$python" -c 'import sys; print(sys.version.split()[0])')"
key="$(echo "$stamp" | sha256sum | cut -c1-16)"
venv="${MESHPLAN_ENGINE_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/meshplan/engines-$key}"
mkdir -p "$(dirname "$venv")"
if [[ -f "$venv/meshplan-stamp" && "$(cat "$venv/meshplan-stamp")" == "$stamp" ]]; then
    echo "check-exports: reusing $venv (stamp $stamp)"
else
    echo "check-exports: creating $venv from $requirements (stamp $stamp)"
    # Only a directory that is a venv (or nothing) is replaced.
    if [[ -e "$venv" && ! -f "$venv/pyvenv.cfg" ]]; then
        echo "check-exports: $venv exists and is not a venv; not replacing it" >&2
        exit 1
    fi
    rm -rf "$venv"
    "$python" -m venv "$venv"
    # pip prints each package as it is collected, downloaded and installed: torch alone is
    # gigabytes, so this step takes minutes.
    echo "check-exports: installing torch, torchtitan, deepspeed, megatron-core (several minutes)"
    # DS_BUILD_OPS=0: DeepSpeed's sdist compiles no ops at install time.
    DS_BUILD_OPS=0 "$venv/bin/python" -m pip install --progress-bar off --no-cache-dir \
        --disable-pip-version-check -r "$requirements"
    echo "$stamp" > "$venv/meshplan-stamp"
    echo "check-exports: venv ready after $(( $(date +%s) - start )) s"
fi

if [[ -z "${MESHPLAN:-}" ]]; then
    echo "check-exports: building meshplan (cargo build --release)"
    cargo build --release --locked --quiet
    MESHPLAN=target/release/meshplan
fi

echo "check-exports: exporting the plans and loading them with the engines' parsers"
# DS_ACCELERATOR=cuda: DeepSpeed's CUDA accelerator only describes the target; the config is
# parsed without a GPU. (Its CPU accelerator would JIT-compile a shared-memory op at
# init_distributed.) CUDA_VISIBLE_DEVICES= keeps a machine that has a GPU from touching it.
DS_ACCELERATOR=cuda CUDA_VISIBLE_DEVICES= PYTHONHASHSEED=0 PYTHONUNBUFFERED=1 \
    exec "$venv/bin/python" scripts/check_exports.py --meshplan "$MESHPLAN" --out target/engine-exports
