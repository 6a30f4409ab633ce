//! Contractions (`nn.conv2d`, `nn.dense`, `nn.batch_matmul`) with and without epilogues at the
//! sizes of real networks, compiled into kernels and compared with the interpreter: channel
//! counts around and past every blocking and scratch threshold (255, 256, 257, 512, 1024),
//! equal and unequal in/out; the layer shapes of ResNet-50, ResNeXt-50 (32×4d) and
//! MobileNetV2; and random contraction + epilogue groups of several megabytes.
//!
//! The class of bug these pin: a GEMM whose result was given the storage of its own operand (a
//! 1×1 convolution with as many output as input channels, where the padded input and the
//! output have the same size), which reads what it overwrites once the product is blocked.

mod common;

use common::{Case, run_cases_within, tensor_type};
use relay_interp::SplitMix64;

/// The tolerance (rtol, atol): SPEC §4's for contractions, with an absolute part for sums of
/// up to 2,048 float32 products of values in [-1, 1) that cancel to near zero (the reference
/// accumulates in float64). An aliasing bug is off by orders of magnitude more.
const LOOSE: (f64, f64) = (1e-4, 1e-4);

/// A convolution layer: input channels, output channels, input height = width, kernel size,
/// stride, padding, groups.
#[derive(Clone, Copy, Debug)]
struct Conv {
    c_in: i64,
    c_out: i64,
    hw: i64,
    k: i64,
    stride: i64,
    pad: i64,
    groups: i64,
}

const fn conv(c_in: i64, c_out: i64, hw: i64, k: i64, stride: i64, pad: i64) -> Conv {
    Conv {
        c_in,
        c_out,
        hw,
        k,
        stride,
        pad,
        groups: 1,
    }
}

const fn grouped(c: i64, hw: i64, stride: i64, groups: i64) -> Conv {
    Conv {
        c_in: c,
        c_out: c,
        hw,
        k: 3,
        stride,
        pad: 1,
        groups,
    }
}

impl Conv {
    /// The call over `%p0` (data), `%p1` (weight) and, with `epilogue`, `%p2` (bias):
    /// `relu(conv + bias)`.
    fn case(&self, dtype: &str, epilogue: bool) -> Case {
        let Conv {
            c_in,
            c_out,
            hw,
            k,
            stride,
            pad,
            groups,
        } = *self;
        let call = format!(
            "nn.conv2d(%p0, %p1, strides=[{stride}, {stride}], padding=[{pad}, {pad}, {pad}, {pad}], \
             groups={groups}, channels={c_out}, kernel_size=[{k}, {k}])"
        );
        let mut params = vec![
            tensor_type(&[1, c_in, hw, hw], dtype),
            tensor_type(&[c_out, c_in / groups, k, k], dtype),
        ];
        let call = if epilogue {
            params.push(tensor_type(&[c_out, 1, 1], dtype));
            format!("nn.relu(add({call}, %p2))")
        } else {
            call
        };
        (
            format!("{self:?} {dtype} epilogue={epilogue}"),
            call,
            params,
        )
    }
}

/// `nn.dense` of `[batch, c_in]` by `[c_out, c_in]`, with a bias + relu epilogue or not.
fn dense(batch: i64, c_in: i64, c_out: i64, epilogue: bool) -> Case {
    let mut params = vec![
        tensor_type(&[batch, c_in], "float32"),
        tensor_type(&[c_out, c_in], "float32"),
    ];
    let call = if epilogue {
        params.push(tensor_type(&[c_out], "float32"));
        "nn.relu(nn.bias_add(nn.dense(%p0, %p1, units=None), %p2, axis=1))".to_string()
    } else {
        "nn.dense(%p0, %p1, units=None)".to_string()
    };
    (
        format!("dense {batch}x{c_in} -> {c_out} epilogue={epilogue}"),
        call,
        params,
    )
}

