"""One BERT-base encoder layer as an ONNX model with a dynamic batch and sequence (`batch` and
`seq` are symbolic dimensions of its input), written the way PyTorch's exporter writes
Hugging Face's BertLayer: LayerNormalization, 3-D MatMuls by [in, out] initializers with Add
biases, heads split by Reshape with 0s ([0, 0, 12, 64]) and Transpose, scaled attention by 4-D
MatMul, Div and Softmax, heads merged, GELU with Erf. Hidden 768, 12 heads, FFN 3072, post-norm,
no attention mask. Weights are seeded (numpy's default_rng), so the file is the same every time.

    python benches/dynamic/bert_layer.py OUT.onnx
"""

import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper, save

HIDDEN, HEADS, FFN = 768, 12, 3072


def build():
    rng = np.random.default_rng(768)
    inits = []
    nodes = []

    def weight(name, shape, scale, offset=0.0):
        a = (offset + scale * rng.uniform(-1.0, 1.0, shape)).astype(np.float32)
        inits.append(numpy_helper.from_array(a, name))
        return name

    def const(name, values, dtype=np.int64):
        inits.append(numpy_helper.from_array(np.array(values, dtype=dtype), name))
        return name

    def node(op, inputs, name, **attrs):
        nodes.append(helper.make_node(op, inputs, [name], name=name, **attrs))
        return name

    def linear(x, name, d_in, d_out):
        w = weight(f"{name}.weight", (d_in, d_out), np.sqrt(3.0 / d_in))
        b = weight(f"{name}.bias", (d_out,), 0.1)
        return node("Add", [node("MatMul", [x, w], f"{name}.mm"), b], f"{name}.out")

    def layer_norm(x, name):
        g = weight(f"{name}.gamma", (HIDDEN,), 0.1, 1.0)
        b = weight(f"{name}.beta", (HIDDEN,), 0.1)
        return node("LayerNormalization", [x, g, b], name, axis=-1, epsilon=1e-12)

    split = const("heads_shape", [0, 0, HEADS, HIDDEN // HEADS])
    merge = const("merge_shape", [0, 0, HIDDEN])
    scale = const("scale", np.sqrt(HIDDEN // HEADS), np.float32)

    def heads(x, name, perm):
        return node("Transpose", [node("Reshape", [x, split], f"{name}.split")], f"{name}.t",
                    perm=perm)

    x = "hidden"
    q = heads(linear(x, "q", HIDDEN, HIDDEN), "q", [0, 2, 1, 3])
    k = heads(linear(x, "k", HIDDEN, HIDDEN), "k", [0, 2, 3, 1])
    v = heads(linear(x, "v", HIDDEN, HIDDEN), "v", [0, 2, 1, 3])
    scores = node("Div", [node("MatMul", [q, k], "qk"), scale], "scores")
    probs = node("Softmax", [scores], "probs", axis=-1)
    ctx = node("Transpose", [node("MatMul", [probs, v], "ctx")], "ctx.t", perm=[0, 2, 1, 3])
    ctx = node("Reshape", [ctx, merge], "ctx.merged")
    y = layer_norm(node("Add", [linear(ctx, "o", HIDDEN, HIDDEN), x], "res1"), "ln1")
    h = linear(y, "ffn_in", HIDDEN, FFN)
    half = const("half", 0.5, np.float32)
    one = const("one", 1.0, np.float32)
    rsqrt2 = const("rsqrt2", 1.0 / np.sqrt(2.0), np.float32)
    erf = node("Erf", [node("Mul", [h, rsqrt2], "gelu.scaled")], "gelu.erf")
    gelu = node("Mul", [node("Mul", [h, node("Add", [erf, one], "gelu.plus")], "gelu.prod"),
                        half], "gelu")
    f = linear(gelu, "ffn_out", FFN, HIDDEN)
    out = layer_norm(node("Add", [f, y], "res2"), "ln2")

    dims = ["batch", "seq", HIDDEN]
    graph = helper.make_graph(
        nodes, "bert_layer_dynamic",
        [helper.make_tensor_value_info("hidden", TensorProto.FLOAT, dims)],
        [helper.make_tensor_value_info(out, TensorProto.FLOAT, dims)],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def write(path):
    """Writes the model to `path`."""
    save(build(), str(path))


if __name__ == "__main__":
    write(sys.argv[1])
