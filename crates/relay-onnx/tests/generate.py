"""Writes the importer's test models: for each case, a small ONNX model of one operator form
(or one control-flow pattern), seeded inputs, and ONNX Runtime's outputs as the expected
result, into tests/data/ops/<case>/ (model.onnx, inputs.npz by ONNX input name, outputs.npz
by output position "0", "1", ...). `cargo test` checks every directory without Python
(tests/generated.rs); run this after adding a case:

    benches/.venv/bin/python crates/relay-onnx/tests/generate.py

(benches/run.sh creates that environment with numpy, onnx and onnxruntime.) Existing
directories are rewritten; a case's files change only when its model or ONNX Runtime does.

`generate.py --node` writes ONNX's own backend node tests for the operators the importer
converts (tests/data/node/), with ONNX Runtime's outputs; tests/data/node/known_failures.txt
lists the ones the importer fails, with the reason, and `cargo test` checks both lists.
"""

import os
import re
import shutil
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "ops")
CASES = []


def case(fn):
    CASES.append(fn)
    return fn


def rng(seed=0):
    return np.random.default_rng(seed)


def info(name, dtype, shape):
    return h.make_tensor_value_info(name, dtype, shape)


def model(nodes, inputs, outputs, inits=(), opset=17):
    g = h.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def unary(op, x, opset=17, **attrs):
    """One node `op` of one float32 input `x` (its output's shape inferred)."""
    return (
        model(
            [h.make_node(op, ["x"], ["y"], **attrs)],
            [info("x", T.FLOAT, list(x.shape))],
            [info("y", T.FLOAT, [None] * x.ndim)],
            opset=opset,
        ),
        {"x": x},
    )


def body(nodes, inputs, outputs, inits=()):
    return h.make_graph(nodes, "body", inputs, outputs, list(inits))


# ----- Control flow -----


@case
def loop_counter():
    """A counting `Loop` (trip count from an input, no condition): the carried sum of i."""
    b = body(
        [
            h.make_node("Cast", ["i"], ["i_f"], to=T.FLOAT),
            h.make_node("Add", ["s_in", "i_f"], ["s_out"]),
            h.make_node("Identity", ["cond_in"], ["cond_out"]),
        ],
        [info("i", T.INT64, []), info("cond_in", T.BOOL, []), info("s_in", T.FLOAT, [1])],
        [info("cond_out", T.BOOL, []), info("s_out", T.FLOAT, [1])],
    )
    m = model(
        [h.make_node("Loop", ["M", "", "s0"], ["s"], body=b)],
        [info("M", T.INT64, []), info("s0", T.FLOAT, [1])],
        [info("s", T.FLOAT, [1])],
    )
    return m, {"M": np.array(1000, np.int64), "s0": np.zeros(1, np.float32)}


@case
def loop_scan_outputs():
    """A `Loop` with a constant trip count, a captured outer value and a scan output that a
    later node reads (static length)."""
    b = body(
        [
            h.make_node("Add", ["x_in", "w"], ["x_out"]),
            h.make_node("Mul", ["x_out", "x_out"], ["sq"]),
            h.make_node("Identity", ["cond_in"], ["cond_out"]),
        ],
        [info("i", T.INT64, []), info("cond_in", T.BOOL, []), info("x_in", T.FLOAT, [2, 3])],
        [
            info("cond_out", T.BOOL, []),
            info("x_out", T.FLOAT, [2, 3]),
            info("sq", T.FLOAT, [2, 3]),
        ],
    )
    m = model(
        [
            h.make_node("Loop", ["M", "", "x"], ["xf", "sqs"], body=b),
            h.make_node("Relu", ["sqs"], ["r"]),
        ],
        [info("x", T.FLOAT, [2, 3]), info("w", T.FLOAT, [2, 3])],
        [info("xf", T.FLOAT, [2, 3]), info("r", T.FLOAT, [5, 2, 3])],
        [nh.from_array(np.array(5, np.int64), "M")],
    )
    r = rng(1)
    return m, {
        "x": r.standard_normal((2, 3), dtype=np.float32),
        "w": r.standard_normal((2, 3), dtype=np.float32),
    }


@case
def loop_while_with_nested_if():
    """A while `Loop` (condition only, a dynamic number of iterations) whose body branches
    with an `If` on the iteration's parity; its scan output has a dynamic length."""
    then_g = h.make_graph(
        [h.make_node("Mul", ["v_in", "two"], ["t_out"])], "then", [], [info("t_out", T.FLOAT, [3])]
    )
    else_g = h.make_graph(
        [h.make_node("Add", ["v_in", "two"], ["e_out"])], "else", [], [info("e_out", T.FLOAT, [3])]
    )
    b = body(
        [
            h.make_node("Mod", ["i", "two_i"], ["m"]),
            h.make_node("Equal", ["m", "zero_i"], ["even"]),
            h.make_node("If", ["even"], ["v_out"], then_branch=then_g, else_branch=else_g),
            h.make_node("ReduceSum", ["v_out"], ["tot"], keepdims=0),
            h.make_node("Less", ["tot", "limit"], ["cond_out"]),
            h.make_node("Identity", ["tot"], ["tot_s"]),
        ],
        [info("i", T.INT64, []), info("cond_in", T.BOOL, []), info("v_in", T.FLOAT, [3])],
        [info("cond_out", T.BOOL, []), info("v_out", T.FLOAT, [3]), info("tot_s", T.FLOAT, [])],
        [nh.from_array(np.array(2, np.int64), "two_i"), nh.from_array(np.array(0, np.int64), "zero_i")],
    )
    m = model(
        [h.make_node("Loop", ["", "c0", "v"], ["vf", "tots"], body=b)],
        [info("c0", T.BOOL, []), info("v", T.FLOAT, [3]), info("limit", T.FLOAT, [])],
        [info("vf", T.FLOAT, [3]), info("tots", T.FLOAT, [None])],
        [nh.from_array(np.array(2.0, np.float32), "two")],
    )
    return m, {
        "c0": np.array(True),
        "v": np.array([1, 2, 3], np.float32),
        "limit": np.array(1000.0, np.float32),
    }