/// `nn.batch_matmul` of `[b, m, k]` by `[b, n, k]` (transposed, TVM's default), with a
/// scaling epilogue or not.
fn batch_matmul(b: i64, m: i64, k: i64, n: i64, epilogue: bool) -> Case {
    let params = vec![
        tensor_type(&[b, m, k], "float32"),
        tensor_type(&[b, n, k], "float32"),
    ];
    let call = if epilogue {
        "multiply(nn.batch_matmul(%p0, %p1, transpose_a=False, transpose_b=True), 0.125f)"
            .to_string()
    } else {
        "nn.batch_matmul(%p0, %p1, transpose_a=False, transpose_b=True)".to_string()
    };
    (
        format!("batch_matmul {b}x{m}x{k} * {n} epilogue={epilogue}"),
        call,
        params,
    )
}

/// The channel counts around the thresholds: 255, 256, 257, 512 and 1024 channels in and out,
/// equal and unequal.
const CHANNELS: &[(i64, i64)] = &[
    (255, 255),
    (256, 256),
    (257, 257),
    (512, 512),
    (1024, 1024),
    (255, 257),
    (257, 255),
    (256, 512),
    (512, 256),
    (1024, 512),
    (512, 1024),
];

#[test]
fn one_by_one_convolutions_at_every_channel_threshold() {
    let mut cases = Vec::new();
    for &(c_in, c_out) in CHANNELS {
        for epilogue in [false, true] {
            cases.push(conv(c_in, c_out, 14, 1, 1, 0).case("float32", epilogue));
        }
    }
    cases.push(conv(512, 512, 14, 1, 1, 0).case("float64", true));
    run_cases_within(cases, LOOSE);
}

#[test]
fn three_by_three_convolutions_at_every_channel_threshold() {
    let mut cases = Vec::new();
    for &(c_in, c_out) in CHANNELS {
        // The output has as many elements as the input when the channels are equal.
        cases.push(conv(c_in, c_out, 6, 3, 1, 1).case("float32", c_in == c_out));
    }
    // The image window (implicit im2col) in float64 with an epilogue and in float16, strided
    // (float16_contractions_match_the_reference has more float16 windows).
    cases.push(conv(256, 128, 14, 3, 2, 1).case("float64", true));
    cases.push(conv(64, 64, 28, 3, 2, 1).case("float16", false));
    run_cases_within(cases, LOOSE);
}

/// Convolutions with few output channels, which the host computes directly instead of as
/// GEMMs: MNIST's two 5×5 layers, a stride-2 one, a 1×1 projection to 16 channels over a
/// large image (MobileNetV2's first), a row too narrow for the vectors (a GEMM again), and
/// with their epilogues.
#[test]
fn small_convolutions_at_mnist_and_projection_shapes() {
    let mut cases = Vec::new();
    for epilogue in [false, true] {
        cases.push(conv(1, 8, 28, 5, 1, 2).case("float32", epilogue));
        cases.push(conv(8, 16, 14, 5, 1, 2).case("float32", epilogue));
        cases.push(conv(16, 12, 29, 5, 2, 2).case("float32", epilogue));
        cases.push(conv(32, 16, 112, 1, 1, 0).case("float32", epilogue));
        cases.push(conv(64, 16, 7, 3, 1, 1).case("float32", epilogue));
    }
    run_cases_within(cases, LOOSE);
}

#[test]
fn dense_and_batch_matmul_at_every_channel_threshold() {
    let mut cases = Vec::new();
    for &(c_in, c_out) in CHANNELS {
        for epilogue in [false, true] {
            cases.push(dense(64, c_in, c_out, epilogue));
            cases.push(dense(1, c_in, c_out, epilogue));
            cases.push(batch_matmul(2, 64, c_in, c_out, epilogue));
        }
    }
    run_cases_within(cases, LOOSE);
}

