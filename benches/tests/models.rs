//! The model zoo in `cargo test` (issue 15): the small networks whole (the MNIST CNN, the W6
//! LSTM) and one block of each large one at its real shapes (ResNet-50's layer2_0 in float32 and
//! float16, MobileNetV2's depthwise inverted residual block2, BERT-base's encoder layer 0,
//! GPT-2-small's block h0), compiled with their weights bound as constants and run on the VM,
//! each compared with the reference interpreter and with ONNX Runtime's outputs stored by the
//! generator; and GPT-2's generation loop at a small config, against the generator's numpy
//! loop.
//!
//! The test data is `benches/models/tests/` (written by `benches/models/generate.py --tests`):
//! for each model its Relay text, a manifest and the expected outputs (every STRIDE-th element,
//! a few thousand values). The weights are not committed: the manifest gives each tensor's
//! splitmix64 seed, scale and offset, and [`splitmix_uniform`] regenerates it exactly as
//! `benches/models/zoo/weights.py` does. No Python and no network are needed.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use relay::{Compiler, DType, NDArray, Tensor, Value, Vm};
use relay_interp::InterpOptions;
use relay_runtime::half::f32_to_f16_bits;

const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;
const MIX1: u64 = 0xBF58_476D_1CE4_E5B9;
const MIX2: u64 = 0x94D0_49BB_1331_11EB;

/// `n` floats uniform in [offset - scale, offset + scale) from `seed`: splitmix64, the top 24
/// bits of each output as u in [0, 1), then `(2u - 1) · scale + offset` in float32 (see
/// benches/models/zoo/weights.py, which this must match bit for bit).
fn splitmix_uniform(seed: u64, n: usize, scale: f32, offset: f32) -> Vec<f32> {
    (1..=n as u64)
        .map(|i| {
            let mut z = seed.wrapping_add(i.wrapping_mul(GAMMA));
            z = (z ^ (z >> 30)).wrapping_mul(MIX1);
            z = (z ^ (z >> 27)).wrapping_mul(MIX2);
            z ^= z >> 31;
            let u = (z >> 40) as f32 * (1.0 / 16_777_216.0);
            (u * 2.0 - 1.0) * scale + offset
        })
        .collect()
}

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("models/tests")
}

/// One tensor of a manifest: a parameter (bound as a constant) or an input.
struct Entry {
    is_param: bool,
    name: String,
    tensor: Tensor,
}

/// An expected output: every `stride`-th of its `count` elements, from ONNX Runtime.
struct Expected {
    index: usize,
    stride: usize,
    count: usize,
    values: Vec<f64>,
}

struct TestModel {
    name: String,
    source: String,
    entries: Vec<Entry>,
    expected: Vec<Expected>,
    float16: bool,
}

fn tensor(dtype: &str, shape: &[i64], data: &[f32]) -> Tensor {
    match dtype {
        "float32" => Tensor::from_slice(data, shape).unwrap(),
        "float16" => {
            let bytes: Vec<u8> = data
                .iter()
                .flat_map(|&v| f32_to_f16_bits(v).to_ne_bytes())
                .collect();
            Tensor::from_ndarray(NDArray::from_bytes(DType::F16, shape, &bytes).unwrap())
        }
        // Token ids and counts, exact in float32.
        "int32" => {
            let ints: Vec<i32> = data.iter().map(|&v| v as i32).collect();
            Tensor::from_slice(&ints, shape).unwrap()
        }
        other => panic!("manifest dtype {other}"),
    }
}

