"""Peer figures for the kernel benchmarks (BENCHMARKS.md W1-W4): numpy and ONNX Runtime.

One thread unless the workload says otherwise. Prints one machine-readable line per
measurement:

    PEER <workload> <peer> <median seconds>

with peer numpy or onnxruntime and workload one of
- W1_2e20, W1_2e24: add of 2^20 and 2^24 float32;
- W1_2e20_threads2: the same add at 2^20, ONNX Runtime with 2 intra-op threads;
- W2_2e20: relu(a * b + c) over 2^20 float32;
- W3_dense: dense x [128, 512] times the transpose of w [512, 512] (numpy matmul; ONNX Gemm
  with transB=1);
- W3_matmul: 512 x 512 x 512 matrix product (numpy matmul; ONNX MatMul);
- W4_conv2d: 3x3 convolution [1, 64, 56, 56] x [64, 64, 3, 3], stride 1, padding 1 (numpy
  im2col + matmul; ONNX Conv).

Weights are graph inputs, not initializers, as they are arguments of our kernels; every ONNX
Runtime call writes into a preallocated output (IO binding), like our kernels.
`benches/run.sh` reads these lines. Run with `python3 benches/peers/kernels.py [--quick]`.
"""

import sys

from common import median_time, report  # noqa: E402  (sets the thread variables first)

import numpy as np  # noqa: E402




