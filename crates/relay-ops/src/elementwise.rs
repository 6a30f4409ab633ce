//! Elementwise operators: broadcasting binary arithmetic, logic and comparisons, unary math,
//! selection, and the casting, clipping and tensor-creation operators (reference §14.1–§14.2),
//! with their type relations and reference evaluations.
//!
//! Evaluation follows TVM and numpy: every float dtype computes in `f64` and every integer or
//! boolean dtype in `i128`, and results convert back to the output dtype, integers wrapping to
//! their width. Integer division and remainder truncate toward zero unless the operator is a
//! `floor_` one, and dividing an integer by zero is an error.

use relay_ir::OpError;
use std::cmp::Ordering::{self, Equal, Greater, Less};
use std::f64::consts::{FRAC_2_SQRT_PI, PI};
use std::sync::Arc;

use relay_ir::OpPattern::{Broadcast, ElemWise, Injective, Opaque};
use relay_ir::{AttrDefault as D, AttrField, AttrKind as K, OpSchema};
use relay_ir::{Attrs, DType, DTypeCode, Dim, EvalFn, NDArray, RelationFn, Type, Value};

use relay_ir::te::{CmpOp, TExpr, TeValue, Tensor, UnaryOp};

use crate::compute::{self, ComputeResult, bin, cmp};
use crate::support::{
    arg_tensor, attr_dtype, attr_float, attr_opt_ints, broadcast_index, broadcast_shapes,
    broadcast_types, dims, inputs_n, required_dtype, shape_text, tensor, tensor_of, tensor_type,
    unravel, value,
};
use crate::{dtype, field, op, plain, required, required_nullable};
use relay_ir::{ScalarBinary, ScalarOp, ScalarUnary};

/// What a type relation returns.
type RelResult = Result<Type, OpError>;

/// What a reference evaluation returns.
type EvalResult = Result<Value, OpError>;

/// The inputs of every broadcasting binary operator.
const BINARY: &[&str] = &["lhs", "rhs"];

/// The input of every unary operator.
const UNARY: &[&str] = &["data"];

/// `CastAttrs`, shared by `cast` and `reinterpret`.
const CAST_ATTRS: &[AttrField] = &[required("dtype", K::DType)];

/// `InitOpAttrs`, shared by `zeros`, `ones`, `full` and `broadcast_to`. The shape is an
/// `Optional<Array<Integer>>`, which the dynamic twins leave `None`.
pub(crate) const INIT_OP_ATTRS: &[AttrField] =
    &[required_nullable("shape", K::IntArray), dtype("dtype")];

/// `ShapeOfAttrs` (also used by `vm.shape_of`); TVM's default is the unset dtype, and Python's
/// `shape_of` passes `"int32"`.
pub(crate) const SHAPE_OF_ATTRS: &[AttrField] = &[dtype("dtype")];

/// `OneHotAttrs`.
pub(crate) const ONE_HOT_ATTRS: &[AttrField] = &[
    field("depth", K::Int, D::Int(1)),
    field("axis", K::Int, D::Int(-1)),
    dtype("dtype"),
];

pub(crate) static OPS: &[OpSchema] = &[
    // Broadcasting binary arithmetic. Integers compute in `i128` and wrap to their width;
    // division and remainder truncate toward zero (C and TVM) unless named `floor_`.
    binary("add", arith_rel, |a, _| {
        arith(a, |x, y| x + y, i128::wrapping_add)
    })
    .with_compute(|i, _, o| binary_te(i, o, "add", Arith::Add))
    .with_scalar(ScalarOp::Binary(ScalarBinary::Add)),
    binary("subtract", arith_rel, |a, _| {
        arith(a, |x, y| x - y, i128::wrapping_sub)
    })
    .with_compute(|i, _, o| binary_te(i, o, "subtract", Arith::Sub))
    .with_scalar(ScalarOp::Binary(ScalarBinary::Sub)),
    binary("multiply", arith_rel, |a, _| {
        arith(a, |x, y| x * y, i128::wrapping_mul)
    })
    .with_compute(|i, _, o| binary_te(i, o, "multiply", Arith::Mul))
    .with_scalar(ScalarOp::Binary(ScalarBinary::Mul)),
    binary("divide", arith_rel, |a, _| {
        checked(a, |x, y| x / y, |x, y| Ok(div(x, y)?.0))
    })
    .with_compute(|i, _, o| binary_te(i, o, "divide", Arith::Div))
    .with_scalar(ScalarOp::Binary(ScalarBinary::Div)),
    binary("power", arith_rel, |a, _| checked(a, f64::powf, int_power))
        .with_compute(|i, _, o| binary_te(i, o, "power", Arith::Pow)),
    binary("maximum", arith_rel, |a, _| arith(a, nan_max, i128::max))
        .with_compute(|i, _, o| binary_te(i, o, "maximum", Arith::Max))
        .with_scalar(ScalarOp::Binary(ScalarBinary::Max)),
    binary("minimum", arith_rel, |a, _| arith(a, nan_min, i128::min))
        .with_compute(|i, _, o| binary_te(i, o, "minimum", Arith::Min))
        .with_scalar(ScalarOp::Binary(ScalarBinary::Min)),
    binary("mod", arith_rel, |a, _| {
        checked(a, |x, y| x % y, |x, y| Ok(div(x, modulus(y)?)?.1))
    })
    .with_compute(|i, _, o| binary_te(i, o, "mod", Arith::Mod))
    .with_scalar(ScalarOp::Binary(ScalarBinary::Mod)),
    binary("floor_divide", arith_rel, |a, _| {
        checked(a, floor_div, |x, y| Ok(fdiv(x, y)?.0))
    })
    .with_compute(|i, _, o| binary_te(i, o, "floor_divide", Arith::FloorDiv))
    .with_scalar(ScalarOp::Binary(ScalarBinary::FloorDiv)),
    binary("floor_mod", arith_rel, |a, _| {
        checked(a, floor_mod, |x, y| Ok(fdiv(x, modulus(y)?)?.1))
    })
    .with_compute(|i, _, o| binary_te(i, o, "floor_mod", Arith::FloorMod))
    .with_scalar(ScalarOp::Binary(ScalarBinary::FloorMod)),
    binary("trunc_divide", arith_rel, |a, _| {
        checked(a, |x, y| (x / y).trunc(), |x, y| Ok(div(x, y)?.0))
    })
    .with_compute(|i, _, o| binary_te(i, o, "trunc_divide", Arith::TruncDiv)),
    binary("trunc_mod", arith_rel, |a, _| {
        checked(a, |x, y| x % y, |x, y| Ok(div(x, modulus(y)?)?.1))
    })
    .with_compute(|i, _, o| binary_te(i, o, "trunc_mod", Arith::Mod)),
    // Broadcasting binary logic (on booleans) and bitwise operators (on integers and booleans).
    binary("logical_and", logical_rel, |a, _| logical(a, |x, y| x && y))
        .with_compute(|i, _, o| binary_te(i, o, "logical_and", Arith::LogicalAnd))
        .with_scalar(ScalarOp::Binary(ScalarBinary::And)),
    binary("logical_or", logical_rel, |a, _| logical(a, |x, y| x || y))
        .with_compute(|i, _, o| binary_te(i, o, "logical_or", Arith::LogicalOr))
        .with_scalar(ScalarOp::Binary(ScalarBinary::Or)),
    binary("logical_xor", logical_rel, |a, _| logical(a, |x, y| x != y))
        .with_compute(|i, _, o| binary_te(i, o, "logical_xor", Arith::LogicalXor)),
    binary("bitwise_and", bitwise_rel, |a, _| bitwise(a, |x, y| x & y))
        .with_compute(|i, _, o| binary_te(i, o, "bitwise_and", Arith::BitAnd)),
    binary("bitwise_or", bitwise_rel, |a, _| bitwise(a, |x, y| x | y))
        .with_compute(|i, _, o| binary_te(i, o, "bitwise_or", Arith::BitOr)),
    binary("bitwise_xor", bitwise_rel, |a, _| bitwise(a, |x, y| x ^ y))
        .with_compute(|i, _, o| binary_te(i, o, "bitwise_xor", Arith::BitXor)),
    binary("left_shift", bitwise_rel, |a, _| bitwise(a, shift_left))
        .with_compute(|i, _, o| binary_te(i, o, "left_shift", Arith::Shl)),
    binary("right_shift", bitwise_rel, |a, _| bitwise(a, shift_right))
        .with_compute(|i, _, o| binary_te(i, o, "right_shift", Arith::Shr)),
    // Comparisons, with a boolean result; every comparison with NaN is false but `!=`.
    binary("equal", compare_rel, |a, _| {
        compare(a, |o| o == Some(Equal))
    })
    .with_compute(|i, _, o| compare_te(i, o, "equal", CmpOp::Eq))
    .with_scalar(ScalarOp::Binary(ScalarBinary::Eq)),
    binary("not_equal", compare_rel, |a, _| {
        compare(a, |o| o != Some(Equal))
    })
    .with_compute(|i, _, o| compare_te(i, o, "not_equal", CmpOp::Ne))
    .with_scalar(ScalarOp::Binary(ScalarBinary::Ne)),
    binary("less", compare_rel, |a, _| compare(a, |o| o == Some(Less)))
        .with_compute(|i, _, o| compare_te(i, o, "less", CmpOp::Lt))
        .with_scalar(ScalarOp::Binary(ScalarBinary::Lt)),
    binary("less_equal", compare_rel, |a, _| {
        compare(a, |o| matches!(o, Some(Less | Equal)))
    })
    .with_compute(|i, _, o| compare_te(i, o, "less_equal", CmpOp::Le))
    .with_scalar(ScalarOp::Binary(ScalarBinary::Le)),
    binary("greater", compare_rel, |a, _| {
        compare(a, |o| o == Some(Greater))
    })
    .with_compute(|i, _, o| compare_te(i, o, "greater", CmpOp::Gt))
    .with_scalar(ScalarOp::Binary(ScalarBinary::Gt)),
    binary("greater_equal", compare_rel, |a, _| {
        compare(a, |o| matches!(o, Some(Greater | Equal)))
    })
    .with_compute(|i, _, o| compare_te(i, o, "greater_equal", CmpOp::Ge))
    .with_scalar(ScalarOp::Binary(ScalarBinary::Ge)),
    // Unary arithmetic.
    unary("negative", numeric_rel, |a, _| {
        map(a, |x| -x, i128::wrapping_neg)
    })
    .with_compute(|i, _, o| unary_te(i, o, "negative", Un::Neg))
    .with_scalar(ScalarOp::Unary(ScalarUnary::Neg)),
    unary("abs", numeric_rel, |a, _| map(a, f64::abs, i128::abs))
        .with_compute(|i, _, o| unary_te(i, o, "abs", Un::Abs)),
    unary("sign", numeric_rel, |a, _| map(a, sign, i128::signum))
        .with_compute(|i, _, o| unary_te(i, o, "sign", Un::Sign)),
    // Exponentials, logarithms and roots.
    unary("exp", float_rel, |a, _| map_float(a, f64::exp))
        .with_compute(|i, _, o| unary_te(i, o, "exp", Un::Float(UnaryOp::Exp))),
    unary("log", float_rel, |a, _| map_float(a, f64::ln))
        .with_compute(|i, _, o| unary_te(i, o, "log", Un::Float(UnaryOp::Log))),
    unary("log2", float_rel, |a, _| map_float(a, f64::log2))
        .with_compute(|i, _, o| unary_te(i, o, "log2", Un::Float(UnaryOp::Log2))),
    unary("log10", float_rel, |a, _| map_float(a, f64::log10))
        .with_compute(|i, _, o| unary_te(i, o, "log10", Un::Float(UnaryOp::Log10))),
    unary("sqrt", float_rel, |a, _| map_float(a, f64::sqrt))
        .with_compute(|i, _, o| unary_te(i, o, "sqrt", Un::Float(UnaryOp::Sqrt))),
    unary("rsqrt", float_rel, |a, _| map_float(a, |x| 1.0 / x.sqrt()))
        .with_compute(|i, _, o| unary_te(i, o, "rsqrt", Un::Float(UnaryOp::Rsqrt))),
    unary("erf", float_rel, |a, _| map_float(a, erf))
        .with_compute(|i, _, o| unary_te(i, o, "erf", Un::Float(UnaryOp::Erf))),
    // Activations that live at the top level rather than under `nn.`.
    unary("sigmoid", float_rel, |a, _| {
        map_float(a, |x| 1.0 / (1.0 + (-x).exp()))
    })
    .with_compute(|i, _, o| unary_te(i, o, "sigmoid", Un::Float(UnaryOp::Sigmoid))),
    unary("tanh", float_rel, |a, _| map_float(a, f64::tanh))
        .with_compute(|i, _, o| unary_te(i, o, "tanh", Un::Float(UnaryOp::Tanh))),
    // Trigonometric and hyperbolic functions.
    unary("sin", float_rel, |a, _| map_float(a, f64::sin))
        .with_compute(|i, _, o| unary_te(i, o, "sin", Un::Float(UnaryOp::Sin))),
    unary("cos", float_rel, |a, _| map_float(a, f64::cos))
        .with_compute(|i, _, o| unary_te(i, o, "cos", Un::Float(UnaryOp::Cos))),
    unary("tan", float_rel, |a, _| map_float(a, f64::tan))
        .with_compute(|i, _, o| unary_te(i, o, "tan", Un::Float(UnaryOp::Tan))),
    unary("sinh", float_rel, |a, _| map_float(a, f64::sinh))
        .with_compute(|i, _, o| unary_te(i, o, "sinh", Un::Float(UnaryOp::Sinh))),
    unary("cosh", float_rel, |a, _| map_float(a, f64::cosh))
        .with_compute(|i, _, o| unary_te(i, o, "cosh", Un::Float(UnaryOp::Cosh))),
    unary("asin", float_rel, |a, _| map_float(a, f64::asin))
        .with_compute(|i, _, o| unary_te(i, o, "asin", Un::Float(UnaryOp::Asin))),
    unary("acos", float_rel, |a, _| map_float(a, f64::acos))
        .with_compute(|i, _, o| unary_te(i, o, "acos", Un::Float(UnaryOp::Acos))),
    unary("atan", float_rel, |a, _| map_float(a, f64::atan))
        .with_compute(|i, _, o| unary_te(i, o, "atan", Un::Float(UnaryOp::Atan))),
    unary("asinh", float_rel, |a, _| map_float(a, f64::asinh))
        .with_compute(|i, _, o| unary_te(i, o, "asinh", Un::Float(UnaryOp::Asinh))),
    unary("acosh", float_rel, |a, _| map_float(a, f64::acosh))
        .with_compute(|i, _, o| unary_te(i, o, "acosh", Un::Float(UnaryOp::Acosh))),
    unary("atanh", float_rel, |a, _| map_float(a, f64::atanh))
        .with_compute(|i, _, o| unary_te(i, o, "atanh", Un::Float(UnaryOp::Atanh))),
    // Rounding; integers are already whole, so TVM leaves them unchanged. `round` rounds
    // halves to even, as numpy and LLVM's `nearbyint` (TVM's lowering) do.
    unary("ceil", numeric_rel, |a, _| map(a, f64::ceil, |x| x))
        .with_compute(|i, _, o| unary_te(i, o, "ceil", Un::Rounding(UnaryOp::Ceil))),
    unary("floor", numeric_rel, |a, _| map(a, f64::floor, |x| x))
        .with_compute(|i, _, o| unary_te(i, o, "floor", Un::Rounding(UnaryOp::Floor))),
    unary("round", numeric_rel, |a, _| {
        map(a, f64::round_ties_even, |x| x)
    })
    .with_compute(|i, _, o| unary_te(i, o, "round", Un::Rounding(UnaryOp::Round))),
    unary("trunc", numeric_rel, |a, _| map(a, f64::trunc, |x| x))
        .with_compute(|i, _, o| unary_te(i, o, "trunc", Un::Rounding(UnaryOp::Trunc))),
    // Predicates, with a boolean result (integers are never NaN or infinite).
    unary("isnan", predicate_rel, |a, _| predicate(a, f64::is_nan))
        .with_compute(|i, _, o| unary_te(i, o, "isnan", Un::Predicate(UnaryOp::IsNan))),
    unary("isinf", predicate_rel, |a, _| {
        predicate(a, f64::is_infinite)
    })
    .with_compute(|i, _, o| unary_te(i, o, "isinf", Un::Predicate(UnaryOp::IsInf))),
    unary("isfinite", predicate_rel, |a, _| {
        predicate(a, f64::is_finite)
    })
    .with_compute(|i, _, o| unary_te(i, o, "isfinite", Un::Predicate(UnaryOp::IsFinite))),
    // Logical and bitwise negation (`bitwise_not` of a boolean is its logical negation).
    unary("logical_not", bool_rel, |a, _| predicate(a, |x| x == 0.0))
        .with_compute(|i, _, o| unary_te(i, o, "logical_not", Un::LogicalNot))
        .with_scalar(ScalarOp::Unary(ScalarUnary::Not)),
    unary("bitwise_not", int_or_bool_rel, |a, _| bitwise_not(a))
        .with_compute(|i, _, o| unary_te(i, o, "bitwise_not", Un::BitwiseNot)),
    // Copies and constant-filled tensors shaped like the input.
    unary("copy", same_rel, |a, _| {
        Ok(Value::Tensor(arg_tensor(a, 0)?.clone()))
    })
    .with_compute(|i, _, o| unary_te(i, o, "copy", Un::Copy)),
    unary("zeros_like", same_rel, |a, _| like(a, 0))
        .with_compute(|i, _, o| unary_te(i, o, "zeros_like", Un::Fill(0.0))),
    unary("ones_like", same_rel, |a, _| like(a, 1))
        .with_compute(|i, _, o| unary_te(i, o, "ones_like", Un::Fill(1.0))),
    // Fast approximations, evaluated exactly.
    unary("fast_exp", float_rel, |a, _| map_float(a, f64::exp)),
    unary("fast_tanh", float_rel, |a, _| map_float(a, f64::tanh)),
    unary("fast_erf", float_rel, |a, _| map_float(a, erf)),
    // Selection and operators shaped or typed like a second input.
    plain("where", &["condition", "x", "y"])
        .with(Broadcast, where_rel, where_eval)
        .with_compute(where_te),
    plain("full_like", &["data", "fill_value"])
        .with(ElemWise, full_like_rel, full_like_eval)
        .with_compute(|i, _, o| fill_te(i, o, "full_like", 1)),
    plain("cast_like", &["data", "dtype_like"])
        .with(ElemWise, cast_like_rel, cast_like_eval)
        .with_compute(|i, _, o| cast_te(i, o, "cast_like")),
    plain("broadcast_to_like", &["data", "like"])
        .with(Broadcast, to_like_rel, to_like_eval)
        .with_compute(|i, _, o| broadcast_to_te(i, o, "broadcast_to_like")),
    // Casting and clipping.
    op("cast", UNARY, "relay.attrs.CastAttrs", CAST_ATTRS)
        .with(ElemWise, cast_rel, cast_eval)
        .with_compute(|i, _, o| cast_te(i, o, "cast")),
    op("reinterpret", UNARY, "relay.attrs.CastAttrs", CAST_ATTRS),
    op(
        "clip",
        UNARY,
        "relay.attrs.ClipAttrs",
        &[required("a_min", K::Float), required("a_max", K::Float)],
    )
    .with(ElemWise, same_rel, clip_eval)
    .with_compute(clip_te),
    op(
        "fixed_point_multiply",
        UNARY,
        "relay.attrs.FixedPointMultiplyAttrs",
        &[required("multiplier", K::Int), required("shift", K::Int)],
    ),
    op(
        "fixed_point_multiply_per_axis",
        &["data", "fp_multiplier", "left_shift", "right_shift"],
        "relay.attrs.FixedPointMultiplyPerAxisAttrs",
        &[
            field("is_lshift_required", K::Bool, D::Bool(false)),
            field("is_rshift_required", K::Bool, D::Bool(false)),
            required("axes", K::IntArray),
        ],
    ),
    // Tensor creation.
    op("zeros", &[], "relay.attrs.InitOpAttrs", INIT_OP_ATTRS)
        .with(ElemWise, init_rel, zeros)
        .with_compute(|_, _, o| init_te(o, "zeros", 0.0)),
    op("ones", &[], "relay.attrs.InitOpAttrs", INIT_OP_ATTRS)
        .with(ElemWise, init_rel, ones)
        .with_compute(|_, _, o| init_te(o, "ones", 1.0)),
    op(
        "full",
        &["fill_value"],
        "relay.attrs.InitOpAttrs",
        INIT_OP_ATTRS,
    )
    .with(ElemWise, full_rel, full_eval)
    .with_compute(|i, _, o| fill_te(i, o, "full", 0)),
    op(
        "broadcast_to",
        UNARY,
        "relay.attrs.InitOpAttrs",
        INIT_OP_ATTRS,
    )
    .with(Broadcast, broadcast_to_rel, broadcast_to_eval)
    .with_compute(|i, _, o| broadcast_to_te(i, o, "broadcast_to")),
    op(
        "one_hot",
        &["indices", "on_value", "off_value"],
        "relay.attrs.OneHotAttrs",
        ONE_HOT_ATTRS,
    ),
    // Shape queries. TVM keeps `shape_of` opaque so that shape functions stay simple.
    op(
        "shape_of",
        UNARY,
        "relay.attrs.ShapeOfAttrs",
        SHAPE_OF_ATTRS,
    )
    .with(Opaque, shape_of_rel, shape_of_eval)
    .with_compute(shape_of_te),
    op(
        "ndarray_size",
        UNARY,
        "relay.attrs.NdarraySizeAttrs",
        &[dtype("dtype")],
    )
    .with(Injective, ndarray_size_rel, ndarray_size_eval),
];

