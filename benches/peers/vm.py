"""Peer figures for the VM benchmarks (BENCHMARKS.md W5-W8): ONNX Runtime, numpy, CPython, Lua.

One thread everywhere. Prints one machine-readable line per measurement, the median wall time
of one call (the same format as kernels.py, read by `benches/run.sh`, which divides W6, W7 by
the work per call):

    PEER <workload> <peer> <median seconds>

with workload and peer one of
- W5_b1, W5_b64 (the MLP 784 -> 512 relu -> 512 relu -> 10 softmax, batch 1 and 64):
  onnxruntime (MatMul/Add/Relu x2, MatMul/Add/Softmax, the weights as initializers, as a model
  ships them) and onnxruntime_inputs (the same graph with the weights as graph inputs, as they
  are arguments of our @main);
- W6 (100 steps of an LSTM cell, input 128, hidden 128, batch 1, the same input every step as
  in W6_lstm.relay): onnxruntime (one ONNX LSTM op over a sequence of 100, weights as
  initializers), onnxruntime_inputs (weights as graph inputs) and numpy (the cell in numpy,
  driven by a Python loop);
- W7_sum_to (0 + 1 + ... + (10^6 - 1)): cpython (a while loop) and lua (tail recursion, only
  when a Lua 5.4 interpreter, `lua5.4`, is on PATH);
- W7_fib (recursive fib(25), 242,785 calls): cpython and lua;
- W8 (compile time): onnxruntime_session, the creation of an ONNX Runtime session for the W5
  MLP (batch 1) from the serialized model, weights included.

Every ONNX Runtime call writes into preallocated outputs (IO binding), like our VM's kernels;
every result is checked against numpy (W5, W6) or the exact value (W7) before timing.
Run with `python3 benches/peers/vm.py [--quick]`.
"""

import os
import shutil
import subprocess
import sys

from common import median_time, report  # noqa: E402  (sets the thread variables first)

import numpy as np  # noqa: E402

# The recursion depth CPython needs for fib(25) is 26 frames; sum_to is a loop.
FIB_N = 25
FIB_VALUE = 75025
SUM_N = 10**6
SUM_VALUE = SUM_N * (SUM_N - 1) // 2
LSTM_STEPS = 100
HIDDEN = 128




def uniform(rng, shape):
    return rng.uniform(-1, 1, shape).astype(np.float32)


def onnx_model(nodes, inputs, outputs, initializers):
    """A serialized ONNX model of `nodes`.

    `inputs` and `outputs` map each float32 tensor's name to its shape; `initializers` maps names
    to numpy arrays stored in the model."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    def value(name, shape):
        return helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape))

    graph = helper.make_graph(
        nodes,
        "g",
        [value(name, shape) for name, shape in inputs.items()],
        [value(name, shape) for name, shape in outputs.items()],
        initializer=[numpy_helper.from_array(a, name) for name, a in initializers.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = min(model.ir_version, 9)
    onnx.checker.check_model(model)
    return model.SerializeToString()


def onnx_session(model_bytes):
    """An ONNX Runtime session for a serialized model, one intra-op thread."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return ort.InferenceSession(model_bytes, options, providers=["CPUExecutionProvider"])


def ort_runner(session, feeds, outputs):
    """A call of `session` writing into preallocated outputs (IO binding).

    `outputs` maps each output's name to its shape; returns the call and the output arrays."""
    binding = session.io_binding()
    for name, value in feeds.items():
        binding.bind_cpu_input(name, value)
    arrays = {}
    for name, shape in outputs.items():
        out = np.empty(shape, dtype=np.float32)
        binding.bind_output(
            name, "cpu", 0, np.float32, out.shape, out.__array_interface__["data"][0]
        )
        arrays[name] = out
    return lambda: session.run_with_iobinding(binding), arrays


def mlp_weights(rng):
    """The MLP's weights in Relay's layout: dense weights [units, in], biases [units]."""
    return {
        "w1": uniform(rng, (512, 784)),
        "b1": uniform(rng, 512),
        "w2": uniform(rng, (512, 512)),
        "b2": uniform(rng, 512),
        "w3": uniform(rng, (10, 512)),
        "b3": uniform(rng, 10),
    }