@case
def scan_reverse_axis_1():
    """`Scan`: a running sum along axis 1, read backwards, stacked along axis 1."""
    b = body(
        [h.make_node("Add", ["s_in", "x_t"], ["s_out"]), h.make_node("Identity", ["s_out"], ["y_t"])],
        [info("s_in", T.FLOAT, [2]), info("x_t", T.FLOAT, [2])],
        [info("s_out", T.FLOAT, [2]), info("y_t", T.FLOAT, [2])],
    )
    m = model(
        [
            h.make_node(
                "Scan",
                ["s0", "xs"],
                ["sf", "ys"],
                body=b,
                num_scan_inputs=1,
                scan_input_axes=[1],
                scan_input_directions=[1],
                scan_output_axes=[1],
            )
        ],
        [info("s0", T.FLOAT, [2]), info("xs", T.FLOAT, [2, 4])],
        [info("sf", T.FLOAT, [2]), info("ys", T.FLOAT, [2, 4])],
    )
    return m, {"s0": np.zeros(2, np.float32), "xs": rng(2).standard_normal((2, 4), dtype=np.float32)}


@case
def scan_two_inputs_reversed_output():
    """`Scan` over two inputs of one length (the second backwards), an output reversed."""
    b = body(
        [
            h.make_node("Mul", ["a_t", "b_t"], ["p"]),
            h.make_node("Add", ["s_in", "p"], ["s_out"]),
            h.make_node("Tanh", ["s_out"], ["y_t"]),
        ],
        [info("s_in", T.FLOAT, [3]), info("a_t", T.FLOAT, [3]), info("b_t", T.FLOAT, [3])],
        [info("s_out", T.FLOAT, [3]), info("y_t", T.FLOAT, [3])],
    )
    m = model(
        [
            h.make_node(
                "Scan",
                ["s0", "a", "b"],
                ["sf", "ys"],
                body=b,
                num_scan_inputs=2,
                scan_input_directions=[0, 1],
                scan_output_directions=[1],
            )
        ],
        [info("s0", T.FLOAT, [3]), info("a", T.FLOAT, [5, 3]), info("b", T.FLOAT, [5, 3])],
        [info("sf", T.FLOAT, [3]), info("ys", T.FLOAT, [5, 3])],
    )
    r = rng(3)
    return m, {
        "s0": r.standard_normal(3, dtype=np.float32),
        "a": r.standard_normal((5, 3), dtype=np.float32),
        "b": r.standard_normal((5, 3), dtype=np.float32),
    }


@case
def if_on_an_input():
    """`If` on a graph input, each branch reading the graph's inputs."""
    then_g = h.make_graph([h.make_node("Add", ["a", "b"], ["o"])], "then", [], [info("o", T.FLOAT, [2])])
    else_g = h.make_graph([h.make_node("Sub", ["a", "b"], ["o2"])], "else", [], [info("o2", T.FLOAT, [2])])
    m = model(
        [h.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)],
        [info("c", T.BOOL, [1]), info("a", T.FLOAT, [2]), info("b", T.FLOAT, [2])],
        [info("y", T.FLOAT, [2])],
    )
    return m, {"c": np.array([False]), "a": np.array([1, 2], np.float32), "b": np.array([3, 5], np.float32)}


@case
def if_on_a_constant_two_outputs():
    """`If` on a condition known at import (a shape test): the branch taken is imported
    inline; two outputs."""
    then_g = h.make_graph(
        [h.make_node("Relu", ["x"], ["r"]), h.make_node("Neg", ["x"], ["n"])],
        "then",
        [],
        [info("r", T.FLOAT, [2, 2]), info("n", T.FLOAT, [2, 2])],
    )
    else_g = h.make_graph(
        [h.make_node("Sigmoid", ["x"], ["s"]), h.make_node("Abs", ["x"], ["a"])],
        "else",
        [],
        [info("s", T.FLOAT, [2, 2]), info("a", T.FLOAT, [2, 2])],
    )
    m = model(
        [
            h.make_node("Shape", ["x"], ["shape"]),
            h.make_node("ReduceProd", ["shape"], ["size"], keepdims=0),
            h.make_node("Greater", ["size", "three"], ["big"]),
            h.make_node("If", ["big"], ["y", "z"], then_branch=then_g, else_branch=else_g),
        ],
        [info("x", T.FLOAT, [2, 2])],
        [info("y", T.FLOAT, [2, 2]), info("z", T.FLOAT, [2, 2])],
        [nh.from_array(np.array(3, np.int64), "three")],
    )
    return m, {"x": rng(4).standard_normal((2, 2), dtype=np.float32)}


@case
def symbolic_batch_dimension():
    """A model whose batch dimension is symbolic (`N`): the given input's shape fixes it."""
    m = model(
        [h.make_node("MatMul", ["x", "w"], ["m"]), h.make_node("Relu", ["m"], ["y"])],
        [info("x", T.FLOAT, ["N", 4])],
        [info("y", T.FLOAT, ["N", 3])],
        [nh.from_array(rng(5).standard_normal((4, 3), dtype=np.float32), "w")],
    )
    return m, {"x": rng(6).standard_normal((5, 4), dtype=np.float32)}


# ----- Recurrent cells -----


