"""A network written twice at once: as Relay text the way TVM's ONNX importer writes it, and as an
ONNX graph for ONNX Runtime, from the same seeded weights.

Every method of `Graph` appends one Relay binding (`%N = op(...)`) and the ONNX node that
computes the same thing, and returns a `Value` naming both results with their shape. Weights are
parameters of `@main` (bound by `relayc run --params W.npz`) and initializers of the ONNX model;
inputs are parameters of `@main` not in the `.npz` and inputs of the ONNX graph.

Every tensor comes from `weights.splitmix_uniform` with a seed derived from the network's seed and
the tensor's name; `Graph.manifest` records, for each one, what regenerates it (the Rust tests
read it, see benches/tests/models.rs).
"""

from dataclasses import dataclass

import numpy as np

from .weights import splitmix_uniform, tensor_seed

ONNX_DTYPE = {"float32": 1, "float16": 10, "int64": 7}


@dataclass
class Value:
    relay: str  # "%3" or "%input"
    onnx: str  # the ONNX value name
    shape: tuple


def relay_shape(shape):
    inner = ", ".join(str(d) for d in shape)
    return f"({inner},)" if len(shape) == 1 else f"({inner})"


def ints(values):
    return "[" + ", ".join(str(v) for v in values) + "]"


def f32_text(x):
    """The shortest text that reads back as float32 `x`."""
    return np.format_float_positional(np.float32(x), unique=True, trim="0")


