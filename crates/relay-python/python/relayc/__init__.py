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
    "import_onnx",
    "load",
    "parse",
]