def onnx_session(nodes, inputs, out_shape, threads=1):
    """An ONNX Runtime session with `threads` intra-op threads for a graph of `nodes`.

    `inputs` maps each float32 input's name to its shape; the graph's output is `out`."""
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper

    def value(name, shape):
        return helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape))

    graph = helper.make_graph(
        nodes,
        "g",
        [value(name, shape) for name, shape in inputs.items()],
        [value("out", out_shape)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = min(model.ir_version, 9)
    onnx.checker.check_model(model)
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )


def ort_runner(session, feeds, out_shape):
    """A call of `session` writing into a preallocated output (IO binding), like our kernels."""
    binding = session.io_binding()
    for name, value in feeds.items():
        binding.bind_cpu_input(name, value)
    out = np.empty(out_shape, dtype=np.float32)
    binding.bind_output(
        "out", "cpu", 0, np.float32, out.shape, out.__array_interface__["data"][0]
    )
    return lambda: session.run_with_iobinding(binding), out


def uniform(rng, shape):
    return rng.uniform(-1, 1, shape).astype(np.float32)


def elementwise(rng, seconds):
    """W1 and W2."""
    from onnx import helper

    add = [helper.make_node("Add", ["a", "b"], ["out"])]
    for name, n in (("W1_2e20", 1 << 20), ("W1_2e24", 1 << 24)):
        a, b = uniform(rng, n), uniform(rng, n)
        c = np.empty(n, dtype=np.float32)
        report(name, "numpy", median_time(lambda: np.add(a, b, out=c), seconds))
        runs = [(name, 1)] + ([(name + "_threads2", 2)] if n == 1 << 20 else [])
        for workload, threads in runs:
            session = onnx_session(add, {"a": [n], "b": [n]}, [n], threads)
            run, out = ort_runner(session, {"a": a, "b": b}, n)
            run()
            assert np.array_equal(out, a + b)
            report(workload, "onnxruntime", median_time(run, seconds))

    n = 1 << 20
    a, b, c = (uniform(rng, n) for _ in range(3))
    # numpy's natural form: three passes over memory, each allocating its result.
    report("W2_2e20", "numpy", median_time(lambda: np.maximum(a * b + c, 0), seconds))
    nodes = [
        helper.make_node("Mul", ["a", "b"], ["ab"]),
        helper.make_node("Add", ["ab", "c"], ["abc"]),
        helper.make_node("Relu", ["abc"], ["out"]),
    ]
    session = onnx_session(nodes, {"a": [n], "b": [n], "c": [n]}, [n])
    run, out = ort_runner(session, {"a": a, "b": b, "c": c}, n)
    run()
    assert np.allclose(out, np.maximum(a * b + c, 0), rtol=1e-5, atol=1e-6)
    report("W2_2e20", "onnxruntime", median_time(run, seconds))


def gemm(rng, seconds):
    """W3: dense and matmul."""
    from onnx import helper

    m, k, n = 128, 512, 512
    x, w = uniform(rng, (m, k)), uniform(rng, (n, k))
    c = np.empty((m, n), dtype=np.float32)
    report("W3_dense", "numpy", median_time(lambda: np.matmul(x, w.T, out=c), seconds))
    node = helper.make_node("Gemm", ["x", "w"], ["out"], transB=1)
    session = onnx_session([node], {"x": [m, k], "w": [n, k]}, [m, n])
    run, out = ort_runner(session, {"x": x, "w": w}, (m, n))
    run()
    assert np.allclose(out, x @ w.T, rtol=1e-4, atol=1e-4)
    report("W3_dense", "onnxruntime", median_time(run, seconds))

    s = 512
    a, b = uniform(rng, (s, s)), uniform(rng, (s, s))
    c = np.empty((s, s), dtype=np.float32)
    report("W3_matmul", "numpy", median_time(lambda: np.matmul(a, b, out=c), seconds))
    node = helper.make_node("MatMul", ["a", "b"], ["out"])
    session = onnx_session([node], {"a": [s, s], "b": [s, s]}, [s, s])
    run, out = ort_runner(session, {"a": a, "b": b}, (s, s))
    run()
    assert np.allclose(out, a @ b, rtol=1e-4, atol=1e-4)
    report("W3_matmul", "onnxruntime", median_time(run, seconds))


def conv(rng, seconds):
    """W4: numpy im2col + matmul, and ONNX Conv."""
    from onnx import helper

    n, c, h, w, o, kh, kw, pad = 1, 64, 56, 56, 64, 3, 3, 1
    oh, ow = h + 2 * pad - kh + 1, w + 2 * pad - kw + 1
    x, weight = uniform(rng, (n, c, h, w)), uniform(rng, (o, c, kh, kw))
    padded = np.zeros((n, c, h + 2 * pad, w + 2 * pad), dtype=np.float32)
    col = np.empty((n, c, kh, kw, oh, ow), dtype=np.float32)
    out = np.empty((n, o, oh, ow), dtype=np.float32)
    wmat = weight.reshape(o, c * kh * kw)

    def im2col_matmul():
        # Pad, gather the columns [C*KH*KW, OH*OW], then one GEMM per image.
        padded[:, :, pad : pad + h, pad : pad + w] = x
        windows = np.lib.stride_tricks.sliding_window_view(padded, (kh, kw), axis=(2, 3))
        np.copyto(col, windows.transpose(0, 1, 4, 5, 2, 3))
        for i in range(n):
            np.matmul(
                wmat, col[i].reshape(c * kh * kw, oh * ow), out=out[i].reshape(o, oh * ow)
            )

    im2col_matmul()
    expected = out.copy()
    report("W4_conv2d", "numpy", median_time(im2col_matmul, seconds))
    node = helper.make_node(
        "Conv", ["x", "w"], ["out"], kernel_shape=[kh, kw], pads=[pad, pad, pad, pad]
    )
    session = onnx_session(
        [node], {"x": [n, c, h, w], "w": [o, c, kh, kw]}, [n, o, oh, ow]
    )
    run, result = ort_runner(session, {"x": x, "w": weight}, (n, o, oh, ow))
    run()
    assert np.allclose(result, expected, rtol=1e-4, atol=1e-4)
    report("W4_conv2d", "onnxruntime", median_time(run, seconds))


def main():
    quick = "--quick" in sys.argv
    seconds = 0.5 if quick else 3.0
    rng = np.random.default_rng(0)
    elementwise(rng, seconds)
    gemm(rng, seconds)
    conv(rng, seconds)


if __name__ == "__main__":
    main()
