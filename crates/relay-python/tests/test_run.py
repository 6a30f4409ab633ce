"""relayc.VM: run by position and keyword, __call__, entry, every kind of value in and out
(tensors, scalars, lists, tuples, ADT values, references, closures), max_frames, profile."""

import numpy as np
import pytest

import relayc
import relay_programs as P
from support import adt_to_list, scalar, seeded


@pytest.fixture(scope="module")
def add_exe():
    return relayc.compile(P.ADD)


def add_inputs():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    y = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    return x, y, x + y


# --- calling conventions -------------------------------------------------------------------


def test_run_by_position(add_exe):
    x, y, want = add_inputs()
    out = relayc.VM(add_exe).run(x, y)
    assert isinstance(out, np.ndarray)
    assert out.dtype == np.float32 and out.shape == (2, 3)
    np.testing.assert_array_equal(out, want)


def test_run_by_keyword(add_exe):
    x, y, want = add_inputs()
    vm = relayc.VM(add_exe)
    np.testing.assert_array_equal(vm.run(x=x, y=y), want)
    np.testing.assert_array_equal(vm.run(y=y, x=x), want)


def test_run_mixing_position_and_keyword(add_exe):
    x, y, want = add_inputs()
    np.testing.assert_array_equal(relayc.VM(add_exe).run(x, y=y), want)


def test_call_is_run_of_main(add_exe):
    x, y, want = add_inputs()
    vm = relayc.VM(add_exe)
    np.testing.assert_array_equal(vm(x, y), want)
    np.testing.assert_array_equal(vm(x=x, y=y), want)
    np.testing.assert_array_equal(vm.run(x, y, entry="main"), want)


def test_a_vm_runs_many_times_with_fresh_results(add_exe):
    vm = relayc.VM(add_exe)
    x, y, _ = add_inputs()
    first = vm(x, y)
    first_copy = first.copy()
    for k in range(1, 20):
        out = vm(x, np.full((2, 3), k, np.float32))
        np.testing.assert_array_equal(out, x + k)
    # Later runs do not overwrite an earlier result that is still referenced.
    np.testing.assert_array_equal(first, first_copy)


def test_non_contiguous_inputs_are_accepted(add_exe):
    big = np.arange(24, dtype=np.float32).reshape(4, 6)
    x = big[::2, ::2]  # (2, 3), strided
    y = np.asfortranarray(np.ones((2, 3), np.float32))
    assert not x.flags.c_contiguous
    # Copied once into contiguous memory.
    np.testing.assert_array_equal(relayc.VM(add_exe)(x, y), x + 1)
    # Byte-swapped arrays too.
    swapped = np.arange(6, dtype=">f4").reshape(2, 3)
    np.testing.assert_array_equal(relayc.VM(add_exe)(swapped, y), np.arange(6).reshape(2, 3) + 1)


def test_vm_keeps_its_executable(add_exe):
    vm = relayc.VM(add_exe)
    assert vm.executable is add_exe or vm.executable.disasm() == add_exe.disasm()
    assert isinstance(vm.executable, relayc.Executable)


def test_a_fresh_result_is_writeable_and_an_input_handed_back_is_not():
    fresh = relayc.VM(relayc.compile(P.HEADER + """
def @main(%x: Tensor[(4), float32]) -> Tensor[(4), float32] {
  add(%x, 1f)
}
"""))(np.zeros(4, np.float32))
    assert fresh.flags.writeable
    fresh[0] = 5.0
    np.testing.assert_array_equal(fresh, [5, 1, 1, 1])
    handed_back = relayc.VM(relayc.compile(P.identity(4)))(relayc.empty(4))
    assert not handed_back.flags.writeable


def test_fresh_tensors_inside_tuples_are_writeable_and_inside_adts_read_only():
    # The binding's documentation (convert.rs): a result tensor is writeable when nothing
    # else holds it. These are fresh tensors, held by nothing once returned; an ADT keeps its
    # value (to be passed back unchanged), so its fields are read-only views of it.
    a, b = relayc.VM(relayc.compile(P.HEADER + """
def @main(%x: Tensor[(4), float32]) -> (Tensor[(4), float32], Tensor[(4), float32]) {
  (add(%x, 1f), multiply(%x, 2f))
}
"""))(np.zeros(4, np.float32))
    assert a.flags.writeable and b.flags.writeable
    xs, _, _ = relayc.VM(relayc.compile(P.ADT))(2)
    assert not xs[0].flags.writeable