/// The convolution layers of ResNet-50 (stem, bottleneck 1×1 and 3×3 convolutions of every
/// stage, the strided projections).
const RESNET50: &[Conv] = &[
    conv(3, 64, 224, 7, 2, 3),
    conv(64, 64, 56, 1, 1, 0),
    conv(64, 64, 56, 3, 1, 1),
    conv(64, 256, 56, 1, 1, 0),
    conv(256, 64, 56, 1, 1, 0),
    conv(256, 128, 56, 1, 1, 0),
    conv(128, 128, 56, 3, 2, 1),
    conv(256, 512, 56, 1, 2, 0),
    conv(128, 512, 28, 1, 1, 0),
    conv(512, 128, 28, 1, 1, 0),
    conv(256, 256, 28, 3, 2, 1),
    conv(512, 1024, 28, 1, 2, 0),
    conv(1024, 256, 14, 1, 1, 0),
    conv(256, 256, 14, 3, 1, 1),
    conv(256, 1024, 14, 1, 1, 0),
    conv(512, 512, 14, 3, 2, 1),
    conv(1024, 2048, 14, 1, 2, 0),
    conv(2048, 512, 7, 1, 1, 0),
    conv(512, 512, 7, 3, 1, 1),
    conv(512, 2048, 7, 1, 1, 0),
];

/// The layers of ResNeXt-50 (32×4d) that differ from ResNet-50: grouped 3×3 convolutions
/// with 32 groups, and the 1×1 convolutions around them with as many output as input channels.
const RESNEXT50: &[Conv] = &[
    conv(64, 128, 56, 1, 1, 0),
    grouped(128, 56, 1, 32),
    conv(128, 256, 56, 1, 1, 0),
    conv(256, 256, 56, 1, 1, 0),
    grouped(256, 56, 2, 32),
    conv(256, 256, 28, 1, 1, 0),
    grouped(256, 28, 1, 32),
    conv(512, 512, 28, 1, 1, 0),
    grouped(512, 28, 2, 32),
    conv(512, 512, 14, 1, 1, 0),
    grouped(512, 14, 1, 32),
    conv(1024, 1024, 14, 1, 1, 0),
    grouped(1024, 14, 2, 32),
    conv(1024, 1024, 7, 1, 1, 0),
    grouped(1024, 7, 1, 32),
];

/// The layers of MobileNetV2: the stem, depthwise 3×3 convolutions (groups = channels) at
/// every resolution and stride, and the pointwise expansions and projections around them.
const MOBILENET_V2: &[Conv] = &[
    conv(3, 32, 224, 3, 2, 1),
    grouped(32, 112, 1, 32),
    conv(32, 16, 112, 1, 1, 0),
    conv(16, 96, 112, 1, 1, 0),
    grouped(96, 112, 2, 96),
    conv(96, 24, 56, 1, 1, 0),
    conv(24, 144, 56, 1, 1, 0),
    grouped(144, 56, 1, 144),
    grouped(144, 56, 2, 144),
    conv(144, 32, 28, 1, 1, 0),
    grouped(192, 28, 1, 192),
    grouped(384, 14, 1, 384),
    conv(384, 64, 14, 1, 1, 0),
    conv(64, 384, 14, 1, 1, 0),
    grouped(576, 14, 2, 576),
    grouped(960, 7, 1, 960),
    conv(960, 320, 7, 1, 1, 0),
    conv(320, 1280, 7, 1, 1, 0),
];

#[test]
fn resnet50_layers() {
    let mut cases: Vec<Case> = RESNET50.iter().map(|c| c.case("float32", true)).collect();
    cases.push(dense(1, 2048, 1000, true));
    run_cases_within(cases, LOOSE);
}

#[test]
fn resnext50_layers() {
    let cases = RESNEXT50.iter().map(|c| c.case("float32", true)).collect();
    run_cases_within(cases, LOOSE);
}

#[test]
fn mobilenet_v2_layers() {
    let mut cases: Vec<Case> = MOBILENET_V2
        .iter()
        .map(|c| c.case("float32", true))
        .collect();
    cases.push(dense(1, 1280, 1000, true));
    run_cases_within(cases, LOOSE);
}

