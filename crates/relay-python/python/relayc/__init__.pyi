"""Type stubs of the relayc package (the native module relayc._relayc)."""

import os
from typing import Any, Mapping, Optional, Sequence, Union

import numpy as np
import numpy.typing as npt

__version__: str

PathLike = Union[str, "os.PathLike[str]"]
ArrayLike = Union[npt.ArrayLike, Any]  # numpy arrays, objects with __dlpack__, scalars, lists
Result = Union[np.ndarray, tuple, "ADT", "Ref", "Closure"]

class Error(Exception):
    """Every error relayc raises."""

    code: Optional[str]
    """The diagnostic's code (``relay::vm::bad_argument``), or None."""
    rendered: str
    """The diagnostic as the ``relayc`` command line prints it."""

class ParseError(Error):
    """Relay text that does not parse."""

class TypeCheckError(Error):
    """A program that does not type-check."""

class CompileError(Error):
    """A program, its parameters, its pass pipeline or an ONNX model that cannot be compiled."""

class RunError(Error):
    """A run that failed: wrong inputs, a failed kernel, a recursion limit, no ``match`` clause."""

class FileError(Error):
    """A file that cannot be read or written, or a corrupt executable file."""

class Module:
    """A parsed and type-checked Relay module."""

    def astext(self) -> str:
        """The module as canonical Relay text."""

class Function:
    """A global function of an executable."""

    name: str
    params: list[tuple[str, str]]
    """(name, type as Relay text) of each parameter."""
    ret_type: Optional[str]

class Executable:
    """A compiled program: bytecode, constants and JIT-compiled kernels; shared by any number
    of VMs on any threads."""

    @property
    def functions(self) -> list[Function]:
        """The global functions, sorted by name."""
    def save(self, path: PathLike) -> None:
        """Writes a ``.ro`` file (what ``relayc build -o`` writes)."""
    def disasm(self) -> str:
        """The bytecode of every VM function (what ``relayc disasm`` prints)."""

class VM:
    """A virtual machine running one executable; one call at a time, one VM per thread."""

    def __init__(
        self,
        exe: Executable,
        threads: Optional[int] = None,
        max_frames: int = 1_000_000,
        profile: bool = False,
        isa: Optional[str] = None,
    ) -> None: ...
    def run(self, *args: ArrayLike, entry: str = "main", **kwargs: ArrayLike) -> Result:
        """Runs global function ``entry`` on the arguments, by position or by name."""
    def __call__(self, *args: ArrayLike, **kwargs: ArrayLike) -> Result:
        """``run`` of ``@main``."""
    def profile(self) -> dict[str, Any]:
        """The profile recorded so far (a VM made with ``profile=True``)."""
    @property
    def executable(self) -> Executable: ...

class ADT:
    """An ADT value: constructor name, tag and fields."""

    constructor: str
    tag: int
    fields: tuple[Any, ...]
    def __len__(self) -> int: ...
    def __getitem__(self, i: int) -> Any: ...

class Ref:
    """A reference cell a run returned."""

    @property
    def value(self) -> Any:
        """The cell's content now."""

class Closure:
    """A closure a run returned; pass it back as an argument."""

def parse(text: str, name: str = "model.relay") -> Module:
    """Parses Relay text and type-checks it."""

def check(source: Union[Module, str], name: str = "model.relay") -> list[str]:
    """Type-checks a module or Relay text; returns its warnings."""

def compile(
    source: Union[Module, str, "os.PathLike[str]", bytes],
    params: Optional[Mapping[str, ArrayLike]] = None,
    opt_level: Optional[int] = None,
    passes: Optional[PathLike] = None,
    threads: int = 0,
    entry: str = "main",
    name: str = "model.relay",
    generate: bool = False,
) -> Executable:
    """Compiles a module, Relay text, a ``.relay``/``.onnx`` path or ONNX bytes
    (``generate``: an ONNX decoder with past in a greedy generation loop)."""

def load(path: PathLike) -> Executable:
    """Loads a ``.ro`` executable file."""

def import_onnx(
    model: Union[PathLike, bytes],
    input_shapes: Optional[Mapping[str, Sequence[int]]] = None,
    generate: bool = False,
) -> tuple[Module, dict[str, np.ndarray]]:
    """Imports an ONNX model: the Relay module and its initializers (``generate``: a decoder
    with past wrapped in a greedy generation loop)."""

def generate(
    model: PathLike,
    prompt: ArrayLike,
    new_tokens: int,
    eos: int = -1,
    threads: int = 0,
) -> np.ndarray:
    """Greedy generation with an ONNX decoder with past, compiled once per path: the
    generated ids (int64)."""

def empty(shape: Union[int, Sequence[int]], dtype: str = "float32") -> np.ndarray:
    """A zero-filled numpy array whose data is 64-byte aligned (read in place by the VM)."""
