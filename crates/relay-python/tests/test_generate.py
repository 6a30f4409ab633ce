"""relayc.generate and compile(..., generate=True): a GPT-2 decoder with past as Hugging Face's
exporter writes it (crates/relay-onnx/tests/data/generation/, written with ONNX Runtime's ids by
benches/generate/export.py --test-data) in a greedy generation loop, token for token against
ONNX Runtime's greedy loop over the same model."""

import numpy as np
import pytest

import relayc
from support import ONNX_DATA

MODEL = ONNX_DATA / "generation" / "model.onnx"


def cases():
    expected = np.load(ONNX_DATA / "generation" / "expected.npz")
    i = 0
    while f"ids{i}" in expected:
        yield (expected[f"prompt{i}"], int(expected[f"new_tokens{i}"]), int(expected[f"eos{i}"]),
               expected[f"ids{i}"])
        i += 1


def test_generate_in_one_call_matches_onnx_runtime():
    for prompt, new_tokens, eos, ids in cases():
        got = relayc.generate(MODEL, list(prompt), new_tokens, eos=eos)
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got, ids, err_msg=f"prompt {prompt}, eos {eos}")


def test_a_compiled_generation_loop_runs_at_any_prompt_length():
    exe = relayc.compile(str(MODEL), generate=True)
    vm = relayc.VM(exe)
    for prompt, new_tokens, eos, ids in cases():
        got = vm(np.asarray(prompt, np.int64), np.int32(new_tokens), np.int64(eos))
        np.testing.assert_array_equal(np.asarray(got), ids)
    assert vm(np.asarray([3], np.int64), np.int32(0), np.int64(-1)).shape == (0,)


def test_a_model_that_is_not_a_decoder_raises_compile_error():
    with pytest.raises(relayc.CompileError, match="not a decoder with past"):
        relayc.compile(str(ONNX_DATA / "mnist.onnx"), generate=True)
    with pytest.raises(relayc.Error, match="generate=True takes an ONNX decoder"):
        relayc.compile(relayc.parse('#[version = "0.0.5"]\ndef @main() { 1 }'), generate=True)