def recurrent(op, gates, seq=5, batch=2, inp=3, hidden=4, direction="forward", layout=0,
              bias=True, initial=True, peephole=False, seed=10, lens=None, **attrs):
    """One `op` node with random W, R (and B, initial states, peepholes) as inputs."""
    r = rng(seed)
    dirs = 2 if direction == "bidirectional" else 1
    x_shape = [seq, batch, inp] if layout == 0 else [batch, seq, inp]
    s_shape = [dirs, batch, hidden] if layout == 0 else [batch, dirs, hidden]
    feeds = {
        "X": r.standard_normal(x_shape, dtype=np.float32),
        "W": 0.5 * r.standard_normal((dirs, gates * hidden, inp), dtype=np.float32),
        "R": 0.5 * r.standard_normal((dirs, gates * hidden, hidden), dtype=np.float32),
    }
    names = ["X", "W", "R"]
    names.append("B" if bias else "")
    if bias:
        feeds["B"] = 0.3 * r.standard_normal((dirs, 2 * gates * hidden), dtype=np.float32)
    names.append("lens" if lens is not None else "")
    if lens is not None:
        feeds["lens"] = np.array(lens, np.int32)
    names.append("h0" if initial else "")
    if initial:
        feeds["h0"] = r.standard_normal(s_shape, dtype=np.float32)
    if op == "LSTM":
        names.append("c0" if initial else "")
        if initial:
            feeds["c0"] = r.standard_normal(s_shape, dtype=np.float32)
        names.append("P" if peephole else "")
        if peephole:
            feeds["P"] = 0.5 * r.standard_normal((dirs, 3 * hidden), dtype=np.float32)
    while names and names[-1] == "":
        names.pop()
    outs = ["Y", "Y_h"] + (["Y_c"] if op == "LSTM" else [])
    node = h.make_node(op, names, outs, hidden_size=hidden, direction=direction, layout=layout, **attrs)
    inputs = [info(n, nh.from_array(feeds[n]).data_type, list(feeds[n].shape))
              for n in names if n]
    ranks = [4, 3, 3]
    outputs = [info(o, T.FLOAT, [None] * k) for o, k in zip(outs, ranks)]
    m = model([node], inputs, outputs, opset=14)
    if layout == 0:
        return m, feeds
    # ONNX Runtime runs only layout 0: the expected outputs are those of the layout-0 model on
    # the transposed inputs, transposed back.
    ref, ref_feeds = recurrent(op, gates, seq, batch, inp, hidden, direction, 0, bias, initial,
                               peephole, seed, lens, **attrs)
    for k in ("h0", "c0"):
        if k in ref_feeds:
            ref_feeds[k] = feeds[k].transpose(1, 0, 2)
    ref_feeds["X"] = feeds["X"].transpose(1, 0, 2)
    ys = run(ref, ref_feeds)
    expected = [ys[0].transpose(2, 0, 1, 3)] + [y.transpose(1, 0, 2) for y in ys[1:]]
    return m, feeds, expected


@case
def lstm_bidirectional_peepholes_clip_layout_1():
    return recurrent("LSTM", 4, direction="bidirectional", layout=1, peephole=True, clip=1.5)


@case
def lstm_reverse_other_activations_input_forget():
    return recurrent(
        "LSTM", 4, direction="reverse", input_forget=1,
        activations=["HardSigmoid", "LeakyRelu", "Softsign"], activation_alpha=[0.3, 0.1],
        activation_beta=[0.4], seed=11,
    )


@case
def lstm_forward_no_bias_no_initial_state():
    return recurrent("LSTM", 4, bias=False, initial=False, seed=12)


@case
def gru_bidirectional():
    return recurrent("GRU", 3, direction="bidirectional", seed=13)


@case
def gru_linear_before_reset_reverse_layout_1():
    return recurrent("GRU", 3, direction="reverse", layout=1, linear_before_reset=1, seed=14)


@case
def gru_activations_clip_no_bias():
    return recurrent(
        "GRU", 3, bias=False, clip=2.0, activations=["Sigmoid", "Relu"], seed=15,
    )


@case
def lstm_bidirectional_sequence_lengths():
    return recurrent("LSTM", 4, batch=3, direction="bidirectional", lens=[5, 2, 3], seed=18)


@case
def gru_reverse_sequence_lengths():
    return recurrent("GRU", 3, batch=3, direction="reverse", lens=[1, 5, 4], seed=19)


@case
def rnn_sequence_lengths_no_initial_state():
    return recurrent("RNN", 1, batch=2, lens=[3, 5], initial=False, seed=20)


@case
def rnn_forward():
    return recurrent("RNN", 1, seed=16)


@case
def rnn_bidirectional_relu_and_affine():
    return recurrent(
        "RNN", 1, direction="bidirectional", activations=["Relu", "Affine"],
        activation_alpha=[0.7], activation_beta=[0.1], initial=False, seed=17,
    )


# ----- Normalizations, resampling, index operators -----


def single(op, feeds, inits=(), opset=17, out_rank=None, out_type=T.FLOAT, **attrs):
    """One `op` node over `feeds` (graph inputs, in order) and `inits` (initializers)."""
    names = list(feeds) + [t.name for t in inits]
    first = next(iter(feeds.values()))
    rank = first.ndim if out_rank is None else out_rank
    m = model(
        [h.make_node(op, names, ["y"], **attrs)],
        [info(k, nh.from_array(v).data_type, list(v.shape)) for k, v in feeds.items()],
        [info("y", out_type, [None] * rank)],
        inits,
        opset=opset,
    )
    return m, feeds


def image(shape, seed=20):
    return rng(seed).standard_normal(shape, dtype=np.float32)


@case
def instance_normalization():
    r = rng(21)
    return single(
        "InstanceNormalization",
        {"x": image((2, 3, 4, 5)), "s": r.standard_normal(3, dtype=np.float32),
         "b": r.standard_normal(3, dtype=np.float32)},
        epsilon=1e-3,
    )


@case
def lrn_odd_size():
    return single("LRN", {"x": image((2, 7, 3, 4))}, size=3, alpha=2e-3, beta=0.8, bias=1.5)


@case
def lrn_even_size():
    """ONNX Runtime takes odd sizes only: the expected result is the operator's definition
    computed here in float64 (channels c - floor((size-1)/2) through c + ceil((size-1)/2))."""
    size, alpha, beta, bias = 4, 1e-4, 0.75, 1.0
    x = image((1, 6, 2, 2), seed=22)
    m, feeds = single("LRN", {"x": x}, size=size)
    x64 = x.astype(np.float64)
    lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
    sq = np.zeros_like(x64)
    for c in range(x.shape[1]):
        sq[:, c] = (x64[:, max(0, c - lo): c + hi + 1] ** 2).sum(axis=1)
    y = x64 / (bias + alpha / size * sq) ** beta
    return m, feeds, [y.astype(np.float32)]


@case
def depth_to_space_dcr():
    return single("DepthToSpace", {"x": image((1, 8, 2, 3))}, blocksize=2)


@case
def depth_to_space_crd():
    return single("DepthToSpace", {"x": image((2, 8, 2, 3))}, blocksize=2, mode="CRD")


@case
def space_to_depth():
    return single("SpaceToDepth", {"x": image((1, 2, 4, 6))}, blocksize=2)


@case
def one_hot_last_axis_negative_indices():
    return single(
        "OneHot",
        {"i": np.array([[0, 3, -1], [2, -4, 1]], np.int64)},
        [nh.from_array(np.array(4, np.int64), "depth"),
         nh.from_array(np.array([0.5, 2.0], np.float32), "values")],
        out_rank=3,
    )


