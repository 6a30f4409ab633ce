"""The zoo's networks at their real layer shapes, each a function building a `Graph`.

Weights are named like the originals' (`layer2_0_conv1_weight`, `layer3_attn_q_weight`); a
network's seed depends on its family only, so batch sizes and float16 variants share weights (the
float16 ones are the float32 weights rounded to float16). Initialization keeps activations in a
sane range through the whole depth: He-uniform convolutions, batch-norm scale in [0.4, 0.8) and
shift in [-0.1, 0.1), dense layers uniform with variance 1/fan-in, layer-norm gamma in
[0.9, 1.1).
"""

import math

import numpy as np

from .graph import Graph, Value
from .weights import splitmix_uniform, tensor_seed

SEEDS = {"densenet121": 121, "mnist": 8, "mobilenetv2": 2, "resnet50": 50, "bert": 768, "gpt2": 124, "lstm": 6}


def conv_bn(g, x, name, cout, k, stride=1, pad=0, groups=1, act="relu"):
    """A convolution without bias, batch norm as multiply/add by [C, 1, 1] constants, an
    activation (relu, relu6 or None)."""
    cin = x.shape[1]
    fan_in = cin // groups * k * k
    w = g.weight(f"{name}_weight", (cout, cin // groups, k, k), math.sqrt(6 / fan_in))
    y = g.conv2d(x, w, stride, pad, groups)
    scale = g.weight(f"{name}_bn_scale", (cout, 1, 1), 0.2, 0.6)
    shift = g.weight(f"{name}_bn_shift", (cout, 1, 1), 0.1)
    y = g.add(g.multiply(y, scale), shift)
    if act == "relu":
        return g.relu(y)
    if act == "relu6":
        return g.relu6(y)
    return y


def classifier(g, x, classes):
    """Global average pool, flatten, dense with bias."""
    y = g.batch_flatten(g.global_avg_pool2d(x))
    w = g.weight("fc_weight", (classes, y.shape[1]), math.sqrt(3 / y.shape[1]), onnx_array=np.transpose)
    b = g.weight("fc_bias", (classes,), 0.1)
    return g.bias_add(g.dense(y, w), b)


# -- DenseNet-121 ---------------------------------------------------------------------------------


def bn_relu(g, x, name):
    """Batch norm as multiply/add by [C, 1, 1] constants, then relu: DenseNet's pre-activation
    (a batch norm on a concatenation, which no convolution absorbs)."""
    c = x.shape[1]
    scale = g.weight(f"{name}_scale", (c, 1, 1), 0.2, 0.6)
    shift = g.weight(f"{name}_shift", (c, 1, 1), 0.1)
    return g.relu(g.add(g.multiply(x, scale), shift))


def conv(g, x, name, cout, k, pad=0):
    fan_in = x.shape[1] * k * k
    return g.conv2d(x, g.weight(f"{name}_weight", (cout, x.shape[1], k, k), math.sqrt(6 / fan_in)), 1, pad)


def densenet121(batch=1):
    """torchvision's densenet121 (growth 32, blocks 6/12/24/16, bottleneck 4·32) as its
    TorchScript export computes it: each layer concatenates every earlier feature map of its
    block, batch norm + relu, a 1×1 convolution whose batch norm the exporter folds, relu, a
    3×3 convolution; transitions halve the channels and average-pool 2×2."""
    g = Graph("densenet121", SEEDS["densenet121"])
    x = g.input("x", (batch, 3, 224, 224))
    y = conv_bn(g, x, "features_conv0", 64, 7, 2, 3)
    y = g.max_pool2d(y, 3, 2, 1)
    for b, layers in enumerate((6, 12, 24, 16), start=1):
        features = [y]
        for i in range(1, layers + 1):
            name = f"features_denseblock{b}_denselayer{i}"
            z = features[0] if len(features) == 1 else g.concatenate(features, 1)
            z = bn_relu(g, z, f"{name}_norm1")
            z = conv_bn(g, z, f"{name}_conv1", 128, 1)
            features.append(conv(g, z, f"{name}_conv2", 32, 3, 1))
        y = g.concatenate(features, 1)
        if b < 4:
            name = f"features_transition{b}"
            y = conv(g, bn_relu(g, y, f"{name}_norm"), f"{name}_conv", y.shape[1] // 2, 1)
            y = g.avg_pool2d(y, 2, 2)
    y = bn_relu(g, y, "features_norm5")
    g.output(classifier(g, y, 1000))
    return g


# -- ResNet-50 v1 ---------------------------------------------------------------------------------


def bottleneck(g, x, name, mid, out, stride):
    """ResNet v1 bottleneck: the stride on the first 1×1 convolution and on the projection."""
    y = conv_bn(g, x, f"{name}_conv1", mid, 1, stride)
    y = conv_bn(g, y, f"{name}_conv2", mid, 3, 1, 1)
    y = conv_bn(g, y, f"{name}_conv3", out, 1, act=None)
    shortcut = x
    if stride != 1 or x.shape[1] != out:
        shortcut = conv_bn(g, x, f"{name}_downsample", out, 1, stride, act=None)
    return g.relu(g.add(y, shortcut))


def resnet50(batch=1, dtype="float32"):
    g = Graph(f"resnet50_b{batch}_{dtype}", SEEDS["resnet50"], dtype)
    x = g.input("input", (batch, 3, 224, 224))
    y = conv_bn(g, x, "conv1", 64, 7, 2, 3)
    y = g.max_pool2d(y, 3, 2, 1)
    for stage, (blocks, mid) in enumerate([(3, 64), (4, 128), (6, 256), (3, 512)], start=1):
        for i in range(blocks):
            stride = 2 if i == 0 and stage > 1 else 1
            y = bottleneck(g, y, f"layer{stage}_{i}", mid, mid * 4, stride)
    g.output(classifier(g, y, 1000))
    return g


def resnet50_block(dtype="float32"):
    """ResNet-50's layer2_0 at its real shape: 256 → 128 → 512 channels, 56² → 28², projection."""
    g = Graph(f"resnet50_layer2_0_{dtype}", SEEDS["resnet50"], dtype)
    x = g.input("input", (1, 256, 56, 56))
    g.output(bottleneck(g, x, "layer2_0", 128, 512, 2))
    return g


# -- MobileNetV2 ----------------------------------------------------------------------------------

MOBILENET_V2 = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                (6, 160, 3, 2), (6, 320, 1, 1)]


def inverted_residual(g, x, name, expand, out, stride):
    cin = x.shape[1]
    hidden = cin * expand
    y = x
    if expand != 1:
        y = conv_bn(g, y, f"{name}_expand", hidden, 1, act="relu6")
    y = conv_bn(g, y, f"{name}_dw", hidden, 3, stride, 1, groups=hidden, act="relu6")
    y = conv_bn(g, y, f"{name}_project", out, 1, act=None)
    if stride == 1 and cin == out:
        y = g.add(x, y)
    return y


def mobilenetv2():
    g = Graph("mobilenetv2_b1_float32", SEEDS["mobilenetv2"])
    x = g.input("input", (1, 3, 224, 224))
    y = conv_bn(g, x, "conv0", 32, 3, 2, 1, act="relu6")
    index = 0
    for expand, out, repeat, stride in MOBILENET_V2:
        for i in range(repeat):
            y = inverted_residual(g, y, f"block{index}", expand, out, stride if i == 0 else 1)
            index += 1
    y = conv_bn(g, y, "conv_last", 1280, 1, act="relu6")
    g.output(classifier(g, y, 1000))
    return g


def mobilenetv2_block():
    """MobileNetV2's block2 (24 → 144 → 24 channels at 56², depthwise 3×3, residual)."""
    g = Graph("mobilenetv2_block2", SEEDS["mobilenetv2"])
    x = g.input("input", (1, 24, 56, 56))
    g.output(inverted_residual(g, x, "block2", 6, 24, 1))
    return g


# -- transformers ---------------------------------------------------------------------------------


def linear(g, x, name, out):
    """ONNX's MatMul + Add on [b, s, in] as TVM imports it: reshape to 2-D, nn.dense with the
    [out, in] weight, reshape back, add the bias."""
    b, s, d = x.shape
    w = g.weight(f"{name}_weight", (out, d), math.sqrt(3 / d), onnx_array=np.transpose)
    bias = g.weight(f"{name}_bias", (out,), 0.1)
    y = g.dense(g.reshape(x, (b * s, d)), w)
    return g.add(g.reshape(y, (b, s, out)), bias)


def layer_norm(g, x, name, epsilon):
    d = x.shape[-1]
    gamma = g.weight(f"{name}_gamma", (d,), 0.1, 1.0)
    beta = g.weight(f"{name}_beta", (d,), 0.1)
    return g.layer_norm(x, gamma, beta, epsilon)


def heads(g, x, n_heads):
    """[b, s, h·d] → [b·h, s, d]."""
    b, s, width = x.shape
    d = width // n_heads
    y = g.transpose(g.reshape(x, (b, s, n_heads, d)), (0, 2, 1, 3))
    return g.reshape(y, (b * n_heads, s, d))


def attention(g, x, name, n_heads, mask=None):
    b, s, width = x.shape
    q = heads(g, linear(g, x, f"{name}_q", width), n_heads)
    k = heads(g, linear(g, x, f"{name}_k", width), n_heads)
    v = heads(g, linear(g, x, f"{name}_v", width), n_heads)
    scores = g.divide_scalar(g.batch_matmul(q, k, transpose_b=True), math.sqrt(width // n_heads))
    if mask is not None:
        scores = g.add(scores, mask)
    context = g.batch_matmul(g.softmax(scores), v, transpose_b=False)
    context = g.transpose(g.reshape(context, (b, n_heads, s, width // n_heads)), (0, 2, 1, 3))
    return linear(g, g.reshape(context, (b, s, width)), f"{name}_out", width)


def gelu_erf(g, x):
    """x · 0.5 · (1 + erf(x / √2)), as exported from BERT."""
    y = g.add_scalar(g.erf(g.divide_scalar(x, 1.4142135)), 1.0)
    return g.mul_scalar(g.multiply(x, y), 0.5)


def gelu_tanh(g, x):
    """0.5 · x · (1 + tanh(√(2/π) · (x + 0.044715 · x³))), as exported from GPT-2."""
    cube = g.mul_scalar(g.power_scalar(x, 3.0), 0.044715)
    inner = g.tanh(g.mul_scalar(g.add(x, cube), 0.7978846))
    return g.multiply(g.mul_scalar(x, 0.5), g.add_scalar(inner, 1.0))


def bert_layer(g, x, name):
    """A BERT-base encoder layer (post-norm): attention, add & norm, GELU FFN, add & norm."""
    width = x.shape[-1]
    y = layer_norm(g, g.add(attention(g, x, f"{name}_attn", 12), x), f"{name}_ln1", 1e-12)
    f = linear(g, gelu_erf(g, linear(g, y, f"{name}_ffn_in", 4 * width)), f"{name}_ffn_out", width)
    return layer_norm(g, g.add(f, y), f"{name}_ln2", 1e-12)


def token_ids(g, name, shape, vocab):
    u = splitmix_uniform(tensor_seed(g.seed, name), int(np.prod(shape)), 0.5, 0.5)
    ids = np.minimum((u.astype(np.float64) * vocab).astype(np.int64), vocab - 1)
    return g.input(name, shape, data=ids.reshape(shape))


def bert(batch=1, dtype="float32", seq=128, layers=12):
    g = Graph(f"bert_b{batch}_{dtype}", SEEDS["bert"], dtype)
    ids = token_ids(g, "input_ids", (batch, seq), 30522)
    words = g.take(g.weight("word_embeddings", (30522, 768), 1.0), ids)
    positions = g.weight("position_embeddings", (seq, 768), 0.1)
    token_type = g.weight("token_type_embedding", (768,), 0.1)
    y = g.add(g.add(words, positions), token_type)
    y = layer_norm(g, y, "embeddings_ln", 1e-12)
    for layer in range(layers):
        y = bert_layer(g, y, f"layer{layer}")
    g.output(y)
    return g


def bert_block(dtype="float32"):
    """One BERT-base encoder layer at its real shape ([1, 128, 768], 12 heads, FFN 3072)."""
    g = Graph(f"bert_layer0_{dtype}", SEEDS["bert"], dtype)
    g.output(bert_layer(g, g.input("hidden", (1, 128, 768)), "layer0"))
    return g


def gpt2_block_(g, x, name, mask):
    """A GPT-2 block (pre-norm): causal attention and a tanh-GELU MLP, each with a residual."""
    width = x.shape[-1]
    y = g.add(x, attention(g, layer_norm(g, x, f"{name}_ln1", 1e-5), f"{name}_attn", 12, mask))
    m = linear(g, layer_norm(g, y, f"{name}_ln2", 1e-5), f"{name}_mlp_in", 4 * width)
    return g.add(y, linear(g, gelu_tanh(g, m), f"{name}_mlp_out", width))


def gpt2(seq=64, blocks=12):
    g = Graph("gpt2_b1_float32", SEEDS["gpt2"])
    ids = token_ids(g, "input_ids", (1, seq), 50257)
    wte = g.weight("wte", (50257, 768), math.sqrt(3 / 768))
    y = g.add(g.take(wte, ids), g.weight("wpe", (seq, 768), 0.1))
    mask = g.causal_mask("causal_mask", seq)
    for block in range(blocks):
        y = gpt2_block_(g, y, f"h{block}", mask)
    y = layer_norm(g, y, "ln_f", 1e-5)
    # The LM head is tied to the token embedding: nn.dense by wte itself ([vocab, 768]); ONNX
    # multiplies by a transposed copy.
    g.initializers["wte_T"] = np.ascontiguousarray(g.params["wte"].T)
    head = Value("%wte", "wte_T", wte.shape)
    logits = g.dense(g.reshape(y, (seq, 768)), head)
    g.output(g.reshape(logits, (1, seq, 50257)))
    return g


def gpt2_block():
    """One GPT-2-small block at its real shape ([1, 64, 768], 12 heads, MLP 3072, causal)."""
    g = Graph("gpt2_h0", SEEDS["gpt2"])
    x = g.input("hidden", (1, 64, 768))
    g.output(gpt2_block_(g, x, "h0", g.causal_mask("causal_mask", 64)))
    return g


# -- small ones -----------------------------------------------------------------------------------


def mnist():
    """The ONNX model zoo's mnist-8 shapes: conv 5×5 1→8 (same padding), relu, max pool 2,
    conv 5×5 8→16, relu, max pool 3, dense 256 → 10, each layer with a bias."""
    g = Graph("mnist_b1_float32", SEEDS["mnist"])
    y = g.input("input", (1, 1, 28, 28))
    for name, cout, pool in (("conv1", 8, 2), ("conv2", 16, 3)):
        cin = y.shape[1]
        w = g.weight(f"{name}_weight", (cout, cin, 5, 5), math.sqrt(6 / (cin * 25)))
        b = g.weight(f"{name}_bias", (cout,), 0.1)
        y = g.relu(g.bias_add(g.conv2d(y, w, 1, 2), b))
        y = g.max_pool2d(y, pool, pool, 0)
    y = g.reshape(y, (1, 256))
    w = g.weight("fc_weight", (10, 256), math.sqrt(3 / 256), onnx_array=np.transpose)
    g.output(g.bias_add(g.dense(y, w), g.weight("fc_bias", (10,), 0.1)))
    return g
