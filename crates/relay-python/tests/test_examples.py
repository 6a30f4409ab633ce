"""The repository's examples and the MNIST ONNX model run from Python, against the Rust library
through the `relayc` command line (`relayc run ... --output out.npz`) and against stored
expected outputs."""

import re

import numpy as np
import pytest

import relayc
from support import EXAMPLES, ONNX_DATA, run_cli, seeded

DTYPES = {"float32": np.float32, "float64": np.float64, "int32": np.int32, "int64": np.int64}


def tensor_type(text):
    """'Tensor[(1, 784), float32]' -> ((1, 784), float32)."""
    m = re.fullmatch(r"Tensor\[\(([0-9, ]*)\), (\w+)\]", text)
    assert m, f"not a static tensor type: {text}"
    shape = tuple(int(d) for d in m.group(1).replace(" ", "").split(",") if d)
    return shape, DTYPES[m.group(2)]


def seeded_inputs(exe, seed):
    """Seeded inputs for every parameter of @main, by name, from the executable's signature."""
    main = {f.name: f for f in exe.functions}["main"]
    rng = np.random.default_rng(seed)
    inputs = {}
    for name, ty in main.params:
        shape, dtype = tensor_type(ty)
        inputs[name] = seeded(rng, shape, dtype)
    return inputs


def leaves(value):
    """The tensor leaves of a result in depth-first order, as `relayc run --output` writes them."""
    if isinstance(value, np.ndarray):
        return [value]
    if isinstance(value, tuple):
        return [leaf for field in value for leaf in leaves(field)]
    if isinstance(value, relayc.ADT):
        return [leaf for field in value.fields for leaf in leaves(field)]
    if isinstance(value, relayc.Ref):
        return leaves(value.value)
    raise AssertionError(f"unexpected result value {type(value)}")


def cli_run(relayc_bin, tmp_path, source, inputs, *extra):
    args = ["run", source]
    for name, array in inputs.items():
        path = tmp_path / f"in_{name}.npy"
        np.save(path, array)
        args += ["--input", f"{name}={path}"]
    out = tmp_path / "out.npz"
    run_cli(relayc_bin, *args, "--output", out, *extra)
    with np.load(out) as data:
        return [data[str(k)] for k in range(len(data.files))]


def assert_same_leaves(got, want, rtol=1e-5, atol=1e-6):
    assert len(got) == len(want), (len(got), len(want))
    for g, w in zip(got, want):
        assert g.dtype == w.dtype, (g.dtype, w.dtype)
        assert g.shape == w.shape, (g.shape, w.shape)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


@pytest.mark.parametrize("example", ["mlp", "lstm", "gru_list", "tree"])
def test_example_matches_the_cli(example, relayc_bin, tmp_path):
    source = EXAMPLES / f"{example}.relay"
    exe = relayc.compile(source)
    inputs = seeded_inputs(exe, seed=42)
    got = leaves(relayc.VM(exe)(**inputs))
    assert got, "no tensor in the result"
    want = cli_run(relayc_bin, tmp_path, source, inputs)
    assert_same_leaves(got, want)
    # And the reference interpreter agrees, up to float rounding.
    interp = cli_run(relayc_bin, tmp_path, source, inputs, "--executor", "interp")
    assert_same_leaves(got, interp, rtol=1e-4, atol=1e-5)


def test_mlp_outputs_are_probabilities():
    exe = relayc.compile(EXAMPLES / "mlp.relay")
    inputs = seeded_inputs(exe, seed=0)
    out = relayc.VM(exe)(**inputs)
    assert out.shape == (1, 10) and out.dtype == np.float32
    np.testing.assert_allclose(out.sum(), 1.0, rtol=1e-5)
    assert (out >= 0).all()


def test_mlp_with_bound_params_matches_the_cli(relayc_bin, tmp_path):
    source = EXAMPLES / "mlp.relay"
    inputs = seeded_inputs(relayc.compile(source), seed=7)
    x = inputs.pop("x")
    params_path = tmp_path / "params.npz"
    np.savez(params_path, **inputs)
    exe = relayc.compile(source, params=inputs)
    assert [n for n, _ in {f.name: f for f in exe.functions}["main"].params] == ["x"]
    got = relayc.VM(exe)(x)
    want = cli_run(relayc_bin, tmp_path, source, {"x": x}, "--params", params_path)
    assert_same_leaves([got], want)


def test_lstm_on_its_stored_inputs_matches_the_cli(relayc_bin, tmp_path):
    source = EXAMPLES / "lstm.relay"
    inputs = {name: np.load(EXAMPLES / "lstm" / f"{name}.npy") for name in ("seq", "w", "u", "b")}
    exe = relayc.compile(source)
    got = relayc.VM(exe)(**inputs)
    assert got.shape == (1, 32) and got.dtype == np.float32
    assert np.all(np.abs(got) < 1)  # a hidden state: o * tanh(c)
    want = cli_run(relayc_bin, tmp_path, source, inputs)
    assert_same_leaves([got], want)
    # The same from a .ro written by the CLI.
    ro = tmp_path / "lstm.ro"
    run_cli(relayc_bin, "build", source, "-o", ro)
    assert_same_leaves([relayc.VM(relayc.load(ro))(**inputs)], want)


def test_lstm_is_deterministic_and_positional_equals_keyword():
    exe = relayc.compile(EXAMPLES / "lstm.relay")
    inputs = {name: np.load(EXAMPLES / "lstm" / f"{name}.npy") for name in ("seq", "w", "u", "b")}
    vm = relayc.VM(exe)
    a = vm(**inputs)
    b = vm(inputs["seq"], inputs["w"], inputs["u"], inputs["b"])
    np.testing.assert_array_equal(a, b)


def test_mnist_onnx_matches_onnx_runtime():
    exe = relayc.compile(ONNX_DATA / "mnist.onnx")
    out = relayc.VM(exe)(np.load(ONNX_DATA / "mnist_input.npy"))
    want = np.load(ONNX_DATA / "mnist_expected.npy")
    np.testing.assert_allclose(out.reshape(-1), want, rtol=1e-4, atol=1e-4)
    assert int(out.argmax()) == int(want.argmax())


def test_mnist_onnx_matches_the_cli(relayc_bin, tmp_path):
    model = ONNX_DATA / "mnist.onnx"
    x = np.load(ONNX_DATA / "mnist_input.npy")
    got = relayc.VM(relayc.compile(model))(x)
    want = cli_run(relayc_bin, tmp_path, model, {"input": x})
    assert_same_leaves([got], want)