/// A broadcasting binary operator.
const fn binary(name: &'static str, relation: RelationFn, eval: EvalFn) -> OpSchema {
    plain(name, BINARY).with(Broadcast, relation, eval)
}

/// An elementwise unary operator.
const fn unary(name: &'static str, relation: RelationFn, eval: EvalFn) -> OpSchema {
    plain(name, UNARY).with(ElemWise, relation, eval)
}

// ----- Type relations -----

/// The dtypes an operator accepts.
#[derive(Clone, Copy)]
enum Accepts {
    Any,
    /// Integers and floats, not `bool`.
    Numeric,
    Float,
    Bool,
    IntOrBool,
}

impl Accepts {
    /// An error naming the expected and the given dtype unless `dtype` is accepted.
    fn check(self, dtype: DType) -> Result<(), OpError> {
        let is_bool = dtype.code == DTypeCode::Bool;
        let (ok, expected) = match self {
            Accepts::Any => (true, ""),
            Accepts::Numeric => (dtype.is_int() || dtype.is_float(), "a numeric"),
            Accepts::Float => (dtype.is_float(), "a float"),
            Accepts::Bool => (is_bool, "a bool"),
            Accepts::IntOrBool => (dtype.is_int() || is_bool, "an integer or bool"),
        };
        if ok {
            Ok(())
        } else {
            Err(OpError::dtype(format!(
                "expected {expected} dtype, got {dtype}"
            )))
        }
    }
}

/// Two tensors of one accepted dtype, broadcast; the result has `result` or the input dtype.
fn broadcast_rel(inputs: &[Type], accepts: Accepts, result: Option<DType>) -> RelResult {
    let (shape, dtype) = broadcast_types(inputs)?;
    accepts.check(dtype)?;
    Ok(tensor(shape, result.unwrap_or(dtype)))
}

fn arith_rel(inputs: &[Type], _: &Attrs) -> RelResult {
    broadcast_rel(inputs, Accepts::Any, None)
}

fn logical_rel(inputs: &[Type], _: &Attrs) -> RelResult {
    broadcast_rel(inputs, Accepts::Bool, None)
}

fn bitwise_rel(inputs: &[Type], _: &Attrs) -> RelResult {
    broadcast_rel(inputs, Accepts::IntOrBool, None)
}

fn compare_rel(inputs: &[Type], _: &Attrs) -> RelResult {
    broadcast_rel(inputs, Accepts::Any, Some(DType::BOOL))
}

/// One tensor of an accepted dtype; the result has its shape and `result` or its dtype.
fn elemwise_rel(inputs: &[Type], accepts: Accepts, result: Option<DType>) -> RelResult {
    let [data] = inputs_n(inputs)?;
    let (shape, dtype) = tensor_type(data, "the input")?;
    accepts.check(dtype)?;
    Ok(tensor(shape.to_vec(), result.unwrap_or(dtype)))
}

fn same_rel(inputs: &[Type], _: &Attrs) -> RelResult {
    elemwise_rel(inputs, Accepts::Any, None)
}

fn numeric_rel(inputs: &[Type], _: &Attrs) -> RelResult {
    elemwise_rel(inputs, Accepts::Numeric, None)
}

/// A function of floats. Like TVM's `IdentityRel` it type-checks for every dtype, so that
/// every program TVM accepted is accepted; evaluating or compiling it for a non-float dtype is
/// the error, naming the operator and the dtype.
fn float_rel(inputs: &[Type], _: &Attrs) -> RelResult {
    elemwise_rel(inputs, Accepts::Any, None)
}

fn bool_rel(inputs: &[Type], _: &Attrs) -> RelResult {
    elemwise_rel(inputs, Accepts::Bool, None)
}

