//! Hostile models: thousands of random mutations of valid ones (the importer's test models),
//! imported. Each must import or give an `ImportError` — never panic — and no allocation may
//! be out of proportion to the model (an allocator in this test binary records the largest
//! request of each thread). Mutations act on the bytes (flips, cuts, splices) and on the decoded messages
//! (dimensions, attribute values, int64 constants, element types, operator types, inputs), the latter
//! reaching the operators' conversions past the decoder. `MUTATIONS_TRACE=1 cargo test -p
//! relay-onnx --test mutations -- --nocapture` prints each case and its outcome;
//! `PROPTEST_CASES=N` runs more. `fuzz/`'s `import_onnx` target is the same property for
//! cargo-fuzz.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use proptest::prelude::*;
use prost::Message;
use relay_onnx::proto::{AttributeProto, ModelProto};
use relay_onnx::{ImportOptions, import};
use relay_testing::RecordingAllocator;

#[global_allocator]
static ALLOCATOR: RecordingAllocator = RecordingAllocator;

/// The largest allocation the importer's bounds allow: a constant computed at import of 2²⁴
/// eight-byte elements, with room.
const LIMIT: usize = 256 << 20;

/// The seed models: the importer's generated cases and a sample of ONNX's node tests.
fn seeds() -> &'static [Vec<u8>] {
    static SEEDS: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    SEEDS.get_or_init(|| {
        let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
        let mut files: Vec<PathBuf> = vec![data.join("mnist.onnx")];
        for set in ["ops", "node", "dynamic"] {
            let mut dirs: Vec<PathBuf> = std::fs::read_dir(data.join(set))
                .unwrap()
                .map(|e| e.unwrap().path().join("model.onnx"))
                .filter(|p| p.exists())
                .collect();
            dirs.sort();
            // Every generated case; every fourth node test (each operator still appears).
            let step = if set == "ops" { 1 } else { 4 };
            files.extend(dirs.into_iter().step_by(step));
        }
        files.iter().map(|f| std::fs::read(f).unwrap()).collect()
    })
}

