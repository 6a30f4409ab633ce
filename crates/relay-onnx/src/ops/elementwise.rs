//! Elementwise operators: numpy-broadcasting arithmetic, activations, `Clip`, `Cast`.

use crate::attrs::Attrs;
use crate::builder::{Value, attr, finite, floats_of};
use crate::error::ConvertError;
use crate::graph::Graph;
use crate::proto::NodeProto;
use relay_runtime::DType;

/// The numpy broadcast of two shapes.
pub(crate) fn broadcast(a: &[i64], b: &[i64]) -> Result<Vec<i64>, ConvertError> {
    let rank = a.len().max(b.len());
    let at = |s: &[i64], i: usize| {
        if i < rank - s.len() {
            1
        } else {
            s[i - (rank - s.len())]
        }
    };
    (0..rank)
        .map(|i| {
            let (x, y) = (at(a, i), at(b, i));
            crate::symbolic::broadcast_dim(x, y).ok_or_else(|| {
                ConvertError::from(format!(
                    "shapes {a:?} and {b:?} do not broadcast ({x} against {y})"
                ))
            })
        })
        .collect()
}

/// `Add`, `Sub`, `Mul`, `Div`, `Pow` (two inputs) and `Max`, `Min`, `Sum` (any number),
/// folded left to right.
pub(super) fn variadic(g: &mut Graph, node: &NodeProto) -> Result<Value, ConvertError> {
    let op = match node.op_type.as_str() {
        "Add" | "Sum" => "add",
        "Sub" => "subtract",
        "Mul" => "multiply",
        "Div" => "divide",
        "Pow" => "power",
        "Max" => "maximum",
        // `fmod` = 0: the sign of the divisor (integers only); 1: of the dividend (C's fmod).
        "Mod" if Attrs(&node.attribute).int("fmod", 0)? == 0 => "floor_mod",
        "Mod" => "trunc_mod",
        _ => "minimum",
    };
    let mut acc = g.input(node, 0)?;
    for i in 1..node.input.len() {
        let x = g.input(node, i)?;
        let x = if node.op_type == "Pow" && x.dtype != acc.dtype {
            // Pow's exponent may have another type: computed in the base's.
            g.call("cast", &[&x], &[("dtype", attr::str(acc.dtype))])?
        } else if x.dtype != acc.dtype {
            return Err(format!("operands of {} and {}", acc.dtype, x.dtype).into());
        } else {
            x
        };
        broadcast(&acc.shape, &x.shape)?;
        acc = g.call(op, &[&acc, &x], &[])?;
    }
    Ok(acc)
}

/// The one-input activations and math functions.
pub(super) fn unary(g: &mut Graph, node: &NodeProto) -> Result<Value, ConvertError> {
    let x = g.input(node, 0)?;
    let f = match node.op_type.as_str() {
        "Relu" => "nn.relu",
        "Reciprocal" => {
            let one = g.float(1.0, x.dtype)?;
            return g.call("divide", &[&one, &x], &[]);
        }
        op => match op {
            "Sigmoid" => "sigmoid",
            "Tanh" => "tanh",
            "Erf" => "erf",
            "Exp" => "exp",
            "Log" => "log",
            "Sqrt" => "sqrt",
            "Neg" => "negative",
            "Abs" => "abs",
            "Floor" => "floor",
            // Halves to even, as ONNX's Round.
            "Round" => "round",
            "Sign" => "sign",
            "Sin" => "sin",
            "Cos" => "cos",
            "Tan" => "tan",
            "Asin" => "asin",
            "Acos" => "acos",
            "Atan" => "atan",
            "Sinh" => "sinh",
            "Cosh" => "cosh",
            "Asinh" => "asinh",
            "Acosh" => "acosh",
            "Atanh" => "atanh",
            _ => "ceil",
        },
    };
    g.call(f, &[&x], &[])
}

/// `Clip`: bounds from attributes (opset < 11) or constant inputs, either absent.
pub(super) fn clip(g: &mut Graph, node: &NodeProto, a: &Attrs<'_>) -> Result<Value, ConvertError> {
    let x = g.input(node, 0)?;
    let (lo, hi) = if g.opset < 11 {
        (
            f64::from(a.float("min", f32::NEG_INFINITY)?),
            f64::from(a.float("max", f32::INFINITY)?),
        )
    } else {
        let bound = |i: usize, default: f64| -> Result<f64, ConvertError> {
            match g.optional_input(node, i)? {
                None => Ok(default),
                Some(v) => floats_of(&v)
                    .and_then(|f| f.first().copied())
                    .ok_or_else(|| ConvertError::from(format!("bound {i} is not a constant"))),
            }
        };
        (bound(1, f64::NEG_INFINITY)?, bound(2, f64::INFINITY)?)
    };
    if !x.dtype.is_float() {
        // Integers: `minimum`/`maximum` with the bounds that are given, as literals.
        let mut y = x.clone();
        if hi.is_finite() {
            let hi = g.int(hi as i64, x.dtype)?;
            y = g.call("minimum", &[&y, &hi], &[])?;
        }
        if lo.is_finite() {
            let lo = g.int(lo as i64, x.dtype)?;
            y = g.call("maximum", &[&y, &lo], &[])?;
        }
        return Ok(y);
    }
    clip_to(g, &x, lo, hi)
}