@case
def one_hot_axis_0_int_values():
    return single(
        "OneHot",
        {"i": np.array([1, 0, 2], np.int64)},
        [nh.from_array(np.array([3], np.int64), "depth"),
         nh.from_array(np.array([-1, 7], np.int64), "values")],
        out_rank=2, out_type=T.INT64, axis=0,
    )


@case
def cumsum_inclusive():
    return single("CumSum", {"x": image((3, 5))}, [nh.from_array(np.array(1, np.int64), "axis")])


@case
def cumsum_exclusive_reverse():
    return single(
        "CumSum", {"x": image((4, 3, 2))}, [nh.from_array(np.array(0, np.int32), "axis")],
        exclusive=1, reverse=1,
    )


@case
def cumsum_int64():
    return single(
        "CumSum", {"x": np.arange(12, dtype=np.int64).reshape(3, 4)},
        [nh.from_array(np.array(-1, np.int64), "axis")], out_type=T.INT64, exclusive=1,
    )


@case
def max_pool_3d_strides_pads():
    return single("MaxPool", {"x": image((1, 2, 5, 6, 7))}, kernel_shape=[2, 3, 2],
                  strides=[2, 1, 2], pads=[1, 0, 1, 0, 1, 1])


@case
def average_pool_3d_ceil_dilations():
    return single("AveragePool", {"x": image((2, 1, 6, 5, 5), seed=23)}, opset=19,
                  kernel_shape=[2, 2, 3], strides=[2, 2, 1], dilations=[2, 1, 1], ceil_mode=1)


@case
def max_pool_ceil_drops_the_last_window():
    return single("MaxPool", {"x": image((1, 1, 3, 3), seed=24)}, kernel_shape=[2, 2],
                  strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1)


@case
def pad_wrap():
    return single("Pad", {"x": image((3, 4), seed=25)},
                  [nh.from_array(np.array([1, 2, 2, 1], np.int64), "pads")], opset=19,
                  mode="wrap")


@case
def top_k_largest_with_ties():
    x = np.array([[3, 1, 3, 2, 5, 5], [0, -1, 4, 4, 4, 2]], np.float32)
    m = model(
        [h.make_node("TopK", ["x", "k"], ["v", "i"], axis=1)],
        [info("x", T.FLOAT, [2, 6])],
        [info("v", T.FLOAT, [2, 3]), info("i", T.INT64, [2, 3])],
        [nh.from_array(np.array([3], np.int64), "k")],
    )
    return m, {"x": x}


@case
def top_k_smallest_axis_0_int32():
    x = rng(26).integers(-20, 20, (7, 3)).astype(np.int32)
    m = model(
        [h.make_node("TopK", ["x", "k"], ["v", "i"], axis=0, largest=0)],
        [info("x", T.INT32, [7, 3])],
        [info("v", T.INT32, [2, 3]), info("i", T.INT64, [2, 3])],
        [nh.from_array(np.array([2], np.int64), "k")],
    )
    return m, {"x": x}


@case
def gather_nd_negative_indices():
    return single(
        "GatherND",
        {"x": image((3, 4, 5)), "i": np.array([[0, -1], [2, 1], [-3, 3]], np.int64)},
        out_rank=2,
    )


@case
def gather_nd_batch_dims():
    return single(
        "GatherND",
        {"x": image((2, 3, 4), seed=27), "i": np.array([[[1], [0]], [[2], [2]]], np.int64)},
        out_rank=3, batch_dims=1,
    )


@case
def round_halves_to_even():
    return single("Round", {"x": np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.49, -3.7],
                                          np.float32)})


@case
def softplus_large_and_small():
    return single("Softplus", {"x": np.array([-100, -3, -0.5, 0, 0.5, 3, 25, 40, 100],
                                             np.float32)})


@case
def scatter_elements_add_shorter_indices():
    return single(
        "ScatterElements",
        {"x": image((3, 5), seed=28), "i": np.array([[4, -1], [0, 2]], np.int64),
         "u": image((2, 2), seed=29)},
        axis=1, reduction="add",
    )


@case
def scatter_elements_none_axis_0():
    return single(
        "ScatterElements",
        {"x": image((4, 3), seed=30), "i": np.array([[3, 0, 1]], np.int64),
         "u": image((1, 3), seed=31)},
    )


def einsum_case(eq, *shapes, rank):
    feeds = {f"x{i}": image(s, seed=30 + i) for i, s in enumerate(shapes)}
    return single("Einsum", feeds, out_rank=rank, equation=eq)


@case
def einsum_matmul():
    return einsum_case("ij,jk->ik", (3, 4), (4, 5), rank=2)


@case
def einsum_batched_attention_scores():
    return einsum_case("bhqd,bhkd->bhqk", (2, 3, 4, 5), (2, 3, 6, 5), rank=4)


@case
def einsum_transpose_and_sum():
    return einsum_case("ijk->ki", (2, 3, 4), rank=2)


@case
def einsum_ellipsis_batched_matmul():
    return einsum_case("...ij,...jk->...ik", (2, 3, 4, 5), (2, 3, 5, 6), rank=4)


@case
def einsum_ellipsis_implicit_output_and_broadcast_rank():
    return einsum_case("...ij,jk", (2, 3, 4), (4, 5), rank=3)


@case
def einsum_trace_implicit():
    return einsum_case("ii", (4, 4), rank=0)


@case
def einsum_diagonal_then_matmul():
    return einsum_case("iij,jk->ik", (3, 3, 4), (4, 2), rank=2)


@case
def einsum_row_dot_and_outer():
    return einsum_case("ij,ij->i", (3, 4), (3, 4), rank=1)


@case
def einsum_outer_implicit_output():
    return einsum_case("j,i", (3,), (4,), rank=2)


@case
def batch_norm_training_mode():
    r = rng(43)
    x = r.standard_normal((3, 4, 5, 2), dtype=np.float32)
    stats = {k: r.standard_normal(4, dtype=np.float32) for k in ("s", "b", "m")}
    stats["v"] = r.random(4, dtype=np.float32) + 0.5
    m = model(
        [h.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y", "rm", "rv"],
                     training_mode=1, momentum=0.7, epsilon=1e-3)],
        [info(k, T.FLOAT, list(v.shape)) for k, v in {"x": x, **stats}.items()],
        [info("y", T.FLOAT, [None] * 4), info("rm", T.FLOAT, [4]), info("rv", T.FLOAT, [4])],
        opset=15,
    )
    return m, {"x": x, **stats}