def test_vm_options(add_exe):
    x, y, want = add_inputs()
    for vm in (
        relayc.VM(add_exe, threads=1),
        relayc.VM(add_exe, threads=2),
        relayc.VM(add_exe, max_frames=10),
        relayc.VM(add_exe, profile=True),
        relayc.VM(add_exe, threads=None, max_frames=1_000_000, profile=False),
    ):
        np.testing.assert_array_equal(vm(x, y), want)


# --- scalars, lists, tuples ----------------------------------------------------------------


@pytest.fixture(scope="module")
def tuples_vm():
    return relayc.VM(relayc.compile(P.SCALARS_AND_TUPLES))


def test_scalars_lists_and_tuples_in_and_out(tuples_vm):
    a, v, p = 1.5, [1, 2, 3], (np.array([1.0, -2.0], np.float32), 4)
    out = tuples_vm(a, v, p)
    assert isinstance(out, tuple) and len(out) == 3
    doubled, incremented, inner = out
    assert isinstance(doubled, np.ndarray) and doubled.shape == () and doubled.dtype == np.float32
    assert scalar(doubled) == 3.0
    assert incremented.dtype == np.int64
    np.testing.assert_array_equal(incremented, [2, 3, 4])
    assert isinstance(inner, tuple) and len(inner) == 2
    assert inner[0].dtype == np.int32 and scalar(inner[0]) == 5
    np.testing.assert_array_equal(inner[1], np.array([1.5, -3.0], np.float32))


def test_python_numbers_are_converted_to_the_parameter_dtype(tuples_vm):
    # An int where float32 is expected, numpy scalars, a list of numpy ints, a nested tuple
    # with a list.
    out = tuples_vm(2, np.array([7, 8, 9], np.int64), ([0.5, 0.25], np.int32(1)))
    assert scalar(out[0]) == 4.0
    np.testing.assert_array_equal(out[1], [8, 9, 10])
    assert scalar(out[2][0]) == 2
    np.testing.assert_array_equal(out[2][1], [1.0, 0.5])
    out = tuples_vm(np.float32(0.5), [1, 2, 3], (np.zeros(2, np.float32), 0))
    assert scalar(out[0]) == 1.0


def test_a_tuple_of_the_wrong_arity_is_a_run_error(tuples_vm):
    with pytest.raises(relayc.RunError) as info:
        tuples_vm(1.0, [1, 2, 3], (np.zeros(2, np.float32),))
    assert "p" in info.value.rendered