fn int_or_bool_rel(inputs: &[Type], _: &Attrs) -> RelResult {
    elemwise_rel(inputs, Accepts::IntOrBool, None)
}

fn predicate_rel(inputs: &[Type], _: &Attrs) -> RelResult {
    elemwise_rel(inputs, Accepts::Any, Some(DType::BOOL))
}

/// `where(condition, x, y)`: the three shapes broadcast together; `x` and `y` share a dtype.
/// Like TVM, the condition may have any dtype (non-zero is true).
fn where_rel(inputs: &[Type], _: &Attrs) -> RelResult {
    let [condition, x, y] = inputs_n(inputs)?;
    let (cond_shape, _) = tensor_type(condition, "the condition")?;
    let (shape, dtype) = broadcast_types(&[x.clone(), y.clone()])?;
    let shape = broadcast_shapes(cond_shape, &shape).ok_or_else(|| {
        OpError::shape(format!(
            "cannot broadcast condition `{condition}` with `{x}` and `{y}`"
        ))
    })?;
    Ok(tensor(shape, dtype))
}

fn cast_rel(inputs: &[Type], attrs: &Attrs) -> RelResult {
    let [data] = inputs_n(inputs)?;
    let (shape, _) = tensor_type(data, "the input")?;
    Ok(tensor(shape.to_vec(), required_dtype(attrs)?))
}

fn cast_like_rel(inputs: &[Type], _: &Attrs) -> RelResult {
    let [data, like] = inputs_n(inputs)?;
    let (shape, _) = tensor_type(data, "the data")?;
    let (_, dtype) = tensor_type(like, "the dtype source")?;
    Ok(tensor(shape.to_vec(), dtype))
}

/// The dtype of a `fill_value`, which must be a scalar.
fn fill_dtype(fill: &Type) -> Result<DType, OpError> {
    match tensor_type(fill, "the fill value")? {
        ([], dtype) => Ok(dtype),
        _ => Err(OpError::shape(format!(
            "the fill value must be a scalar, got `{fill}`"
        ))),
    }
}

fn full_rel(inputs: &[Type], attrs: &Attrs) -> RelResult {
    let [fill] = inputs_n(inputs)?;
    let fill = fill_dtype(fill)?;
    let dtype = attr_dtype(attrs, "dtype")?.unwrap_or(fill);
    Ok(tensor_of(&attr_shape(attrs)?, dtype))
}

fn full_like_rel(inputs: &[Type], _: &Attrs) -> RelResult {
    let [data, fill] = inputs_n(inputs)?;
    let (shape, dtype) = tensor_type(data, "the data")?;
    fill_dtype(fill)?;
    Ok(tensor(shape.to_vec(), dtype))
}

/// `zeros` and `ones`: the shape and dtype come from the attributes.
fn init_rel(inputs: &[Type], attrs: &Attrs) -> RelResult {
    inputs_n::<0>(inputs)?;
    Ok(tensor_of(&attr_shape(attrs)?, required_dtype(attrs)?))
}

/// Whether a tensor of shape `from` broadcasts to exactly `to` (unknown dimensions may).
fn broadcasts_to(from: &[Dim], to: &[Dim]) -> bool {
    from.len() <= to.len()
        && from
            .iter()
            .rev()
            .zip(to.iter().rev())
            .all(|(&f, &t)| f == t || f == Dim::Known(1) || f == Dim::Any || t == Dim::Any)
}

fn broadcast_to_rel(inputs: &[Type], attrs: &Attrs) -> RelResult {
    let [data] = inputs_n(inputs)?;
    let (shape, dtype) = tensor_type(data, "the input")?;
    let target: Vec<Dim> = attr_shape(attrs)?.into_iter().map(Dim::Known).collect();
    if !broadcasts_to(shape, &target) {
        return Err(OpError::shape(format!(
            "cannot broadcast `{data}` to shape {}",
            shape_text(&target)
        )));
    }
    Ok(tensor(target, dtype))
}

fn to_like_rel(inputs: &[Type], _: &Attrs) -> RelResult {
    let [data, like] = inputs_n(inputs)?;
    let (shape, dtype) = tensor_type(data, "the data")?;
    let (target, _) = tensor_type(like, "the shape source")?;
    if !broadcasts_to(shape, target) {
        return Err(OpError::shape(format!(
            "cannot broadcast `{data}` to `{like}`"
        )));
    }
    Ok(tensor(target.to_vec(), dtype))
}

fn shape_of_rel(inputs: &[Type], attrs: &Attrs) -> RelResult {
    let [data] = inputs_n(inputs)?;
    let (shape, _) = tensor_type(data, "the input")?;
    let dtype = attr_dtype(attrs, "dtype")?.unwrap_or(DType::I32);
    Ok(tensor_of(&[shape.len() as i64], dtype))
}

/// `shape_of`: the input's (static) dimensions as constants, `out[i] = shape[i]`.
fn shape_of_te(inputs: &[TeValue], _: &Attrs, out: &Type) -> Result<TeValue, OpError> {
    let (shape, dtype) = compute::static_tensor(out)?;
    let x = compute::input(inputs, 0)?;
    if shape != [x.shape.len() as i64] {
        return Err(OpError::shape(format!(
            "`shape_of` of a rank-{} tensor cannot have shape {shape:?}",
            x.shape.len()
        )));
    }
    let dims = x.shape.clone();
    compute::tensor_value(Tensor::compute("T_shape_of", &shape, |i| {
        // A select chain over the positions (a rank-0 input gives an empty output).
        dims.iter()
            .enumerate()
            .rev()
            .fold(compute::int_const(0, dtype), |rest, (d, &n)| {
                i[0].clone()
                    .compare(CmpOp::Eq, TExpr::index(d as i64))
                    .select(compute::int_const(i128::from(n), dtype), rest)
            })
    }))
}

fn ndarray_size_rel(inputs: &[Type], attrs: &Attrs) -> RelResult {
    let [data] = inputs_n(inputs)?;
    tensor_type(data, "the input")?;
    let dtype = attr_dtype(attrs, "dtype")?.unwrap_or(DType::I32);
    Ok(tensor_of(&[], dtype))
}

/// The `shape` attribute of `InitOpAttrs`: known, non-negative dimensions.
fn attr_shape(attrs: &Attrs) -> Result<Vec<i64>, OpError> {
    let shape = attr_opt_ints(attrs, "shape")?.ok_or_else(|| {
        OpError::attribute(
            "shape",
            "attribute `shape` must be a list of integers, got None",
        )
    })?;
    match shape.iter().find(|&&d| d < 0) {
        Some(d) => Err(OpError::attribute(
            "shape",
            format!("`shape` must not have negative dimensions, got {d}"),
        )),
        None => Ok(shape),
    }
}

// ----- Compute definitions -----
//
// Each definition computes exactly what the reference evaluation does, in the tensor
// expression operators (`relay_ir::te`). Where those leave a case open — NaN operands of `Max`
// and `Min`, shifts by the width or more, arithmetic on booleans — the definitions spell the
// evaluation's answer out with comparisons and selections instead.

/// The broadcasting binary operators.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Arith {
    Add,
    Sub,
    Mul,
    Div,
    Pow,
    Max,
    Min,
    Mod,
    FloorDiv,
    FloorMod,
    TruncDiv,
    LogicalAnd,
    LogicalOr,
    LogicalXor,
    BitAnd,
    BitOr,
    BitXor,
    Shl,
    Shr,
}

/// The two tensor inputs of a binary operator, of one dtype.
fn te_two<'a>(inputs: &'a [TeValue], name: &str) -> Result<(&'a Tensor, &'a Tensor), OpError> {
    let (a, b) = (compute::input(inputs, 0)?, compute::input(inputs, 1)?);
    if a.dtype != b.dtype {
        return Err(OpError::dtype(format!(
            "`{name}` input dtypes differ: {} and {}",
            a.dtype, b.dtype
        )));
    }
    Ok((a, b))
}

fn binary_te(inputs: &[TeValue], out: &Type, name: &str, op: Arith) -> ComputeResult {
    let (shape, _) = compute::static_tensor(out)?;
    let (a, b) = te_two(inputs, name)?;
    compute::broadcast_compute(&format!("T_{name}"), &shape, &[a, b], |r| {
        arith_te(name, op, &r[0], &r[1])
    })
}

/// `x op y` as the reference evaluation computes it, in the operands' dtype.
fn arith_te(name: &str, op: Arith, x: &TExpr, y: &TExpr) -> Result<TExpr, OpError> {
    use relay_ir::te::BinaryOp as B;
    let dtype = x.dtype();
    let unsupported = || {
        Err(OpError::unsupported(format!(
            "`{name}` does not support dtype {dtype}"
        )))
    };
    if compute::is_bool(dtype) {
        return match op {
            Arith::LogicalAnd | Arith::BitAnd => Ok(bin(B::LogicalAnd, x, y)),
            Arith::LogicalOr | Arith::BitOr => Ok(bin(B::LogicalOr, x, y)),
            Arith::LogicalXor | Arith::BitXor => Ok(bin(B::LogicalXor, x, y)),
            // `x ** y` is 1 for `y` false and `x` for `y` true.
            Arith::Pow => Ok(y.clone().select(x.clone(), compute::one(dtype))),
            // Booleans compute as the integers 0 and 1, then convert back (non-zero is true).
            _ => Ok(arith_te(
                name,
                op,
                &x.clone().cast(DType::I32),
                &y.clone().cast(DType::I32),
            )?
            .cast(dtype)),
        };
    }
    if dtype.is_float() {
        return Ok(match op {
            Arith::Add => bin(B::Add, x, y),
            Arith::Sub => bin(B::Sub, x, y),
            Arith::Mul => bin(B::Mul, x, y),
            Arith::Div => bin(B::Div, x, y),
            Arith::Pow => bin(B::Pow, x, y),
            Arith::Mod => bin(B::Mod, x, y),
            Arith::Max | Arith::Min => {
                let m = bin(if op == Arith::Max { B::Max } else { B::Min }, x, y);
                let nan = compute::const_of(f64::NAN, dtype);
                let either = bin(B::LogicalOr, &compute::is_nan(x), &compute::is_nan(y));
                either.select(nan, m)
            }
            // The quotient rounds once, in `f64`, as the reference evaluation computes it.
            Arith::FloorDiv | Arith::TruncDiv => {
                let wide = |e: &TExpr| e.clone().cast(DType::F64);
                let q = bin(B::Div, &wide(x), &wide(y));
                let r = if op == Arith::FloorDiv {
                    UnaryOp::Floor
                } else {
                    UnaryOp::Trunc
                };
                q.unary(r).cast(dtype)
            }
            // numpy's `%`: the C remainder, moved to the sign of the divisor.
            Arith::FloorMod => {
                let r = bin(B::Mod, x, y);
                let zero = compute::zero(dtype);
                let fix = cmp(CmpOp::Ne, &r, &zero).binary(
                    B::LogicalAnd,
                    bin(
                        B::LogicalXor,
                        &cmp(CmpOp::Lt, &r, &zero),
                        &cmp(CmpOp::Lt, y, &zero),
                    ),
                );
                fix.select(bin(B::Add, &r, y), r)
            }
            _ => return unsupported(),
        });
    }
    if !dtype.is_int() {
        return unsupported();
    }
    let width = i128::from(dtype.bits);
    let signed = dtype.code == DTypeCode::Int;
    Ok(match op {
        Arith::Add => bin(B::Add, x, y),
        Arith::Sub => bin(B::Sub, x, y),
        Arith::Mul => bin(B::Mul, x, y),
        Arith::Div | Arith::TruncDiv => bin(B::Div, x, y),
        Arith::Mod => bin(B::Mod, x, y),
        Arith::FloorDiv => bin(B::FloorDiv, x, y),
        Arith::FloorMod => bin(B::FloorMod, x, y),
        Arith::Max => bin(B::Max, x, y),
        Arith::Min => bin(B::Min, x, y),
        Arith::BitAnd => bin(B::BitAnd, x, y),
        Arith::BitOr => bin(B::BitOr, x, y),
        Arith::BitXor => bin(B::BitXor, x, y),
        // Shifting every bit out gives 0 (or the sign for `>>`), as numpy does; so does a
        // negative shift.
        Arith::Shl | Arith::Shr => {
            let below = cmp(CmpOp::Lt, y, &compute::int_const(width, dtype));
            let in_range = if signed {
                cmp(CmpOp::Ge, y, &compute::zero(dtype)).binary(B::LogicalAnd, below)
            } else {
                below
            };
            if op == Arith::Shl {
                in_range.select(bin(B::Shl, x, y), compute::zero(dtype))
            } else if signed {
                let amount = in_range.select(y.clone(), compute::int_const(width - 1, dtype));
                bin(B::Shr, x, &amount)
            } else {
                in_range.select(bin(B::Shr, x, y), compute::zero(dtype))
            }
        }
        // The kernel raises a negative exponent as a run-time error, as the reference does.
        Arith::Pow => bin(B::Pow, x, y),
        Arith::LogicalAnd | Arith::LogicalOr | Arith::LogicalXor => return unsupported(),
    })
}