/// The epilogues TVM's importer writes after a convolution: batch norm as a per-channel
/// multiply (`%p2`) and add (`%p3`), then `relu`, a residual add (`%p4`) then `relu`
/// (ResNet's block ends), `clip` (ReLU6) or a residual add alone (MobileNetV2's projections).
const IMPORTER_EPILOGUES: &[&str] = &[
    "nn.relu(add(multiply(%r, %p2), %p3))",
    "nn.relu(add(add(multiply(%r, %p2), %p3), %p4))",
    "clip(add(multiply(%r, %p2), %p3), a_min=0f, a_max=6f)",
    "add(add(multiply(%r, %p2), %p3), %p4)",
];

/// `layer` followed by `epilogue` (one of [`IMPORTER_EPILOGUES`]) in `dtype`.
fn importer_case(layer: Conv, epilogue: &str, dtype: &str) -> Case {
    let (label, call, mut params) = layer.case(dtype, false);
    let out = (layer.hw + 2 * layer.pad - layer.k) / layer.stride + 1;
    params.push(tensor_type(&[layer.c_out, 1, 1], dtype));
    params.push(tensor_type(&[layer.c_out, 1, 1], dtype));
    if epilogue.contains("%p4") {
        params.push(tensor_type(&[1, layer.c_out, out, out], dtype));
    }
    let epilogue = match dtype {
        "float64" => epilogue.replace("0f,", "0f64,").replace("6f)", "6f64)"),
        _ => epilogue.to_string(),
    };
    let body = format!("let %r = {call}; {epilogue}");
    (format!("{label} then {epilogue}"), body, params)
}

/// Convolutions at the layer shapes of ResNet-50 and MobileNetV2 with the epilogues TVM's
/// importer writes: the stem, 1×1 layers into and out of a bottleneck, a 7×7 stage whose
/// product is computed transposed, in float32 and float64; and dense layers with a bias and
/// a residual add.
#[test]
fn importer_epilogues_at_real_sizes() {
    let [relu, residual_relu, relu6, residual] = [0, 1, 2, 3].map(|i| IMPORTER_EPILOGUES[i]);
    let mut cases = vec![
        importer_case(conv(3, 64, 224, 7, 2, 3), relu, "float32"),
        importer_case(conv(64, 256, 56, 1, 1, 0), residual_relu, "float32"),
        importer_case(conv(256, 64, 56, 1, 1, 0), relu, "float32"),
        importer_case(conv(512, 512, 7, 3, 1, 1), relu, "float32"),
        importer_case(conv(512, 2048, 7, 1, 1, 0), residual_relu, "float32"),
        importer_case(conv(144, 24, 56, 1, 1, 0), residual, "float32"),
        importer_case(conv(32, 192, 28, 1, 1, 0), relu6, "float32"),
        importer_case(conv(64, 256, 28, 1, 1, 0), residual_relu, "float64"),
        importer_case(conv(256, 256, 7, 3, 1, 1), relu6, "float64"),
    ];
    for (m, k, n, dtype) in [
        (128, 768, 3072, "float32"),
        (1, 2048, 1000, "float32"),
        (64, 300, 257, "float64"),
    ] {
        let params = vec![
            tensor_type(&[m, k], dtype),
            tensor_type(&[n, k], dtype),
            tensor_type(&[n], dtype),
            tensor_type(&[m, n], dtype),
        ];
        let call = "add(nn.bias_add(nn.dense(%p0, %p1, units=None), %p2, axis=1), %p3)";
        cases.push((
            format!("dense {m}x{k} -> {n} {dtype} + bias + residual"),
            call.into(),
            params,
        ));
    }
    run_cases_within(cases, LOOSE);
}

