"""The W6 LSTM (benches/programs/W6_lstm.relay): its Relay program with the weights as parameters
bound by --params, and one ONNX LSTM op over the 100 steps for ONNX Runtime (its fused LSTM)."""

from pathlib import Path

import numpy as np

from .graph import Graph
from .networks import SEEDS

PROGRAM = Path(__file__).resolve().parents[2] / "programs" / "W6_lstm.relay"
STEPS = 100
HIDDEN = 128


class LstmGraph(Graph):
    """A Graph whose Relay text is W6's program and whose ONNX model is one LSTM op."""

    def relay_text(self):
        text = PROGRAM.read_text()
        return text.replace(
            "// W6 (BENCHMARKS.md)",
            "// Copied from benches/programs/W6_lstm.relay by benches/models/generate.py.\n// W6",
            1,
        )

    def onnx_model(self):
        import onnx
        from onnx import TensorProto, helper, numpy_helper

        def onnx_order(a):
            # ONNX orders the gates i, o, f, c; W6 i, f, g, o.
            i, f, g, o = np.split(a, 4, axis=0)
            return np.concatenate([i, o, f, g], axis=0)

        w, u, b = (self.params[name] for name in ("w", "u", "b"))
        weights = {
            "W": onnx_order(w)[None],
            "R": onnx_order(u)[None],
            "B": np.concatenate([onnx_order(b), np.zeros_like(b)])[None],
            "steps": np.array([STEPS, 1, 1], dtype=np.int64),
        }
        nodes = [
            # W6 feeds the same x every step: X is x broadcast over the 100 steps.
            helper.make_node("Expand", ["x", "steps"], ["X"]),
            helper.make_node("Unsqueeze", ["h0", "axis0"], ["initial_h"]),
            helper.make_node("Unsqueeze", ["c0", "axis0"], ["initial_c"]),
            helper.make_node(
                "LSTM", ["X", "W", "R", "B", "", "initial_h", "initial_c"], ["", "Y_h", "Y_c"],
                hidden_size=HIDDEN,
            ),
            helper.make_node("Squeeze", ["Y_h", "axis0"], ["h"]),
            helper.make_node("Squeeze", ["Y_c", "axis0"], ["c"]),
        ]
        weights["axis0"] = np.array([0], dtype=np.int64)

        def info(name):
            return helper.make_tensor_value_info(name, TensorProto.FLOAT, [1, HIDDEN])

        graph = helper.make_graph(
            nodes, self.name, [info(n) for n in ("x", "h0", "c0")], [info("h"), info("c")],
            initializer=[numpy_helper.from_array(a, n) for n, a in weights.items()],
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = min(model.ir_version, 9)
        onnx.checker.check_model(model)
        return model


def lstm():
    g = LstmGraph("lstm_w6", SEEDS["lstm"])
    for name in ("x", "h0", "c0"):
        g.input(name, (1, HIDDEN))
    g.weight("w", (4 * HIDDEN, HIDDEN), 1.0)
    g.weight("u", (4 * HIDDEN, HIDDEN), 1.0)
    g.weight("b", (4 * HIDDEN,), 1.0)
    g.output_names = ["h", "c"]
    return g
