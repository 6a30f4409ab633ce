"""relayc: compile and run TVM Relay programs from Python.

Relay is TVM's functional tensor IR: tensors and operators, plus closures, recursion, algebraic
data types, ``match`` and references, so that LSTMs over lists, tree models and decoders that
loop compile as one program. relayc compiles it for a register VM with JIT-compiled kernels.

>>> import numpy as np, relayc
>>> exe = relayc.compile('''#[version = "0.0.5"]
... def @main(%x: Tensor[(2, 2), float32], %w: Tensor[(2, 2), float32]) {
...   nn.relu(nn.dense(%x, %w, units=None))
... }''', params={"w": np.eye(2, dtype="float32")})
>>> vm = relayc.VM(exe)
>>> vm(np.array([[1, -2], [3, 4]], dtype="float32"))
array([[1., 0.],
       [3., 4.]], dtype=float32)

Compiling and running release the GIL; one ``Executable`` serves any number of ``VM``s, one
per thread. Results are numpy arrays over the VM's memory (no copy); inputs that are 64-byte
aligned (``relayc.empty``) are read in place.
"""

from ._relayc import (
    ADT,
    Closure,
    CompileError,
    Error,
    Executable,
    FileError,
    Function,
    Module,
    ParseError,
    Ref,
    RunError,
    TypeCheckError,
    VM,
    __version__,
    check,
    compile,
    empty,
    import_onnx,
    load,
    parse,
)

__all__ = [
    "ADT",
    "Closure",
    "CompileError",
    "Error",
    "Executable",
    "FileError",
    "Function",
    "Module",
    "ParseError",
    "Ref",
    "RunError",
    "TypeCheckError",
    "VM",
    "__version__",
    "check",
    "compile",
    "empty",
    "generate",
    "import_onnx",
    "load",
    "parse",
]


# Executables of `generate`, by the model's path, its modification time and the threads.
_GENERATORS = {}


def generate(model, prompt, new_tokens, eos=-1, threads=0):
    """Greedy generation with an ONNX decoder with past (Hugging Face's exporters' inputs
    ``input_ids``, ``attention_mask``, ``past_key_values.N.key``/``.value``; outputs ``logits``,
    ``present.N.key``/``.value``), in one call: the model is wrapped in a generation loop and
    compiled once per path (``compile(model, generate=True)``, kept for the next call), then
    the prefill and every step run in the VM. ``prompt`` is a sequence of token ids; returns
    the ``new_tokens`` generated ids (fewer when ``eos``, a negative one never matching, ends
    them; it is kept) as an int64 numpy array.

    >>> ids = relayc.generate("decoder_with_past.onnx", [464, 2068, 7586], 32, eos=50256)
    """
    import os

    import numpy as np

    key = (os.fspath(model), os.stat(model).st_mtime_ns, threads)
    exe = _GENERATORS.get(key)
    if exe is None:
        exe = _GENERATORS[key] = compile(model, generate=True, threads=threads)
    prompt = np.ascontiguousarray(np.asarray(prompt, dtype=np.int64).reshape(-1))
    return np.array(VM(exe)(prompt, np.int32(new_tokens), np.int64(eos)))