def max_pool_indices(x_shape, seed=42, **attrs):
    x = rng(seed).standard_normal(x_shape, dtype=np.float32)
    # Ties: repeated values, so the first largest of a window is the one reported.
    x[..., ::3] = np.round(x[..., ::3])
    m = model(
        [h.make_node("MaxPool", ["x"], ["y", "i"], **attrs)],
        [info("x", T.FLOAT, list(x_shape))],
        [info("y", T.FLOAT, [None] * 4), info("i", T.INT64, [None] * 4)],
        opset=12,
    )
    return m, {"x": x}


@case
def max_pool_indices_padded_strided():
    return max_pool_indices((2, 3, 9, 8), kernel_shape=[3, 3], strides=[2, 2],
                            pads=[1, 1, 1, 1])


@case
def max_pool_indices_column_major_dilated():
    return max_pool_indices((1, 2, 10, 7), kernel_shape=[2, 3], dilations=[2, 1],
                            storage_order=1)


@case
def max_pool_indices_ceil_mode():
    return max_pool_indices((1, 4, 8, 10), kernel_shape=[3, 2], strides=[2, 3], ceil_mode=1)


def conv3d(x_shape, w_shape, seed=41, bias=False, **attrs):
    r = rng(seed)
    feeds = {"x": r.standard_normal(x_shape, dtype=np.float32),
             "w": r.standard_normal(w_shape, dtype=np.float32)}
    if bias:
        feeds["b"] = r.standard_normal(w_shape[0], dtype=np.float32)
    return single("Conv", feeds, **attrs)


@case
def conv3d_basic():
    return conv3d((1, 2, 4, 5, 5), (3, 2, 2, 3, 3))


@case
def conv3d_strides_pads_dilations_groups_bias():
    return conv3d((2, 4, 7, 6, 5), (6, 2, 3, 2, 3), bias=True, group=2, strides=[2, 1, 2],
                  pads=[1, 0, 1, 1, 1, 0], dilations=[2, 1, 1])


@case
def conv3d_same_upper():
    return conv3d((1, 3, 5, 6, 7), (4, 3, 3, 3, 3), strides=[2, 2, 1], auto_pad="SAME_UPPER")


@case
def conv3d_same_lower_pointwise_depth():
    return conv3d((1, 2, 6, 4, 4), (2, 2, 4, 1, 1), strides=[3, 1, 1], auto_pad="SAME_LOWER")


@case
def conv_transpose_3d_basic():
    return conv_t((1, 2, 3, 4, 3), (2, 3, 2, 3, 3))


@case
def conv_transpose_3d_strides_pads_groups_dilation_bias():
    return conv_t((1, 4, 3, 3, 4), (4, 2, 3, 2, 2), bias=True, group=2, strides=[2, 1, 3],
                  pads=[1, 0, 1, 0, 1, 1], output_padding=[1, 0, 2], dilations=[1, 2, 1])


@case
def conv_transpose_3d_same_upper_and_output_shape():
    return conv_t((1, 2, 3, 4, 2), (2, 2, 3, 3, 2), strides=[2, 2, 2], auto_pad="SAME_UPPER")


@case
def conv_transpose_3d_output_shape():
    return conv_t((1, 1, 2, 3, 3), (1, 2, 3, 3, 3), strides=[3, 2, 2], output_shape=[8, 8, 7])


def conv_t(x_shape, w_shape, seed=40, bias=False, **attrs):
    r = rng(seed)
    feeds = {"x": r.standard_normal(x_shape, dtype=np.float32),
             "w": r.standard_normal(w_shape, dtype=np.float32)}
    if bias:
        feeds["b"] = r.standard_normal(w_shape[1] * attrs.get("group", 1), dtype=np.float32)
    return single("ConvTranspose", feeds, **attrs)


@case
def conv_transpose_basic():
    return conv_t((1, 2, 3, 4), (2, 3, 3, 3))


@case
def conv_transpose_stride_pads_output_padding_bias():
    return conv_t((2, 3, 4, 3), (3, 2, 3, 2), strides=[2, 3], pads=[1, 0, 1, 1],
                  output_padding=[1, 2], bias=True)


@case
def conv_transpose_groups_dilation():
    return conv_t((1, 4, 5, 5), (4, 3, 2, 3), group=2, dilations=[2, 1], strides=[1, 2])


@case
def conv_transpose_same_upper():
    return conv_t((1, 2, 4, 5), (2, 2, 3, 4), strides=[2, 2], auto_pad="SAME_UPPER")


@case
def conv_transpose_output_shape():
    return conv_t((1, 1, 3, 3), (1, 2, 3, 3), strides=[3, 2], output_shape=[10, 8])


@case
def conv_transpose_large_pads():
    return conv_t((1, 2, 6, 6), (2, 2, 3, 3), pads=[3, 2, 3, 2])


def resize(x_shape, scales=None, sizes=None, opset=17, seed=50, **attrs):
    inits = [nh.from_array(np.zeros(0, np.float32), "roi")]
    names = ["roi"]
    if scales is not None:
        inits.append(nh.from_array(np.array(scales, np.float32), "scales"))
    else:
        inits.append(nh.from_array(np.zeros(0, np.float32), "scales"))
    if sizes is not None:
        inits.append(nh.from_array(np.array(sizes, np.int64), "sizes"))
    x = image(x_shape, seed)
    m = model(
        [h.make_node("Resize", ["x"] + [t.name for t in inits], ["y"], **attrs)],
        [info("x", T.FLOAT, list(x_shape))],
        [info("y", T.FLOAT, [None] * len(x_shape))],
        inits,
        opset=opset,
    )
    return m, {"x": x}


@case
def resize_nearest_upscale_half_pixel():
    return resize((1, 2, 3, 4), scales=[1, 1, 2, 1.5])


@case
def resize_nearest_asymmetric_floor_sizes():
    return resize((1, 1, 5, 4), sizes=[1, 1, 3, 7], coordinate_transformation_mode="asymmetric",
                  nearest_mode="floor")


@case
def resize_nearest_round_prefer_ceil():
    return resize((1, 1, 4, 4), scales=[1, 1, 2.5, 0.75], nearest_mode="round_prefer_ceil")