/// Epilogues a random group applies to a contraction's result `%r` (with `%e`, a per-channel
/// operand, where they use one).
const EPILOGUES: &[&str] = &[
    "%r",
    "nn.relu(%r)",
    "add(%r, %e)",
    "nn.relu(add(%r, %e))",
    "clip(multiply(%r, %e), a_min=-1f, a_max=1f)",
    "sigmoid(subtract(%r, %e))",
    "add(%r, %r)",
    "multiply(nn.relu(%r), %r)",
];

/// One random contraction + epilogue group whose data runs to megabytes: a dense layer, a
/// batched product or a convolution (1×1 or 3×3, strided or not, grouped or not), at sizes
/// past the blocking (k > 256), scratch and parallelization thresholds.
fn random_group(rng: &mut SplitMix64) -> Case {
    let pick = |rng: &mut SplitMix64, xs: &[i64]| xs[(rng.next_u64() % xs.len() as u64) as usize];
    let epilogue = EPILOGUES[(rng.next_u64() % EPILOGUES.len() as u64) as usize];
    let (label, call, mut params, channel_shape) = match rng.next_u64() % 3 {
        0 => {
            let (m, k, n) = (
                pick(rng, &[64, 255, 256, 257, 512]),
                pick(rng, &[255, 256, 257, 512, 1024]),
                pick(rng, &[256, 257, 512, 1000, 1024]),
            );
            let (label, call, params) = dense(m, k, n, false);
            (label, call, params, vec![n])
        }
        1 => {
            let (b, m, k, n) = (
                pick(rng, &[2, 4]),
                pick(rng, &[128, 257, 512]),
                pick(rng, &[255, 256, 512]),
                pick(rng, &[128, 256, 257]),
            );
            let (label, call, params) = batch_matmul(b, m, k, n, false);
            (label, call, params, vec![n])
        }
        _ => {
            let c_in = pick(rng, &[64, 255, 256, 257, 512]);
            let square = rng.next_u64().is_multiple_of(2);
            let c_out = if square {
                c_in
            } else {
                pick(rng, &[128, 256, 512])
            };
            let k = pick(rng, &[1, 3]);
            let layer = Conv {
                c_in,
                c_out,
                hw: pick(rng, &[14, 28]),
                k,
                stride: pick(rng, &[1, 1, 2]),
                pad: k / 2,
                groups: if k == 3 && c_in == c_out && c_in % 32 == 0 {
                    pick(rng, &[1, 32])
                } else {
                    1
                },
            };
            let (label, call, params) = layer.case("float32", false);
            (label, call, params, vec![c_out, 1, 1])
        }
    };
    let uses_e = epilogue.contains("%e");
    if uses_e {
        params.push(tensor_type(&channel_shape, "float32"));
    }
    let e = format!("%p{}", params.len() - 1);
    let body = format!(
        "let %r = {call}; {}",
        epilogue.replace("%e", if uses_e { &e } else { "" })
    );
    (format!("{label} then {epilogue}"), body, params)
}

#[test]
fn random_contraction_groups_of_megabytes() {
    let mut rng = SplitMix64::new(0x6e6f_6e65);
    let cases = (0..24).map(|_| random_group(&mut rng)).collect();
    run_cases_within(cases, LOOSE);
}

/// A depthwise convolution (groups = channels) of `k`×`k` at `hw`² with MobileNetV2's
/// epilogue: batch norm as a per-channel multiply and add, then ReLU6 (`clip`).
fn depthwise_bn_relu6(c: i64, hw: i64, k: i64, stride: i64, dtype: &str) -> Case {
    let pad = k / 2;
    let call = format!(
        "clip(add(multiply(nn.conv2d(%p0, %p1, strides=[{stride}, {stride}], \
         padding=[{pad}, {pad}, {pad}, {pad}], groups={c}, channels={c}, \
         kernel_size=[{k}, {k}]), %p2), %p3), a_min=0f, a_max=6f)"
    );
    let params = vec![
        tensor_type(&[1, c, hw, hw], dtype),
        tensor_type(&[c, 1, k, k], dtype),
        tensor_type(&[c, 1, 1], dtype),
        tensor_type(&[c, 1, 1], dtype),
    ];
    (
        format!("depthwise {c}x{hw}² {k}x{k}/{stride} {dtype}"),
        call,
        params,
    )
}

