"""Zero-copy tensors: relayc.empty's alignment, aligned inputs used in place, outputs viewing
the VM's storage and keeping it alive, DLPack out (np.from_dlpack) and in (any object with
__dlpack__)."""

import gc

import numpy as np
import pytest

import relayc
import relay_programs as P

N_BIG = 25_000_000  # 100 MB of float32


class DLPackOnly:
    """Exposes a numpy array through the DLPack protocol only (no buffer or array interface)."""

    def __init__(self, array):
        self._array = array

    def __dlpack__(self, *args, **kwargs):
        return self._array.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        return self._array.__dlpack_device__()


@pytest.fixture(scope="module")
def identity_big():
    return relayc.compile(P.identity(N_BIG))


@pytest.fixture(scope="module")
def identity_small():
    return relayc.compile(P.identity(1000))


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int8", "int32", "int64", "uint8", "bool"])
@pytest.mark.parametrize("shape", [(1,), (3,), (7, 5), (2, 3, 4), (1001,)])
def test_empty_is_64_byte_aligned(shape, dtype):
    a = relayc.empty(shape, dtype)
    assert isinstance(a, np.ndarray)
    assert a.shape == shape
    assert a.dtype == np.dtype(dtype)
    assert a.flags.c_contiguous and a.flags.writeable
    assert a.ctypes.data % 64 == 0, hex(a.ctypes.data)
    a[...] = 1
    assert a.all()


def test_empty_defaults_to_float32_and_accepts_an_int_shape():
    a = relayc.empty((4, 4))
    assert a.dtype == np.float32 and a.ctypes.data % 64 == 0
    b = relayc.empty(10)
    assert b.shape == (10,) and b.ctypes.data % 64 == 0


def test_many_empties_are_all_aligned():
    arrays = [relayc.empty((n,), "float32") for n in range(1, 200)]
    assert all(a.ctypes.data % 64 == 0 for a in arrays)


def test_aligned_input_is_not_copied(identity_big):
    x = relayc.empty((N_BIG,), "float32")
    x.fill(1.5)
    x[123] = 7.0
    x[-1] = -2.0
    out = relayc.VM(identity_big)(x)
    assert isinstance(out, np.ndarray)
    assert out.shape == (N_BIG,) and out.dtype == np.float32
    assert out.ctypes.data == x.ctypes.data
    assert out[123] == 7.0 and out[-1] == -2.0 and out[0] == 1.5
    # The output keeps the input's memory alive.
    del x
    gc.collect()
    filler = np.full(N_BIG, 9.0, np.float32)  # likely to reuse freed memory if it were freed
    assert out[123] == 7.0 and out[-1] == -2.0 and out[1000] == 1.5
    del filler


def test_unaligned_input_is_copied_once_and_computes_the_same(identity_small):
    base = relayc.empty((1001,), "float32")
    x = base[1:]  # 4 bytes past a 64-byte boundary, still C-contiguous
    assert x.flags.c_contiguous and x.ctypes.data % 64 == 4
    x[:] = np.arange(1000, dtype=np.float32)
    out = relayc.VM(identity_small)(x)
    np.testing.assert_array_equal(out, np.arange(1000, dtype=np.float32))
    assert out.ctypes.data != x.ctypes.data
    # A copy: writing the input afterwards does not change the output.
    x[:] = -1
    assert out[5] == 5.0


def test_an_output_passed_back_in_is_not_copied(identity_small):
    vm = relayc.VM(identity_small)
    first = vm(np.arange(1000, dtype=np.float32))
    second = vm(first)
    assert second.ctypes.data == first.ctypes.data
    np.testing.assert_array_equal(second, np.arange(1000, dtype=np.float32))


def test_outputs_are_aligned_and_outlive_vm_and_executable():
    n = 1_000_000
    text = P.HEADER + f"""
def @main(%x: Tensor[({n}), float32], %y: Tensor[({n}), float32]) -> (Tensor[({n}), float32], Tensor[({n}), float32]) {{
  (add(%x, %y), multiply(%x, %y))
}}
"""
    exe = relayc.compile(text)
    vm = relayc.VM(exe)
    x = np.arange(n, dtype=np.float32)
    y = np.full(n, 2.0, np.float32)
    total, product = vm(x, y)
    assert total.ctypes.data % 64 == 0 and product.ctypes.data % 64 == 0
    del vm, exe
    gc.collect()
    # Other work that allocates and frees VM storage in the meantime.
    other = relayc.VM(relayc.compile(text))
    for _ in range(3):
        other(np.zeros(n, np.float32), np.zeros(n, np.float32))
    del other
    gc.collect()
    np.testing.assert_array_equal(total, x + 2)
    np.testing.assert_array_equal(product, x * 2)


def test_outputs_support_dlpack(identity_small):
    out = relayc.VM(identity_small)(np.arange(1000, dtype=np.float32))
    assert hasattr(out, "__dlpack__") and hasattr(out, "__dlpack_device__")
    assert out.__dlpack_device__()[0] == 1  # kDLCPU
    view = np.from_dlpack(out)
    assert np.shares_memory(view, out)
    assert view.ctypes.data == out.ctypes.data
    np.testing.assert_array_equal(view, np.arange(1000, dtype=np.float32))


def test_dlpack_view_of_an_output_outlives_everything():
    text = P.HEADER + """
def @main(%x: Tensor[(64), float32]) -> Tensor[(64), float32] {
  multiply(%x, 3f)
}
"""
    exe = relayc.compile(text)
    vm = relayc.VM(exe)
    out = vm(np.ones(64, np.float32))
    view = np.from_dlpack(out)
    del out, vm, exe
    gc.collect()
    np.testing.assert_array_equal(view, np.full(64, 3.0, np.float32))


def test_an_object_with_only_dlpack_is_accepted(identity_small):
    x = relayc.empty((1000,), "float32")
    x[:] = np.arange(1000, dtype=np.float32)
    wrapped = DLPackOnly(x)
    assert not hasattr(wrapped, "__array__") and not hasattr(wrapped, "__array_interface__")
    out = relayc.VM(identity_small)(wrapped)
    np.testing.assert_array_equal(out, np.arange(1000, dtype=np.float32))
    # Aligned memory through DLPack is used in place too.
    assert out.ctypes.data == x.ctypes.data


def test_a_dlpack_object_of_the_wrong_dtype_is_a_run_error(identity_small):
    with pytest.raises(relayc.RunError) as info:
        relayc.VM(identity_small)(DLPackOnly(np.zeros(1000, np.int32)))
    assert "int32" in info.value.rendered and "float32" in info.value.rendered


def test_dlpack_inputs_to_a_computing_program():
    out = relayc.VM(relayc.compile(P.ADD))(
        DLPackOnly(np.ones((2, 3), np.float32)), y=DLPackOnly(np.full((2, 3), 2.0, np.float32))
    )
    np.testing.assert_array_equal(out, np.full((2, 3), 3.0, np.float32))
