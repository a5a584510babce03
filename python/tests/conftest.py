"""Fixtures of the Python API's tests: the meshplan CLI binary the results are compared with
(``MESHPLAN_BIN``, else ``meshplan`` on PATH) and the repository root."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def cli():
    binary = os.environ.get("MESHPLAN_BIN") or shutil.which("meshplan")
    if not binary:
        pytest.fail("set MESHPLAN_BIN to the meshplan binary (cargo build --release)")

    def run(*words):
        done = subprocess.run([binary, *words], capture_output=True, text=True, check=False)
        return done.returncode, done.stdout, done.stderr

    return run


@pytest.fixture(scope="session")
def root():
    return ROOT
