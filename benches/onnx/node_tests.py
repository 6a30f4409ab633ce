#!/usr/bin/env python3
"""Runs relayc on ONNX's own node tests and prints a table by operator.

The `onnx` package defines its backend node tests in Python (onnx.backend.test.case.node):
each is a one-node model (sometimes a few) with inputs and expected outputs. For each case this
writes the model and its inputs to a scratch directory, runs
`relayc run model.onnx --input NAME=x.npy ... --output out.npz`, and compares every output
with the case's tolerances (rtol 1e-3, atol 1e-7 unless the case says otherwise).

    benches/.venv/bin/python benches/onnx/node_tests.py --relayc target/release/relayc [--only Relu,Conv]

Needs numpy and onnx (benches/run.sh installs them into benches/.venv). Not run by CI.
"""

import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile
import warnings

import numpy as np


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--relayc", default="target/release/relayc")
    parser.add_argument("--only", default="", help="comma-separated operator names")
    parser.add_argument("--failures", action="store_true", help="print each failure's reason")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    from onnx.backend.test.case import node

    only = {o for o in args.only.split(",") if o}
    cases = node.collect_testcases(None)
    supported = supported_ops()
    # Per operator set: tests, passed, failures; and the tests in scope and passed there.
    by_op = collections.defaultdict(lambda: [0, 0, [], 0, 0])
    with tempfile.TemporaryDirectory() as scratch:
        for case in cases:
            ops = sorted({n.op_type for n in case.model.graph.node})
            op = "+".join(ops)
            if only and not (set(ops) & only):
                continue
            ok, why = run_case(args.relayc, case, scratch)
            entry = by_op[op]
            entry[0] += 1
            entry[1] += ok
            # In scope: every operator converted, at an opset the importer reads (7–21).
            if set(ops) <= supported and 7 <= opset(case.model) <= 21:
                entry[3] += 1
                entry[4] += ok
            if not ok:
                entry[2].append(f"{case.name}: {why}")
    total = sum(e[0] for e in by_op.values())
    passed = sum(e[1] for e in by_op.values())
    in_scope = sum(e[3] for e in by_op.values())
    scope_passed = sum(e[4] for e in by_op.values())
    print("| operator | tests | passed |")
    print("|---|---|---|")
    for op in sorted(by_op):
        tests, ok = by_op[op][:2]
        print(f"| {op} | {tests} | {ok} |")
    print(f"\n{passed} of {total} node tests pass ({100.0 * passed / max(total, 1):.1f}%); "
          f"of those whose operators are all supported, at opsets 7-21, {scope_passed} of "
          f"{in_scope} "
          f"({100.0 * scope_passed / max(in_scope, 1):.1f}%).")
    if args.failures:
        for op in sorted(by_op):
            for failure in by_op[op][2]:
                print(f"- {failure}")
    return 0


def opset(model) -> int:
    """The model's ai.onnx opset."""
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)


def supported_ops() -> set:
    """The operators the importer converts: the names its dispatch matches on."""
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(here, "..", "..", "crates", "relay-onnx", "src", "ops", "mod.rs")
    with open(path) as f:
        text = f.read()
    body = text[text.index("pub(crate) fn convert"):text.index("other => Err(")]
    return set(re.findall(r'"([A-Z][A-Za-z0-9]*)"', body))


