"""Helpers and paths shared by the relayc Python tests.

The repository's files (examples, ONNX fixtures, passes.toml) are found from this file's place:
crates/relay-python/tests/ is three levels below the repository root.
"""

import subprocess
from pathlib import Path

import numpy as np

import relayc

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = REPO / "examples"
ONNX_DATA = REPO / "crates" / "relay-onnx" / "tests" / "data"
PASSES_TOML = REPO / "passes.toml"


def run_cli(binary, *args, cwd=None):
    """Runs `relayc ARGS...`; fails the test with its output unless it exits 0."""
    proc = subprocess.run(
        [str(binary), *(str(a) for a in args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=900,
    )
    assert proc.returncode == 0, (
        f"relayc {' '.join(map(str, args))} exited {proc.returncode}\n"
        f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    )
    return proc


def run_text(text, *args, **kwargs):
    """Compiles Relay text and runs its `@main` once on a fresh VM."""
    return relayc.VM(relayc.compile(text))(*args, **kwargs)


def adt_to_list(value):
    """A relayc.ADT list (Cons/Nil) as a Python list of its elements."""
    items = []
    while True:
        assert isinstance(value, relayc.ADT), f"expected a relayc.ADT, got {type(value)}"
        if value.constructor == "Nil":
            assert tuple(value.fields) == ()
            return items
        assert value.constructor == "Cons", value.constructor
        head, value = value.fields
        items.append(head)


def seeded(rng, shape, dtype=np.float32):
    """Uniform in [-1, 1), as `relayc run --random-inputs` fills floats."""
    return rng.uniform(-1.0, 1.0, size=shape).astype(dtype)


def scalar(value):
    """A 0-d (or one-element) array result as a Python number, checking it is an array."""
    assert isinstance(value, np.ndarray), f"expected a numpy array, got {type(value)}"
    assert value.size == 1, value.shape
    return value.item()
