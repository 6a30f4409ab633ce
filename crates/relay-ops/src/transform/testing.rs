//! Helpers shared by the unit tests of the shape operators: attribute values, types and
//! tensors, running relations and evaluations, and checking compute definitions against the
//! reference evaluations with every read in bounds.

use std::collections::HashMap;
use std::sync::Arc;

use relay_ir::te::BinaryOp::{Add, Div, FloorDiv, FloorMod, Max, Min, Mod, Mul, Sub};
use relay_ir::te::{TExpr, TExprKind, TeValue, Tensor, TensorOp};
use relay_ir::{AttrValue, Attrs, DType, Dim, NDArray, OpError, Type, Value};

use crate::compute::interp::Interp;
use crate::compute::op_tests::{DTYPES, Rng, agree_within, check, random};
use crate::compute::wrap;
use crate::support::tensor;
use crate::testing::{attrs, ints};

pub(super) fn int(i: i64) -> AttrValue {
    AttrValue::Int(i)
}

pub(super) fn text(s: &str) -> AttrValue {
    AttrValue::Str(s.into())
}

pub(super) fn ty(shape: &[i64], dtype: DType) -> Type {
    Type::tensor(shape, dtype)
}

pub(super) fn f32ty(shape: &[i64]) -> Type {
    ty(shape, DType::F32)
}

/// A tensor type where `-1` stands for an unknown dimension.
pub(super) fn any_ty(shape: &[i64]) -> Type {
    tensor(
        shape
            .iter()
            .map(|&d| if d < 0 { Dim::Any } else { Dim::Known(d) })
            .collect(),
        DType::F32,
    )
}

/// The relation of `op` on `inputs`, printed.
pub(super) fn rel(op: &str, inputs: &[&Type], set: &[(&str, AttrValue)]) -> Result<String, String> {
    let f = crate::lookup(op).unwrap().relation.unwrap();
    let inputs: Vec<Type> = inputs.iter().map(|&t| t.clone()).collect();
    f(&inputs, &attrs(op, set))
        .map(|t| t.to_string())
        .map_err(|e| e.to_string())
}

pub(super) fn eval(op: &str, args: &[&Value], set: &[(&str, AttrValue)]) -> Result<Value, String> {
    let f = crate::lookup(op).unwrap().eval.unwrap();
    let args: Vec<Value> = args.iter().map(|&v| v.clone()).collect();
    f(&args, &attrs(op, set)).map_err(|e| e.to_string())
}

pub(super) fn typed(dtype: DType, shape: &[i64], v: &[i128]) -> Value {
    Value::tensor(NDArray::from_i128_slice(dtype, shape, v).unwrap())
}

/// 0, 1, 2, ... as a tensor of `dtype` (bool: alternating false and true).
pub(super) fn iota(dtype: DType, shape: &[i64]) -> Value {
    let n: i64 = shape.iter().product();
    let v: Vec<i128> = (0..n as i128)
        .map(|i| if dtype == DType::BOOL { i % 2 } else { i })
        .collect();
    typed(dtype, shape, &v)
}

/// Shape, dtype and elements (as integers) of a tensor value.
pub(super) fn parts(v: &Value) -> (Vec<i64>, DType, Vec<i128>) {
    let t = v.as_tensor().unwrap();
    (t.shape().to_vec(), t.dtype(), t.to_i128_vec())
}

/// Shape and elements of a tensor value.
pub(super) fn shape_values(v: &Value) -> (Vec<i64>, Vec<i128>) {
    let (s, _, v) = parts(v);
    (s, v)
}

pub(super) fn slice_attrs(
    begin: &[i64],
    end: &[i64],
    strides: &[i64],
) -> Vec<(&'static str, AttrValue)> {
    vec![
        ("begin", ints(begin)),
        ("end", ints(end)),
        ("strides", ints(strides)),
    ]
}

pub(super) const SHAPE_DTYPES: [DType; 8] = [
    DType::BOOL,
    DType::I8,
    DType::U16,
    DType::I32,
    DType::I64,
    DType::F16,
    DType::F32,
    DType::F64,
];