fn compare_te(inputs: &[TeValue], out: &Type, name: &str, op: CmpOp) -> ComputeResult {
    let (shape, _) = compute::static_tensor(out)?;
    let (a, b) = te_two(inputs, name)?;
    compute::broadcast_compute(&format!("T_{name}"), &shape, &[a, b], |r| {
        Ok(cmp(op, &r[0], &r[1]))
    })
}

/// The elementwise unary operators.
#[derive(Clone, Copy)]
enum Un {
    Neg,
    Abs,
    Sign,
    /// A function of floats only.
    Float(UnaryOp),
    /// A rounding function; integers are already whole.
    Rounding(UnaryOp),
    /// A float predicate; integers are finite numbers.
    Predicate(UnaryOp),
    LogicalNot,
    BitwiseNot,
    Copy,
    /// A constant of the input's dtype.
    Fill(f64),
}

fn unary_te(inputs: &[TeValue], out: &Type, name: &str, op: Un) -> ComputeResult {
    let (shape, _) = compute::static_tensor(out)?;
    let a = compute::input(inputs, 0)?;
    compute::broadcast_compute(&format!("T_{name}"), &shape, &[a], |r| {
        unary_expr(name, op, &r[0])
    })
}

/// `op(x)` as the reference evaluation computes it.
fn unary_expr(name: &str, op: Un, x: &TExpr) -> Result<TExpr, OpError> {
    let dtype = x.dtype();
    let float = dtype.is_float();
    let unsigned = matches!(dtype.code, DTypeCode::UInt | DTypeCode::Bool);
    let unsupported = || {
        Err(OpError::unsupported(format!(
            "`{name}` does not support dtype {dtype}"
        )))
    };
    Ok(match op {
        Un::Neg => x.clone().unary(UnaryOp::Neg),
        Un::Abs if unsigned => x.clone(),
        Un::Abs => x.clone().unary(UnaryOp::Abs),
        // -1, 0 or 1; zeros and NaN give themselves, as numpy's `sign` of floats does.
        Un::Sign => {
            let zero = compute::zero(dtype);
            let rest = if unsigned {
                zero.clone()
            } else {
                let other = if float { x.clone() } else { zero.clone() };
                cmp(CmpOp::Lt, x, &zero).select(compute::const_of(-1.0, dtype), other)
            };
            cmp(CmpOp::Gt, x, &zero).select(compute::one(dtype), rest)
        }
        Un::Float(f) if float => x.clone().unary(f),
        Un::Float(_) => return unsupported(),
        Un::Rounding(f) if float => x.clone().unary(f),
        Un::Rounding(_) => x.clone(),
        Un::Predicate(f) if float => x.clone().unary(f),
        Un::Predicate(f) => TExpr::int(i128::from(f == UnaryOp::IsFinite), DType::BOOL),
        Un::LogicalNot | Un::BitwiseNot if compute::is_bool(dtype) => {
            x.clone().unary(UnaryOp::LogicalNot)
        }
        Un::LogicalNot => cmp(CmpOp::Eq, x, &compute::zero(dtype)),
        Un::BitwiseNot if dtype.is_int() => x.clone().unary(UnaryOp::BitwiseNot),
        Un::BitwiseNot => return unsupported(),
        Un::Copy => x.clone(),
        Un::Fill(v) => compute::const_of(v, dtype),
    })
}

fn where_te(inputs: &[TeValue], _: &Attrs, out: &Type) -> ComputeResult {
    let (shape, _) = compute::static_tensor(out)?;
    let c = compute::input(inputs, 0)?;
    let (x, y) = te_two(&inputs[1.min(inputs.len())..], "where")?;
    compute::broadcast_compute("T_where", &shape, &[c, x, y], |r| {
        Ok(r[0]
            .clone()
            .cast(DType::BOOL)
            .select(r[1].clone(), r[2].clone()))
    })
}

/// `cast` and `cast_like`: numpy's `astype` to the output dtype.
fn cast_te(inputs: &[TeValue], out: &Type, name: &str) -> ComputeResult {
    let (shape, dtype) = compute::static_tensor(out)?;
    let a = compute::input(inputs, 0)?;
    compute::broadcast_compute(&format!("T_{name}"), &shape, &[a], |r| {
        Ok(r[0].clone().cast(dtype))
    })
}

/// `full` (fill value input 0) and `full_like` (input 1): the scalar converted to the output
/// dtype, everywhere.
fn fill_te(inputs: &[TeValue], out: &Type, name: &str, fill: usize) -> ComputeResult {
    let (shape, dtype) = compute::static_tensor(out)?;
    let f = compute::input(inputs, fill)?;
    if !f.shape.is_empty() {
        return Err(OpError::shape(format!(
            "the fill value of `{name}` must be a scalar"
        )));
    }
    let value = f.at(&[]).cast(dtype);
    compute::tensor_value(Tensor::compute(format!("T_{name}"), &shape, |_| value))
}

/// `zeros` and `ones`.
fn init_te(out: &Type, name: &str, fill: f64) -> ComputeResult {
    let (shape, dtype) = compute::static_tensor(out)?;
    let value = compute::const_of(fill, dtype);
    compute::tensor_value(Tensor::compute(format!("T_{name}"), &shape, |_| value))
}

/// `broadcast_to` and `broadcast_to_like`: the input read with numpy broadcasting.
fn broadcast_to_te(inputs: &[TeValue], out: &Type, name: &str) -> ComputeResult {
    let (shape, _) = compute::static_tensor(out)?;
    let a = compute::input(inputs, 0)?;
    compute::broadcast_compute(&format!("T_{name}"), &shape, &[a], |r| Ok(r[0].clone()))
}

/// `clip` as the reference evaluation computes it: `max(min(x, a_max), a_min)` with NaN passing
/// through (the comparisons are false for it), and integer bounds truncated toward zero.
fn clip_te(inputs: &[TeValue], attrs: &Attrs, out: &Type) -> ComputeResult {
    let (shape, dtype) = compute::static_tensor(out)?;
    let a = compute::input(inputs, 0)?;
    let (lo, hi) = (attr_float(attrs, "a_min")?, attr_float(attrs, "a_max")?);
    compute::broadcast_compute("T_clip", &shape, &[a], |r| {
        let x = &r[0];
        // `min(v, hi)` and `max(v, lo)` as selections: a NaN `v` compares false and stays.
        let min = |v: &TExpr, hi: &TExpr| cmp(CmpOp::Lt, hi, v).select(hi.clone(), v.clone());
        let max = |v: &TExpr, lo: &TExpr| cmp(CmpOp::Lt, v, lo).select(lo.clone(), v.clone());
        if dtype.is_float() {
            // Rust's `min` and `max` ignore a NaN bound.
            let mut v = x.clone();
            if !hi.is_nan() {
                v = min(&v, &compute::const_of(hi, dtype));
            }
            if !lo.is_nan() {
                v = max(&v, &compute::const_of(lo, dtype));
            }
            return Ok(v);
        }
        let (lo, hi) = (lo as i128, hi as i128);
        let (first, last) = compute::int_range(dtype);
        if hi < first {
            return Ok(compute::int_const(hi.max(lo), dtype));
        }
        if lo > last {
            return Ok(compute::int_const(lo, dtype));
        }
        let hi = compute::int_const(hi.min(last), dtype);
        let lo = compute::int_const(lo.max(first), dtype);
        Ok(max(&min(x, &hi), &lo))
    })
}

// ----- Reference evaluation -----

/// A tensor's elements in the number type its dtype computes in: `f64` for floats, `i128`
/// for integers and booleans (0 and 1).
enum Nums {
    Float(Vec<f64>),
    Int(Vec<i128>),
}

impl Nums {
    fn of(t: &NDArray) -> Nums {
        if t.dtype().is_float() {
            Nums::Float(t.to_f64_vec())
        } else {
            Nums::Int(t.to_i128_vec())
        }
    }

    /// The elements at `index`, in order.
    fn gather(&self, index: &[usize]) -> Nums {
        match self {
            Nums::Float(v) => Nums::Float(index.iter().map(|&i| v[i]).collect()),
            Nums::Int(v) => Nums::Int(index.iter().map(|&i| v[i]).collect()),
        }
    }

    /// A tensor of `dtype` and `shape` holding these numbers, converted as numpy's `astype`.
    fn into_value(self, dtype: DType, shape: &[i64]) -> EvalResult {
        match self {
            Nums::Float(v) => value(NDArray::from_f64_slice(dtype, shape, &v)),
            Nums::Int(v) => value(NDArray::from_i128_slice(dtype, shape, &v)),
        }
    }
}

/// The numpy broadcast of concrete shapes.
fn broadcast_concrete(shapes: &[&[i64]]) -> Result<Vec<i64>, OpError> {
    let rank = shapes.iter().map(|s| s.len()).max().unwrap_or(0);
    let mut out = vec![1i64; rank];
    for shape in shapes {
        for (d, &n) in shape.iter().enumerate() {
            let o = &mut out[rank - shape.len() + d];
            if *o == 1 {
                *o = n;
            } else if n != 1 && n != *o {
                let texts: Vec<String> = shapes.iter().map(|s| concrete_text(s)).collect();
                return Err(OpError::shape(format!(
                    "cannot broadcast shapes {}",
                    texts.join(" and ")
                )));
            }
        }
    }
    Ok(out)
}

fn concrete_text(shape: &[i64]) -> String {
    shape_text(&dims(shape))
}

/// For each element of a tensor of shape `out`, the flat position of the element of a
/// tensor of `shape` broadcast to it.
fn index_map(shape: &[i64], out: &[i64]) -> Vec<usize> {
    let n: i64 = out.iter().product();
    if shape == out {
        return (0..n as usize).collect();
    }
    (0..n)
        .map(|k| broadcast_index(&unravel(k, out), shape))
        .collect()
}

/// The broadcast shape of `arrays` and, per array, its [`index_map`].
fn broadcast(arrays: &[&NDArray]) -> Result<(Vec<i64>, Vec<Vec<usize>>), OpError> {
    let shapes: Vec<&[i64]> = arrays.iter().map(|a| a.shape()).collect();
    let out = broadcast_concrete(&shapes)?;
    let maps = shapes.iter().map(|s| index_map(s, &out)).collect();
    Ok((out, maps))
}

/// The two arguments of a binary operator, with their common dtype.
fn two(args: &[Value]) -> Result<(&NDArray, &NDArray, DType), OpError> {
    let (a, b) = (arg_tensor(args, 0)?, arg_tensor(args, 1)?);
    if a.dtype() != b.dtype() {
        return Err(OpError::dtype(format!(
            "input dtypes differ: {} and {}",
            a.dtype(),
            b.dtype()
        )));
    }
    Ok((a, b, a.dtype()))
}

/// A broadcasting binary operator: `f` on floats, `g` on integers and booleans (whose
/// results wrap to the dtype's width), either of which may fail.
fn checked(
    args: &[Value],
    f: impl Fn(f64, f64) -> f64,
    g: impl Fn(i128, i128) -> Result<i128, OpError>,
) -> EvalResult {
    let (a, b, dtype) = two(args)?;
    let (shape, maps) = broadcast(&[a, b])?;
    let pairs = maps[0].iter().zip(&maps[1]);
    match (Nums::of(a), Nums::of(b)) {
        (Nums::Float(x), Nums::Float(y)) => {
            let out: Vec<f64> = pairs.map(|(&i, &j)| f(x[i], y[j])).collect();
            Nums::Float(out).into_value(dtype, &shape)
        }
        (Nums::Int(x), Nums::Int(y)) => {
            let out = pairs
                .map(|(&i, &j)| g(x[i], y[j]))
                .collect::<Result<_, _>>()?;
            Nums::Int(out).into_value(dtype, &shape)
        }
        _ => Err(OpError::dtype(format!(
            "cannot compute on mixed dtypes of {dtype}"
        ))),
    }
}

/// A broadcasting binary operator that cannot fail.
fn arith(args: &[Value], f: fn(f64, f64) -> f64, g: fn(i128, i128) -> i128) -> EvalResult {
    checked(args, f, |x, y| Ok(g(x, y)))
}

/// A broadcasting bitwise operator, defined on integers and booleans only.
fn bitwise(args: &[Value], g: fn(i128, i128) -> i128) -> EvalResult {
    let (_, _, dtype) = two(args)?;
    Accepts::IntOrBool.check(dtype)?;
    arith(args, |x, _| x, g)
}