/// A depthwise convolution of `[n, c, h, w]` data by `c·multiplier` `k`×`k` filters, with
/// `stride`, `dilation` and `pad` on every side, plus a per-channel scale.
#[allow(clippy::too_many_arguments)]
fn depthwise(
    (n, c, h, w): (i64, i64, i64, i64),
    multiplier: i64,
    k: i64,
    stride: i64,
    dilation: i64,
    pad: i64,
    dtype: &str,
) -> Case {
    let o = c * multiplier;
    let call = format!(
        "multiply(nn.conv2d(%p0, %p1, strides=[{stride}, {stride}], \
         dilation=[{dilation}, {dilation}], padding=[{pad}, {pad}, {pad}, {pad}], groups={c}, \
         channels={o}, kernel_size=[{k}, {k}]), %p2)"
    );
    let params = vec![
        tensor_type(&[n, c, h, w], dtype),
        tensor_type(&[o, 1, k, k], dtype),
        tensor_type(&[o, 1, 1], dtype),
    ];
    (
        format!(
            "depthwise {n}x{c}x{h}x{w}x{multiplier} {k}x{k}/{stride} d{dilation} p{pad} {dtype}"
        ),
        call,
        params,
    )
}

/// Depthwise convolutions the host kernel computes at shapes off MobileNetV2's: odd widths
/// (around the 8 and 16 lanes), strides 1 to 3, padding 0 to 2, dilation 2, 5×5 kernels,
/// a channel multiplier, a batch; and float64, which keeps the direct window.
#[test]
fn depthwise_convolutions_at_odd_shapes() {
    let mut cases = Vec::new();
    for w in [7, 13, 15, 17, 113] {
        for (stride, pad) in [(1, 0), (1, 1), (2, 1), (2, 2), (3, 1)] {
            cases.push(depthwise((1, 12, 11, w), 1, 3, stride, 1, pad, "float32"));
        }
    }
    cases.push(depthwise((1, 40, 29, 31), 1, 3, 1, 2, 2, "float32"));
    cases.push(depthwise((1, 40, 29, 31), 1, 3, 2, 2, 2, "float32"));
    cases.push(depthwise((1, 24, 23, 33), 1, 5, 1, 1, 2, "float32"));
    cases.push(depthwise((1, 24, 23, 33), 1, 5, 2, 1, 2, "float32"));
    cases.push(depthwise((2, 16, 19, 21), 2, 3, 1, 1, 1, "float32"));
    cases.push(depthwise((2, 16, 19, 21), 3, 3, 2, 1, 1, "float32"));
    cases.push(depthwise((1, 16, 19, 21), 1, 3, 2, 2, 1, "float64"));
    run_cases_within(cases, LOOSE);
}

/// A pool `call` (over `%p0`) of a `[1, c, hw, hw]` tensor.
fn pool(call: &str, c: i64, hw: i64, dtype: &str) -> Case {
    let params = vec![tensor_type(&[1, c, hw, hw], dtype)];
    (
        format!("{call} on {c}x{hw}² {dtype}"),
        call.to_string(),
        params,
    )
}

