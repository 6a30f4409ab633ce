//! Helpers shared by the unit tests of the `nn` families: types, attributes and tensors,
//! running relations and evaluations, and checking compute definitions against the reference
//! evaluation (inputs, agreement, in-bounds reads).

use std::collections::HashMap;

use relay_ir::te::TeValue as TV;
use relay_ir::{AttrValue as V, Attrs, DType, DTypeCode, Dim, NDArray, OpSchema, Type, Value};

use crate::compute::op_tests::{DTYPES, Rng, agree_within, check_with, random};
use crate::support::tensor;
use crate::testing::attrs;

pub(super) fn schema(name: &str) -> &'static OpSchema {
    crate::lookup(name).unwrap()
}

pub(super) fn s(text: &str) -> V {
    V::Str(text.into())
}

/// A tensor type; -1 is `?`.
pub(super) fn ty(shape: &[i64], dtype: &str) -> Type {
    let dims = shape
        .iter()
        .map(|&d| if d < 0 { Dim::Any } else { Dim::Known(d) })
        .collect();
    tensor(dims, DType::parse(dtype).unwrap())
}

pub(super) fn f32s(shape: &[i64]) -> Type {
    ty(shape, "float32")
}

pub(super) fn rel(name: &str, types: &[Type], set: &[(&str, V)]) -> Result<String, String> {
    let relation = schema(name).relation.unwrap();
    relation(types, &attrs(name, set))
        .map(|t| t.to_string())
        .map_err(|e| e.to_string())
}

pub(super) fn ok(name: &str, types: &[Type], set: &[(&str, V)]) -> String {
    rel(name, types, set).unwrap()
}

pub(super) fn err(name: &str, types: &[Type], set: &[(&str, V)]) -> String {
    rel(name, types, set).unwrap_err()
}

pub(super) fn t_of(dtype: &str, shape: &[i64], values: &[f64]) -> Value {
    Value::tensor(NDArray::from_f64_slice(DType::parse(dtype).unwrap(), shape, values).unwrap())
}

pub(super) fn t(shape: &[i64], values: &[f64]) -> Value {
    t_of("float32", shape, values)
}

/// `count` values from a small deterministic pattern (the one the expected numbers below
/// were computed from with `conformance/make_expected.py`'s `conv2d` and `pool2d`).
pub(super) fn pattern(count: usize, mul: usize, modulo: usize, shift: f64, scale: f64) -> Vec<f64> {
    (0..count)
        .map(|i| ((i * mul) % modulo) as f64 / scale - shift / scale)
        .collect()
}

pub(super) fn eval(name: &str, args: &[Value], set: &[(&str, V)]) -> Result<Value, String> {
    let eval = schema(name).eval.unwrap();
    eval(args, &attrs(name, set)).map_err(|e| e.to_string())
}

pub(super) fn run(name: &str, args: &[Value], set: &[(&str, V)]) -> (Vec<i64>, Vec<f64>) {
    let v = eval(name, args, set).unwrap();
    let a = v.as_tensor().unwrap();
    (a.shape().to_vec(), a.to_f64_vec())
}

pub(super) fn assert_close(got: &[f64], want: &[f64]) {
    assert_eq!(got.len(), want.len(), "{got:?} vs {want:?}");
    for (g, w) in got.iter().zip(want) {
        assert!(
            (g - w).abs() <= 1e-5 + 1e-4 * w.abs(),
            "{got:?}\nvs\n{want:?}"
        );
    }
}

pub(super) const NINE: [f64; 9] = [1., 2., 3., 4., 5., 6., 7., 8., 9.];

/// Floats whose sums and products stay exact in every float dtype at the sizes tested
/// (halves in -4..4), with NaN, infinities and signed zeros when `special`; integers in
/// -4..4 (0..8 unsigned). Contractions accumulate in their output dtype, so only exact
/// arithmetic agrees with the `float64` reference at every width.
pub(super) fn small(rng: &mut Rng, dtype: DType, shape: &[i64], special: bool) -> NDArray {
    let n: i64 = shape.iter().product();
    let v: Vec<f64> = (0..n)
        .map(|_| {
            if special && rng.below(6) == 0 {
                [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 0.0, -0.0][rng.below(5) as usize]
            } else if dtype.is_float() {
                (rng.below(17) as f64 - 8.0) / 2.0
            } else if dtype.code == DTypeCode::UInt {
                rng.below(9) as f64
            } else {
                rng.below(9) as f64 - 4.0
            }
        })
        .collect();
    NDArray::from_f64_slice(dtype, shape, &v).unwrap()
}

/// Exact integers and special floats for integer dtypes and inputs of contractions in an
/// integer dtype; [`small`] values for float contractions.
pub(super) fn operand(
    rng: &mut Rng,
    dtype: DType,
    out: DType,
    shape: &[i64],
    special: bool,
) -> NDArray {
    if out.is_float() {
        small(rng, dtype, shape, special)
    } else {
        random(rng, dtype, shape)
    }
}

/// A contraction's result within SPEC's tolerance (exact for integers).
pub(super) fn close(w: &NDArray, g: &NDArray) -> bool {
    agree_within(w, g, 1e-4)
}

/// The placeholders of `inputs` and the compute definition of `name` on them, if the
/// relation accepts them and the definition compiles.
pub(super) fn te_of(name: &str, inputs: &[NDArray], set: &Attrs) -> Option<TV> {
    let op = schema(name);
    let types: Vec<Type> = inputs
        .iter()
        .map(|a| Type::tensor(a.shape(), a.dtype()))
        .collect();
    let out = (op.relation.unwrap())(&types, set).ok()?;
    let placeholders = crate::compute::op_tests::placeholders(inputs);
    (op.compute.unwrap())(&placeholders, set, &out).ok()
}

