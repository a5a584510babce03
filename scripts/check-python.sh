#!/usr/bin/env bash
# The Python package (issue #18): builds the abi3 wheel with maturin, installs it into a fresh
# virtual environment and runs the pytest suite (python/tests) against the CLI binary built by
# `cargo build --release`. maturin lives in a virtual environment outside the clone, keyed by the
# hash of python/requirements-ci.txt, so a rerun on the same machine reuses it; the test
# environment is made anew each run (pip's cache keeps that quick).
set -euo pipefail
cd "$(dirname "$0")/.."

python=${PYTHON:-python3.11}
requirements=python/requirements-ci.txt
key=$(sha256sum "$requirements" | cut -c1-16)
tools="${XDG_CACHE_HOME:-$HOME/.cache}/meshplan-python/tools-$key"
if [ ! -x "$tools/bin/maturin" ]; then
    rm -rf "$tools"
    "$python" -m venv "$tools"
    "$tools/bin/pip" install --quiet -r "$requirements"
fi

# The extension crate is held to the same formatting and lints as the library.
cargo fmt --manifest-path python/Cargo.toml -- --check
cargo clippy --manifest-path python/Cargo.toml --locked --all-targets -- -D warnings

wheels=$(mktemp -d)
fresh=$(mktemp -d)
trap 'rm -rf "$wheels" "$fresh"' EXIT
"$tools/bin/maturin" build --release --locked --out "$wheels" --interpreter "$python"
wheel=$(ls "$wheels"/meshplan-*.whl)
"$python" -m venv "$fresh/venv"
"$fresh/venv/bin/pip" install --quiet "$wheel" -r python/requirements-test.txt
# From outside the clone, so that the installed wheel is what is imported.
(cd "$fresh" && MESHPLAN_BIN="$OLDPWD/target/release/meshplan" \
    "$fresh/venv/bin/python" -m pytest -q "$OLDPWD/python/tests")