/// The tensor a manifest line describes (`param|input NAME DTYPE SHAPE KIND ...`; SHAPE
/// `scalar` for a scalar).
fn entry(fields: &[&str]) -> Entry {
    let shape: Vec<i64> = match fields[3] {
        "scalar" => Vec::new(),
        dims => dims.split(',').map(|d| d.parse().unwrap()).collect(),
    };
    let n = shape.iter().product::<i64>() as usize;
    let data = match fields[4] {
        "splitmix" => splitmix_uniform(
            fields[5].parse().unwrap(),
            n,
            fields[6].parse().unwrap(),
            fields[7].parse().unwrap(),
        ),
        "values" => fields[5].split(',').map(|v| v.parse().unwrap()).collect(),
        "causal_mask" => {
            let seq = shape[0] as usize;
            (0..n)
                .map(|k| if k % seq > k / seq { -10000.0 } else { 0.0 })
                .collect()
        }
        other => panic!("manifest kind {other}"),
    };
    Entry {
        is_param: fields[0] == "param",
        name: fields[1].to_owned(),
        tensor: tensor(fields[2], &shape, &data),
    }
}

fn load(name: &str) -> TestModel {
    let dir = data_dir();
    let read = |file: String| {
        std::fs::read_to_string(dir.join(&file)).unwrap_or_else(|e| panic!("{file}: {e}"))
    };
    let mut model = TestModel {
        name: name.to_owned(),
        source: read(format!("{name}.relay")),
        entries: Vec::new(),
        expected: Vec::new(),
        float16: false,
    };
    for line in read(format!("{name}.manifest")).lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        match fields.first() {
            Some(&"param") | Some(&"input") => {
                model.float16 |= fields[2] == "float16";
                model.entries.push(entry(&fields));
            }
            Some(&"output") => {
                let values = Tensor::read_npy(dir.join(fields[4])).unwrap().to_f64_vec();
                model.expected.push(Expected {
                    index: fields[1].parse().unwrap(),
                    stride: fields[2].parse().unwrap(),
                    count: fields[3].parse().unwrap(),
                    values,
                });
            }
            _ => {}
        }
    }
    model
}

/// The tensor leaves of a result, depth first.
fn leaves(value: &Value) -> Vec<Vec<f64>> {
    match value.as_tuple() {
        Some(fields) => fields.iter().flat_map(leaves).collect(),
        None => vec![Tensor::try_from(value).unwrap().to_f64_vec()],
    }
}

/// max |got - want| ≤ tol · max |want|, or a description of the worst element.
fn close(got: &[f64], want: &[f64], tol: f64) -> Result<(), String> {
    assert_eq!(got.len(), want.len(), "element counts");
    let scale = want.iter().fold(1e-6_f64, |m, v| m.max(v.abs()));
    let (worst, diff) = got
        .iter()
        .zip(want)
        .map(|(a, b)| (a - b).abs())
        .enumerate()
        .fold((0, 0.0_f64), |acc, (i, d)| {
            if d > acc.1 || d.is_nan() { (i, d) } else { acc }
        });
    if diff <= tol * scale {
        Ok(())
    } else {
        Err(format!(
            "max |diff| {diff:.4e} at {worst} (got {}, want {}), max |want| {scale:.4e}, \
             tolerance {tol} × max",
            got[worst], want[worst]
        ))
    }
}

