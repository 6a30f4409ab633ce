//! Elementwise operators: broadcasting binary arithmetic, logic and comparisons, unary math,
//! selection, and the casting, clipping and tensor-creation operators (reference §14.1–§14.2).

use relay_ir::{AttrDefault as D, AttrField, AttrKind as K, OpSchema};

use crate::{dtype, field, op, plain, required, required_nullable};

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
    // Broadcasting binary arithmetic.
    plain("add", BINARY),
    plain("subtract", BINARY),
    plain("multiply", BINARY),
    plain("divide", BINARY),
    plain("power", BINARY),
    plain("maximum", BINARY),
    plain("minimum", BINARY),
    plain("mod", BINARY),
    plain("floor_divide", BINARY),
    plain("floor_mod", BINARY),
    plain("trunc_divide", BINARY),
    plain("trunc_mod", BINARY),
    // Broadcasting binary logic and bitwise operators.
    plain("logical_and", BINARY),
    plain("logical_or", BINARY),
    plain("logical_xor", BINARY),
    plain("bitwise_and", BINARY),
    plain("bitwise_or", BINARY),
    plain("bitwise_xor", BINARY),
    plain("left_shift", BINARY),
    plain("right_shift", BINARY),
    // Comparisons, with a boolean result.
    plain("equal", BINARY),
    plain("not_equal", BINARY),
    plain("less", BINARY),
    plain("less_equal", BINARY),
    plain("greater", BINARY),
    plain("greater_equal", BINARY),
    // Unary arithmetic.
    plain("negative", UNARY),
    plain("abs", UNARY),
    plain("sign", UNARY),
    // Exponentials, logarithms and roots.
    plain("exp", UNARY),
    plain("log", UNARY),
    plain("log2", UNARY),
    plain("log10", UNARY),
    plain("sqrt", UNARY),
    plain("rsqrt", UNARY),
    plain("erf", UNARY),
    // Activations that live at the top level rather than under `nn.`.
    plain("sigmoid", UNARY),
    plain("tanh", UNARY),
    // Trigonometric and hyperbolic functions.
    plain("sin", UNARY),
    plain("cos", UNARY),
    plain("tan", UNARY),
    plain("sinh", UNARY),
    plain("cosh", UNARY),
    plain("asin", UNARY),
    plain("acos", UNARY),
    plain("atan", UNARY),
    plain("asinh", UNARY),
    plain("acosh", UNARY),
    plain("atanh", UNARY),
    // Rounding.
    plain("ceil", UNARY),
    plain("floor", UNARY),
    plain("round", UNARY),
    plain("trunc", UNARY),
    // Predicates.
    plain("isnan", UNARY),
    plain("isinf", UNARY),
    plain("isfinite", UNARY),
    // Logical and bitwise negation.
    plain("logical_not", UNARY),
    plain("bitwise_not", UNARY),
    // Copies and constant-filled tensors shaped like the input.
    plain("copy", UNARY),
    plain("zeros_like", UNARY),
    plain("ones_like", UNARY),
    // Fast approximations.
    plain("fast_exp", UNARY),
    plain("fast_tanh", UNARY),
    plain("fast_erf", UNARY),
    // Selection and operators shaped or typed like a second input.
    plain("where", &["condition", "x", "y"]),
    plain("full_like", &["data", "fill_value"]),
    plain("cast_like", &["data", "dtype_like"]),
    plain("broadcast_to_like", &["data", "like"]),
    plain("collapse_sum_like", &["data", "like"]),
    plain("argwhere", &["condition"]),
    // Casting and clipping.
    op("cast", UNARY, "relay.attrs.CastAttrs", CAST_ATTRS),
    op("reinterpret", UNARY, "relay.attrs.CastAttrs", CAST_ATTRS),
    op(
        "clip",
        UNARY,
        "relay.attrs.ClipAttrs",
        &[required("a_min", K::Float), required("a_max", K::Float)],
    ),
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
    op("zeros", &[], "relay.attrs.InitOpAttrs", INIT_OP_ATTRS),
    op("ones", &[], "relay.attrs.InitOpAttrs", INIT_OP_ATTRS),
    op(
        "full",
        &["fill_value"],
        "relay.attrs.InitOpAttrs",
        INIT_OP_ATTRS,
    ),
    op(
        "broadcast_to",
        UNARY,
        "relay.attrs.InitOpAttrs",
        INIT_OP_ATTRS,
    ),
    // `arange` duplicates its inputs as `Expr`-valued attributes, which TVM prints as meta
    // references.
    op(
        "arange",
        &["start", "stop", "step"],
        "relay.attrs.ArangeAttrs",
        &[
            required("start", K::Any),
            required("stop", K::Any),
            required("step", K::Any),
            required("dtype", K::DType),
        ],
    ),
    op(
        "one_hot",
        &["indices", "on_value", "off_value"],
        "relay.attrs.OneHotAttrs",
        ONE_HOT_ATTRS,
    ),
    // Shape queries.
    op(
        "shape_of",
        UNARY,
        "relay.attrs.ShapeOfAttrs",
        SHAPE_OF_ATTRS,
    ),
    op(
        "ndarray_size",
        UNARY,
        "relay.attrs.NdarraySizeAttrs",
        &[dtype("dtype")],
    ),
];
