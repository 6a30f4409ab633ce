"""Writes the inputs and expected outputs of the conformance programs in this directory.

For each program P.relay: P/<param>.npy for every parameter of @main (seeded), and
P/expected.npz with every tensor leaf of the result in depth-first order under "0", "1", ...
(what `relayc run P.relay --input NAME=P/NAME.npy ... --output out.npz` writes). The expected
values are computed here in float64 numpy, independently of relayc, by Relay's semantics as
TVM defines them. Needs only numpy:

    python3 conformance/generate.py

A float leaf matches when numpy.allclose(actual, expected, rtol=1e-4, atol=1e-5) holds and its
dtype is the expected one; integer and boolean leaves must be equal.
"""

import math
import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(20261127)


def f32(a):
    return np.asarray(a, dtype=np.float32)


def leaves(value):
    """The tensor leaves of a nested tuple, depth first."""
    if isinstance(value, (tuple, list)):
        return [leaf for v in value for leaf in leaves(v)]
    return [np.asarray(value)]


def write(program, inputs, result):
    d = os.path.join(HERE, program)
    os.makedirs(d, exist_ok=True)
    for name, array in inputs.items():
        np.save(os.path.join(d, name + ".npy"), array)
    out = {}
    for i, leaf in enumerate(leaves(result)):
        # float64 arithmetic stands for the float32 result.
        out[str(i)] = leaf.astype(np.float32) if leaf.dtype == np.float64 else leaf
    np.savez(os.path.join(d, "expected.npz"), **out)


def sigmoid(v):
    return 1 / (1 + np.exp(-v))


def softmax(v, axis):
    e = np.exp(v - v.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def conv2d(x, w, strides=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1), groups=1):
    """NCHW/OIHW convolution; padding is (top, left, bottom, right)."""
    top, left, bottom, right = padding
    xp = np.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)))
    n, _, h, wd = xp.shape
    o, cg, kh, kw = w.shape
    (sh, sw), (dh, dw) = strides, dilation
    oh = (h - dh * (kh - 1) - 1) // sh + 1
    ow = (wd - dw * (kw - 1) - 1) // sw + 1
    out = np.zeros((n, o, oh, ow))
    og = o // groups
    for g in range(groups):
        xs, ws = xp[:, g * cg:(g + 1) * cg], w[g * og:(g + 1) * og]
        for i in range(kh):
            for j in range(kw):
                rows = slice(i * dh, i * dh + sh * (oh - 1) + 1, sh)
                cols = slice(j * dw, j * dw + sw * (ow - 1) + 1, sw)
                out[:, g * og:(g + 1) * og] += np.einsum(
                    "nchw,oc->nohw", xs[:, :, rows, cols], ws[:, :, i, j])
    return out