/// `x` clipped to `[lo, hi]` (an infinite bound is the dtype's largest finite value).
pub(crate) fn clip_to(g: &mut Graph, x: &Value, lo: f64, hi: f64) -> Result<Value, ConvertError> {
    let bound = |v: f64| attr::float(finite(v, x.dtype));
    g.call("clip", &[x], &[("a_min", bound(lo)), ("a_max", bound(hi))])
}

/// `Cast` to attribute `to`.
pub(super) fn cast(g: &mut Graph, node: &NodeProto, a: &Attrs<'_>) -> Result<Value, ConvertError> {
    let x = g.input(node, 0)?;
    let to = a.int("to", 0)?;
    let dtype = crate::tensor::dtype(to as i32)
        .ok_or_else(|| ConvertError::from(format!("Cast to element type {to}")))?;
    cast_to(g, &x, dtype, a)
}

/// `CastLike`: `Cast` to the element type of input 1.
pub(super) fn cast_like(
    g: &mut Graph,
    node: &NodeProto,
    a: &Attrs<'_>,
) -> Result<Value, ConvertError> {
    let (x, like) = (g.input(node, 0)?, g.input(node, 1)?);
    cast_to(g, &x, like.dtype, a)
}

/// `x` cast to `dtype`. To an 8-bit float, `saturate` (opset 19, default 1) clamps to the
/// format's largest finite value first, infinities included, where Relay's `cast` (as
/// `saturate = 0`) gives infinity or NaN; NaN stays NaN either way.
fn cast_to(g: &mut Graph, x: &Value, dtype: DType, a: &Attrs<'_>) -> Result<Value, ConvertError> {
    let float8 = dtype.bits == 8 && dtype.minifloat().is_some();
    let mut y = x.clone();
    if float8 && a.int("saturate", 1)? != 0 && x.dtype.is_float() {
        // Clamped in a type `clip` computes in: the source, or float32 for a narrow one.
        if x.dtype.minifloat().is_some() {
            y = g.call("cast", &[&y], &[("dtype", attr::str(DType::F32))])?;
        }
        let max = dtype.minifloat().map_or(0.0, |f| f.max_finite());
        y = clip_to(g, &y, -max, max)?;
    }
    g.call("cast", &[&y], &[("dtype", attr::str(dtype))])
}

/// The comparisons (`Equal`, `Less`, ...) and logic (`And`, `Or`, `Xor`, `Not`): `bool`
/// results, numpy broadcasting.
pub(super) fn predicate(g: &mut Graph, node: &NodeProto) -> Result<Value, ConvertError> {
    let x = g.input(node, 0)?;
    if node.op_type == "Not" {
        return g.call("logical_not", &[&x], &[]);
    }
    let y = g.input(node, 1)?;
    if x.dtype != y.dtype {
        return Err(format!("operands of {} and {}", x.dtype, y.dtype).into());
    }
    let op = match node.op_type.as_str() {
        "Equal" => "equal",
        "Less" => "less",
        "LessOrEqual" => "less_equal",
        "Greater" => "greater",
        "GreaterOrEqual" => "greater_equal",
        "And" => "logical_and",
        "Or" => "logical_or",
        _ => "logical_xor",
    };
    broadcast(&x.shape, &y.shape)?;
    g.call(op, &[&x, &y], &[])
}

