"""ONNX Runtime sessions for the zoo: sequential execution, a given number of intra-op threads,
every graph optimization (as a user gets by default); and, for float16 models whose operators
ONNX Runtime's CPU provider does not implement in float16, the same model computed in float32
(the float16 weights widened exactly), the reference the float16 results are checked against."""

import numpy as np


def session(model, threads, blocked=True, spinning=True):
    """A session for a serialized model (bytes) or a model file (path). `blocked=False` stops
    at the "extended" optimization level: ONNX Runtime then runs convolutions on NCHW tensors,
    as relayc does, instead of converting the graph to its blocked NCHWc layout (the layout
    transformer of the "all" level). `spinning=False`: its idle intra-op threads sleep instead
    of spinning (its default) after a run."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    if not spinning:
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    level = ort.GraphOptimizationLevel
    options.graph_optimization_level = level.ORT_ENABLE_ALL if blocked else level.ORT_ENABLE_EXTENDED
    return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])


def widened(model):
    """A copy of an ONNX model with every float16 initializer, input and output as float32."""
    import onnx
    from onnx import TensorProto, numpy_helper

    model = onnx.ModelProto.FromString(model.SerializeToString())
    graph = model.graph
    for i, tensor in enumerate(graph.initializer):
        if tensor.data_type == TensorProto.FLOAT16:
            wide = numpy_helper.to_array(tensor).astype(np.float32)
            graph.initializer[i].CopyFrom(numpy_helper.from_array(wide, tensor.name))
    for value in list(graph.input) + list(graph.output):
        if value.type.tensor_type.elem_type == TensorProto.FLOAT16:
            value.type.tensor_type.elem_type = TensorProto.FLOAT
    return model


def reference_session(model, threads=1, spinning=True):
    """(session, widened): a session for `model` (an onnx.ModelProto), or for its float32
    widening when ONNX Runtime cannot run it as it is."""
    try:
        return session(model.SerializeToString(), threads, spinning=spinning), False
    except Exception:  # noqa: BLE001 (onnxruntime raises its own NOT_IMPLEMENTED types)
        return session(widened(model).SerializeToString(), threads, spinning=spinning), True


def run(sess, feeds, widened_model):
    """The session's outputs for `feeds`, float16 feeds widened when the model was."""
    if widened_model:
        feeds = {
            k: v.astype(np.float32) if v.dtype == np.float16 else v for k, v in feeds.items()
        }
    return sess.run(None, feeds)