@case
def resize_linear_align_corners_sizes():
    return resize((2, 2, 3, 4), sizes=[2, 2, 5, 7], mode="linear",
                  coordinate_transformation_mode="align_corners")


@case
def resize_linear_half_pixel_downscale():
    return resize((1, 3, 8, 6), scales=[1, 1, 0.5, 0.6], mode="linear")


@case
def resize_linear_pytorch_half_pixel():
    return resize((1, 1, 4, 5), sizes=[1, 1, 1, 9], mode="linear",
                  coordinate_transformation_mode="pytorch_half_pixel")


@case
def resize_cubic():
    return resize((1, 1, 5, 6), scales=[1, 1, 1.6, 0.5], mode="cubic")


@case
def resize_cubic_exclude_outside_a_half():
    return resize((1, 2, 4, 4), sizes=[1, 2, 7, 3], mode="cubic", cubic_coeff_a=-0.5,
                  exclude_outside=1)


@case
def upsample_nearest_opset_9():
    x = image((1, 2, 2, 3))
    return single("Upsample", {"x": x}, [nh.from_array(np.array([1, 1, 2, 3], np.float32), "s")],
                  opset=9)


@case
def upsample_linear_opset_9():
    x = image((1, 1, 3, 3), seed=51)
    return single("Upsample", {"x": x}, [nh.from_array(np.array([1, 1, 2, 2], np.float32), "s")],
                  opset=9, mode="linear")


# ----- Operators PyTorch's exporters emit whose ONNX node tests are past opset 21 -----


def unit(shape, seed, lo=-0.95, hi=0.95):
    return rng(seed).uniform(lo, hi, shape).astype(np.float32)


@case
def inverse_trigonometric_and_hyperbolic():
    """`Asin`, `Acos`, `Atan` on (-1, 1), `Sinh`, `Cosh`, `Asinh` on any value, `Acosh` on
    [1, 4), `Atanh` on (-1, 1): one graph, eight outputs."""
    ops = ["Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh"]
    nodes = [h.make_node("Add", ["x", "two"], ["x2"])]
    for op in ops:
        nodes.append(h.make_node(op, ["x2" if op == "Acosh" else "x"], [op.lower()]))
    m = model(
        nodes,
        [info("x", T.FLOAT, [3, 4, 5])],
        [info(op.lower(), T.FLOAT, [3, 4, 5]) for op in ops],
        [nh.from_array(np.array(2.0, np.float32), "two")],
    )
    return m, {"x": unit((3, 4, 5), seed=90)}


@case
def celu_mish_thresholded_relu_shrink():
    """The activations of opsets 10-18 whose node tests are written at newer opsets."""
    x = image((2, 3, 7), seed=91) * 3
    nodes = [
        h.make_node("Celu", ["x"], ["celu"], alpha=1.5),
        h.make_node("Mish", ["x"], ["mish"]),
        h.make_node("ThresholdedRelu", ["x"], ["thresholded"], alpha=0.7),
        h.make_node("Shrink", ["x"], ["shrink"], lambd=1.2, bias=0.3),
    ]
    names = ["celu", "mish", "thresholded", "shrink"]
    m = model(nodes, [info("x", T.FLOAT, [2, 3, 7])], [info(n, T.FLOAT, [2, 3, 7]) for n in names],
              opset=18)
    return m, {"x": x}


@case
def eye_like_off_diagonal_int32():
    """`EyeLike` of a float input as int32, one diagonal above the main one."""
    return single("EyeLike", {"x": image((4, 6), seed=92)}, out_rank=2, out_type=T.INT32,
                  k=1, dtype=T.INT32)


@case
def sdpa_masked_softmax():
    """`scaled_dot_product_attention` as PyTorch 2's exporters write it with a boolean
    mask: scores masked to -inf, a softmax, and `Where(IsNaN(p), 0, p)` for the rows the mask
    removes entirely (softmax of all -inf is NaN); a fully masked row is in the data."""
    q, k = image((1, 2, 4, 8), seed=93), image((1, 2, 4, 8), seed=94)
    mask = np.array([[1, 1, 0, 0], [1, 1, 1, 0], [0, 0, 0, 0], [1, 1, 1, 1]], bool)
    nodes = [
        h.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
        h.make_node("MatMul", ["q", "kt"], ["s0"]),
        h.make_node("Mul", ["s0", "scale"], ["s"]),
        h.make_node("Where", ["mask", "s", "neg_inf"], ["masked"]),
        h.make_node("Softmax", ["masked"], ["p"], axis=-1),
        h.make_node("IsNaN", ["p"], ["nan"]),
        h.make_node("Where", ["nan", "zero", "p"], ["y"]),
        h.make_node("IsInf", ["masked"], ["inf_neg"], detect_positive=0),
    ]
    f = lambda v, n: nh.from_array(np.array(v, np.float32), n)  # noqa: E731
    inits = [f(1 / np.sqrt(8), "scale"), f(-np.inf, "neg_inf"), f(0.0, "zero"),
             nh.from_array(mask, "mask")]
    m = model(nodes, [info("q", T.FLOAT, [1, 2, 4, 8]), info("k", T.FLOAT, [1, 2, 4, 8])],
              [info("y", T.FLOAT, [1, 2, 4, 4]), info("inf_neg", T.BOOL, [1, 2, 4, 4])], inits)
    return m, {"q": q, "k": k}


@case
def scatter_nd_computed_negative_indices():
    """`ScatterND` of rows (a tuple of 2 indices into [3, 4, 5], one negative) whose indices
    are computed (an `Add` of an input), as `x[i, j] = v` exports; and `add` reduction."""
    x = image((3, 4, 5), seed=95)
    idx = np.array([[[0, 1], [2, -1]], [[1, 0], [-3, 2]]], np.int64)
    upd = image((2, 2, 5), seed=96)
    nodes = [
        h.make_node("Add", ["idx", "zero"], ["i"]),
        h.make_node("ScatterND", ["x", "i", "upd"], ["y"]),
        h.make_node("ScatterND", ["x", "i", "upd"], ["y_add"], reduction="add"),
    ]
    m = model(
        nodes,
        [info("x", T.FLOAT, [3, 4, 5]), info("idx", T.INT64, [2, 2, 2]),
         info("upd", T.FLOAT, [2, 2, 5])],
        [info("y", T.FLOAT, [3, 4, 5]), info("y_add", T.FLOAT, [3, 4, 5])],
        [nh.from_array(np.array(0, np.int64), "zero")],
        opset=18,
    )
    return m, {"x": x, "idx": idx, "upd": upd}