/// A broadcasting comparison of the inputs' numbers; the result is boolean.
fn compare(args: &[Value], f: fn(Option<Ordering>) -> bool) -> EvalResult {
    let (a, b, _) = two(args)?;
    let (shape, maps) = broadcast(&[a, b])?;
    let pairs = maps[0].iter().zip(&maps[1]);
    let out: Vec<bool> = match (Nums::of(a), Nums::of(b)) {
        (Nums::Float(x), Nums::Float(y)) => {
            pairs.map(|(&i, &j)| f(x[i].partial_cmp(&y[j]))).collect()
        }
        (Nums::Int(x), Nums::Int(y)) => pairs.map(|(&i, &j)| f(x[i].partial_cmp(&y[j]))).collect(),
        _ => return Err(OpError::dtype("cannot compare mixed dtypes")),
    };
    value(NDArray::from_bool_slice(&shape, &out))
}

/// A broadcasting logical operator on booleans (non-zero is true).
fn logical(args: &[Value], f: fn(bool, bool) -> bool) -> EvalResult {
    let (a, b, _) = two(args)?;
    let (shape, maps) = broadcast(&[a, b])?;
    let (x, y) = (a.to_bool_vec(), b.to_bool_vec());
    let out: Vec<bool> = maps[0]
        .iter()
        .zip(&maps[1])
        .map(|(&i, &j)| f(x[i], y[j]))
        .collect();
    value(NDArray::from_bool_slice(&shape, &out))
}

/// An elementwise operator: `f` on floats, `g` on integers and booleans.
fn map(args: &[Value], f: impl Fn(f64) -> f64, g: impl Fn(i128) -> i128) -> EvalResult {
    let t = arg_tensor(args, 0)?;
    let out = match Nums::of(t) {
        Nums::Float(v) => Nums::Float(v.into_iter().map(f).collect()),
        Nums::Int(v) => Nums::Int(v.into_iter().map(g).collect()),
    };
    out.into_value(t.dtype(), t.shape())
}

/// An elementwise operator on floating-point numbers.
fn map_float(args: &[Value], f: fn(f64) -> f64) -> EvalResult {
    let t = arg_tensor(args, 0)?;
    Accepts::Float.check(t.dtype())?;
    map(args, f, |x| x)
}

/// An elementwise predicate; the result is boolean.
fn predicate(args: &[Value], f: fn(f64) -> bool) -> EvalResult {
    let t = arg_tensor(args, 0)?;
    let out: Vec<bool> = t.to_f64_vec().into_iter().map(f).collect();
    value(NDArray::from_bool_slice(t.shape(), &out))
}

fn bitwise_not(args: &[Value]) -> EvalResult {
    let t = arg_tensor(args, 0)?;
    if t.dtype().code == DTypeCode::Bool {
        return predicate(args, |x| x == 0.0);
    }
    Accepts::IntOrBool.check(t.dtype())?;
    map(args, |x| x, |x| !x)
}

/// A tensor of `dtype` and `shape` with every element `fill` (converted as numpy's `astype`).
fn filled(dtype: DType, shape: &[i64], fill: &NDArray) -> EvalResult {
    let n = NDArray::zeros(dtype, shape)
        .map_err(OpError::from_runtime)?
        .num_elements();
    let one = match Nums::of(fill) {
        Nums::Float(v) => v.first().map(|&x| Nums::Float(vec![x; n])),
        Nums::Int(v) => v.first().map(|&x| Nums::Int(vec![x; n])),
    };
    one.ok_or_else(|| OpError::shape("the fill value must be a scalar, got an empty tensor"))?
        .into_value(dtype, shape)
}

/// `zeros_like` (`fill` 0) and `ones_like` (`fill` 1).
fn like(args: &[Value], fill: i128) -> EvalResult {
    let t = arg_tensor(args, 0)?;
    filled(
        t.dtype(),
        t.shape(),
        &NDArray::scalar_i128(DType::I64, fill).map_err(OpError::from_runtime)?,
    )
}

/// A tensor with the shape and dtype of the attributes, every element `fill`.
fn init(attrs: &Attrs, fill: i128) -> EvalResult {
    let fill = NDArray::scalar_i128(DType::I64, fill).map_err(OpError::from_runtime)?;
    filled(required_dtype(attrs)?, &attr_shape(attrs)?, &fill)
}

fn zeros(_: &[Value], attrs: &Attrs) -> EvalResult {
    init(attrs, 0)
}

fn ones(_: &[Value], attrs: &Attrs) -> EvalResult {
    init(attrs, 1)
}

fn full_eval(args: &[Value], attrs: &Attrs) -> EvalResult {
    let fill = arg_tensor(args, 0)?;
    let dtype = attr_dtype(attrs, "dtype")?.unwrap_or(fill.dtype());
    filled(dtype, &attr_shape(attrs)?, fill)
}

fn full_like_eval(args: &[Value], _: &Attrs) -> EvalResult {
    let data = arg_tensor(args, 0)?;
    filled(data.dtype(), data.shape(), arg_tensor(args, 1)?)
}

/// `t` converted to `dtype` as numpy's `astype` does (integers wrap, floats truncate toward
/// zero when made integers).
fn convert(t: &Arc<NDArray>, dtype: DType) -> EvalResult {
    if t.dtype() == dtype {
        return Ok(Value::Tensor(t.clone()));
    }
    Nums::of(t).into_value(dtype, t.shape())
}

fn cast_eval(args: &[Value], attrs: &Attrs) -> EvalResult {
    convert(arg_tensor(args, 0)?, required_dtype(attrs)?)
}

fn cast_like_eval(args: &[Value], _: &Attrs) -> EvalResult {
    convert(arg_tensor(args, 0)?, arg_tensor(args, 1)?.dtype())
}

/// `clip` as TVM computes it, `max(min(x, a_max), a_min)`, with NaN passing through and the
/// bounds truncated toward zero for integers.
fn clip_eval(args: &[Value], attrs: &Attrs) -> EvalResult {
    let (lo, hi) = (attr_float(attrs, "a_min")?, attr_float(attrs, "a_max")?);
    map(
        args,
        |x| if x.is_nan() { x } else { x.min(hi).max(lo) },
        |x| x.min(hi as i128).max(lo as i128),
    )
}

/// `where`: elements of `x` where the condition is true (non-zero), else of `y`.
fn where_eval(args: &[Value], _: &Attrs) -> EvalResult {
    let (condition, x, y) = (
        arg_tensor(args, 0)?,
        arg_tensor(args, 1)?,
        arg_tensor(args, 2)?,
    );
    let dtype = x.dtype();
    if y.dtype() != dtype {
        return Err(OpError::dtype(format!(
            "input dtypes differ: {dtype} and {}",
            y.dtype()
        )));
    }
    let (shape, maps) = broadcast(&[condition, x, y])?;
    let cond = condition.to_bool_vec();
    let pick = |k: usize| cond[maps[0][k]];
    let n = maps[0].len();
    let out = match (Nums::of(x), Nums::of(y)) {
        (Nums::Float(a), Nums::Float(b)) => Nums::Float(
            (0..n)
                .map(|k| {
                    if pick(k) {
                        a[maps[1][k]]
                    } else {
                        b[maps[2][k]]
                    }
                })
                .collect(),
        ),
        (Nums::Int(a), Nums::Int(b)) => Nums::Int(
            (0..n)
                .map(|k| {
                    if pick(k) {
                        a[maps[1][k]]
                    } else {
                        b[maps[2][k]]
                    }
                })
                .collect(),
        ),
        _ => {
            return Err(OpError::dtype(format!(
                "cannot select between mixed dtypes of {dtype}"
            )));
        }
    };
    out.into_value(dtype, &shape)
}

/// `data` repeated along size-1 and missing leading dimensions to shape `target`.
fn broadcast_value(data: &NDArray, target: &[i64]) -> EvalResult {
    if broadcast_concrete(&[data.shape(), target])? != target {
        return Err(OpError::shape(format!(
            "cannot broadcast shape {} to shape {}",
            concrete_text(data.shape()),
            concrete_text(target)
        )));
    }
    Nums::of(data)
        .gather(&index_map(data.shape(), target))
        .into_value(data.dtype(), target)
}

fn broadcast_to_eval(args: &[Value], attrs: &Attrs) -> EvalResult {
    broadcast_value(arg_tensor(args, 0)?, &attr_shape(attrs)?)
}

fn to_like_eval(args: &[Value], _: &Attrs) -> EvalResult {
    broadcast_value(arg_tensor(args, 0)?, arg_tensor(args, 1)?.shape())
}

fn shape_of_eval(args: &[Value], attrs: &Attrs) -> EvalResult {
    let t = arg_tensor(args, 0)?;
    let dtype = attr_dtype(attrs, "dtype")?.unwrap_or(DType::I32);
    let dims: Vec<i128> = t.shape().iter().map(|&d| d as i128).collect();
    value(NDArray::from_i128_slice(dtype, &[dims.len() as i64], &dims))
}

fn ndarray_size_eval(args: &[Value], attrs: &Attrs) -> EvalResult {
    let t = arg_tensor(args, 0)?;
    let dtype = attr_dtype(attrs, "dtype")?.unwrap_or(DType::I32);
    value(NDArray::scalar_i128(dtype, t.num_elements() as i128))
}

// ----- Scalar arithmetic -----

/// Truncating integer division and its remainder (the sign of the dividend), as C and TVM.
fn div(x: i128, y: i128) -> Result<(i128, i128), OpError> {
    if y == 0 {
        return Err(OpError::value("integer division by zero"));
    }
    Ok((x.wrapping_div(y), x.wrapping_rem(y)))
}

/// The divisor of an integer remainder, checked: modulo by zero is a run-time error.
fn modulus(y: i128) -> Result<i128, OpError> {
    if y == 0 {
        return Err(OpError::value("integer modulo by zero"));
    }
    Ok(y)
}

/// Flooring integer division and its remainder (the sign of the divisor), as numpy.
fn fdiv(x: i128, y: i128) -> Result<(i128, i128), OpError> {
    let (q, r) = div(x, y)?;
    if r != 0 && (r < 0) != (y < 0) {
        Ok((q - 1, r + y))
    } else {
        Ok((q, r))
    }
}

fn floor_div(x: f64, y: f64) -> f64 {
    (x / y).floor()
}

/// The floating-point remainder with the sign of the divisor, as numpy's `mod`.
fn floor_mod(x: f64, y: f64) -> f64 {
    let r = x % y;
    if r != 0.0 && (r < 0.0) != (y < 0.0) {
        r + y
    } else {
        r
    }
}

/// Integer power by squaring, wrapping; negative exponents are an error, as in numpy.
fn int_power(base: i128, exp: i128) -> Result<i128, OpError> {
    if exp < 0 {
        return Err(OpError::value(format!(
            "integers to negative integer powers are not allowed, got exponent {exp}"
        )));
    }
    let (mut result, mut base, mut exp) = (1i128, base, exp);
    while exp > 0 {
        if exp & 1 == 1 {
            result = result.wrapping_mul(base);
        }
        base = base.wrapping_mul(base);
        exp >>= 1;
    }
    Ok(result)
}

/// The larger number, or NaN if either is NaN (numpy's `maximum`).
fn nan_max(x: f64, y: f64) -> f64 {
    if x.is_nan() || y.is_nan() {
        f64::NAN
    } else {
        x.max(y)
    }
}

/// The smaller number, or NaN if either is NaN (numpy's `minimum`).
fn nan_min(x: f64, y: f64) -> f64 {
    if x.is_nan() || y.is_nan() {
        f64::NAN
    } else {
        x.min(y)
    }
}

/// `x << y`, 0 once every bit is shifted out or for a negative shift, as numpy.
fn shift_left(x: i128, y: i128) -> i128 {
    if (0..128).contains(&y) {
        x.wrapping_shl(y as u32)
    } else {
        0
    }
}

/// `x >> y`, arithmetic for signed values (unsigned values are non-negative here); a shift
/// past every bit or a negative shift leaves the sign (0 or -1), as numpy.
fn shift_right(x: i128, y: i128) -> i128 {
    let shift = if (0..128).contains(&y) { y as u32 } else { 127 };
    x >> shift
}

/// numpy's `sign`: -1, 0 or 1, and NaN for NaN.
fn sign(x: f64) -> f64 {
    if x > 0.0 {
        1.0
    } else if x < 0.0 {
        -1.0
    } else {
        x * 0.0
    }
}