def mlp_model(batch, weights, as_initializers):
    """The W5 MLP as an ONNX model: MatMul/Add/Relu twice, MatMul/Add/Softmax.

    MatMul takes the transposed dense weights ([in, units]), stored in the model as
    initializers or passed as graph inputs."""
    from onnx import helper

    nodes = [
        helper.make_node("MatMul", ["x", "w1t"], ["m1"]),
        helper.make_node("Add", ["m1", "b1"], ["a1"]),
        helper.make_node("Relu", ["a1"], ["r1"]),
        helper.make_node("MatMul", ["r1", "w2t"], ["m2"]),
        helper.make_node("Add", ["m2", "b2"], ["a2"]),
        helper.make_node("Relu", ["a2"], ["r2"]),
        helper.make_node("MatMul", ["r2", "w3t"], ["m3"]),
        helper.make_node("Add", ["m3", "b3"], ["a3"]),
        helper.make_node("Softmax", ["a3"], ["out"], axis=-1),
    ]
    params = mlp_params(weights)
    inputs = {"x": [batch, 784]}
    if as_initializers:
        initializers = params
    else:
        initializers = {}
        inputs.update({name: a.shape for name, a in params.items()})
    return onnx_model(nodes, inputs, {"out": [batch, 10]}, initializers)


def mlp_params(weights):
    """The ONNX graph's parameters: transposed dense weights and the biases."""
    params = {}
    for k in ("1", "2", "3"):
        params["w" + k + "t"] = np.ascontiguousarray(weights["w" + k].T)
        params["b" + k] = weights["b" + k]
    return params


def mlp_numpy(x, w):
    """The MLP in numpy (float64), for checking."""
    h = np.maximum(x @ w["w1"].T.astype(np.float64) + w["b1"], 0)
    h = np.maximum(h @ w["w2"].T.astype(np.float64) + w["b2"], 0)
    z = h @ w["w3"].T.astype(np.float64) + w["b3"]
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def mlp(rng, seconds):
    """W5 at batch 1 and 64, and W8's ONNX Runtime session creation."""
    weights = mlp_weights(rng)
    for workload, batch in (("W5_b1", 1), ("W5_b64", 64)):
        x = uniform(rng, (batch, 784))
        expected = mlp_numpy(x, weights)
        for peer, as_initializers in (("onnxruntime", True), ("onnxruntime_inputs", False)):
            session = onnx_session(mlp_model(batch, weights, as_initializers))
            feeds = {"x": x}
            if not as_initializers:
                feeds.update(mlp_params(weights))
            run, outs = ort_runner(session, feeds, {"out": (batch, 10)})
            run()
            assert np.allclose(outs["out"], expected, rtol=1e-4, atol=1e-5), peer
            report(workload, peer, median_time(run, seconds))

    model = mlp_model(1, weights, True)
    report("W8", "onnxruntime_session", median_time(lambda: onnx_session(model), seconds))


def sigmoid(v):
    return 1.0 / (1.0 + np.exp(-v))


def lstm_numpy(x, h, c, w, u, b):
    """W6 in numpy driven by a Python loop: the cell of W6_lstm.relay, gates i, f, g, o."""
    for _ in range(LSTM_STEPS):
        gates = x @ w.T + h @ u.T + b
        i, f, g, o = np.split(gates, 4, axis=1)
        c = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
        h = sigmoid(o) * np.tanh(c)
    return h, c


def lstm_model(params, as_initializers):
    """One ONNX LSTM op over a sequence of LSTM_STEPS, returning the final h and c."""
    from onnx import helper

    n = HIDDEN
    node = helper.make_node(
        "LSTM",
        ["X", "W", "R", "B", "", "initial_h", "initial_c"],
        ["", "Y_h", "Y_c"],
        hidden_size=n,
    )
    inputs = {"X": [LSTM_STEPS, 1, n], "initial_h": [1, 1, n], "initial_c": [1, 1, n]}
    weights = {name: params[name] for name in ("W", "R", "B")}
    if as_initializers:
        initializers = weights
    else:
        initializers = {}
        inputs.update({name: a.shape for name, a in weights.items()})
    outputs = {"Y_h": [1, 1, n], "Y_c": [1, 1, n]}
    return onnx_model([node], inputs, outputs, initializers)


