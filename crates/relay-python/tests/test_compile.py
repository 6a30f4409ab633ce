"""relayc.compile from every kind of source, its options, relayc.import_onnx, and
Executable.save / relayc.load / functions / disasm."""

import numpy as np
import pytest

import relayc
import relay_programs as P
from support import ONNX_DATA, PASSES_TOML, run_cli, seeded

MNIST = ONNX_DATA / "mnist.onnx"
CNN_DYNAMIC = ONNX_DATA / "dynamic" / "cnn_dynamic_batch"


def add_inputs():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    y = np.full((2, 3), 0.5, dtype=np.float32)
    return x, y, x + y


def dense_reference(x, w, b):
    y = x @ w.T + b
    return np.maximum(y, 0), y.sum()


def assert_mnist(out):
    want = np.load(ONNX_DATA / "mnist_expected.npy")
    assert isinstance(out, np.ndarray)
    assert out.shape == (1, 10)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out.reshape(-1), want, rtol=1e-4, atol=1e-4)


# --- sources -----------------------------------------------------------------------------


def test_compile_a_module():
    exe = relayc.compile(relayc.parse(P.ADD))
    assert isinstance(exe, relayc.Executable)
    x, y, want = add_inputs()
    np.testing.assert_array_equal(relayc.VM(exe)(x, y), want)


def test_compile_text():
    x, y, want = add_inputs()
    np.testing.assert_array_equal(relayc.VM(relayc.compile(P.ADD))(x, y), want)


def test_compile_a_relay_path_as_str_and_pathlike(tmp_path):
    path = tmp_path / "add.relay"
    path.write_text(P.ADD)
    x, y, want = add_inputs()
    for source in (str(path), path):
        np.testing.assert_array_equal(relayc.VM(relayc.compile(source))(x, y), want)


def test_compile_text_errors_carry_the_name():
    with pytest.raises(relayc.ParseError) as info:
        relayc.compile(P.BAD_SYNTAX, name="named.relay")
    assert "named.relay" in info.value.rendered


def test_compile_a_relay_path_names_errors_after_the_file(tmp_path):
    path = tmp_path / "broken_file.relay"
    path.write_text(P.ILL_TYPED)
    with pytest.raises(relayc.TypeCheckError) as info:
        relayc.compile(path)
    assert "broken_file.relay" in info.value.rendered


def test_compile_an_onnx_path_binds_its_initializers():
    exe = relayc.compile(MNIST)
    main = {f.name: f for f in exe.functions}["main"]
    # The initializers are constants: only the graph input is left.
    assert [name for name, _ in main.params] == ["input"]
    assert main.params[0][1] == "Tensor[(1, 1, 28, 28), float32]"
    x = np.load(ONNX_DATA / "mnist_input.npy")
    assert_mnist(relayc.VM(exe)(x))
    assert_mnist(relayc.VM(relayc.compile(str(MNIST)))(input=x))


def test_compile_onnx_bytes():
    exe = relayc.compile(MNIST.read_bytes())
    assert_mnist(relayc.VM(exe)(np.load(ONNX_DATA / "mnist_input.npy")))


def test_compile_of_a_ro_path_points_at_load(tmp_path):
    path = tmp_path / "add.ro"
    relayc.compile(P.ADD).save(path)
    with pytest.raises(relayc.Error) as info:
        relayc.compile(path)
    assert "relayc.load" in str(info.value)


def test_compile_a_missing_file_is_an_error(tmp_path):
    # A str that names no file and is not Relay text, and a PathLike that does not exist.
    with pytest.raises(relayc.Error):
        relayc.compile(tmp_path / "missing.relay")
    with pytest.raises(relayc.Error):
        relayc.compile(str(tmp_path / "missing.onnx"))


def test_compile_rejects_other_source_types():
    # The binding raises relayc.Error (not TypeError) for a source of another type.
    with pytest.raises((TypeError, relayc.Error)) as info:
        relayc.compile(42)
    assert "compile()" in str(info.value)


# --- params --------------------------------------------------------------------------------