/// The error function to within a few units in the last place: for |x| < 2.5 the series
/// `erf(x) = 2/sqrt(pi) exp(-x^2) sum_n 2^n x^(2n+1) / (1 3 5 ... (2n+1))`, whose terms are
/// all positive, and beyond it `1 - erfc(x)` with Laplace's continued fraction
/// `erfc(x) = exp(-x^2)/sqrt(pi) / (x + (1/2)/(x + 1/(x + (3/2)/(x + ...))))`.
pub(crate) fn erf(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    let a = x.abs();
    let r = if a < 2.5 {
        let a2 = a * a;
        let (mut term, mut sum) = (a, a);
        for k in 1..200 {
            term *= 2.0 * a2 / (2 * k + 1) as f64;
            sum += term;
            if term <= sum * 1e-17 {
                break;
            }
        }
        FRAC_2_SQRT_PI * (-a2).exp() * sum
    } else if a < 6.0 {
        // erfc(6) is below 2^-53, so erf rounds to 1 from there on.
        let mut t = a;
        for k in (1..=60).rev() {
            t = a + (f64::from(k) / 2.0) / t;
        }
        1.0 - (-a * a).exp() / (PI.sqrt() * t)
    } else {
        1.0
    };
    r.copysign(x)
}

#[cfg(test)]
mod tests {
    use std::slice::from_ref;

    use relay_ir::{AttrValue, Symbol};

    use super::*;

    const F: DType = DType::F32;
    const I: DType = DType::I32;
    const B: DType = DType::BOOL;

    fn attrs(entries: &[(&str, AttrValue)]) -> Attrs {
        Attrs::new(
            entries
                .iter()
                .map(|(k, v)| (Symbol::intern(k), v.clone()))
                .collect(),
        )
    }

    fn dtype_attr(d: &str) -> Attrs {
        attrs(&[("dtype", AttrValue::Str(d.into()))])
    }

    fn shape_attrs(shape: &[i64], d: &str) -> Attrs {
        let shape = shape.iter().map(|&n| AttrValue::Int(n)).collect();
        attrs(&[
            ("shape", AttrValue::Array(shape)),
            ("dtype", AttrValue::Str(d.into())),
        ])
    }

    fn ty(shape: &[i64], dtype: DType) -> Type {
        Type::tensor(shape, dtype)
    }

    fn rel_with(name: &str, inputs: &[Type], attrs: &Attrs) -> Result<String, String> {
        let op = crate::lookup(name).unwrap();
        (op.relation.unwrap())(inputs, attrs)
            .map(|t| t.to_string())
            .map_err(|e| e.to_string())
    }

    fn rel(name: &str, inputs: &[Type]) -> Result<String, String> {
        rel_with(name, inputs, &Attrs::empty())
    }

    fn floats(dtype: DType, shape: &[i64], v: &[f64]) -> Value {
        Value::tensor(NDArray::from_f64_slice(dtype, shape, v).unwrap())
    }

    fn ints(dtype: DType, shape: &[i64], v: &[i128]) -> Value {
        Value::tensor(NDArray::from_i128_slice(dtype, shape, v).unwrap())
    }

    fn bools(shape: &[i64], v: &[bool]) -> Value {
        Value::tensor(NDArray::from_bool_slice(shape, v).unwrap())
    }

    fn run_with(name: &str, args: &[Value], attrs: &Attrs) -> Result<Arc<NDArray>, String> {
        let op = crate::lookup(name).unwrap();
        (op.eval.unwrap())(args, attrs)
            .map(|v| v.as_tensor().unwrap().clone())
            .map_err(|e| e.to_string())
    }

    fn run(name: &str, args: &[Value]) -> Result<Arc<NDArray>, String> {
        run_with(name, args, &Attrs::empty())
    }

    /// The result's dtype, shape and elements as `f64`.
    fn run_f(name: &str, args: &[Value]) -> (DType, Vec<i64>, Vec<f64>) {
        let t = run(name, args).unwrap();
        (t.dtype(), t.shape().to_vec(), t.to_f64_vec())
    }

    /// The result's elements as `i128`, checking its dtype.
    fn run_i(name: &str, args: &[Value], dtype: DType) -> Vec<i128> {
        let t = run(name, args).unwrap();
        assert_eq!(t.dtype(), dtype, "{name}");
        t.to_i128_vec()
    }

    fn run_b(name: &str, args: &[Value]) -> Vec<bool> {
        let t = run(name, args).unwrap();
        assert_eq!(t.dtype(), B, "{name}");
        t.to_bool_vec()
    }

    fn close(got: &[f64], want: &[f64], tol: f64) {
        assert_eq!(got.len(), want.len());
        for (g, w) in got.iter().zip(want) {
            assert!(
                (g - w).abs() <= tol * w.abs().max(1.0) || (g.is_nan() && w.is_nan()),
                "got {got:?}, want {want:?}"
            );
        }
    }

    #[test]
    fn every_tier1_op_here_is_complete() {
        // That every Tier 1 operator has a relation and an evaluation is checked for the whole
        // registry in `lib.rs`.
        let pattern = |name: &str| crate::lookup(name).unwrap().pattern;
        assert_eq!(pattern("add"), Broadcast);
        assert_eq!(pattern("less"), Broadcast);
        assert_eq!(pattern("where"), Broadcast);
        assert_eq!(pattern("broadcast_to"), Broadcast);
        assert_eq!(pattern("exp"), ElemWise);
        assert_eq!(pattern("clip"), ElemWise);
        assert_eq!(pattern("cast"), ElemWise);
        assert_eq!(pattern("zeros"), ElemWise);
        assert_eq!(pattern("shape_of"), Opaque);
    }

    #[test]
    fn binary_relations() {
        let k = |shape: &[i64]| ty(shape, F);
        assert_eq!(
            rel("add", &[k(&[2, 1, 3]), k(&[4, 1])]),
            Ok("Tensor[(2, 4, 3), float32]".into())
        );
        assert_eq!(
            rel("multiply", &[k(&[]), k(&[0, 3])]),
            Ok("Tensor[(0, 3), float32]".into())
        );
        assert_eq!(
            rel("add", &[k(&[2, 3]), k(&[4, 3])]),
            Err("cannot broadcast `Tensor[(2, 3), float32]` with `Tensor[(4, 3), float32]`".into())
        );
        assert_eq!(
            rel("subtract", &[k(&[2]), ty(&[2], I)]),
            Err("input dtypes differ: `Tensor[(2), float32]` and `Tensor[(2), int32]`".into())
        );
        let any = tensor(vec![Dim::Any, Dim::Known(3)], I);
        assert_eq!(
            rel("divide", &[any, ty(&[3], I)]),
            Ok("Tensor[(?, 3), int32]".into())
        );
        assert_eq!(
            rel("less", &[ty(&[4, 5], F), ty(&[5], F)]),
            Ok("Tensor[(4, 5), bool]".into())
        );
        assert_eq!(rel("equal", &[ty(&[], I), ty(&[], I)]), Ok("bool".into()));
        assert_eq!(
            rel("logical_and", &[ty(&[2], F), ty(&[2], F)]),
            Err("expected a bool dtype, got float32".into())
        );
        assert_eq!(
            rel("logical_or", &[ty(&[2], B), ty(&[], B)]),
            Ok("Tensor[(2), bool]".into())
        );
        assert_eq!(
            rel("bitwise_xor", &[ty(&[2], F), ty(&[2], F)]),
            Err("expected an integer or bool dtype, got float32".into())
        );
        assert_eq!(
            rel("left_shift", &[ty(&[2], DType::U8), ty(&[], DType::U8)]),
            Ok("Tensor[(2), uint8]".into())
        );
        assert_eq!(
            rel("add", &[ty(&[2], F)]),
            Err("expects 2 inputs, got 1".into())
        );
    }

    #[test]
    fn unary_relations() {
        assert_eq!(
            rel("exp", &[ty(&[2, 3], F)]),
            Ok("Tensor[(2, 3), float32]".into())
        );
        assert_eq!(rel("exp", &[ty(&[2], I)]), Ok("Tensor[(2), int32]".into()));
        assert_eq!(
            rel("erf", &[ty(&[2], DType::F16)]),
            Ok("Tensor[(2), float16]".into())
        );
        assert_eq!(rel("negative", &[ty(&[], I)]), Ok("int32".into()));
        assert_eq!(
            rel("abs", &[ty(&[2], B)]),
            Err("expected a numeric dtype, got bool".into())
        );
        assert_eq!(rel("isnan", &[ty(&[6], F)]), Ok("Tensor[(6), bool]".into()));
        assert_eq!(
            rel("logical_not", &[ty(&[2], I)]),
            Err("expected a bool dtype, got int32".into())
        );
        assert_eq!(
            rel("bitwise_not", &[ty(&[2], B)]),
            Ok("Tensor[(2), bool]".into())
        );
        assert_eq!(rel("copy", &[ty(&[0], B)]), Ok("Tensor[(0), bool]".into()));
        assert_eq!(
            rel("floor", &[ty(&[2], I)]),
            Ok("Tensor[(2), int32]".into())
        );
        assert_eq!(
            rel("sqrt", &[ty(&[2], F), ty(&[2], F)]),
            Err("expects 1 input, got 2".into())
        );
        assert_eq!(
            rel("tanh", &[Type::tuple(vec![])]),
            Err("the input must be a tensor, got `()`".into())
        );
    }

    #[test]
    fn other_relations() {
        assert_eq!(
            rel("where", &[ty(&[4, 1], B), ty(&[1, 5], F), ty(&[5], F)]),
            Ok("Tensor[(4, 5), float32]".into())
        );
        assert!(rel("where", &[ty(&[3], B), ty(&[2], F), ty(&[2], F)]).is_err());
        assert!(rel("where", &[ty(&[2], B), ty(&[2], F), ty(&[2], I)]).is_err());
        let clip = attrs(&[
            ("a_min", AttrValue::Float(0.0)),
            ("a_max", AttrValue::Float(6.0)),
        ]);
        assert_eq!(
            rel_with("clip", &[ty(&[2], F)], &clip),
            Ok("Tensor[(2), float32]".into())
        );
        assert_eq!(
            rel_with("cast", &[ty(&[2, 3], F)], &dtype_attr("int8")),
            Ok("Tensor[(2, 3), int8]".into())
        );
        assert_eq!(
            rel_with("cast", &[ty(&[2], F)], &dtype_attr("")),
            Err("attribute `dtype` must be set, got \"\"".into())
        );
        assert_eq!(
            rel("cast_like", &[ty(&[2], F), ty(&[7], DType::I64)]),
            Ok("Tensor[(2), int64]".into())
        );
        assert_eq!(
            rel_with("full", &[ty(&[], I)], &shape_attrs(&[2, 3], "")),
            Ok("Tensor[(2, 3), int32]".into())
        );
        assert_eq!(
            rel_with("full", &[ty(&[], I)], &shape_attrs(&[2], "float16")),
            Ok("Tensor[(2), float16]".into())
        );
        assert_eq!(
            rel_with("full", &[ty(&[1], I)], &shape_attrs(&[2], "")),
            Err("the fill value must be a scalar, got `Tensor[(1), int32]`".into())
        );
        assert_eq!(
            rel("full_like", &[ty(&[2, 2], F), ty(&[], F)]),
            Ok("Tensor[(2, 2), float32]".into())
        );
        assert_eq!(
            rel_with("zeros", &[], &shape_attrs(&[1, 8], "float32")),
            Ok("Tensor[(1, 8), float32]".into())
        );
        assert_eq!(
            rel_with("ones", &[], &shape_attrs(&[-1], "float32")),
            Err("`shape` must not have negative dimensions, got -1".into())
        );
        let null_shape = attrs(&[
            ("shape", AttrValue::Null),
            ("dtype", AttrValue::Str("".into())),
        ]);
        assert!(rel_with("zeros", &[], &null_shape).is_err());
        assert_eq!(
            rel_with("broadcast_to", &[ty(&[5], F)], &shape_attrs(&[3, 5], "")),
            Ok("Tensor[(3, 5), float32]".into())
        );
        assert_eq!(
            rel_with("broadcast_to", &[ty(&[2], F)], &shape_attrs(&[3, 5], "")),
            Err("cannot broadcast `Tensor[(2), float32]` to shape (3, 5)".into())
        );
        assert!(
            rel_with(
                "broadcast_to",
                &[ty(&[2, 1, 5], F)],
                &shape_attrs(&[3, 5], "")
            )
            .is_err()
        );
        let any = tensor(vec![Dim::Any, Dim::Known(1)], I);
        assert_eq!(
            rel("broadcast_to_like", &[ty(&[1], I), any.clone()]),
            Ok("Tensor[(?, 1), int32]".into())
        );
        assert_eq!(
            rel_with("shape_of", &[any], &dtype_attr("int64")),
            Ok("Tensor[(2), int64]".into())
        );
        assert_eq!(
            rel_with("shape_of", &[ty(&[], F)], &dtype_attr("")),
            Ok("Tensor[(0), int32]".into())
        );
    }

