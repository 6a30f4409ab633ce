"""The exception classes: every one raised where it belongs, each with `.code` and `.rendered`,
all subclasses of relayc.Error (itself an Exception)."""

import numpy as np
import pytest

import relayc
import relay_programs as P

SUBCLASSES = [
    relayc.ParseError,
    relayc.TypeCheckError,
    relayc.CompileError,
    relayc.RunError,
    relayc.FileError,
]


def assert_diagnostic(err, cls, code=None):
    """`err` is exactly a `cls`, a relayc.Error, with a code and a rendered report."""
    assert type(err) is cls, type(err)
    assert isinstance(err, relayc.Error)
    assert isinstance(err.rendered, str) and err.rendered.strip()
    assert err.code is None or isinstance(err.code, str)
    if code is not None:
        assert err.code == code, (err.code, err.rendered)
        # The rendered report carries the code, as relayc's command line prints it.
        assert code in err.rendered, err.rendered
    assert str(err).strip()


def test_error_hierarchy():
    assert issubclass(relayc.Error, Exception)
    for cls in SUBCLASSES:
        assert issubclass(cls, relayc.Error), cls
        assert cls is not relayc.Error
    assert len(set(SUBCLASSES)) == len(SUBCLASSES)
    # None of them is caught as another.
    for a in SUBCLASSES:
        for b in SUBCLASSES:
            if a is not b:
                assert not issubclass(a, b), (a, b)


def test_parse_error():
    with pytest.raises(relayc.ParseError) as info:
        relayc.parse(P.BAD_SYNTAX, name="bad.relay")
    assert_diagnostic(info.value, relayc.ParseError, "relay::parse::unexpected_token")
    assert "bad.relay:3:36" in info.value.rendered


def test_type_check_error():
    with pytest.raises(relayc.TypeCheckError) as info:
        relayc.parse(P.ILL_TYPED, name="ill.relay")
    assert_diagnostic(info.value, relayc.TypeCheckError, "relay::type::operator")
    assert "ill.relay:4:3" in info.value.rendered


def test_type_check_error_of_a_return_type():
    text = P.HEADER + """
def @main(%x: Tensor[(2), float32]) -> Tensor[(2), int32] {
  %x
}
"""
    with pytest.raises(relayc.TypeCheckError) as info:
        relayc.compile(text)
    assert_diagnostic(info.value, relayc.TypeCheckError)
    assert info.value.code.startswith("relay::type::"), info.value.code


def test_compile_error_from_passes():
    with pytest.raises(relayc.CompileError) as info:
        relayc.compile(P.ADD, passes='[pipeline]\npasses = ["nonexistent_pass"]\n')
    assert_diagnostic(info.value, relayc.CompileError, "relay::config::unknown_pass")


def test_compile_error_from_kernels():
    with pytest.raises(relayc.CompileError) as info:
        relayc.compile(P.LOG_INT, name="logint.relay")
    assert_diagnostic(info.value, relayc.CompileError)
    assert "does not support dtype int32" in info.value.rendered
    assert "logint.relay" in info.value.rendered


def test_run_error_wrong_shape_names_parameter_and_types():
    vm = relayc.VM(relayc.compile(P.ADD))
    good = np.zeros((2, 3), np.float32)
    with pytest.raises(relayc.RunError) as info:
        vm(good, np.zeros((3, 2), np.float32))
    err = info.value
    assert_diagnostic(err, relayc.RunError, "relay::vm::bad_argument")
    assert "%y" in err.rendered or "`y`" in err.rendered, err.rendered
    assert "Tensor[(2, 3), float32]" in err.rendered
    assert "(3, 2)" in err.rendered


def test_run_error_wrong_dtype_names_parameter_and_types():
    vm = relayc.VM(relayc.compile(P.ADD))
    with pytest.raises(relayc.RunError) as info:
        vm(np.zeros((2, 3), np.int32), np.zeros((2, 3), np.float32))
    err = info.value
    assert_diagnostic(err, relayc.RunError, "relay::vm::bad_argument")
    assert "%x" in err.rendered or "`x`" in err.rendered, err.rendered
    assert "float32" in err.rendered
    assert "int32" in err.rendered


def test_run_error_wrong_dtype_of_a_keyword_argument():
    vm = relayc.VM(relayc.compile(P.ADD))
    with pytest.raises(relayc.RunError) as info:
        vm(x=np.zeros((2, 3), np.float32), y=np.zeros((2, 3), np.float64))
    assert "float64" in info.value.rendered
    assert "%y" in info.value.rendered or "`y`" in info.value.rendered