/// Sliding windows lowered as unrolled, partitioned, vectorized loops: MobileNetV2's depthwise
/// convolutions with their batch-norm + ReLU6 epilogue (stride 1 and 2, 3×3 and 5×5, float32
/// and float64, widths not a multiple of the lanes), ResNet-50's and the MNIST CNN's max pools,
/// average pools with and without the padding counted, in float32, float64 and int32.
#[test]
fn depthwise_convolutions_and_pools() {
    let mut cases = vec![
        depthwise_bn_relu6(144, 56, 3, 1, "float32"),
        depthwise_bn_relu6(96, 112, 3, 2, "float32"),
        depthwise_bn_relu6(576, 14, 3, 2, "float32"),
        depthwise_bn_relu6(960, 7, 3, 1, "float32"),
        depthwise_bn_relu6(240, 28, 5, 1, "float32"),
        depthwise_bn_relu6(32, 15, 3, 2, "float64"),
    ];
    let max3 = "nn.max_pool2d(%p0, pool_size=[3, 3], strides=[2, 2], padding=[1, 1, 1, 1])";
    let max2 = "nn.max_pool2d(%p0, pool_size=[2, 2], strides=[2, 2])";
    let avg3 = "nn.avg_pool2d(%p0, pool_size=[3, 3], strides=[1, 1], padding=[1, 1, 1, 1])";
    let avg3_pad = "nn.avg_pool2d(%p0, pool_size=[3, 3], strides=[1, 1], padding=[1, 1, 1, 1], \
                    count_include_pad=True)";
    cases.push(pool(max3, 64, 112, "float32"));
    cases.push(pool(max3, 24, 29, "float64"));
    cases.push(pool(max3, 16, 30, "int32"));
    cases.push(pool(max2, 8, 28, "float32"));
    cases.push(pool(max2, 16, 14, "float32"));
    cases.push(pool(avg3, 64, 28, "float32"));
    cases.push(pool(avg3_pad, 32, 17, "float32"));
    run_cases_within(cases, LOOSE);
}

/// float16 contractions go through the GEMM (widened to float32 while packed, rounded once);
/// the reference accumulates in float64 and rounds once, so the two differ by at most one
/// float16 ulp (a relative 2^-10) where the float32 sum rounds across a float16 tie.
#[test]
fn float16_contractions_match_the_reference() {
    const HALF_ULP: (f64, f64) = (1e-3, 1e-4);
    let t = |shape: &[i64]| tensor_type(shape, "float16");
    let mut cases: Vec<Case> = vec![
        // No bias epilogue: one ulp of a product cancelled by the bias is many of the sum's.
        conv(64, 128, 28, 3, 1, 1).case("float16", false),
        conv(256, 64, 14, 1, 1, 0).case("float16", false),
        conv(32, 48, 15, 3, 2, 1).case("float16", false),
    ];
    cases.push((
        "dense float16 33x300 -> 257".into(),
        "nn.relu(nn.dense(%p0, %p1, units=None))".into(),
        vec![t(&[33, 300]), t(&[257, 300])],
    ));
    cases.push((
        "dense float16 1x512 -> 100".into(),
        "nn.dense(%p0, %p1, units=None)".into(),
        vec![t(&[1, 512]), t(&[100, 512])],
    ));
    cases.push((
        "matmul float16".into(),
        "nn.matmul(%p0, %p1, units=None)".into(),
        vec![t(&[70, 129]), t(&[129, 40])],
    ));
    cases.push((
        "batch_matmul float16".into(),
        "nn.batch_matmul(%p0, %p1, transpose_a=False, transpose_b=True)".into(),
        vec![t(&[4, 64, 96]), t(&[4, 33, 96])],
    ));
    run_cases_within(cases, HALF_ULP);
    // A per-channel scale and `relu`, which the host applies to each row of the result as
    // it is rounded: the product's ulp, then the multiply's rounding (two ulps; a scale keeps
    // the relative error where an add could cancel it).
    let mut scaled = Vec::new();
    for layer in [conv(3, 64, 224, 7, 2, 3), conv(256, 512, 14, 1, 1, 0)] {
        let (label, call, mut params) = layer.case("float16", false);
        params.push(t(&[layer.c_out, 1, 1]));
        let body = format!("let %r = {call}; nn.relu(multiply(%r, %p2))");
        scaled.push((format!("{label} then relu(scale)"), body, params));
    }
    run_cases_within(scaled, (2.5e-3, 1e-4));
}