/// `IsNaN(x)`, and `IsInf(x)` of either sign or only the ones `detect_positive` and
/// `detect_negative` keep: boolean tensors of `x`'s shape (PyTorch's exporters write
/// `scaled_dot_product_attention`'s masked softmax as `Where(IsNaN(s), 0, s)`).
pub(super) fn float_class(
    g: &mut Graph,
    node: &NodeProto,
    a: &Attrs<'_>,
) -> Result<Value, ConvertError> {
    let x = g.input(node, 0)?;
    if !x.dtype.is_float() {
        return Err(format!("{} of {}", node.op_type, x.dtype).into());
    }
    if node.op_type == "IsNaN" {
        return g.call("isnan", &[&x], &[]);
    }
    let inf = g.call("isinf", &[&x], &[])?;
    let sign = match (
        a.int("detect_positive", 1)? != 0,
        a.int("detect_negative", 1)? != 0,
    ) {
        (true, true) => return Ok(inf),
        (true, false) => "greater",
        (false, true) => "less",
        // Neither sign: false everywhere.
        (false, false) => {
            let nan = g.call("isnan", &[&x], &[])?;
            return g.call("logical_and", &[&inf, &nan], &[]);
        }
    };
    let zero = g.float(0.0, x.dtype)?;
    let signed = g.call(sign, &[&x, &zero], &[])?;
    g.call("logical_and", &[&inf, &signed], &[])
}

/// `BitwiseAnd`, `BitwiseOr`, `BitwiseXor` (broadcasting) and `BitwiseNot` of integers, and
/// `BitShift` (`direction` LEFT or RIGHT; a right shift of unsigned integers is logical).
pub(super) fn bitwise(
    g: &mut Graph,
    node: &NodeProto,
    a: &Attrs<'_>,
) -> Result<Value, ConvertError> {
    let x = g.input(node, 0)?;
    if !x.dtype.is_int() {
        return Err(format!("{} of {}", node.op_type, x.dtype).into());
    }
    if node.op_type == "BitwiseNot" {
        return g.call("bitwise_not", &[&x], &[]);
    }
    let y = g.input(node, 1)?;
    if x.dtype != y.dtype {
        return Err(format!("operands of {} and {}", x.dtype, y.dtype).into());
    }
    let op = match node.op_type.as_str() {
        "BitwiseAnd" => "bitwise_and",
        "BitwiseOr" => "bitwise_or",
        "BitwiseXor" => "bitwise_xor",
        _ => match a.string("direction", "")?.as_str() {
            "LEFT" => "left_shift",
            "RIGHT" => "right_shift",
            other => return Err(format!("BitShift direction `{other}` (LEFT or RIGHT)").into()),
        },
    };
    broadcast(&x.shape, &y.shape)?;
    g.call(op, &[&x, &y], &[])
}

/// `Where(cond, x, y)`, broadcasting all three.
pub(super) fn select(g: &mut Graph, node: &NodeProto) -> Result<Value, ConvertError> {
    let (c, x, y) = (g.input(node, 0)?, g.input(node, 1)?, g.input(node, 2)?);
    if c.dtype != relay_runtime::DType::BOOL || x.dtype != y.dtype {
        return Err(format!("Where of {}, {} and {}", c.dtype, x.dtype, y.dtype).into());
    }
    broadcast(&broadcast(&c.shape, &x.shape)?, &y.shape)?;
    g.call("where", &[&c, &x, &y], &[])
}

/// `Mean` of any number of inputs: their sum divided by their count.
pub(super) fn mean(g: &mut Graph, node: &NodeProto) -> Result<Value, ConvertError> {
    let mut sum = NodeProto {
        op_type: "Sum".into(),
        ..node.clone()
    };
    sum.output.clear();
    let total = variadic(g, &sum)?;
    if !total.dtype.is_float() {
        return Err(format!("Mean of {}", total.dtype).into());
    }
    let n = g.float(node.input.len() as f64, total.dtype)?;
    g.call("divide", &[&total, &n], &[])
}

/// `Dropout` in inference (or training with a ratio of 0): the identity, and a mask of
/// every element kept when it is asked for. Random dropping in training is not supported.
pub(super) fn dropout(g: &mut Graph, node: &NodeProto) -> Result<Vec<Value>, ConvertError> {
    let training = match g.optional_input(node, 2)? {
        None => false,
        Some(t) => floats_of(&t).is_none_or(|v| v.iter().any(|&b| b != 0.0)),
    };
    // Training with a ratio of 0 drops nothing either.
    let ratio = match g.optional_input(node, 1)? {
        None => Some(0.5),
        Some(r) => floats_of(&r).and_then(|v| v.first().copied()),
    };
    if training && ratio != Some(0.0) {
        return Err("Dropout in training mode (random) is not supported".into());
    }
    let x = g.input(node, 0)?;
    if node.output.get(1).is_none_or(|o| o.is_empty()) {
        return Ok(vec![x]);
    }
    // The mask: every element kept.
    let mask = g.call(
        "ones",
        &[],
        &[
            ("shape", attr::ints(&x.shape)),
            ("dtype", attr::str(DType::BOOL)),
        ],
    )?;
    Ok(vec![x, mask])
}