@case
def trilu_causal_mask_and_bit_shift():
    """A causal mask as exporters build it (`Trilu` of ones with k = 1, upper) and
    `BitShift` both ways on uint32."""
    a = np.array([[1, 2, 3], [200, 4000, 1 << 20]], np.uint32)
    b = np.array([[1, 2, 3], [4, 5, 6]], np.uint32)
    nodes = [
        h.make_node("Trilu", ["x", "one"], ["causal"], upper=1),
        h.make_node("BitShift", ["a", "b"], ["left"], direction="LEFT"),
        h.make_node("BitShift", ["a", "b"], ["right"], direction="RIGHT"),
    ]
    m = model(
        nodes,
        [info("x", T.FLOAT, [2, 5, 5]), info("a", T.UINT32, [2, 3]), info("b", T.UINT32, [2, 3])],
        [info("causal", T.FLOAT, [2, 5, 5]), info("left", T.UINT32, [2, 3]),
         info("right", T.UINT32, [2, 3])],
        [nh.from_array(np.array(1, np.int64), "one")],
    )
    return m, {"x": image((2, 5, 5), seed=97), "a": a, "b": b}


# ----- Dynamic dimensions -----
#
# Models whose inputs have symbolic dimensions (`dim_param`), with their shape arithmetic
# written as exporters write it (`Shape` -> `Gather` -> `Concat` -> `Reshape`), each with
# inputs and ONNX Runtime's outputs at two sizes, into tests/data/dynamic/<case>/
# (inputs_<k>.npz, outputs_<k>.npz): imported once with no --input-shape, run at both.

DYNAMIC = []


def dynamic(fn):
    DYNAMIC.append(fn)
    return fn


def shape_vector(name, source, dims, tail):
    """Nodes computing `[Shape(source)[d] for d in dims] + tail` as `name` (int64)."""
    nodes = [h.make_node("Shape", [source], [f"{name}_shape"])]
    parts = []
    for d in dims:
        nodes.append(h.make_node("Gather", [f"{name}_shape", f"{name}_i{d}"], [f"{name}_g{d}"], axis=0))
        nodes.append(h.make_node("Unsqueeze", [f"{name}_g{d}", "axes0"], [f"{name}_u{d}"]))
        parts.append(f"{name}_u{d}")
    inits = [nh.from_array(np.array(d, np.int64), f"{name}_i{d}") for d in dims]
    inits.append(nh.from_array(np.array(tail, np.int64), f"{name}_tail"))
    nodes.append(h.make_node("Concat", parts + [f"{name}_tail"], [name], axis=0))
    return nodes, inits


@dynamic
def cnn_dynamic_batch():
    """A batch-`N` CNN: convolution, batch norm, pools, `x.view(x.size(0), -1)` and `Gemm`,
    a softmax, and a `Flatten`."""
    r = rng(70)
    w1 = r.standard_normal((8, 3, 3, 3), dtype=np.float32) * 0.3
    w2 = r.standard_normal((16, 8, 1, 1), dtype=np.float32) * 0.3
    fc = r.standard_normal((10, 16), dtype=np.float32) * 0.3
    bn = [np.abs(r.standard_normal(8, dtype=np.float32)) + 0.5 for _ in range(4)]
    nodes = [
        h.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
        h.make_node("BatchNormalization", ["c1", "s", "b", "m", "v"], ["n1"]),
        h.make_node("Relu", ["n1"], ["r1"]),
        h.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        h.make_node("Conv", ["p1", "w2"], ["c2"]),
        h.make_node("Relu", ["c2"], ["r2"]),
        h.make_node("GlobalAveragePool", ["r2"], ["g"]),
    ]
    view, view_inits = shape_vector("view", "g", [0], [-1])
    nodes += view + [
        h.make_node("Reshape", ["g", "view"], ["flat"]),
        h.make_node("Gemm", ["flat", "fc"], ["logits"], transB=1),
        h.make_node("Softmax", ["logits"], ["y"], axis=-1),
        h.make_node("Flatten", ["p1"], ["z"], axis=1),
    ]
    inits = [nh.from_array(w1, "w1"), nh.from_array(w2, "w2"), nh.from_array(fc, "fc"),
             nh.from_array(np.array([0], np.int64), "axes0")]
    inits += [nh.from_array(a, n) for a, n in zip(bn, "sbmv")] + view_inits
    m = model(nodes, [info("x", T.FLOAT, ["N", 3, 12, 12])],
              [info("y", T.FLOAT, ["N", 10]), info("z", T.FLOAT, ["N", 288])], inits, opset=13)
    return m, [{"x": image((n, 3, 12, 12), seed=71 + n)} for n in (1, 3)]