/// Checks `name` on one random tensor of every dtype and of `shape`, asserting that the
/// relation accepts it.
pub(super) fn check_all(rng: &mut Rng, name: &str, shape: &[i64], set: &[(&str, AttrValue)]) {
    let a = attrs(name, set);
    for dtype in DTYPES {
        let x = random(rng, dtype, shape);
        assert!(
            check_op(name, &[x], &a),
            "{name} {shape:?} {set:?} rejected"
        );
    }
}

/// The tensors of a compute definition's result, depth first.
pub(super) fn te_leaves(v: &TeValue, out: &mut Vec<Tensor>) {
    match v {
        TeValue::Tensor(t) => out.push(t.clone()),
        TeValue::Tuple(fields) => fields.iter().for_each(|f| te_leaves(f, out)),
    }
}

/// The input types, the compute definition's result and the reference evaluation's.
pub(super) type Compiled = (Vec<Type>, Result<TeValue, OpError>, Result<Value, OpError>);

/// The input types, the compute definition's result of `name` on placeholders for
/// `parts` (one tuple of them when `tuple_in`), and the reference evaluation's result;
/// `None` when the relation rejects the inputs.
pub(super) fn compile(
    name: &str,
    parts: &[NDArray],
    tuple_in: bool,
    attrs: &Attrs,
) -> Option<Compiled> {
    let op = crate::lookup(name).unwrap();
    let types: Vec<Type> = parts
        .iter()
        .map(|a| Type::tensor(a.shape(), a.dtype()))
        .collect();
    let types = if tuple_in {
        vec![Type::tuple(types)]
    } else {
        types
    };
    let out = (op.relation.unwrap())(&types, attrs).ok()?;
    let placeholders = crate::compute::op_tests::placeholders(parts);
    let values: Vec<Value> = parts.iter().map(|a| Value::tensor(a.clone())).collect();
    let (placeholders, values) = if tuple_in {
        (
            vec![TeValue::Tuple(placeholders)],
            vec![Value::tuple(values)],
        )
    } else {
        (placeholders, values)
    };
    let want = (op.eval.unwrap())(&values, attrs);
    let te = (op.compute.unwrap())(&placeholders, attrs, &out);
    Some((types, te, want))
}

/// The value of an integer expression at the loop variables `env`, visiting every read in
/// it (both branches of a select included) and asserting that it is in bounds. Reads of
/// kernel inputs of integer dtypes have values (`take`'s indices); other values are `None`.
pub(super) fn visit(e: &TExpr, env: &HashMap<u32, i64>, inputs: &[NDArray]) -> Option<i128> {
    let d = e.dtype();
    match e.kind() {
        TExprKind::Var(v) => Some(i128::from(env[&v.id])),
        TExprKind::Int(v) => Some(*v),
        TExprKind::Float(_) => None,
        TExprKind::Read { tensor, indices } => {
            let at: Vec<i128> = indices
                .iter()
                .map(|i| visit(i, env, inputs).expect("an index has a value"))
                .collect();
            assert_eq!(at.len(), tensor.shape.len());
            let mut flat = 0usize;
            for (&i, &n) in at.iter().zip(&tensor.shape) {
                assert!(
                    (0..i128::from(n)).contains(&i),
                    "{} read at {at:?}, outside {:?}",
                    tensor.name,
                    tensor.shape
                );
                flat = flat * n as usize + i as usize;
            }
            match tensor.op {
                TensorOp::Placeholder(k) if !d.is_float() => Some(inputs[k].to_i128_vec()[flat]),
                _ => None,
            }
        }
        TExprKind::Unary(_, a) => {
            visit(a, env, inputs);
            None
        }
        TExprKind::Compare(_, a, b) => {
            visit(a, env, inputs);
            visit(b, env, inputs);
            None
        }
        TExprKind::Select(c, a, b) => {
            visit(c, env, inputs);
            visit(a, env, inputs);
            visit(b, env, inputs);
            None
        }
        TExprKind::Cast(a) => {
            let v = visit(a, env, inputs);
            if d.is_float() {
                None
            } else {
                v.map(|v| wrap(v, d))
            }
        }
        TExprKind::Binary(op, a, b) => {
            let (x, y) = (visit(a, env, inputs)?, visit(b, env, inputs)?);
            if d.is_float() || (y == 0 && matches!(op, Div | Mod | FloorDiv | FloorMod)) {
                return None;
            }
            let v = match op {
                Add => x + y,
                Sub => x - y,
                Mul => x * y,
                Div => x / y,
                Mod => x % y,
                FloorDiv | FloorMod => {
                    let (q, r) = (x / y, x % y);
                    let q = if r != 0 && (r < 0) != (y < 0) {
                        q - 1
                    } else {
                        q
                    };
                    if *op == FloorDiv { q } else { x - q * y }
                }
                Max => x.max(y),
                Min => x.min(y),
                _ => return None,
            };
            Some(wrap(v, d))
        }
        TExprKind::Reduce { .. } => panic!("a shape operator reduces"),
    }
}