def pool2d(x, size, strides, padding, kind, count_include_pad=False, ceil_mode=False):
    """Max or average pool; padding is (top, left, bottom, right). An average divides by the
    window's elements inside the image, or inside the padded image with
    `count_include_pad`."""
    top, left, bottom, right = padding
    n, c, h, w = x.shape

    def extent(length, lo, hi, k, s):
        span = length + lo + hi - k
        return (-(-span // s) if ceil_mode else span // s) + 1

    oh, ow = extent(h, top, bottom, size[0], strides[0]), extent(w, left, right, size[1], strides[1])
    out = np.zeros((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            y0, x0 = i * strides[0] - top, j * strides[1] - left
            y1, x1 = y0 + size[0], x0 + size[1]
            window = x[:, :, max(y0, 0):min(y1, h), max(x0, 0):min(x1, w)]
            if kind == "max":
                out[:, :, i, j] = window.max(axis=(2, 3))
            elif count_include_pad:
                count = (min(y1, h + bottom) - y0) * (min(x1, w + right) - x0)
                out[:, :, i, j] = window.sum(axis=(2, 3)) / count
            else:
                count = (min(y1, h) - max(y0, 0)) * (min(x1, w) - max(x0, 0))
                out[:, :, i, j] = window.sum(axis=(2, 3)) / count
    return out


def elementwise():
    x = f32(rng.uniform(-2.5, 2.5, (3, 6)))
    y = f32(rng.uniform(-1.5, 1.5, 6))
    p = rng.integers(-30, 30, (3, 6)).astype(np.int32)
    q = np.array([4, -3, 7, -5, 2, -2], dtype=np.int32)
    s = f32([0.5, np.nan, -np.inf, np.inf, -3.0, 0.0, -np.nan])
    slope = f32([0.05, 0.1, 0.2, 0.3, 0.4, 0.6])
    X, Y = x.astype(np.float64), y.astype(np.float64)
    erf = np.vectorize(math.erf)
    result = (
        (np.abs(X) + 0.5) ** Y,
        np.mod(p, q),
        np.floor_divide(p, q),
        np.fmod(p, q),
        (np.sign(p) * np.sign(q) * (np.abs(p) // np.abs(q))).astype(np.int32),
        erf(X * np.float32(0.7)),
        1 / np.sqrt(X * X + 0.25),
        np.sign(X) * np.floor(np.abs(X) + 0.5),
        np.clip(X, -1, 0.5),
        np.where(X < Y, Y, X),
        np.trunc(x * np.float32(3)).astype(np.int32),
        np.logical_or(x > 0, y < 0),
        (np.isnan(s), np.isinf(s), np.isfinite(s)),
        np.where(X > 0, X, 0.2 * X),
        np.where(X > 0, X, slope.astype(np.float64) * X),
        X - np.log(np.exp(X - X.max(0)).sum(0)) - X.max(0),
        np.broadcast_to(Y, (2, 3, 6)),
        np.tanh(X) * sigmoid(Y) + np.exp(-np.abs(X)) / (np.sqrt(np.abs(X)) + 2),
        np.sign(X),
        np.minimum(p, q),
        np.right_shift(p, 1),
        np.bitwise_and(p, q),
        (np.floor(X), np.ceil(X), np.trunc(X)),
        np.log(np.abs(X) + 1),
    )
    write("elementwise", dict(x=x, y=y, p=p, q=q, s=s, slope=slope), result)


def reductions():
    x = f32(rng.standard_normal((4, 3, 5)))
    X = x.astype(np.float64)
    mean2 = X.mean(axis=2, keepdims=True)
    result = (
        X.sum(axis=0),
        X.mean(axis=(1, 2), keepdims=True),
        X.min(axis=(1, 2)),
        np.argmin(x, axis=1).astype(np.int32),
        np.argmax(x, axis=2)[..., None].astype(np.int32),
        ((X - mean2) ** 2).mean(axis=2, keepdims=True),
        X.prod(axis=0),
        (x < np.float32(0.3)).any(axis=1),
        (x < np.float32(0.3)).all(axis=(0, 2)),
        X.max(),
        X.sum(axis=1, keepdims=True),
    )
    write("reductions", dict(x=x), result)


def shapes():
    x = f32(rng.standard_normal((3, 2, 4)))
    i = np.array([[0, 5, -1], [3, -2, 1]], dtype=np.int32)
    result = (
        x.reshape(6, 4),
        x.reshape(3, 2, 4),
        x.reshape(6, 4),
        x.reshape(3, 1, 2, 4),
        x.reshape(3, 2, 2, 2),
        x.transpose(1, 2, 0),
        x.transpose(2, 1, 0),
        x,
        np.concatenate([x, x, x], axis=0),
        np.stack([x, x], axis=3),
        x[:, 0:1],
        x[:, 1:2],
        x[2:0:-1, 0:2, 3:0:-2],
        np.take(x, np.mod(i, 4), axis=2),
        np.take(x, np.clip(i, 0, 2), axis=0),
        np.tile(x, (2, 1, 1)),
        np.repeat(x, 3, axis=2),
        x[:, :, ::-1],
        x.reshape(3, 8),
        np.array(x.shape, dtype=np.int64),
    )
    write("shapes", dict(x=x, i=i), result)


def convpool():
    x = f32(rng.standard_normal((1, 3, 10, 10)))
    dw = f32(rng.standard_normal((3, 1, 3, 3)) * 0.5)
    w = f32(rng.standard_normal((5, 3, 3, 3)) * 0.3)
    bias = f32(rng.standard_normal(5) * 0.2)
    X, DW, W = (a.astype(np.float64) for a in (x, dw, w))
    depthwise = conv2d(X, DW, padding=(1, 1, 1, 1), groups=3)
    strided = conv2d(X, W, strides=(2, 2), padding=(1, 0, 1, 0))
    relu = np.maximum(strided + bias.reshape(1, -1, 1, 1), 0)
    adaptive = np.zeros((1, 3, 3, 4))
    for a in range(3):
        for b in range(4):
            y0, y1 = (a * 10) // 3, -(-((a + 1) * 10) // 3)
            x0, x1 = (b * 10) // 4, -(-((b + 1) * 10) // 4)
            adaptive[:, :, a, b] = X[:, :, y0:y1, x0:x1].max(axis=(2, 3))
    result = (
        depthwise,
        relu,
        pool2d(depthwise, (3, 3), (2, 2), (1, 1, 1, 1), "max"),
        pool2d(depthwise, (3, 3), (2, 2), (0, 0, 0, 0), "avg", ceil_mode=True),
        pool2d(depthwise, (3, 3), (3, 3), (1, 1, 1, 1), "avg", count_include_pad=True),
        relu.mean(axis=(2, 3), keepdims=True),
        adaptive,
        np.pad(X, ((0, 0), (1, 0), (0, 1), (2, 2)), constant_values=0.25),
        conv2d(X, W, padding=(2, 2, 2, 2), dilation=(2, 2)),
    )
    write("convpool", dict(x=x, dw=dw, w=w, bias=bias), result)


def attention():
    x = f32(rng.standard_normal((6, 8)))
    wq, wk, wv, wo = (f32(rng.standard_normal((8, 8)) * 0.35) for _ in range(4))
    gamma = f32(rng.uniform(0.5, 1.5, 8))
    beta = f32(rng.standard_normal(8) * 0.1)
    X = x.astype(np.float64)

    def heads(wt):
        return (X @ wt.astype(np.float64).T).reshape(6, 2, 4).transpose(1, 0, 2)

    q, k, v = heads(wq), heads(wk), heads(wv)
    p = softmax(q @ k.transpose(0, 2, 1) * 0.5, axis=2)
    merged = (p @ v).transpose(1, 0, 2).reshape(6, 8)
    y = merged @ wo.astype(np.float64).T + X
    mu, var = y.mean(1, keepdims=True), y.var(1, keepdims=True)
    result = (y - mu) / np.sqrt(var + 1e-5) * gamma + beta
    write("attention", dict(x=x, wq=wq, wk=wk, wv=wv, wo=wo, gamma=gamma, beta=beta), result)


def gru_list():
    seq = f32(rng.standard_normal((4, 1, 6)))
    w = f32(rng.standard_normal((18, 6)) * 0.4)
    u = f32(rng.standard_normal((18, 6)) * 0.4)
    b = f32(rng.standard_normal(18) * 0.1)
    W, U, B = (a.astype(np.float64) for a in (w, u, b))
    h, best = np.zeros((1, 6)), np.full((1, 6), -100.0)
    for t in range(4):
        gx = np.split(seq[t].astype(np.float64) @ W.T + B, 3, axis=1)
        gh = np.split(h @ U.T, 3, axis=1)
        z, r = sigmoid(gx[0] + gh[0]), sigmoid(gx[1] + gh[1])
        c = np.tanh(gx[2] + r * gh[2])
        h = z * h + (1 - z) * c
        best = np.maximum(best, h)
    write("gru_list", dict(seq=seq, w=w, u=u, b=b), (best, np.int32(4)))


if __name__ == "__main__":
    for program in (elementwise, reductions, shapes, convpool, attention, gru_list):
        program()
        print(program.__name__)