def lstm(rng, seconds):
    """W6: ONNX Runtime's LSTM op and the numpy loop, per 100 steps."""
    n = HIDDEN
    x, h0, c0 = uniform(rng, (1, n)), uniform(rng, (1, n)), uniform(rng, (1, n))
    w, u, b = uniform(rng, (4 * n, n)), uniform(rng, (4 * n, n)), uniform(rng, 4 * n)
    want_h, want_c = lstm_numpy(x, h0, c0, w, u, b)
    report("W6", "numpy", median_time(lambda: lstm_numpy(x, h0, c0, w, u, b), seconds))

    # ONNX orders the gates i, o, f, c; W6_lstm.relay (and the numpy loop) i, f, g, o.
    def onnx_order(a):
        i, f, g, o = np.split(a, 4, axis=0)
        return np.concatenate([i, o, f, g], axis=0)

    params = {
        "W": onnx_order(w)[None],
        "R": onnx_order(u)[None],
        "B": np.concatenate([onnx_order(b), np.zeros(4 * n, np.float32)])[None],
        "X": np.ascontiguousarray(np.broadcast_to(x, (LSTM_STEPS, 1, n))),
        "initial_h": h0[None],
        "initial_c": c0[None],
    }
    for peer, as_initializers in (("onnxruntime", True), ("onnxruntime_inputs", False)):
        session = onnx_session(lstm_model(params, as_initializers))
        names = ["X", "initial_h", "initial_c"] + ([] if as_initializers else ["W", "R", "B"])
        feeds = {name: params[name] for name in names}
        run, outs = ort_runner(session, feeds, {"Y_h": (1, 1, n), "Y_c": (1, 1, n)})
        run()
        assert np.allclose(outs["Y_h"][0], want_h, rtol=1e-3, atol=1e-3), peer
        assert np.allclose(outs["Y_c"][0], want_c, rtol=1e-3, atol=1e-3), peer
        report("W6", peer, median_time(run, seconds))


def sum_to(n):
    """0 + 1 + ... + (n - 1) by a while loop."""
    i = 0
    acc = 0
    while i < n:
        acc += i
        i += 1
    return acc


def fib(n):
    """fib(n) by double recursion."""
    if n < 2:
        return n
    return fib(n - 1) + fib(n - 2)


LUA = """
local function sum_to(i, n, acc)
  if i == n then return acc end
  return sum_to(i + 1, n, acc + i)
end
local function fib(n)
  if n < 2 then return n end
  return fib(n - 1) + fib(n - 2)
end
-- The median wall time of one call of f over at least min_seconds (os.clock: CPU time, which
-- is wall time for this single-threaded loop).
local function median_time(f, min_seconds)
  for _ = 1, 3 do f() end
  local times = {}
  local start = os.clock()
  while #times < 11 or os.clock() - start < min_seconds do
    local t0 = os.clock()
    f()
    times[#times + 1] = os.clock() - t0
    if #times >= 10000 then break end
  end
  table.sort(times)
  return times[#times // 2 + 1]
end
local seconds = tonumber(arg[1])
assert(sum_to(0, %(sum_n)d, 0) == %(sum_value)d)
assert(fib(%(fib_n)d) == %(fib_value)d)
print(string.format("PEER W7_sum_to lua %%.9e",
  median_time(function() return sum_to(0, %(sum_n)d, 0) end, seconds)))
print(string.format("PEER W7_fib lua %%.9e",
  median_time(function() return fib(%(fib_n)d) end, seconds)))
"""


def lua_binary():
    """A Lua 5.4 interpreter on PATH, or None."""
    found = shutil.which("lua5.4")
    if found:
        return found
    found = shutil.which("lua")
    if found:
        version = subprocess.run([found, "-v"], capture_output=True, text=True)
        if "Lua 5.4" in version.stdout + version.stderr:
            return found
    return None


def interpreters(seconds):
    """W7 in CPython, and in Lua 5.4 when it is installed."""
    assert sum_to(SUM_N) == SUM_VALUE
    report("W7_sum_to", "cpython", median_time(lambda: sum_to(SUM_N), seconds))
    assert fib(FIB_N) == FIB_VALUE
    report("W7_fib", "cpython", median_time(lambda: fib(FIB_N), seconds))
    lua = lua_binary()
    if lua is None:
        print("lua5.4 is not on PATH: the Lua peers are not measured", file=sys.stderr)
        return
    script = LUA % {
        "sum_n": SUM_N,
        "sum_value": SUM_VALUE,
        "fib_n": FIB_N,
        "fib_value": FIB_VALUE,
    }
    result = subprocess.run(
        [lua, "-", str(seconds)], input=script, capture_output=True, text=True
    )
    if result.returncode != 0:
        print(f"the Lua peers fail:\n{result.stderr}", file=sys.stderr)
        return
    print(result.stdout, end="", flush=True)


def main():
    quick = "--quick" in sys.argv
    seconds = 0.5 if quick else 3.0
    rng = np.random.default_rng(0)
    mlp(rng, seconds)
    lstm(rng, seconds)
    interpreters(seconds)


if __name__ == "__main__":
    main()