def test_tuple_results_of_tensors():
    rng = np.random.default_rng(10)
    x, w, b = seeded(rng, (2, 4)), seeded(rng, (3, 4)), seeded(rng, (3,))
    out = relayc.VM(relayc.compile(P.DENSE))(x, w, b)
    assert isinstance(out, tuple) and len(out) == 2
    y = x @ w.T + b
    np.testing.assert_allclose(out[0], np.maximum(y, 0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out[1], y.sum(), rtol=1e-5, atol=1e-5)


# --- ADT values ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def adt_exe():
    return relayc.compile(P.ADT)


def test_adt_results(adt_exe):
    xs, total, found = relayc.VM(adt_exe)(5)
    assert isinstance(xs, relayc.ADT)
    assert xs.constructor == "Cons"
    assert isinstance(xs.fields, tuple) and len(xs.fields) == 2
    assert isinstance(xs.tag, int)
    # Indexing and len() reach the fields too.
    assert len(xs) == 2 and xs[0] is not None
    assert scalar(xs[0]) == 1 and xs[1].constructor == "Cons"
    assert [scalar(v) for v in adt_to_list(xs)] == [1, 2, 3, 4, 5]
    assert scalar(total) == 15
    assert isinstance(found, relayc.ADT)
    assert found.constructor == "Some"
    assert len(found.fields) == 1 and scalar(found.fields[0]) == 30


def test_adt_tags_follow_the_constructors(adt_exe):
    xs, _, found = relayc.VM(adt_exe)(2)
    nil = xs.fields[1].fields[1]
    assert nil.constructor == "Nil" and nil.fields == ()
    assert xs.tag != nil.tag
    assert xs.fields[1].tag == xs.tag
    # TVM numbers a type's constructors in declaration order.
    assert (xs.tag, nil.tag) == (0, 1)
    assert found.constructor == "None" and found.fields == () and found.tag == 1


def test_empty_list_and_none(adt_exe):
    xs, total, found = relayc.VM(adt_exe)(0)
    assert xs.constructor == "Nil" and xs.fields == ()
    assert scalar(total) == 0
    assert found.constructor == "None"


def test_adt_values_pass_back_in(adt_exe):
    vm = relayc.VM(adt_exe)
    xs, _, _ = vm(6)
    assert scalar(vm.run(xs, entry="sum")) == 21
    some = vm.run(xs, 4, entry="find")
    assert some.constructor == "Some" and scalar(some.fields[0]) == 40
    assert vm.run(xs, 99, entry="find").constructor == "None"
    # The tail of a list is a list too.
    assert scalar(vm.run(xs.fields[1], entry="sum")) == 20
    # And into another VM of the same executable.
    assert scalar(relayc.VM(adt_exe).run(xs, entry="sum")) == 21


def test_long_lists(adt_exe):
    xs, total, _ = relayc.VM(adt_exe)(10_000)
    values = adt_to_list(xs)
    assert len(values) == 10_000
    assert scalar(values[-1]) == 10_000
    assert scalar(total) == 10_000 * 10_001 // 2


def test_an_adt_where_a_tensor_is_expected_is_a_run_error(adt_exe):
    vm = relayc.VM(adt_exe)
    xs, _, _ = vm(2)
    with pytest.raises(relayc.RunError) as info:
        vm(xs)
    assert info.value.code == "relay::vm::bad_argument"
    with pytest.raises(relayc.RunError):
        vm.run(np.zeros(3, np.int32), entry="sum")


# --- references ----------------------------------------------------------------------------


def test_reference_results_and_arguments():
    vm = relayc.VM(relayc.compile(P.REFS))
    ref, old, peeked = vm(5)
    assert isinstance(ref, relayc.Ref)
    # r = 6, then bump doubled it to 12.
    assert scalar(old) == 6
    assert scalar(peeked) == 12
    assert scalar(ref.value) == 12
    # Passed back in, the program reads and writes the same reference.
    assert scalar(vm.run(ref, entry="peek")) == 12
    assert scalar(vm.run(ref, entry="bump")) == 12
    assert scalar(ref.value) == 24
    assert scalar(vm.run(ref, entry="peek")) == 24


def test_a_reference_where_a_tensor_is_expected_is_a_run_error():
    vm = relayc.VM(relayc.compile(P.REFS))
    ref, _, _ = vm(1)
    with pytest.raises(relayc.RunError):
        vm(ref)
    with pytest.raises(relayc.RunError):
        vm.run(np.int32(3), entry="peek")


# --- closures ------------------------------------------------------------------------------


def test_closures_returned_and_passed_back():
    exe = relayc.compile(P.CLOSURES)
    vm = relayc.VM(exe)
    f, applied = vm(100)
    assert isinstance(f, relayc.Closure)
    assert scalar(applied) == 101
    assert scalar(vm.run(f, 5, entry="apply")) == 105
    g = vm.run(7, entry="make_adder")
    assert isinstance(g, relayc.Closure)
    assert scalar(vm.run(g, -7, entry="apply")) == 0
    assert scalar(vm.run(f=g, x=1, entry="apply")) == 8
    # Closures outlive the VM that made them and run on another VM of the same executable.
    del vm
    assert scalar(relayc.VM(exe).run(f, 1, entry="apply")) == 101


def test_a_closure_of_another_executable_is_refused():
    # Even of the same program: a closure names a function of the executable that made it.
    f, _ = relayc.VM(relayc.compile(P.CLOSURES))(1)
    other = relayc.VM(relayc.compile(P.CLOSURES))
    with pytest.raises(relayc.RunError) as info:
        other.run(f, 2, entry="apply")
    assert "another executable" in str(info.value)
    assert "%f" in str(info.value)


def test_a_closure_where_a_tensor_is_expected_is_a_run_error():
    vm = relayc.VM(relayc.compile(P.CLOSURES))
    f, _ = vm(1)
    with pytest.raises(relayc.RunError):
        vm(f)
    with pytest.raises(relayc.RunError):
        vm.run(np.int32(1), 2, entry="apply")


# --- recursion, max_frames -----------------------------------------------------------------


def test_max_frames_limits_recursion():
    exe = relayc.compile(P.SUM_TO)
    assert scalar(relayc.VM(exe)(1000)) == 500500
    vm = relayc.VM(exe, max_frames=100)
    assert scalar(vm(50)) == 1275
    with pytest.raises(relayc.RunError) as info:
        vm(1000)
    err = info.value
    assert err.code == "relay::vm::recursion_limit"
    assert "100 frames" in err.rendered
    assert "sum_to" in err.rendered
    # The VM is usable after the error.
    assert scalar(vm(10)) == 55


def test_tail_recursion_runs_in_constant_frames():
    vm = relayc.VM(relayc.compile(P.COUNT), max_frames=10)
    assert scalar(vm(100_000)) == 100_000


# --- profile -------------------------------------------------------------------------------


def test_profile_reports_kernels_instructions_and_allocator():
    rng = np.random.default_rng(11)
    x, w, b = seeded(rng, (2, 4)), seeded(rng, (3, 4)), seeded(rng, (3,))
    vm = relayc.VM(relayc.compile(P.DENSE), profile=True)
    for _ in range(3):
        vm(x, w, b)
    profile = vm.profile()
    assert isinstance(profile, dict)
    for key in ("kernels", "instructions", "allocator"):
        assert key in profile, sorted(profile)
    assert profile["kernels"], profile
    assert profile["instructions"], profile


def test_profile_needs_a_profiling_vm(add_exe):
    vm = relayc.VM(add_exe)
    x, y, _ = add_inputs()
    vm(x, y)
    with pytest.raises(relayc.Error):
        vm.profile()


# --- the host kernels' instruction set -----------------------------------------------------

WIDE_DENSE = P.HEADER + """
def @main(%x: Tensor[(33, 200), float32], %w: Tensor[(70, 200), float32]) {
  nn.relu(nn.dense(%x, %w, units=70))
}
"""


def test_every_isa_the_cpu_runs_gives_the_same_product_and_others_are_errors():
    rng = np.random.default_rng(12)
    x, w = seeded(rng, (33, 200)), seeded(rng, (70, 200))
    want = np.maximum(x @ w.T, 0)
    exe = relayc.compile(WIDE_DENSE)
    ran = []
    for isa in ["portable", "avx2", "avx512"]:
        try:
            vm = relayc.VM(exe, threads=1, isa=isa)
        except relayc.Error as e:
            assert "this CPU cannot run" in str(e), e
            continue
        np.testing.assert_allclose(vm(x, w), want, rtol=1e-4, atol=1e-4)
        ran.append(isa)
    assert "portable" in ran
    with pytest.raises(relayc.Error, match="unknown instruction set `sse2`"):
        relayc.VM(exe, isa="sse2")


def test_a_bad_relayc_isa_in_the_environment_is_an_error(monkeypatch):
    exe = relayc.compile(WIDE_DENSE)
    monkeypatch.setenv("RELAYC_ISA", "mmx")
    with pytest.raises(relayc.Error, match="RELAYC_ISA: unknown instruction set `mmx`"):
        relayc.VM(exe)
    monkeypatch.setenv("RELAYC_ISA", "portable")
    relayc.VM(exe)


# --- shapes that vary ----------------------------------------------------------------------

GROWING_LOOP = """#[version = "0.0.5"]
def @step(%i: int32, %n: int32, %kv: Tensor[(?, 16), float32], %w: Tensor[(16, 16), float32]) -> Tensor[(?, 16), float32] {
  if (greater_equal(%i, %n)) {
    %kv
  } else {
    let %h = nn.dense(%kv, %w, units=None);
    let %att = nn.softmax(multiply(nn.dense(%h, %kv, units=None), 0.25f), axis=-1);
    let %ctx = nn.batch_matmul(expand_dims(%att, axis=0), expand_dims(%kv, axis=0), transpose_b=False);
    let %row = mean(squeeze(%ctx, axis=[0]), axis=[0], keepdims=True);
    @step(add(%i, 1), %n, concatenate((%kv, tanh(%row)), axis=0), %w)
  }
}
def @main(%x: Tensor[(1, 16), float32], %w: Tensor[(16, 16), float32], %n: int32) -> Tensor[(?, 16), float32] {
  @step(0, %n, %x, %w)
}
"""


def growing_loop_reference(x, w, n):
    kv = x
    for _ in range(n):
        s = (kv @ w.T) @ kv.T * np.float32(0.25)
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        ctx = (e / e.sum(axis=-1, keepdims=True)) @ kv
        kv = np.concatenate((kv, np.tanh(ctx.mean(axis=0, keepdims=True))), axis=0)
    return kv


def test_a_tensor_that_grows_in_a_loop_runs_at_every_length():
    rng = np.random.default_rng(7)
    x, w = 0.3 * seeded(rng, (1, 16)), 0.3 * seeded(rng, (16, 16))
    vm = relayc.VM(relayc.compile(GROWING_LOOP), threads=1)
    for n in (0, 1, 5, 40):
        out = vm(x, w, np.int32(n))
        assert out.shape == (n + 1, 16)
        np.testing.assert_allclose(out, growing_loop_reference(x, w, n), rtol=1e-4, atol=1e-5)