/// A change to a model.
#[derive(Clone, Debug)]
enum Mutation {
    /// Flip bit `bit` of the byte at `at` (a fraction of the length).
    Flip { at: f64, bit: u8 },
    /// Keep the first `at` of the bytes.
    Cut { at: f64 },
    /// Insert `bytes` at `at`.
    Splice { at: f64, bytes: Vec<u8> },
    /// Set dimension `which` of a graph input or initializer to `value`.
    Dim { which: usize, value: i64 },
    /// Make dimension `which` of the graph inputs symbolic (`dim_param` `name`; empty:
    /// unknown), so that it stays dynamic through the import.
    Symbolic { which: usize, name: &'static str },
    /// Set integer `which` of an attribute (any node's, in order) to `value`.
    AttrInt { which: usize, value: i64 },
    /// Set integer element `which` of the int64 initializers (shapes, axes, repeats, pads)
    /// to `value`.
    IntData { which: usize, value: i64 },
    /// Set the element type of tensor `which` (input or initializer) to `value`.
    DataType { which: usize, value: i32 },
    /// Make node `which` another operator.
    OpType { which: usize, op: &'static str },
    /// Drop the last input of node `which`, or give it one more.
    Arity { which: usize, more: bool },
}

/// Operators to swap in: some take attributes or constant inputs that the original node
/// does not have.
const OPS: &[&str] = &[
    "Reshape",
    "Slice",
    "Resize",
    "Conv",
    "ConvTranspose",
    "Loop",
    "If",
    "Scan",
    "LSTM",
    "GRU",
    "Gather",
    "Split",
    "Pad",
    "Einsum",
    "CumSum",
    "OneHot",
    "Tile",
    "Expand",
    "Range",
    "ConstantOfShape",
    "MaxPool",
    "Transpose",
    "Concat",
    "MatMul",
    "TopK",
];

/// Extreme integers and the usual ones.
fn integer() -> impl Strategy<Value = i64> {
    prop_oneof![
        Just(0i64),
        Just(-1),
        Just(i64::MAX),
        Just(i64::MIN),
        Just(1 << 40),
        Just(-(1 << 31)),
        -8i64..64,
    ]
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (0.0..1.0f64, 0u8..8).prop_map(|(at, bit)| Mutation::Flip { at, bit }),
        (0.0..1.0f64).prop_map(|at| Mutation::Cut { at }),
        (0.0..1.0f64, proptest::collection::vec(any::<u8>(), 1..12))
            .prop_map(|(at, bytes)| Mutation::Splice { at, bytes }),
        (0usize..64, integer()).prop_map(|(which, value)| Mutation::Dim { which, value }),
        (0usize..16, proptest::sample::select(&["N", "S", ""][..]))
            .prop_map(|(which, name)| Mutation::Symbolic { which, name }),
        (0usize..64, integer()).prop_map(|(which, value)| Mutation::AttrInt { which, value }),
        (0usize..16, -2i32..30).prop_map(|(which, value)| Mutation::DataType { which, value }),
        (0usize..32, integer()).prop_map(|(which, value)| Mutation::IntData { which, value }),
        (0usize..16, proptest::sample::select(OPS))
            .prop_map(|(which, op)| Mutation::OpType { which, op }),
        (0usize..16, any::<bool>()).prop_map(|(which, more)| Mutation::Arity { which, more }),
    ]
}

/// The byte offset a fraction `at` of `len` stands for.
fn offset(at: f64, len: usize) -> usize {
    ((at * len as f64) as usize).min(len)
}

/// Applies `m` to the model `bytes`; a structural change of bytes that do not decode leaves
/// them as they are.
fn apply(bytes: &mut Vec<u8>, m: &Mutation) {
    match m {
        Mutation::Flip { at, bit } => {
            if !bytes.is_empty() {
                let i = offset(*at, bytes.len() - 1);
                bytes[i] ^= 1 << bit;
            }
        }
        Mutation::Cut { at } => bytes.truncate(offset(*at, bytes.len())),
        Mutation::Splice { at, bytes: more } => {
            let i = offset(*at, bytes.len());
            bytes.splice(i..i, more.iter().copied());
        }
        structural => {
            let Ok(mut model) = ModelProto::decode(bytes.as_slice()) else {
                return;
            };
            if let Some(g) = model.graph.as_mut() {
                change(g, structural);
            }
            *bytes = model.encode_to_vec();
        }
    }
}

/// A structural mutation of graph `g`.
fn change(g: &mut relay_onnx::proto::GraphProto, m: &Mutation) {
    match *m {
        Mutation::Dim { which, value } => {
            let dims = g
                .initializer
                .iter_mut()
                .flat_map(|t| t.dims.iter_mut())
                .nth(which);
            if let Some(d) = dims {
                *d = value;
            } else if let Some(dim) = g
                .input
                .iter_mut()
                .filter_map(|v| v.r#type.as_mut()?.tensor_type.as_mut()?.shape.as_mut())
                .flat_map(|s| s.dim.iter_mut())
                .nth(which)
            {
                dim.value = Some(relay_onnx::proto::DimensionValue::DimValue(value));
            }
        }
        Mutation::Symbolic { which, name } => {
            let dim = g
                .input
                .iter_mut()
                .filter_map(|v| v.r#type.as_mut()?.tensor_type.as_mut()?.shape.as_mut())
                .flat_map(|s| s.dim.iter_mut())
                .nth(which);
            if let Some(dim) = dim {
                dim.value = Some(relay_onnx::proto::DimensionValue::DimParam(name.into()));
            }
        }
        Mutation::AttrInt { which, value } => {
            let ints = g
                .node
                .iter_mut()
                .flat_map(|n| n.attribute.iter_mut())
                .flat_map(|a: &mut AttributeProto| {
                    std::iter::once(&mut a.i).chain(a.ints.iter_mut())
                })
                .nth(which);
            if let Some(v) = ints {
                *v = value;
            }
        }
        Mutation::IntData { which, value } => {
            // Element `which` over the int64 initializers, typed or raw little-endian.
            let mut left = which;
            for t in g.initializer.iter_mut().filter(|t| t.data_type == 7) {
                if left < t.int64_data.len() {
                    t.int64_data[left] = value;
                    return;
                }
                left -= t.int64_data.len();
                let n = t.raw_data.len() / 8;
                if left < n {
                    let mut raw = t.raw_data.to_vec();
                    raw[left * 8..left * 8 + 8].copy_from_slice(&value.to_le_bytes());
                    t.raw_data = raw.into();
                    return;
                }
                left -= n;
            }
        }
        Mutation::DataType { which, value } => {
            let count = g.initializer.len();
            if which < count {
                g.initializer[which].data_type = value;
            } else if let Some(t) = g
                .input
                .get_mut(which - count)
                .and_then(|v| v.r#type.as_mut()?.tensor_type.as_mut())
            {
                t.elem_type = value;
            }
        }
        Mutation::OpType { which, op } => {
            if let Some(n) = g.node.get_mut(which) {
                n.op_type = op.to_string();
            }
        }
        Mutation::Arity { which, more } => {
            if let Some(n) = g.node.get_mut(which) {
                if more {
                    let extra = n.input.first().cloned().unwrap_or_default();
                    n.input.push(extra);
                } else {
                    n.input.pop();
                }
            }
        }
        _ => {}
    }
}

proptest! {
    #![proptest_config(relay_testing::proptest_config(10_000))]

    #[test]
    fn mutated_models_import_or_fail_cleanly(
        seed in any::<prop::sample::Index>(),
        mutations in proptest::collection::vec(mutation(), 1..4),
    ) {
        let seeds = seeds();
        let mut bytes = seeds[seed.index(seeds.len())].clone();
        for m in &mutations {
            apply(&mut bytes, m);
        }
        if std::env::var_os("MUTATIONS_TRACE").is_some() {
            eprintln!("case: seed {} {mutations:?}", seed.index(seeds.len()));
        }
        // An error is the expected outcome of most; a panic fails the property.
        let (result, largest) =
            relay_testing::largest_allocation(|| import(&bytes, &ImportOptions::default()));
        if std::env::var_os("MUTATIONS_TRACE").is_some() {
            eprintln!("result: {}", match &result {
                Ok(_) => "imported".to_string(),
                Err(e) => e.to_string().chars().take(60).collect(),
            });
        }
        prop_assert!(
            largest <= LIMIT.max(bytes.len() * 16),
            "an allocation of {largest} bytes for a model of {} bytes",
            bytes.len()
        );
    }
}

/// An `RNN` (always unrolled: there is no fused one) over a sequence too long to unroll is an
/// error, not an allocation for its steps — found by the property above with a random seed:
/// the sequence dimension of `X` set to 2^40 aborted the process allocating 79 TB.
#[test]
fn a_recurrence_too_long_to_unroll_is_an_error() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/ops/rnn_forward/model.onnx");
    let mut bytes = std::fs::read(path).unwrap();
    let model = relay_onnx::proto::ModelProto::decode(&bytes[..]).unwrap();
    let graph = model.graph.unwrap();
    let initializer_dims: usize = graph.initializer.iter().map(|t| t.dims.len()).sum();
    let seq = Mutation::Dim {
        which: initializer_dims,
        value: 1 << 40,
    };
    apply(&mut bytes, &seq);
    let (result, largest) =
        relay_testing::largest_allocation(|| import(&bytes, &ImportOptions::default()));
    let message = result.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(
        message.contains("1099511627776 steps (unrolled: at most"),
        "{message}"
    );
    assert!(largest <= LIMIT, "an allocation of {largest} bytes");
}