def test_run_error_arity():
    vm = relayc.VM(relayc.compile(P.ADD))
    with pytest.raises(relayc.RunError) as info:
        vm(np.zeros((2, 3), np.float32))
    assert_diagnostic(info.value, relayc.RunError)
    # The missing input is named with its type.
    assert "%y" in info.value.rendered and "Tensor[(2, 3), float32]" in info.value.rendered
    with pytest.raises(relayc.RunError) as info:
        vm(np.zeros((2, 3), np.float32), np.zeros((2, 3), np.float32), np.zeros((2, 3), np.float32))
    assert "got 3" in info.value.rendered
    with pytest.raises(relayc.RunError):
        vm(np.zeros((2, 3), np.float32), x=np.zeros((2, 3), np.float32))


def test_run_error_unknown_keyword():
    vm = relayc.VM(relayc.compile(P.ADD))
    with pytest.raises(relayc.RunError) as info:
        vm(x=np.zeros((2, 3), np.float32), z=np.zeros((2, 3), np.float32))
    assert "`z`" in info.value.rendered


def test_run_error_unknown_entry():
    vm = relayc.VM(relayc.compile(P.ADD))
    with pytest.raises(relayc.RunError) as info:
        vm.run(np.zeros((2, 3), np.float32), np.zeros((2, 3), np.float32), entry="nope")
    assert_diagnostic(info.value, relayc.RunError, "relay::vm::unknown_function")
    assert "nope" in info.value.rendered


def test_run_error_recursion_limit():
    vm = relayc.VM(relayc.compile(P.SUM_TO, name="sum_to.relay"), max_frames=50)
    with pytest.raises(relayc.RunError) as info:
        vm(10_000)
    assert_diagnostic(info.value, relayc.RunError, "relay::vm::recursion_limit")
    assert "sum_to.relay" in info.value.rendered


def test_run_error_from_a_kernel():
    vm = relayc.VM(relayc.compile(P.DIVIDE))
    assert int(vm(7, 2)) == 3
    with pytest.raises(relayc.RunError) as info:
        vm(7, 0)
    assert_diagnostic(info.value, relayc.RunError, "relay::vm::kernel")
    assert "division by zero" in info.value.rendered


def test_file_error_missing(tmp_path):
    with pytest.raises(relayc.FileError) as info:
        relayc.load(tmp_path / "missing.ro")
    assert_diagnostic(info.value, relayc.FileError, "relay::exe::io")
    assert "missing.ro" in info.value.rendered


def test_file_error_for_a_missing_source_file(tmp_path):
    # A one-line string naming a .relay, .onnx or .ro file is a path, even when the file is
    # missing: a FileError, not Relay text that fails to parse.
    for name in ("missing.relay", "missing.onnx"):
        with pytest.raises(relayc.FileError) as info:
            relayc.compile(str(tmp_path / name))
        assert_diagnostic(info.value, relayc.FileError)
        assert name in info.value.rendered


def test_file_error_not_an_executable(tmp_path):
    path = tmp_path / "garbage.ro"
    path.write_bytes(b"this is not an executable at all" * 4)
    with pytest.raises(relayc.FileError) as info:
        relayc.load(path)
    assert_diagnostic(info.value, relayc.FileError, "relay::exe::magic")


def test_file_error_truncated_and_flipped(tmp_path):
    good = tmp_path / "good.ro"
    relayc.compile(P.ADT).save(good)
    data = good.read_bytes()
    assert relayc.load(good) is not None

    truncated = tmp_path / "truncated.ro"
    truncated.write_bytes(data[: len(data) // 2])
    with pytest.raises(relayc.FileError) as info:
        relayc.load(truncated)
    assert_diagnostic(info.value, relayc.FileError)
    assert info.value.code.startswith("relay::exe::"), info.value.code

    flipped = bytearray(data)
    flipped[len(data) // 2] ^= 0xFF
    path = tmp_path / "flipped.ro"
    path.write_bytes(bytes(flipped))
    with pytest.raises(relayc.FileError) as info:
        relayc.load(path)
    assert_diagnostic(info.value, relayc.FileError, "relay::exe::checksum")

    empty = tmp_path / "empty.ro"
    empty.write_bytes(b"")
    with pytest.raises(relayc.FileError):
        relayc.load(empty)


def test_file_error_when_saving_to_a_missing_directory(tmp_path):
    with pytest.raises(relayc.FileError) as info:
        relayc.compile(P.ADD).save(tmp_path / "no" / "such" / "dir" / "x.ro")
    assert_diagnostic(info.value, relayc.FileError, "relay::exe::io")


def test_all_errors_are_caught_as_relayc_error(tmp_path):
    attempts = [
        lambda: relayc.parse(P.BAD_SYNTAX),
        lambda: relayc.parse(P.ILL_TYPED),
        lambda: relayc.compile(P.LOG_INT),
        lambda: relayc.VM(relayc.compile(P.DIVIDE))(1, 0),
        lambda: relayc.load(tmp_path / "none.ro"),
    ]
    for attempt in attempts:
        with pytest.raises(relayc.Error):
            attempt()