class Graph:
    """A network under construction; `dtype` is the float type of its weights and activations."""

    def __init__(self, name, seed, dtype="float32"):
        self.name = name
        self.seed = seed
        self.dtype = dtype
        self.np_dtype = np.dtype(dtype)
        self.lines = []
        self.main_params = []  # (name, relay type text)
        self.params = {}  # name -> array (the .npz)
        self.inputs = {}  # name -> array (the .npy inputs)
        self.manifest = []  # "param|input NAME DTYPE SHAPE KIND ..." lines
        self.nodes = []
        self.initializers = {}
        self.graph_inputs = []
        self.outputs = []
        self.counter = 0
        self.constants = {}

    # -- tensors --------------------------------------------------------------------------------

    def _seeded(self, role, name, shape, scale, offset, dtype):
        seed = tensor_seed(self.seed, name)
        data = splitmix_uniform(seed, int(np.prod(shape)), scale, offset).reshape(shape)
        self.manifest.append(
            f"{role} {name} {dtype} {','.join(map(str, shape))} splitmix {seed} "
            f"{f32_text(scale)} {f32_text(offset)}"
        )
        return data.astype(dtype)

    def weight(self, name, shape, scale, offset=0.0, onnx_array=None):
        """A seeded weight: a parameter of @main and (as `onnx_array(w)` if given) an
        initializer."""
        data = self._seeded("param", name, shape, scale, offset, self.dtype)
        return self._weight_array(name, data, onnx_array)

    def causal_mask(self, name, seq):
        """An additive causal mask [seq, seq]: 0 on and below the diagonal, -10000 above."""
        data = np.triu(np.full((seq, seq), -10000.0, np.float32), k=1).astype(self.dtype)
        self.manifest.append(f"param {name} {self.dtype} {seq},{seq} causal_mask")
        return self._weight_array(name, data, None)

    def _weight_array(self, name, data, onnx_array):
        self.params[name] = data
        self.main_params.append((name, f"Tensor[{relay_shape(data.shape)}, {data.dtype}]"))
        onnx_data = data if onnx_array is None else np.ascontiguousarray(onnx_array(data))
        self.initializers[name] = onnx_data
        return Value(f"%{name}", name, tuple(data.shape))

    def input(self, name, shape, data=None):
        """A network input: seeded uniform in [-1, 1) unless `data` (e.g. token ids) is given."""
        if data is None:
            data = self._seeded("input", name, shape, 1.0, 0.0, self.dtype)
        self.inputs[name] = data
        dtype = str(data.dtype)
        self.main_params.append((name, f"Tensor[{relay_shape(shape)}, {dtype}]"))
        self.graph_inputs.append((name, dtype, list(shape)))
        return Value(f"%{name}", name, tuple(shape))

    def literal(self, x):
        """A scalar constant: its Relay text and the name of an ONNX initializer."""
        suffix = "f" if self.dtype == "float32" else "f16"
        if x not in self.constants:
            name = f"c{len(self.constants)}"
            self.constants[x] = name
            self.initializers[name] = np.array(x, dtype=self.np_dtype)
        return f"{f32_text(x)}{suffix}", self.constants[x]

    def shape_tensor(self, values):
        name = f"shape{len(self.initializers)}"
        self.initializers[name] = np.array(values, dtype=np.int64)
        return name

    # -- emission -------------------------------------------------------------------------------

    def _bind(self, relay_call, shape, op, inputs, **attrs):
        """Appends `%N = relay_call;` and the ONNX node `op(inputs)`."""
        from onnx import helper

        name = f"%{self.counter}"
        out = f"t{self.counter}"
        self.counter += 1
        self.lines.append(f"  {name} = {relay_call};")
        self.nodes.append(helper.make_node(op, inputs, [out], **attrs))
        return Value(name, out, tuple(shape))

    def _unary(self, relay, op, x):
        return self._bind(f"{relay}({x.relay})", x.shape, op, [x.onnx])

    def _binary(self, relay, op, x, y):
        shape = np.broadcast_shapes(x.shape, y.shape)
        return self._bind(f"{relay}({x.relay}, {y.relay})", shape, op, [x.onnx, y.onnx])

    def _scalar(self, relay, op, x, c):
        text, name = self.literal(c)
        return self._bind(f"{relay}({x.relay}, {text})", x.shape, op, [x.onnx, name])

    def add(self, x, y):
        return self._binary("add", "Add", x, y)

    def multiply(self, x, y):
        return self._binary("multiply", "Mul", x, y)

    def add_scalar(self, x, c):
        return self._scalar("add", "Add", x, c)

    def mul_scalar(self, x, c):
        return self._scalar("multiply", "Mul", x, c)

    def divide_scalar(self, x, c):
        return self._scalar("divide", "Div", x, c)

    def power_scalar(self, x, c):
        return self._scalar("power", "Pow", x, c)

    def relu(self, x):
        return self._unary("nn.relu", "Relu", x)

    def erf(self, x):
        return self._unary("erf", "Erf", x)

    def tanh(self, x):
        return self._unary("tanh", "Tanh", x)

    def relu6(self, x):
        """relu6 as TVM imports ONNX's Clip(x, 0, 6)."""
        _, lo = self.literal(0.0)
        _, hi = self.literal(6.0)
        return self._bind(f"clip({x.relay}, a_min=0f, a_max=6f)", x.shape, "Clip", [x.onnx, lo, hi])

    def conv2d(self, x, w, stride=1, pad=0, groups=1):
        n, _, h, wd = x.shape
        o, _, kh, kw = w.shape
        oh = (h + 2 * pad - kh) // stride + 1
        ow = (wd + 2 * pad - kw) // stride + 1
        group_attr = f", groups={groups}" if groups != 1 else ""
        call = (
            f"nn.conv2d({x.relay}, {w.relay}, strides={ints([stride] * 2)}, "
            f"padding={ints([pad] * 4)}{group_attr}, channels={o}, kernel_size={ints([kh, kw])})"
        )
        return self._bind(
            call, (n, o, oh, ow), "Conv", [x.onnx, w.onnx],
            strides=[stride] * 2, pads=[pad] * 4, group=groups, kernel_shape=[kh, kw],
        )

    def max_pool2d(self, x, size, stride, pad):
        n, c, h, w = x.shape
        oh = (h + 2 * pad - size) // stride + 1
        ow = (w + 2 * pad - size) // stride + 1
        call = (
            f"nn.max_pool2d({x.relay}, pool_size={ints([size] * 2)}, "
            f"strides={ints([stride] * 2)}, padding={ints([pad] * 4)})"
        )
        return self._bind(
            call, (n, c, oh, ow), "MaxPool", [x.onnx],
            kernel_shape=[size] * 2, strides=[stride] * 2, pads=[pad] * 4,
        )

    def avg_pool2d(self, x, size, stride):
        n, c, h, w = x.shape
        oh, ow = (h - size) // stride + 1, (w - size) // stride + 1
        call = f"nn.avg_pool2d({x.relay}, pool_size={ints([size] * 2)}, strides={ints([stride] * 2)})"
        return self._bind(
            call, (n, c, oh, ow), "AveragePool", [x.onnx],
            kernel_shape=[size] * 2, strides=[stride] * 2,
        )

    def concatenate(self, xs, axis):
        shape = list(xs[0].shape)
        shape[axis] = sum(x.shape[axis] for x in xs)
        fields = ", ".join(x.relay for x in xs)
        return self._bind(
            f"concatenate(({fields},), axis={axis})", shape, "Concat", [x.onnx for x in xs],
            axis=axis,
        )

    def global_avg_pool2d(self, x):
        n, c = x.shape[:2]
        return self._bind(
            f"nn.global_avg_pool2d({x.relay})", (n, c, 1, 1), "GlobalAveragePool", [x.onnx]
        )

    def batch_flatten(self, x):
        shape = (x.shape[0], int(np.prod(x.shape[1:])))
        return self._bind(f"nn.batch_flatten({x.relay})", shape, "Flatten", [x.onnx], axis=1)

    def reshape(self, x, shape):
        shape = tuple(shape)
        assert np.prod(shape) == np.prod(x.shape), (x.shape, shape)
        return self._bind(
            f"reshape({x.relay}, newshape={ints(shape)})", shape, "Reshape",
            [x.onnx, self.shape_tensor(shape)],
        )

    def transpose(self, x, axes):
        shape = tuple(x.shape[a] for a in axes)
        return self._bind(
            f"transpose({x.relay}, axes={ints(axes)})", shape, "Transpose", [x.onnx],
            perm=list(axes),
        )

    def dense(self, x, w):
        """nn.dense with [out, in] weights; in ONNX a MatMul by the [in, out] initializer (so the
        weight must come from `weight(..., onnx_array=np.transpose)`)."""
        return self._bind(
            f"nn.dense({x.relay}, {w.relay}, units={w.shape[0]})",
            (x.shape[0], w.shape[0]), "MatMul", [x.onnx, w.onnx],
        )

    def bias_add(self, x, b):
        """nn.bias_add on axis 1 (channels of NCHW, features of [N, F])."""
        onnx_bias = b.onnx
        if len(x.shape) == 4:
            # ONNX broadcasts from the right: the bias as [C, 1, 1].
            onnx_bias = f"{b.onnx}_c11"
            self.initializers[onnx_bias] = self.initializers.pop(b.onnx).reshape(-1, 1, 1)
        return self._bind(f"nn.bias_add({x.relay}, {b.relay})", x.shape, "Add", [x.onnx, onnx_bias])

    def batch_matmul(self, x, y, transpose_b):
        """nn.batch_matmul; with transpose_b (TVM's default) y is [b, n, k]."""
        from onnx import helper

        b, m, _ = x.shape
        n = y.shape[1] if transpose_b else y.shape[2]
        y_name = y.onnx
        if transpose_b:
            y_name = f"{y.onnx}_T"
            self.nodes.append(helper.make_node("Transpose", [y.onnx], [y_name], perm=[0, 2, 1]))
        call = f"nn.batch_matmul({x.relay}, {y.relay}, transpose_b={transpose_b})"
        return self._bind(call, (b, m, n), "MatMul", [x.onnx, y_name])

    def softmax(self, x):
        return self._bind(f"nn.softmax({x.relay}, axis=-1)", x.shape, "Softmax", [x.onnx], axis=-1)

    def layer_norm(self, x, gamma, beta, epsilon):
        return self._bind(
            f"nn.layer_norm({x.relay}, {gamma.relay}, {beta.relay}, epsilon={f32_text(epsilon)}f)",
            x.shape, "LayerNormalization", [x.onnx, gamma.onnx, beta.onnx],
            axis=-1, epsilon=float(epsilon),
        )

    def take(self, table, ids):
        shape = tuple(ids.shape) + tuple(table.shape[1:])
        return self._bind(
            f"take({table.relay}, {ids.relay}, axis=0)", shape, "Gather", [table.onnx, ids.onnx],
            axis=0,
        )

    def output(self, *values):
        self.outputs = list(values)

    # -- results --------------------------------------------------------------------------------

    def relay_text(self):
        params = ",\n    ".join(f"%{name}: {ty}" for name, ty in self.main_params)
        body = "\n".join(self.lines)
        if len(self.outputs) == 1:
            result = self.outputs[0].relay
        else:
            result = "(" + ", ".join(v.relay for v in self.outputs) + ")"
        return (
            '#[version = "0.0.5"]\n'
            f"// {self.name}: written by benches/models/generate.py (seed {self.seed}); the\n"
            "// weights are bound by `relayc run --params`, see benches/models/README.md.\n"
            f"def @main(\n    {params}) {{\n{body}\n  {result}\n}}\n"
        )

    def onnx_model(self):
        import onnx
        from onnx import helper, numpy_helper

        def info(name, dtype, shape):
            return helper.make_tensor_value_info(name, ONNX_DTYPE[dtype], list(shape))

        graph = helper.make_graph(
            self.nodes,
            self.name,
            [info(*entry) for entry in self.graph_inputs],
            [info(v.onnx, self.dtype, v.shape) for v in self.outputs],
            initializer=[numpy_helper.from_array(a, n) for n, a in self.initializers.items()],
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = min(model.ir_version, 9)
        onnx.checker.check_model(model)
        return model