/// The value of an index expression (loop variables, constants and integer arithmetic).
fn index_value(e: &relay_ir::te::TExpr, env: &HashMap<u32, i128>) -> i128 {
    use relay_ir::te::{BinaryOp as B, TExprKind};
    match e.kind() {
        TExprKind::Var(v) => env[&v.id],
        TExprKind::Int(v) => *v,
        TExprKind::Cast(a) => index_value(a, env),
        TExprKind::Binary(op, a, b) => {
            let (a, b) = (index_value(a, env), index_value(b, env));
            match op {
                B::Add => a + b,
                B::Sub => a - b,
                B::Mul => a * b,
                B::Div => a / b,
                B::Mod => a % b,
                B::FloorDiv => a.div_euclid(b),
                B::FloorMod => a.rem_euclid(b),
                B::Min => a.min(b),
                B::Max => a.max(b),
                _ => panic!("unexpected {op:?} in an index"),
            }
        }
        k => panic!("unexpected {k:?} in an index"),
    }
}

/// Every read in `e` (in every branch of every `select`), with its indices.
pub(super) fn reads_of(
    e: &relay_ir::te::TExpr,
    out: &mut Vec<(relay_ir::te::Tensor, Vec<relay_ir::te::TExpr>)>,
) {
    use relay_ir::te::TExprKind as K;
    match e.kind() {
        K::Var(_) | K::Int(_) | K::Float(_) => {}
        K::Read { tensor, indices } => {
            out.push((tensor.clone(), indices.clone()));
            indices.iter().for_each(|i| reads_of(i, out));
        }
        K::Unary(_, a) | K::Cast(a) => reads_of(a, out),
        K::Binary(_, a, b) | K::Compare(_, a, b) => {
            reads_of(a, out);
            reads_of(b, out);
        }
        K::Select(c, a, b) => {
            reads_of(c, out);
            reads_of(a, out);
            reads_of(b, out);
        }
        K::Reduce { body, .. } => reads_of(body, out),
    }
}

/// Asserts that no read of `t` or of the tensors it reads is ever out of bounds, in any
/// branch of a `select` (the kernel evaluates both).
pub(super) fn assert_reads_in_bounds(t: &relay_ir::te::Tensor) {
    use relay_ir::te::{TExprKind, TensorOp};
    let TensorOp::Compute { axes, body } = &t.op else {
        return;
    };
    let mut all = axes.clone();
    if let TExprKind::Reduce { axes, .. } = body.kind() {
        all.extend(axes);
    }
    let mut reads = Vec::new();
    reads_of(body, &mut reads);
    for (tensor, _) in &reads {
        assert_reads_in_bounds(tensor);
    }
    let points: i64 = all.iter().map(|a| a.extent.max(0)).product();
    for p in 0..points {
        let mut env = HashMap::new();
        let mut rest = p;
        for a in all.iter().rev() {
            env.insert(a.id, i128::from(rest % a.extent));
            rest /= a.extent;
        }
        for (tensor, indices) in &reads {
            for (i, &n) in indices.iter().zip(&tensor.shape) {
                let v = index_value(i, &env);
                assert!(
                    (0..i128::from(n)).contains(&v),
                    "`{}` reads `{}` at {v} outside 0..{n}",
                    t.name,
                    tensor.name
                );
            }
        }
    }
}

/// `check_with`, then the compute definition's reads checked in bounds in every branch.
pub(super) fn verify(
    name: &str,
    inputs: &[NDArray],
    set: &Attrs,
    agree: impl Fn(&NDArray, &NDArray) -> bool,
) -> bool {
    let accepted = check_with(name, inputs, set, agree);
    match te_of(name, inputs, set) {
        Some(TV::Tensor(t)) => assert_reads_in_bounds(&t),
        Some(TV::Tuple(fields)) => fields
            .iter()
            .for_each(|f| assert_reads_in_bounds(f.as_tensor().unwrap())),
        None => {}
    }
    accepted
}

/// The plain `check` comparison, through [`verify`].
pub(super) fn exact(w: &NDArray, g: &NDArray) -> bool {
    let rtol = match w.dtype().bits {
        64 => 1e-12,
        32 => 1e-6,
        _ => 4e-3,
    };
    agree_within(w, g, rtol)
}

pub(super) fn out_dtype(d: Option<DType>) -> V {
    d.map_or(V::Null, |d| s(&d.to_string()))
}

/// The (input, output) dtype pairs tested with `out_dtype` set.
const OUT_DTYPES: [(DType, DType); 7] = [
    (DType::I8, DType::I32),
    (DType::I32, DType::I8),
    (DType::U8, DType::U64),
    (DType::F32, DType::I32),
    (DType::F64, DType::U8),
    (DType::F16, DType::F32),
    (DType::I16, DType::F64),
];

/// Every numeric dtype (the contraction relations reject `bool`) with no `out_dtype`, and
/// the [`OUT_DTYPES`] pairs.
pub(super) fn contraction_dtypes() -> Vec<(DType, Option<DType>)> {
    let same = DTYPES.iter().map(|&d| (d, None));
    same.chain(OUT_DTYPES.iter().map(|&(i, o)| (i, Some(o))))
        .collect()
}

/// `n` random values of a 1-D integer attribute with entries from `choices`.
pub(super) fn pick<'a>(rng: &mut Rng, choices: &'a [&'a [i64]]) -> &'a [i64] {
    choices[rng.below(choices.len() as u64) as usize]
}
