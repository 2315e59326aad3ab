"""Fixtures of the Python package's tests: the demo model, loaded once, and `ocular run`."""

import json
import os
import subprocess

import pytest

MODEL = "models/shapes-paligemma"
IMAGE = f"{MODEL}/sample.png"


@pytest.fixture(scope="session")
def model():
    import ocular

    return ocular.load(MODEL, threads=2)


@pytest.fixture(scope="session")
def ocular_run():
    """`ocular run --json` on the demo model: the CLI's answer to compare with."""
    binary = os.environ.get("OCULAR_BIN", "build/tools/cli/ocular")
    if not os.path.exists(binary):
        pytest.skip(f"no ocular binary at {binary}")

    def run(prompt, *args, model=MODEL, mmproj=None):
        cmd = [binary, "run", "-m", model, "-p", prompt, "--json", "-t", "2", *args]
        if mmproj:
            cmd += ["--mmproj", mmproj]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        return json.loads(out)

    return run