def test_params_are_bound_as_constants():
    rng = np.random.default_rng(1)
    x, w, b = seeded(rng, (2, 4)), seeded(rng, (3, 4)), seeded(rng, (3,))
    exe = relayc.compile(P.DENSE, params={"w": w, "b": b})
    main = {f.name: f for f in exe.functions}["main"]
    assert main.params == [("x", "Tensor[(2, 4), float32]")]
    relu, total = relayc.VM(exe)(x)
    want_relu, want_total = dense_reference(x, w, b)
    np.testing.assert_allclose(relu, want_relu, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(total, want_total, rtol=1e-5, atol=1e-5)
    # The bound values were copied: changing the arrays afterwards changes nothing.
    w[:] = 0
    relu2, _ = relayc.VM(exe)(x)
    np.testing.assert_array_equal(relu2, relu)


def test_params_partially_bound():
    rng = np.random.default_rng(2)
    x, w, b = seeded(rng, (2, 4)), seeded(rng, (3, 4)), seeded(rng, (3,))
    exe = relayc.compile(P.DENSE, params={"b": b})
    main = {f.name: f for f in exe.functions}["main"]
    assert [name for name, _ in main.params] == ["x", "w"]
    relu, _ = relayc.VM(exe)(x, w)
    np.testing.assert_allclose(relu, dense_reference(x, w, b)[0], rtol=1e-5, atol=1e-6)


def test_params_of_the_wrong_shape_are_an_error_naming_the_parameter():
    with pytest.raises(relayc.Error) as info:
        relayc.compile(P.DENSE, params={"w": np.zeros((4, 3), np.float32)})
    err = info.value
    assert err.code == "relay::api::bind_params", err.code
    assert "%w" in err.rendered
    assert "Tensor[(3, 4), float32]" in err.rendered


# --- opt_level, passes, threads ------------------------------------------------------------


@pytest.mark.parametrize("level", [0, 1, 2, 3])
def test_every_opt_level_computes_the_same(level):
    rng = np.random.default_rng(3)
    x, w, b = seeded(rng, (2, 4)), seeded(rng, (3, 4)), seeded(rng, (3,))
    relu, total = relayc.VM(relayc.compile(P.DENSE, opt_level=level))(x, w, b)
    want_relu, want_total = dense_reference(x, w, b)
    np.testing.assert_allclose(relu, want_relu, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(total, want_total, rtol=1e-5, atol=1e-5)


def test_opt_level_out_of_range_is_an_error():
    with pytest.raises((relayc.Error, ValueError, OverflowError)):
        relayc.compile(P.ADD, opt_level=7)


def test_passes_from_a_path_and_from_toml_text():
    x, y, want = add_inputs()
    for passes in (PASSES_TOML, str(PASSES_TOML), PASSES_TOML.read_text()):
        np.testing.assert_array_equal(relayc.VM(relayc.compile(P.ADD, passes=passes))(x, y), want)


def test_passes_pipeline_is_the_one_given():
    # The repository's pipeline at opt level 0 computes the same as the default one.
    toml = PASSES_TOML.read_text().replace("opt_level = 2", "opt_level = 0")
    assert "opt_level = 0" in toml
    rng = np.random.default_rng(4)
    x, w, b = seeded(rng, (2, 4)), seeded(rng, (3, 4)), seeded(rng, (3,))
    relu, _ = relayc.VM(relayc.compile(P.DENSE, passes=toml))(x, w, b)
    np.testing.assert_allclose(relu, dense_reference(x, w, b)[0], rtol=1e-5, atol=1e-6)


def test_bad_passes_toml_is_a_compile_error(tmp_path):
    bad = '[pipeline]\npasses = ["nonexistent_pass"]\n'
    path = tmp_path / "bad_passes.toml"
    path.write_text(bad)
    for passes in (bad, path, str(path)):
        with pytest.raises(relayc.CompileError) as info:
            relayc.compile(P.ADD, passes=passes)
        err = info.value
        assert err.code == "relay::config::unknown_pass", err.code
        assert "nonexistent_pass" in err.rendered
    with pytest.raises(relayc.CompileError) as info:
        relayc.compile(P.ADD, passes=path)
    assert "bad_passes.toml" in info.value.rendered


def test_passes_toml_that_is_not_toml_is_a_compile_error():
    with pytest.raises(relayc.CompileError):
        relayc.compile(P.ADD, passes="[pipeline\npasses = 3")


@pytest.mark.parametrize("threads", [0, 1, 2])
def test_threads_option_computes_the_same(threads):
    rng = np.random.default_rng(5)
    x, w, b = seeded(rng, (2, 4)), seeded(rng, (3, 4)), seeded(rng, (3,))
    relu, _ = relayc.VM(relayc.compile(P.DENSE, threads=threads))(x, w, b)
    np.testing.assert_allclose(relu, dense_reference(x, w, b)[0], rtol=1e-5, atol=1e-6)


def test_entry_option_binds_params_of_another_function():
    text = P.HEADER + """
def @other(%x: Tensor[(3), float32], %s: Tensor[(3), float32]) -> Tensor[(3), float32] {
  multiply(%x, %s)
}

def @main(%x: Tensor[(3), float32]) -> Tensor[(3), float32] {
  negative(%x)
}
"""
    # By default `@other`, unreachable from `@main`, is dropped.
    assert "other" not in [f.name for f in relayc.compile(text).functions]
    s = np.array([1, 2, 3], np.float32)
    exe = relayc.compile(text, params={"s": s}, entry="other")
    other = {f.name: f for f in exe.functions}["other"]
    assert other.params == [("x", "Tensor[(3), float32]")]
    out = relayc.VM(exe).run(np.full(3, 2, np.float32), entry="other")
    np.testing.assert_array_equal(out, 2 * s)


def test_log_on_int32_is_a_compile_error():
    with pytest.raises(relayc.CompileError) as info:
        relayc.compile(P.LOG_INT)
    err = info.value
    assert err.code is not None and err.code.startswith("relay::"), err.code
    assert "log" in err.rendered
    assert "int32" in err.rendered


# --- import_onnx -------------------------------------------------------------------------


def check_mnist_import(module, params):
    assert isinstance(module, relayc.Module)
    assert isinstance(params, dict)
    text = module.astext()
    assert "%input: Tensor[(1, 1, 28, 28), float32]" in text
    assert "nn.conv2d" in text
    assert len(params) == 6, sorted(params)
    assert "conv1_weight" in params
    for name, value in params.items():
        assert isinstance(value, np.ndarray), name
        assert f"%{name}" in text
    assert params["conv1_weight"].shape == (8, 1, 5, 5)
    assert params["conv1_weight"].dtype == np.float32


def test_import_onnx_from_a_path():
    for source in (MNIST, str(MNIST)):
        module, params = relayc.import_onnx(source)
        check_mnist_import(module, params)
        exe = relayc.compile(module, params=params)
        assert_mnist(relayc.VM(exe)(np.load(ONNX_DATA / "mnist_input.npy")))


def test_import_onnx_from_bytes():
    module, params = relayc.import_onnx(MNIST.read_bytes())
    check_mnist_import(module, params)
    assert_mnist(relayc.VM(relayc.compile(module, params=params))(np.load(ONNX_DATA / "mnist_input.npy")))


def test_import_onnx_leaves_the_params_as_inputs_when_not_bound():
    module, params = relayc.import_onnx(MNIST)
    exe = relayc.compile(module)
    main = {f.name: f for f in exe.functions}["main"]
    names = [name for name, _ in main.params]
    assert names[0] == "input"
    assert sorted(names[1:]) == sorted(params)
    x = np.load(ONNX_DATA / "mnist_input.npy")
    assert_mnist(relayc.VM(exe)(x, **params))


def test_import_onnx_input_shapes_fix_dynamic_dimensions():
    model = CNN_DYNAMIC / "model.onnx"
    dynamic, params = relayc.import_onnx(model)
    assert "%x: Tensor[(?, 3, 12, 12), float32]" in dynamic.astext()
    fixed, fixed_params = relayc.import_onnx(model, input_shapes={"x": (3, 3, 12, 12)})
    assert "%x: Tensor[(3, 3, 12, 12), float32]" in fixed.astext()
    assert sorted(fixed_params) == sorted(params)

    inputs, outputs = np.load(CNN_DYNAMIC / "inputs_1.npz"), np.load(CNN_DYNAMIC / "outputs_1.npz")
    for module in (dynamic, fixed):
        out = relayc.VM(relayc.compile(module, params=params))(inputs["x"])
        assert isinstance(out, tuple) and len(out) == 2
        for got, key in zip(out, ("0", "1")):
            np.testing.assert_allclose(got, outputs[key], rtol=1e-4, atol=1e-4)

    # The dynamic module runs at batch 1 too; the fixed one rejects it.
    inputs0, outputs0 = np.load(CNN_DYNAMIC / "inputs_0.npz"), np.load(CNN_DYNAMIC / "outputs_0.npz")
    out = relayc.VM(relayc.compile(dynamic, params=params))(inputs0["x"])
    np.testing.assert_allclose(out[0], outputs0["0"], rtol=1e-4, atol=1e-4)
    with pytest.raises(relayc.RunError):
        relayc.VM(relayc.compile(fixed, params=params))(inputs0["x"])


def test_import_onnx_of_a_dynamic_sequence_runs_at_any_batch_and_length():
    # GPT-2 exported with a dynamic batch and sequence: its causal mask is built from the
    # sequence (Range, GatherND, Expand), so the import keeps both dimensions symbolic.
    model = ONNX_DATA / "exported" / "gpt2_dynseq_dynamo"
    module, params = relayc.import_onnx(model / "model.onnx")
    assert "%input_ids: Tensor[(?, ?), int64]" in module.astext()
    vm = relayc.VM(relayc.compile(module, params=params))
    ids, mask = np.load(model / "input_input_ids.npy"), np.load(model / "input_attention_mask.npy")
    want = np.load(model / "output_0.npy")
    np.testing.assert_allclose(vm(ids, mask), want, rtol=1e-4, atol=1e-4)
    # A causal model's logits for a prefix of one row are the first positions of that row's.
    for length in (1, 5):
        got = vm(ids[:1, :length], mask[:1, :length])
        np.testing.assert_allclose(got, want[:1, :length], rtol=1e-4, atol=1e-4)


def test_import_onnx_of_garbage_is_an_error():
    with pytest.raises(relayc.Error):
        relayc.import_onnx(b"this is not an onnx model")


# --- save / load ---------------------------------------------------------------------------


def test_save_and_load_round_trip(tmp_path):
    rng = np.random.default_rng(6)
    x, w, b = seeded(rng, (2, 4)), seeded(rng, (3, 4)), seeded(rng, (3,))
    exe = relayc.compile(P.DENSE, params={"w": w})
    path = tmp_path / "dense.ro"
    exe.save(path)
    assert path.stat().st_size > 0
    assert path.read_bytes()[:8] == b"RELAYVM\0"
    exe.save(str(tmp_path / "dense2.ro"))
    for source in (path, str(path), str(tmp_path / "dense2.ro")):
        loaded = relayc.load(source)
        assert isinstance(loaded, relayc.Executable)
        assert [(f.name, f.params, f.ret_type) for f in loaded.functions] == [
            (f.name, f.params, f.ret_type) for f in exe.functions
        ]
        assert loaded.disasm() == exe.disasm()
        got = relayc.VM(loaded)(x, b)
        want = relayc.VM(exe)(x, b)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])