/// Compiles the model with its weights bound, runs it on the VM, and compares the result with
/// the interpreter's (same weights, bound alike) and with the stored ONNX Runtime outputs.
fn check(name: &str) {
    let model = load(name);
    let module = relay::parse(&model.source, &format!("{name}.relay")).unwrap();
    let params: Vec<(String, Tensor)> = model
        .entries
        .iter()
        .filter(|e| e.is_param)
        .map(|e| (e.name.clone(), e.tensor.clone()))
        .collect();
    let inputs: Vec<Tensor> = model
        .entries
        .iter()
        .filter(|e| !e.is_param)
        .map(|e| e.tensor.clone())
        .collect();
    let exe = Compiler::new()
        .params(params.clone())
        .compile(&module)
        .unwrap_or_else(|e| panic!("{name}: {:?}", miette::Report::from(e)));
    let got = Vm::new(&exe)
        .invoke("main", &inputs)
        .unwrap_or_else(|e| panic!("{name}: vm: {:?}", miette::Report::from(e)));

    let arrays: HashMap<String, NDArray> = params
        .into_iter()
        .map(|(n, t)| (n, t.into_ndarray()))
        .collect();
    let bound = relay::bind_params(module, "main", &arrays).unwrap();
    let args: Vec<Value> = inputs.into_iter().map(Value::from).collect();
    let want = relay_interp::run(&bound, "main", args, &InterpOptions::default())
        .unwrap_or_else(|e| panic!("{name}: interpreter: {e:?}"));

    let (tol_interp, tol_ort) = if model.float16 {
        (1e-2, 3e-2)
    } else {
        (1e-4, 1e-3)
    };
    let got = leaves(&got);
    for (i, (g, w)) in got.iter().zip(&leaves(&want)).enumerate() {
        close(g, w, tol_interp)
            .unwrap_or_else(|e| panic!("{name}: output {i}, VM vs interpreter: {e}"));
    }
    assert_eq!(model.expected.len(), got.len(), "{name}: outputs");
    for expected in &model.expected {
        let out = &got[expected.index];
        assert_eq!(
            out.len(),
            expected.count,
            "{name}: output {}",
            expected.index
        );
        let sampled: Vec<f64> = out.iter().step_by(expected.stride).copied().collect();
        close(&sampled, &expected.values, tol_ort).unwrap_or_else(|e| {
            panic!(
                "{}: output {}, VM vs ONNX Runtime: {e}",
                model.name, expected.index
            )
        });
    }
}

#[test]
fn splitmix_matches_the_generator() {
    // benches/models/zoo/weights.py: splitmix_uniform(0x0123456789ABCDEF, 4, 0.25, 1.0).
    let bits: Vec<u32> = splitmix_uniform(0x0123_4567_89AB_CDEF, 4, 0.25, 1.0)
        .iter()
        .map(|v| v.to_bits())
        .collect();
    assert_eq!(bits, [0x3f4a_bd1c, 0x3f95_5cd4, 0x3f57_c85c, 0x3f88_b506]);
    // numpy's float16 rounding of the first.
    assert_eq!(f32_to_f16_bits(f32::from_bits(0x3f4a_bd1c)), 0x3a56);
}

#[test]
fn mnist_cnn() {
    check("mnist");
}

#[test]
fn lstm_w6() {
    check("lstm");
}

#[test]
fn resnet50_bottleneck() {
    check("resnet50_layer2_0");
}

#[test]
fn resnet50_bottleneck_float16() {
    check("resnet50_layer2_0_f16");
}

#[test]
fn mobilenetv2_inverted_residual() {
    check("mobilenetv2_block2");
}

#[test]
fn bert_encoder_layer() {
    check("bert_layer0");
}

#[test]
fn gpt2_block() {
    check("gpt2_h0");
}

/// Issue 32's generation program (`benches/models/zoo/generation.py`) at a small config: an
/// 8-token prompt, 40 new tokens, greedy, the cache grown per step; the ids equal the numpy
/// loop's token for token (and the interpreter's).
#[test]
fn gpt2_generation() {
    check("gpt2_generate_tiny");
}

/// The same greedy loop with preallocated caches: each a `[heads, prompt + new tokens, 16]`
/// buffer, a parameter of the decode loop written a row per step by `strided_set` in place
/// (`invoke_packed_update`), attention over the whole buffer with the positions not yet written
/// masked; the ids equal the numpy loop's (and the interpreter's).
#[test]
fn gpt2_generation_with_preallocated_caches() {
    check("gpt2_generate_preallocated_tiny");
}

/// The zoo's beam search (width 4) at the same config: the beams decoded together (one product
/// per layer for all four), reordered by origin each step, picked by argmax-and-mask; the best
/// sequence equals the numpy search's (and the interpreter's), and differs from greedy's.
#[test]
fn gpt2_beam_search() {
    check("gpt2_beam_tiny");
}