@dynamic
def attention_dynamic_batch_and_sequence():
    """A transformer block of batch `B` and sequence `S`: layer norm, projections, heads by
    `Shape`-computed reshapes, batched products with dynamic batch axes, softmax, GELU with
    `Erf`, a residual; and the first token (`Gather`) and the tokens after it (`Slice`)."""
    r = rng(80)
    d, heads = 32, 4
    w = {k: r.standard_normal((d, d), dtype=np.float32) * 0.2 for k in ("wq", "wk", "wv", "wo")}
    nodes = [h.make_node("LayerNormalization", ["x", "ln_s", "ln_b"], ["ln"], axis=-1)]
    split, split_inits = shape_vector("heads", "x", [0, 1], [heads, d // heads])
    merge, merge_inits = shape_vector("merge", "x", [0, 1], [d])
    nodes += split + merge
    for k in "qkv":
        nodes += [
            h.make_node("MatMul", ["ln", f"w{k}"], [f"{k}0"]),
            h.make_node("Reshape", [f"{k}0", "heads"], [f"{k}1"]),
            h.make_node("Transpose", [f"{k}1"], [f"{k}2"],
                        perm=[0, 2, 3, 1] if k == "k" else [0, 2, 1, 3]),
        ]
    nodes += [
        h.make_node("MatMul", ["q2", "k2"], ["scores0"]),
        h.make_node("Div", ["scores0", "scale"], ["scores"]),
        h.make_node("Softmax", ["scores"], ["probs"], axis=-1),
        h.make_node("MatMul", ["probs", "v2"], ["ctx0"]),
        h.make_node("Transpose", ["ctx0"], ["ctx1"], perm=[0, 2, 1, 3]),
        h.make_node("Reshape", ["ctx1", "merge"], ["ctx"]),
        h.make_node("MatMul", ["ctx", "wo"], ["proj"]),
        h.make_node("Add", ["proj", "x"], ["res"]),
        h.make_node("Div", ["res", "sqrt2"], ["gd"]),
        h.make_node("Erf", ["gd"], ["ge"]),
        h.make_node("Add", ["ge", "one"], ["gp"]),
        h.make_node("Mul", ["res", "gp"], ["gm"]),
        h.make_node("Mul", ["gm", "half"], ["y"]),
        h.make_node("Gather", ["y", "zero"], ["first"], axis=1),
        h.make_node("Slice", ["y", "starts", "ends", "axes1"], ["rest"]),
    ]
    f = lambda v, n: nh.from_array(np.array(v, np.float32), n)  # noqa: E731
    inits = [nh.from_array(v, k) for k, v in w.items()] + split_inits + merge_inits + [
        f(np.ones(d), "ln_s"), f(np.zeros(d), "ln_b"), f(np.sqrt(d // heads), "scale"),
        f(np.sqrt(2.0), "sqrt2"), f(1.0, "one"), f(0.5, "half"),
        nh.from_array(np.array(0, np.int64), "zero"),
        nh.from_array(np.array([0], np.int64), "axes0"),
        nh.from_array(np.array([1], np.int64), "starts"),
        nh.from_array(np.array([np.iinfo(np.int64).max], np.int64), "ends"),
        nh.from_array(np.array([1], np.int64), "axes1"),
    ]
    m = model(nodes, [info("x", T.FLOAT, ["B", "S", d])],
              [info("y", T.FLOAT, ["B", "S", d]), info("first", T.FLOAT, ["B", d]),
               info("rest", T.FLOAT, ["B", None, d])], inits, opset=17)
    return m, [{"x": image((b, s, d), seed=81 + s)} for b, s in ((1, 5), (2, 7))]


def write_dynamic(name, m, feeds):
    """Writes dynamic case `name`: its model, and inputs and ONNX Runtime's outputs per size."""
    d = os.path.join(os.path.dirname(OUT), "dynamic", name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    onnx.save(m, os.path.join(d, "model.onnx"))
    for k, f in enumerate(feeds):
        np.savez(os.path.join(d, f"inputs_{k}.npz"), **f)
        outs = run(m, f)
        np.savez(os.path.join(d, f"outputs_{k}.npz"), **{str(i): o for i, o in enumerate(outs)})


def run(m, feeds):
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def write(name, m, feeds, outs=None):
    """Writes case `name`: its model, inputs, and outputs (ONNX Runtime's unless given)."""
    if outs is None:
        outs = run(m, feeds)
    d = os.path.join(OUT, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    onnx.save(m, os.path.join(d, "model.onnx"))
    np.savez(os.path.join(d, "inputs.npz"), **feeds)
    np.savez(os.path.join(d, "outputs.npz"), **{str(i): o for i, o in enumerate(outs)})


def supported_ops():
    """The operators the importer converts (the names its dispatch matches on)."""
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "..", "src", "ops", "mod.rs")) as f:
        text = f.read()
    body = text[text.index("pub(crate) fn convert"):text.index("other => Err(")]
    return set(re.findall(r'"([A-Z][A-Za-z0-9]*)"', body))


def node_cases():
    """ONNX's own backend node tests (from the installed `onnx` package) whose operators the
    importer converts, at opsets 7-21, written to tests/data/node/<test>/ with ONNX Runtime's
    outputs — or the test's own expected outputs where ONNX Runtime cannot run the model
    (noted in expected.txt)."""
    import warnings

    from onnx.backend.test.case import node

    warnings.simplefilter("ignore")
    supported = supported_ops()
    root = os.path.join(os.path.dirname(OUT), "node")
    # The cases are rewritten; the list of known failures is kept.
    known = os.path.join(root, "known_failures.txt")
    kept = open(known).read() if os.path.exists(known) else None
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    if kept is not None:
        with open(known, "w") as f:
            f.write(kept)
    written = 0
    for case in node.collect_testcases(None):
        ops = {n.op_type for n in case.model.graph.node}
        version = next(
            (o.version for o in case.model.opset_import if o.domain in ("", "ai.onnx")), 0
        )
        if not ops <= supported or not 7 <= version <= 21:
            continue
        inputs, expected = case.data_sets[0]
        names = [i.name for i in case.model.graph.input]
        if any(not isinstance(v, np.ndarray) for v in inputs) or any(
            not isinstance(v, np.ndarray) for v in expected
        ):
            continue  # sequences, maps, optionals
        if any(v.dtype.kind in "OUSV" for v in list(inputs) + list(expected)):
            continue  # strings
        feeds = dict(zip(names, inputs))
        source = "onnxruntime"
        try:
            outs = run(case.model, feeds)
        except Exception:  # noqa: BLE001 (any failure of ONNX Runtime's)
            outs, source = list(expected), "onnx reference"
        d = os.path.join(root, case.name)
        os.makedirs(d)
        onnx.save(case.model, os.path.join(d, "model.onnx"))
        np.savez(os.path.join(d, "inputs.npz"), **feeds)
        np.savez(os.path.join(d, "outputs.npz"), **{str(i): o for i, o in enumerate(outs)})
        if source != "onnxruntime":
            with open(os.path.join(d, "expected.txt"), "w") as f:
                f.write("the expected outputs are the onnx test's own: ONNX Runtime cannot run it\n")
        written += 1
    print(f"{written} node tests written to {root}")


def main():
    if sys.argv[1:] == ["--node"]:
        node_cases()
        return
    only = set(sys.argv[1:])
    for fn in CASES:
        if only and fn.__name__ not in only:
            continue
        write(fn.__name__, *fn())
        print(fn.__name__)
    for fn in DYNAMIC:
        if only and fn.__name__ not in only:
            continue
        write_dynamic(fn.__name__, *fn())
        print(fn.__name__)


if __name__ == "__main__":
    main()