def test_save_and_load_keep_adts_and_closures(tmp_path):
    path = tmp_path / "adt.ro"
    relayc.compile(P.ADT).save(path)
    xs, total, found = relayc.VM(relayc.load(path))(4)
    assert xs.constructor == "Cons"
    assert int(total) == 10
    assert found.constructor == "Some"


def test_load_a_ro_written_by_the_cli(relayc_bin, tmp_path):
    src = tmp_path / "dense.relay"
    src.write_text(P.DENSE)
    out = tmp_path / "dense_cli.ro"
    run_cli(relayc_bin, "build", src, "-o", out)
    exe = relayc.load(out)
    rng = np.random.default_rng(7)
    x, w, b = seeded(rng, (2, 4)), seeded(rng, (3, 4)), seeded(rng, (3,))
    relu, total = relayc.VM(exe)(x, w, b)
    want_relu, want_total = dense_reference(x, w, b)
    np.testing.assert_allclose(relu, want_relu, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(total, want_total, rtol=1e-5, atol=1e-5)
    # Its bytecode is what `relayc disasm` prints.
    proc = run_cli(relayc_bin, "disasm", out)
    assert exe.disasm().strip() == proc.stdout.strip()


def test_a_ro_saved_from_python_runs_in_the_cli(relayc_bin, tmp_path):
    path = tmp_path / "add.ro"
    relayc.compile(P.ADD).save(path)
    x, y, want = add_inputs()
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    run_cli(relayc_bin, "run", path, "--input", f"x={tmp_path / 'x.npy'}", "--input",
            f"y={tmp_path / 'y.npy'}", "--output", tmp_path / "out.npy")
    np.testing.assert_array_equal(np.load(tmp_path / "out.npy"), want)


# --- functions, disasm -------------------------------------------------------------------


def test_functions_lists_the_globals_with_their_types():
    exe = relayc.compile(P.DENSE)
    functions = exe.functions
    assert isinstance(functions, list)
    assert all(isinstance(f, relayc.Function) for f in functions)
    main = {f.name: f for f in functions}["main"]
    assert main.params == [
        ("x", "Tensor[(2, 4), float32]"),
        ("w", "Tensor[(3, 4), float32]"),
        ("b", "Tensor[(3), float32]"),
    ]
    assert main.ret_type == "(Tensor[(2, 3), float32], float32)"


def test_functions_of_a_program_with_several_globals():
    exe = relayc.compile(P.CLOSURES)
    by_name = {f.name: f for f in exe.functions}
    assert {"main", "make_adder", "apply"} <= set(by_name), sorted(by_name)
    assert [name for name, _ in by_name["apply"].params] == ["f", "x"]
    assert "fn" in by_name["apply"].params[0][1]
    for f in exe.functions:
        assert isinstance(f.name, str)
        assert all(isinstance(n, str) and isinstance(t, str) for n, t in f.params)
        assert f.ret_type is None or isinstance(f.ret_type, str)


def test_disasm_prints_every_function_bytecode():
    exe = relayc.compile(P.CLOSURES)
    text = exe.disasm()
    assert isinstance(text, str)
    for name in ("main", "make_adder", "apply"):
        assert f"VMFunc {name}(" in text
    assert "alloc_closure" in text
    assert "ret " in text
