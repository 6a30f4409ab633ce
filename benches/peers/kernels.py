"""Peer figures for the kernel benchmarks (BENCHMARKS.md W1, W2): numpy and ONNX Runtime.

One thread. Prints one machine-readable line per measurement:

    PEER <workload> <peer> <median seconds>

with workload W1_2e20, W1_2e24 or W2_2e20 and peer numpy or onnxruntime. `benches/run.sh`
reads these lines. Run with `python3 benches/peers/kernels.py [--quick]`.
"""

import os
import sys
import time

# One thread for every BLAS or OpenMP pool numpy or ONNX Runtime may start.
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(var, "1")

import numpy as np  # noqa: E402


def median_time(fn, min_seconds):
    """The median wall time of one call of `fn`, in seconds, over at least `min_seconds`."""
    for _ in range(3):
        fn()
    times = []
    start = time.perf_counter()
    while len(times) < 11 or time.perf_counter() - start < min_seconds:
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        if len(times) >= 10000:
            break
    times.sort()
    return times[len(times) // 2]


def report(workload, peer, seconds):
    print(f"PEER {workload} {peer} {seconds:.9e}", flush=True)


def onnx_session(nodes, inputs, n):
    """An ONNX Runtime session, one thread, for a graph of `nodes` over float32 vectors of `n`."""
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper

    vec = lambda name: helper.make_tensor_value_info(name, TensorProto.FLOAT, [n])  # noqa: E731
    graph = helper.make_graph(nodes, "g", [vec(i) for i in inputs], [vec("out")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = min(model.ir_version, 9)
    onnx.checker.check_model(model)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )


def ort_runner(session, feeds, n):
    """A call of `session` writing into a preallocated output (IO binding), like our kernels."""
    binding = session.io_binding()
    for name, value in feeds.items():
        binding.bind_cpu_input(name, value)
    out = np.empty(n, dtype=np.float32)
    binding.bind_output(
        "out", "cpu", 0, np.float32, out.shape, out.__array_interface__["data"][0]
    )
    return lambda: session.run_with_iobinding(binding), out


def main():
    quick = "--quick" in sys.argv
    seconds = 0.5 if quick else 3.0
    rng = np.random.default_rng(0)
    from onnx import helper

    for name, n in (("W1_2e20", 1 << 20), ("W1_2e24", 1 << 24)):
        a = rng.uniform(-1, 1, n).astype(np.float32)
        b = rng.uniform(-1, 1, n).astype(np.float32)
        c = np.empty(n, dtype=np.float32)
        report(name, "numpy", median_time(lambda: np.add(a, b, out=c), seconds))
        session = onnx_session([helper.make_node("Add", ["a", "b"], ["out"])], ["a", "b"], n)
        run, out = ort_runner(session, {"a": a, "b": b}, n)
        run()
        assert np.array_equal(out, a + b)
        report(name, "onnxruntime", median_time(run, seconds))

    n = 1 << 20
    a, b, c = (rng.uniform(-1, 1, n).astype(np.float32) for _ in range(3))
    # numpy's natural form: three passes over memory, each allocating its result.
    report("W2_2e20", "numpy", median_time(lambda: np.maximum(a * b + c, 0), seconds))
    nodes = [
        helper.make_node("Mul", ["a", "b"], ["ab"]),
        helper.make_node("Add", ["ab", "c"], ["abc"]),
        helper.make_node("Relu", ["abc"], ["out"]),
    ]
    session = onnx_session(nodes, ["a", "b", "c"], n)
    run, out = ort_runner(session, {"a": a, "b": b, "c": c}, n)
    run()
    assert np.allclose(out, np.maximum(a * b + c, 0), rtol=1e-5, atol=1e-6)
    report("W2_2e20", "onnxruntime", median_time(run, seconds))


if __name__ == "__main__":
    main()