def run_case(relayc: str, case, scratch: str):
    """Runs one case; returns (passed, reason)."""
    from onnx import numpy_helper  # noqa: F401  (imported for the side effect of checks)

    d = os.path.join(scratch, case.name)
    os.makedirs(d, exist_ok=True)
    model = os.path.join(d, "model.onnx")
    with open(model, "wb") as f:
        f.write(case.model.SerializeToString())
    inputs, outputs = case.data_sets[0]
    command = [relayc, "run", model, "--output", os.path.join(d, "out.npz")]
    for j, value in enumerate(inputs):
        if isinstance(value, (list, dict)) or value is None:
            return False, "a sequence, map or optional input"
        value = plain(value)
        name = case.model.graph.input[j].name
        path = os.path.join(d, f"in{j}.npy")
        np.save(path, value)
        command += ["--input", f"{name}={path}"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return False, "timed out"
    if done.returncode != 0:
        # The diagnostic's message: the first line that is not its code or a frame.
        lines = [l.strip(" │×╰─▶") for l in done.stderr.splitlines()]
        lines = [l for l in lines if l and not l.startswith("relay::")]
        nodes = [l for l in lines if l.startswith("node `")]
        return False, ((nodes or lines or [f"exit {done.returncode}"])[0])[:200]
    got = np.load(os.path.join(d, "out.npz"))
    types = [o.type.tensor_type.elem_type for o in case.model.graph.output]
    rtol = getattr(case, "rtol", 1e-3) or 1e-3
    atol = getattr(case, "atol", 1e-7) or 1e-7
    for i, want in enumerate(outputs):
        key = str(i)
        if key not in got:
            return False, f"output {i} missing"
        elem_type = types[i] if i < len(types) else 0
        g = narrow_values(got[key], elem_type)
        want = plain(want)
        if elem_type in FLOAT8:
            want = narrow_values(want.view(np.dtype("V1")), elem_type)
        if g.shape != want.shape:
            return False, f"output {i} shape {g.shape}, expected {want.shape}"
        if want.dtype.kind in "fc":
            if not np.allclose(g.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol, equal_nan=True):
                return False, f"output {i} differs by {np.nanmax(np.abs(g.astype(np.float64) - want.astype(np.float64)))}"
        elif not np.array_equal(g, want):
            return False, f"output {i} differs"
    return True, ""


# The 8-bit float element types: (exponent bits, mantissa bits, bias, specials), where
# specials is "ieee" (infinities and NaNs), "fn" (all ones is NaN) or "fnuz" (0x80 is NaN).
FLOAT8 = {17: (4, 3, 7, "fn"), 18: (4, 3, 8, "fnuz"), 19: (5, 2, 15, "ieee"), 20: (5, 2, 16, "fnuz")}


def plain(value):
    """A case's value as a numpy array. The 8-bit float cases hold `TensorProto`s (in an object
    array), whose int32_data are the elements' bits: those become uint8 bits."""
    from onnx import TensorProto, numpy_helper

    if isinstance(value, np.ndarray) and value.dtype == object and value.size == 1:
        value = value.reshape(-1)[0]
    if isinstance(value, TensorProto):
        if value.data_type in FLOAT8:
            bits = np.array(value.int32_data, dtype=np.uint8) if value.int32_data else \
                np.frombuffer(value.raw_data, dtype=np.uint8)
            return bits.reshape(tuple(value.dims))
        return numpy_helper.to_array(value)
    return np.asarray(value)


def narrow_values(g, elem_type: int):
    """relayc's output as the onnx package gives expected values: bfloat16 (16) as its bits,
    the 8-bit floats (17-20) as float32 values. relayc writes both as raw `V2`/`V1` elements."""
    if g.dtype.kind != "V":
        return g
    bits = g.view(np.uint16 if g.dtype.itemsize == 2 else np.uint8)
    if elem_type not in FLOAT8:
        return bits
    e_bits, m_bits, bias, specials = FLOAT8[elem_type]
    b = bits.astype(np.int64)
    sign = np.where(b >> (e_bits + m_bits) & 1, -1.0, 1.0)
    e = (b >> m_bits) & ((1 << e_bits) - 1)
    m = b & ((1 << m_bits) - 1)
    value = np.where(e == 0, m * 2.0 ** (1 - bias - m_bits),
                     (m + (1 << m_bits)) * 2.0 ** (e - bias - m_bits))
    value = sign * value
    ones = (1 << e_bits) - 1
    if specials == "ieee":
        value = np.where(e == ones, np.where(m == 0, sign * np.inf, np.nan), value)
    elif specials == "fn":
        value = np.where((e == ones) & (m == (1 << m_bits) - 1), np.nan, value)
    else:
        value = np.where(b == 0x80, np.nan, value)
    return value.astype(np.float32)


if __name__ == "__main__":
    sys.exit(main())