    #[test]
    fn arithmetic_broadcasts() {
        let a = floats(F, &[2, 1], &[1.0, 2.0]);
        let b = floats(F, &[3], &[10.0, 20.0, 30.0]);
        assert_eq!(
            run_f("add", &[a.clone(), b.clone()]),
            (F, vec![2, 3], vec![11.0, 21.0, 31.0, 12.0, 22.0, 32.0])
        );
        assert_eq!(
            run_f("subtract", &[b, a]),
            (F, vec![2, 3], vec![9.0, 19.0, 29.0, 8.0, 18.0, 28.0])
        );
        // Size-0 dimensions broadcast with size-1 ones and give empty results.
        let empty = floats(F, &[0, 3], &[]);
        let row = floats(F, &[1, 3], &[1.0, 2.0, 3.0]);
        assert_eq!(
            run_f("multiply", &[empty.clone(), row]),
            (F, vec![0, 3], vec![])
        );
        assert_eq!(
            run_f("multiply", &[empty.clone(), floats(F, &[], &[2.0])]),
            (F, vec![0, 3], vec![])
        );
        assert_eq!(
            run("add", &[empty, floats(F, &[2, 3], &[0.0; 6])]),
            Err("cannot broadcast shapes (0, 3) and (2, 3)".into())
        );
        // Rank-0 scalars.
        let s = floats(F, &[], &[2.0]);
        assert_eq!(
            run_f("multiply", &[s.clone(), s.clone()]),
            (F, vec![], vec![4.0])
        );
        assert_eq!(
            run_f("divide", &[floats(F, &[2], &[1.0, -3.0]), s]),
            (F, vec![2], vec![0.5, -1.5])
        );
        assert_eq!(
            run("add", &[floats(F, &[1], &[1.0]), ints(I, &[1], &[1])]),
            Err("input dtypes differ: float32 and int32".into())
        );
    }

    #[test]
    fn integer_division_truncates_and_floors() {
        let x = ints(I, &[4], &[7, -7, 7, -7]);
        let y = ints(I, &[4], &[2, 2, -2, -2]);
        let both = [x, y];
        assert_eq!(run_i("divide", &both, I), [3, -3, -3, 3]);
        assert_eq!(run_i("trunc_divide", &both, I), [3, -3, -3, 3]);
        assert_eq!(run_i("mod", &both, I), [1, -1, 1, -1]);
        assert_eq!(run_i("trunc_mod", &both, I), [1, -1, 1, -1]);
        assert_eq!(run_i("floor_divide", &both, I), [3, -4, -4, 3]);
        assert_eq!(run_i("floor_mod", &both, I), [1, 1, -1, -1]);
        let zero = [ints(I, &[2], &[1, 2]), ints(I, &[], &[0])];
        for op in [
            "divide",
            "mod",
            "floor_divide",
            "floor_mod",
            "trunc_divide",
            "trunc_mod",
        ] {
            let what = if op.ends_with("mod") {
                "modulo"
            } else {
                "division"
            };
            assert_eq!(
                run(op, &zero),
                Err(format!("integer {what} by zero")),
                "{op}"
            );
        }
        // The overflowing quotient wraps as in numpy.
        let min = [ints(I, &[1], &[i32::MIN as i128]), ints(I, &[1], &[-1])];
        assert_eq!(run_i("divide", &min, I), [i32::MIN as i128]);
        assert_eq!(
            run_i(
                "floor_divide",
                &[ints(DType::U8, &[1], &[200]), ints(DType::U8, &[1], &[7])],
                DType::U8
            ),
            [28]
        );
    }

    #[test]
    fn float_division_and_remainders() {
        let x = floats(F, &[4], &[7.0, -7.0, 7.0, -7.0]);
        let y = floats(F, &[4], &[2.0, 2.0, -2.0, -2.0]);
        let both = [x, y];
        assert_eq!(run_f("divide", &both).2, [3.5, -3.5, -3.5, 3.5]);
        assert_eq!(run_f("mod", &both).2, [1.0, -1.0, 1.0, -1.0]);
        assert_eq!(run_f("floor_divide", &both).2, [3.0, -4.0, -4.0, 3.0]);
        assert_eq!(run_f("floor_mod", &both).2, [1.0, 1.0, -1.0, -1.0]);
        let by_zero = run_f(
            "divide",
            &[floats(F, &[3], &[1.0, -1.0, 0.0]), floats(F, &[], &[0.0])],
        );
        assert_eq!(by_zero.2[..2], [f64::INFINITY, f64::NEG_INFINITY]);
        assert!(by_zero.2[2].is_nan());
    }

    #[test]
    fn power_maximum_minimum() {
        let p = run_f(
            "power",
            &[
                floats(F, &[3], &[2.0, 4.0, 9.0]),
                floats(F, &[3], &[3.0, 0.5, -1.0]),
            ],
        );
        close(&p.2, &[8.0, 2.0, 1.0 / 9.0], 1e-7);
        assert_eq!(
            run_i(
                "power",
                &[ints(I, &[3], &[2, -3, 7]), ints(I, &[3], &[10, 3, 0])],
                I
            ),
            [1024, -27, 1]
        );
        assert_eq!(
            run_i(
                "power",
                &[ints(DType::I8, &[1], &[2]), ints(DType::I8, &[1], &[7])],
                DType::I8
            ),
            [-128]
        );
        assert!(run("power", &[ints(I, &[1], &[2]), ints(I, &[1], &[-1])]).is_err());
        let x = floats(F, &[3], &[1.0, f64::NAN, -2.0]);
        let y = floats(F, &[3], &[2.0, 0.0, -3.0]);
        let max = run_f("maximum", &[x.clone(), y.clone()]).2;
        assert_eq!((max[0], max[2]), (2.0, -2.0));
        assert!(max[1].is_nan());
        let min = run_f("minimum", &[x, y]).2;
        assert_eq!((min[0], min[2]), (1.0, -3.0));
        assert!(min[1].is_nan());
        assert_eq!(
            run_i("maximum", &[ints(I, &[2], &[3, -2]), ints(I, &[], &[0])], I),
            [3, 0]
        );
    }

    #[test]
    fn every_dtype_class() {
        for dtype in [
            DType::F16,
            DType::F32,
            DType::F64,
            DType::I8,
            DType::I16,
            DType::I32,
            DType::I64,
            DType::U8,
            DType::U16,
            DType::U32,
            DType::U64,
        ] {
            let a = ints(dtype, &[2], &[1, 2]);
            let b = ints(dtype, &[2], &[3, 2]);
            let sum = run("add", &[a.clone(), b.clone()]).unwrap();
            assert_eq!(
                (sum.dtype(), sum.to_i128_vec()),
                (dtype, vec![4, 4]),
                "{dtype}"
            );
            assert_eq!(
                run_b("less", &[a.clone(), b.clone()]),
                [true, false],
                "{dtype}"
            );
            assert_eq!(
                run_b("equal", &[a.clone(), b.clone()]),
                [false, true],
                "{dtype}"
            );
            let product = run("multiply", &[a.clone(), b]).unwrap();
            assert_eq!(product.to_i128_vec(), vec![3, 4], "{dtype}");
            let neg = run("negative", from_ref(&a)).unwrap();
            assert_eq!(neg.dtype(), dtype);
            let copy = run("copy", from_ref(&a)).unwrap();
            assert_eq!(copy.to_i128_vec(), vec![1, 2], "{dtype}");
            let ones = run("ones_like", &[a]).unwrap();
            assert_eq!(
                (ones.dtype(), ones.to_i128_vec()),
                (dtype, vec![1, 1]),
                "{dtype}"
            );
        }
        // Booleans compute as 0 and 1.
        let t = bools(&[2], &[true, false]);
        assert_eq!(run_b("add", &[t.clone(), t.clone()]), [true, false]);
        assert_eq!(
            run_b("greater", &[t.clone(), bools(&[], &[false])]),
            [true, false]
        );
        assert_eq!(run_b("zeros_like", &[t]), [false, false]);
        // float16 rounds its results.
        let h = run_f(
            "add",
            &[
                floats(DType::F16, &[1], &[0.1]),
                floats(DType::F16, &[1], &[0.2]),
            ],
        );
        assert_eq!(h.2, [0.2998046875]);
    }

    #[test]
    fn integers_wrap() {
        let i8s = |v: &[i128]| ints(DType::I8, &[v.len() as i64], v);
        assert_eq!(
            run_i("add", &[i8s(&[100, -100]), i8s(&[100, -100])], DType::I8),
            [-56, 56]
        );
        let u8s = |v: &[i128]| ints(DType::U8, &[v.len() as i64], v);
        assert_eq!(run_i("subtract", &[u8s(&[0]), u8s(&[1])], DType::U8), [255]);
        assert_eq!(run_i("negative", &[u8s(&[1])], DType::U8), [255]);
        let big = ints(DType::I64, &[1], &[i64::MAX as i128]);
        assert_eq!(
            run_i("multiply", &[big.clone(), big.clone()], DType::I64),
            [1]
        );
        assert_eq!(
            run_i(
                "abs",
                &[ints(DType::I64, &[1], &[i64::MIN as i128])],
                DType::I64
            ),
            [i64::MIN as i128]
        );
        let u64s = ints(DType::U64, &[2], &[u64::MAX as i128, 0]);
        assert_eq!(
            run_i(
                "add",
                &[u64s.clone(), ints(DType::U64, &[], &[1])],
                DType::U64
            ),
            [0, 1]
        );
        assert_eq!(
            run_b("greater", &[u64s, ints(DType::U64, &[], &[1])]),
            [true, false]
        );
    }

    #[test]
    fn bitwise_and_shifts() {
        let n = ints(I, &[3], &[12, -5, 0]);
        let m = ints(I, &[3], &[10, 3, -1]);
        assert_eq!(run_i("bitwise_and", &[n.clone(), m.clone()], I), [8, 3, 0]);
        assert_eq!(
            run_i("bitwise_or", &[n.clone(), m.clone()], I),
            [14, -5, -1]
        );
        assert_eq!(run_i("bitwise_xor", &[n.clone(), m], I), [6, -8, -1]);
        assert_eq!(run_i("bitwise_not", from_ref(&n), I), [-13, 4, -1]);
        assert_eq!(
            run_i("bitwise_not", &[ints(DType::U8, &[1], &[1])], DType::U8),
            [254]
        );
        assert_eq!(
            run_b("bitwise_not", &[bools(&[2], &[true, false])]),
            [false, true]
        );
        let t = bools(&[2], &[true, false]);
        assert_eq!(
            run_b("bitwise_xor", &[t.clone(), bools(&[], &[true])]),
            [false, true]
        );
        let two = ints(I, &[], &[2]);
        assert_eq!(
            run_i("left_shift", &[n.clone(), two.clone()], I),
            [48, -20, 0]
        );
        assert_eq!(run_i("right_shift", &[n, two], I), [3, -2, 0]);
        let by = ints(I, &[3], &[31, 32, -1]);
        assert_eq!(
            run_i("left_shift", &[ints(I, &[3], &[1, 1, 1]), by.clone()], I),
            [i32::MIN as i128, 0, 0]
        );
        assert_eq!(
            run_i("right_shift", &[ints(I, &[3], &[-8, 8, -1]), by], I),
            [-1, 0, -1]
        );
        let u8s = ints(DType::U8, &[1], &[200]);
        assert_eq!(
            run_i(
                "left_shift",
                &[u8s.clone(), ints(DType::U8, &[], &[1])],
                DType::U8
            ),
            [144]
        );
        assert_eq!(
            run_i("right_shift", &[u8s, ints(DType::U8, &[], &[3])], DType::U8),
            [25]
        );
        assert!(
            run(
                "bitwise_and",
                &[floats(F, &[1], &[1.0]), floats(F, &[1], &[1.0])]
            )
            .is_err()
        );
    }

    #[test]
    fn logic_and_comparisons() {
        let a = bools(&[4], &[true, true, false, false]);
        let b = bools(&[4], &[true, false, true, false]);
        let both = [a.clone(), b];
        assert_eq!(run_b("logical_and", &both), [true, false, false, false]);
        assert_eq!(run_b("logical_or", &both), [true, true, true, false]);
        assert_eq!(run_b("logical_xor", &both), [false, true, true, false]);
        assert_eq!(run_b("logical_not", &[a]), [false, false, true, true]);
        let x = floats(F, &[3], &[1.0, f64::NAN, 3.0]);
        let y = floats(F, &[3], &[2.0, f64::NAN, 3.0]);
        let xy = [x, y];
        assert_eq!(run_b("equal", &xy), [false, false, true]);
        assert_eq!(run_b("not_equal", &xy), [true, true, false]);
        assert_eq!(run_b("less", &xy), [true, false, false]);
        assert_eq!(run_b("less_equal", &xy), [true, false, true]);
        assert_eq!(run_b("greater", &xy), [false, false, false]);
        assert_eq!(run_b("greater_equal", &xy), [false, false, true]);
        let n = ints(I, &[2, 1], &[-1, 5]);
        let m = ints(I, &[2], &[0, 5]);
        let t = run("greater_equal", &[n, m]).unwrap();
        assert_eq!(t.shape(), [2, 2]);
        assert_eq!(t.to_bool_vec(), [false, false, true, true]);
    }