/// Asserts that `name`'s compute definition on `parts` reads only in bounds, at every
/// output index and in every branch, whatever the values of the inputs.
pub(super) fn assert_reads_in_bounds(name: &str, parts: &[NDArray], tuple_in: bool, attrs: &Attrs) {
    let Some((_, Ok(te), _)) = compile(name, parts, tuple_in, attrs) else {
        return;
    };
    let mut outs = Vec::new();
    te_leaves(&te, &mut outs);
    for t in outs {
        let TensorOp::Compute { axes, body } = &t.op else {
            panic!("{name} returns an input")
        };
        let n: i64 = t.shape.iter().product();
        for k in 0..n {
            let mut env = HashMap::new();
            let mut rest = k;
            for a in axes.iter().rev() {
                env.insert(a.id, rest % a.extent);
                rest /= a.extent;
            }
            visit(body, &env, parts);
        }
    }
}

/// `check`, and every read in bounds.
pub(super) fn check_op(name: &str, inputs: &[NDArray], attrs: &Attrs) -> bool {
    let ok = check(name, inputs, attrs);
    if ok {
        assert_reads_in_bounds(name, inputs, false, attrs);
    }
    ok
}

/// As `check_op` for the operators with a tuple input (`concatenate` and `stack`, when
/// `tuple_in`) or a tuple output (`split`): every output tensor must equal the reference
/// evaluation's exactly. Returns whether the relation accepted the inputs.
pub(super) fn check_tuple(name: &str, parts: &[NDArray], tuple_in: bool, attrs: &Attrs) -> bool {
    let Some((types, te, want)) = compile(name, parts, tuple_in, attrs) else {
        return false;
    };
    let te = match te {
        Ok(te) => te,
        Err(_) if want.is_err() => return true,
        Err(e) => panic!("`{name}` on {types:?}: no compute: {e}"),
    };
    let want = want.unwrap_or_else(|e| panic!("`{name}` on {types:?} fails: {e}"));
    let want: Vec<Arc<NDArray>> = match &want {
        Value::Tensor(t) => vec![t.clone()],
        Value::Tuple(fields) => fields
            .iter()
            .map(|f| f.as_tensor().unwrap().clone())
            .collect(),
        other => panic!("unexpected result {other:?}"),
    };
    let mut got = Vec::new();
    te_leaves(&te, &mut got);
    assert_eq!(want.len(), got.len(), "`{name}` on {types:?}");
    let mut interp = Interp::new(parts);
    for (w, g) in want.iter().zip(&got) {
        let g = interp.tensor(g).unwrap();
        assert!(
            agree_within(w, &g, 0.0),
            "`{name}` on {parts:?} with {attrs:?}:\n eval {w:?}\n te   {g:?}"
        );
    }
    assert_reads_in_bounds(name, parts, tuple_in, attrs);
    true
}