    #[test]
    fn unary_arithmetic_and_rounding() {
        let x = floats(F, &[7], &[0.5, 1.5, 2.5, -0.5, -1.5, 1.25, -0.75]);
        assert_eq!(
            run_f("round", from_ref(&x)).2,
            [0.0, 2.0, 2.0, -0.0, -2.0, 1.0, -1.0]
        );
        assert_eq!(
            run_f("floor", from_ref(&x)).2,
            [0.0, 1.0, 2.0, -1.0, -2.0, 1.0, -1.0]
        );
        assert_eq!(
            run_f("ceil", from_ref(&x)).2,
            [1.0, 2.0, 3.0, -0.0, -1.0, 2.0, -0.0]
        );
        assert_eq!(
            run_f("trunc", from_ref(&x)).2,
            [0.0, 1.0, 2.0, -0.0, -1.0, 1.0, -0.0]
        );
        assert_eq!(
            run_f("abs", from_ref(&x)).2,
            [0.5, 1.5, 2.5, 0.5, 1.5, 1.25, 0.75]
        );
        assert_eq!(
            run_f("negative", &[x]).2,
            [-0.5, -1.5, -2.5, 0.5, 1.5, -1.25, 0.75]
        );
        let n = ints(I, &[3], &[-7, 0, 3]);
        assert_eq!(run_i("round", from_ref(&n), I), [-7, 0, 3]);
        assert_eq!(run_i("floor", from_ref(&n), I), [-7, 0, 3]);
        assert_eq!(run_i("sign", from_ref(&n), I), [-1, 0, 1]);
        assert_eq!(run_i("abs", from_ref(&n), I), [7, 0, 3]);
        assert_eq!(run_i("negative", &[n], I), [7, 0, -3]);
        let s = run_f("sign", &[floats(F, &[4], &[-2.5, 0.0, 3.0, f64::NAN])]).2;
        assert_eq!(s[..3], [-1.0, 0.0, 1.0]);
        assert!(s[3].is_nan());
    }

    #[test]
    fn transcendental_functions() {
        let v = [0.5, 1.0, 2.0];
        let x = floats(DType::F64, &[3], &v);
        let check = |name: &str, f: fn(f64) -> f64| {
            let want: Vec<f64> = v.iter().map(|&x| f(x)).collect();
            close(&run_f(name, from_ref(&x)).2, &want, 1e-15);
        };
        check("exp", f64::exp);
        check("log", f64::ln);
        check("log2", f64::log2);
        check("log10", f64::log10);
        check("sqrt", f64::sqrt);
        check("rsqrt", |x| 1.0 / x.sqrt());
        check("sigmoid", |x| 1.0 / (1.0 + (-x).exp()));
        check("tanh", f64::tanh);
        check("sin", f64::sin);
        check("cos", f64::cos);
        check("tan", f64::tan);
        check("sinh", f64::sinh);
        check("cosh", f64::cosh);
        check("atan", f64::atan);
        check("asinh", f64::asinh);
        check("acosh", f64::acosh);
        check("fast_exp", f64::exp);
        check("fast_tanh", f64::tanh);
        let half = floats(DType::F64, &[1], &[0.5]);
        close(&run_f("asin", from_ref(&half)).2, &[0.5f64.asin()], 1e-15);
        close(&run_f("acos", from_ref(&half)).2, &[0.5f64.acos()], 1e-15);
        close(&run_f("atanh", &[half]).2, &[0.5f64.atanh()], 1e-15);
        // float32 results are the float64 results rounded.
        let e = run_f("exp", &[floats(F, &[1], &[1.0])]).2;
        assert_eq!(e, [f64::from(std::f32::consts::E)]);
        let l = run_f("log", &[floats(F, &[2], &[0.0, -1.0])]).2;
        assert_eq!(l[0], f64::NEG_INFINITY);
        assert!(l[1].is_nan());
        assert!(run("exp", &[ints(I, &[1], &[1])]).is_err());
    }

    #[test]
    fn erf_is_accurate() {
        // Reference values from Python's `math.erf`.
        let cases = [
            (0.0, 0.0),
            (1e-10, 1.1283791670955126e-10),
            (-0.1, -0.1124629160182849),
            (0.5, 0.5204998778130465),
            (1.0, 0.8427007929497149),
            (1.5, 0.9661051464753108),
            (2.0, 0.9953222650189527),
            (2.5, 0.999593047982555),
            (3.0, 0.9999779095030014),
            (-4.0, -0.9999999845827421),
            (5.5, 0.9999999999999927),
            (7.0, 1.0),
            (f64::INFINITY, 1.0),
        ];
        for (x, want) in cases {
            let got = erf(x);
            assert!(
                (got - want).abs() <= 2e-15 * want.abs().max(1e-300),
                "erf({x}) = {got}, want {want}"
            );
        }
        assert!(erf(f64::NAN).is_nan());
        let t = run_f("erf", &[floats(F, &[2], &[1.0, -2.0])]).2;
        close(&t, &[0.8427007929497149, -0.9953222650189527], 1e-7);
        assert_eq!(run_f("fast_erf", &[floats(F, &[1], &[1.0])]).2, t[..1]);
    }

    #[test]
    fn predicates() {
        let s = floats(
            F,
            &[6],
            &[1.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -2.0, 0.0],
        );
        assert_eq!(
            run_b("isnan", from_ref(&s)),
            [false, true, false, false, false, false]
        );
        assert_eq!(
            run_b("isinf", from_ref(&s)),
            [false, false, true, true, false, false]
        );
        assert_eq!(
            run_b("isfinite", &[s]),
            [true, false, false, false, true, true]
        );
        assert_eq!(run_b("isfinite", &[ints(I, &[1], &[7])]), [true]);
        assert_eq!(run_b("isnan", &[ints(I, &[], &[7])]), [false]);
    }

    #[test]
    fn where_and_clip() {
        let cond = bools(&[2, 1], &[true, false]);
        let x = floats(F, &[3], &[1.0, 2.0, 3.0]);
        let y = floats(F, &[], &[0.0]);
        assert_eq!(
            run_f("where", &[cond, x, y]),
            (F, vec![2, 3], vec![1.0, 2.0, 3.0, 0.0, 0.0, 0.0])
        );
        let picked = run_i(
            "where",
            &[
                bools(&[2], &[false, true]),
                ints(I, &[2], &[1, 2]),
                ints(I, &[2], &[3, 4]),
            ],
            I,
        );
        assert_eq!(picked, [3, 2]);
        assert!(
            run(
                "where",
                &[
                    bools(&[1], &[true]),
                    ints(I, &[1], &[1]),
                    floats(F, &[1], &[1.0])
                ]
            )
            .is_err()
        );
        let bounds = attrs(&[
            ("a_min", AttrValue::Float(-0.5)),
            ("a_max", AttrValue::Float(0.75)),
        ]);
        let v = floats(F, &[4], &[-2.0, 0.25, 1.0, f64::NAN]);
        let c = run_with("clip", &[v], &bounds).unwrap().to_f64_vec();
        assert_eq!(c[..3], [-0.5, 0.25, 0.75]);
        assert!(c[3].is_nan());
        let int_bounds = attrs(&[
            ("a_min", AttrValue::Float(-2.0)),
            ("a_max", AttrValue::Float(6.0)),
        ]);
        let c = run_with("clip", &[ints(I, &[3], &[-9, 3, 9])], &int_bounds).unwrap();
        assert_eq!((c.dtype(), c.to_i128_vec()), (I, vec![-2, 3, 6]));
    }

    #[test]
    fn casts() {
        let x = floats(F, &[4], &[1.7, -1.7, 0.0, 300.0]);
        let c = run_with("cast", from_ref(&x), &dtype_attr("int32")).unwrap();
        assert_eq!((c.dtype(), c.to_i128_vec()), (I, vec![1, -1, 0, 300]));
        let c = run_with("cast", from_ref(&x), &dtype_attr("bool")).unwrap();
        assert_eq!(c.to_bool_vec(), [true, true, false, true]);
        let c = run_with("cast", &[ints(I, &[2], &[300, -1])], &dtype_attr("uint8")).unwrap();
        assert_eq!(c.to_i128_vec(), [44, 255]);
        let c = run_with(
            "cast",
            &[bools(&[2], &[true, false])],
            &dtype_attr("float16"),
        )
        .unwrap();
        assert_eq!((c.dtype(), c.to_f64_vec()), (DType::F16, vec![1.0, 0.0]));
        let c = run_with(
            "cast",
            &[floats(DType::F64, &[1], &[0.1])],
            &dtype_attr("float32"),
        )
        .unwrap();
        assert_eq!(c.to_f64_vec(), [f64::from(0.1f32)]);
        let c = run("cast_like", &[x, ints(DType::I8, &[], &[0])]).unwrap();
        assert_eq!(
            (c.dtype(), c.to_i128_vec()),
            (DType::I8, vec![1, -1, 0, 127])
        );
    }

    #[test]
    fn creation() {
        let z = run_with("zeros", &[], &shape_attrs(&[1, 3], "float32")).unwrap();
        assert_eq!(
            (z.dtype(), z.shape(), z.to_f64_vec()),
            (F, &[1i64, 3][..], vec![0.0; 3])
        );
        let o = run_with("ones", &[], &shape_attrs(&[2], "int64")).unwrap();
        assert_eq!((o.dtype(), o.to_i128_vec()), (DType::I64, vec![1, 1]));
        let o = run_with("ones", &[], &shape_attrs(&[], "bool")).unwrap();
        assert_eq!((o.shape(), o.to_bool_vec()), (&[][..], vec![true]));
        let e = run_with("zeros", &[], &shape_attrs(&[0, 4], "float32")).unwrap();
        assert_eq!(e.num_elements(), 0);
        let f = run_with(
            "full",
            &[floats(F, &[], &[2.5])],
            &shape_attrs(&[2], "int32"),
        )
        .unwrap();
        assert_eq!((f.dtype(), f.to_i128_vec()), (I, vec![2, 2]));
        let f = run_with("full", &[floats(F, &[], &[2.5])], &shape_attrs(&[2], "")).unwrap();
        assert_eq!((f.dtype(), f.to_f64_vec()), (F, vec![2.5, 2.5]));
        let f = run(
            "full_like",
            &[ints(I, &[2, 1], &[5, 6]), floats(F, &[], &[-1.5])],
        )
        .unwrap();
        assert_eq!(
            (f.dtype(), f.shape(), f.to_i128_vec()),
            (I, &[2i64, 1][..], vec![-1, -1])
        );
        assert_eq!(
            run_f("zeros_like", &[floats(F, &[2], &[3.0, 4.0])]).2,
            [0.0, 0.0]
        );
    }

    #[test]
    fn broadcast_to_and_shapes() {
        let b = floats(F, &[3], &[1.0, 2.0, 3.0]);
        let t = run_with("broadcast_to", from_ref(&b), &shape_attrs(&[2, 3], "")).unwrap();
        assert_eq!(
            (t.shape(), t.to_f64_vec()),
            (&[2i64, 3][..], vec![1.0, 2.0, 3.0, 1.0, 2.0, 3.0])
        );
        assert_eq!(
            run_with("broadcast_to", from_ref(&b), &shape_attrs(&[2, 4], "")),
            Err("cannot broadcast shapes (3) and (2, 4)".into())
        );
        assert_eq!(
            run_with(
                "broadcast_to",
                &[floats(F, &[2, 1], &[1.0, 2.0])],
                &shape_attrs(&[2], "")
            ),
            Err("cannot broadcast shape (2, 1) to shape (2)".into())
        );
        let col = ints(I, &[2, 1], &[7, 8]);
        let t = run("broadcast_to_like", &[col, floats(F, &[2, 2], &[0.0; 4])]).unwrap();
        assert_eq!((t.dtype(), t.to_i128_vec()), (I, vec![7, 7, 8, 8]));
        let s = run_with(
            "shape_of",
            &[floats(F, &[2, 0, 5], &[])],
            &dtype_attr("int64"),
        )
        .unwrap();
        assert_eq!((s.dtype(), s.to_i128_vec()), (DType::I64, vec![2, 0, 5]));
        let s = run_with("shape_of", from_ref(&b), &dtype_attr("")).unwrap();
        assert_eq!((s.dtype(), s.to_i128_vec()), (I, vec![3]));
        let n = run_with("ndarray_size", &[b], &dtype_attr("int64")).unwrap();
        assert_eq!((n.shape(), n.to_i128_vec()), (&[][..], vec![3]));
    }
}
