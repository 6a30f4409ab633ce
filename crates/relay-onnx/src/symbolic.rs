//! Dynamic dimensions. A dimension the import cannot know — a `dim_param` that no
//! `--input-shape` fixes, an unknown one, or one computed from those — is a *symbol* in a
//! value's shape: a negative number, printed `?` in the Relay text, which the VM then runs
//! at whatever size the inputs have. Every dimension from one `dim_param` name is one symbol
//! (`batch` here is `batch` there), so a reshape can tell that a dimension is the input's
//! own and write Relay's `0` (copy it) rather than a second `-1`; [`ANY`] is a dimension
//! known to be dynamic and equal to nothing else (a product, a sum).
//!
//! Small integer vectors computed from shapes (`Shape` → `Gather` → `Concat`, the
//! exporters' way of writing `x.view(x.size(0), -1)`) keep their elements here too, symbols
//! included ([`crate::builder::Value::elems`]), so that the `Reshape` they feed stays a static
//! `reshape` with `0` and `-1` codes; an element that turns out static is a constant, and
//! the shape arithmetic folds as before.

use crate::error::ConvertError;
use crate::proto::NodeProto;

/// A dynamic dimension equal to no other.
pub(crate) const ANY: i64 = i64::MIN / 2;

/// The symbol of the `k`-th named dynamic dimension (a `dim_param`).
pub(crate) fn named(k: usize) -> i64 {
    ANY - 1 - k as i64
}

/// Whether shape-vector element `e` is a symbol (a dynamic dimension) rather than a number.
pub(crate) fn is_symbol(e: i64) -> bool {
    e <= ANY
}

/// Whether a shape has a dynamic dimension.
pub(crate) fn is_dynamic(shape: &[i64]) -> bool {
    shape.iter().any(|&d| d < 0)
}

/// Whether dimensions `a` and `b` are known to be equal: the same number, or the same named
/// symbol.
pub(crate) fn same(a: i64, b: i64) -> bool {
    a == b && a != ANY
}

/// The product of `dims`: [`ANY`] when one is dynamic.
pub(crate) fn product(dims: &[i64]) -> i64 {
    if is_dynamic(dims) {
        ANY
    } else {
        dims.iter().product()
    }
}

/// The numpy broadcast of dimensions `x` and `y`: a dynamic dimension against a static one
/// other than 1 is that one (it must be, at run time), two different dynamic ones are
/// [`ANY`].
pub(crate) fn broadcast_dim(x: i64, y: i64) -> Option<i64> {
    match (x, y) {
        _ if x == y || y == 1 => Some(x),
        (1, _) => Some(y),
        _ if x < 0 && y < 0 => Some(ANY),
        _ if x < 0 => Some(y),
        _ if y < 0 => Some(x),
        _ => None,
    }
}

/// Relay `reshape` codes taking a tensor of shape `from` to shape `to` (some dimensions
/// dynamic): a static dimension as itself; a dynamic one as `0` when it is the input's
/// dimension at the same position, else as the one `-1`. `None` when `to` has two dynamic
/// dimensions that are not the input's in place.
pub(crate) fn newshape(from: &[i64], to: &[i64]) -> Option<Vec<i64>> {
    let mut inferred = false;
    to.iter()
        .enumerate()
        .map(|(i, &d)| match d {
            d if d >= 0 => Some(d),
            d if from.get(i).is_some_and(|&f| same(f, d)) => Some(0),
            _ if !std::mem::replace(&mut inferred, true) => Some(-1),
            _ => None,
        })
        .collect()
}

/// The shape ONNX `Reshape` spec `spec` (numbers, `0` = the input's dimension unless
/// `allow_zero`, one `-1` = what is left, and symbols) gives `from`: the `-1` is static when
/// the symbols of both sides cancel, the remaining one symbol when one is left over, else
/// [`ANY`].
pub(crate) fn resolve(
    from: &[i64],
    spec: &[i64],
    allow_zero: bool,
) -> Result<Vec<i64>, ConvertError> {
    let mut to: Vec<i64> = spec
        .iter()
        .enumerate()
        .map(|(i, &d)| match d {
            0 if !allow_zero => from.get(i).copied().unwrap_or(0),
            d => d,
        })
        .collect();
    let Some(at) = to.iter().position(|&d| d == -1) else {
        return Ok(to);
    };
    if to.iter().filter(|&&d| d == -1).count() > 1 {
        return Err(format!("shape {spec:?} has more than one -1").into());
    }
    // What of `from` the other dimensions of `to` do not account for.
    let mut left: Vec<i64> = from.iter().copied().filter(|&d| d < 0).collect();
    let mut ratio = (from.iter().filter(|&&d| d >= 0).product::<i64>(), 1i64);
    for (i, &d) in to.iter().enumerate() {
        if i == at {
            continue;
        }
        if d >= 0 {
            ratio.1 = ratio.1.saturating_mul(d);
        } else if let Some(k) = left.iter().position(|&s| same(s, d)) {
            left.remove(k);
        } else {
            to[at] = ANY;
            return Ok(to);
        }
    }
    to[at] = match left.as_slice() {
        [] if ratio.1 > 0 && ratio.0 % ratio.1 == 0 => ratio.0 / ratio.1,
        [] => return Err(format!("shape {spec:?} for the {} elements", ratio.0).into()),
        [one] if ratio.0 == ratio.1 => *one,
        _ => ANY,
    };
    Ok(to)
}

/// Whether `node` (whose first input has rank `rank`) converts inputs with dynamic
/// dimensions (its conversion reads no dynamic dimension as a number), and which:
/// `Some(true)` any dimension, `Some(false)` the first one only (a batch: the 1-D and 2-D
/// layers, whose window arithmetic needs the others).
pub(crate) fn accepts_dynamic(node: &NodeProto, rank: usize) -> Option<bool> {
    let second_output = node.output.get(1).is_some_and(|o| !o.is_empty());
    match node.op_type.as_str() {
        "Add" | "Sub" | "Mul" | "Div" | "Pow" | "Max" | "Min" | "Sum" | "Mod" | "Mean" | "Relu"
        | "Sigmoid" | "Tanh" | "Erf" | "Exp" | "Log" | "Sqrt" | "Neg" | "Abs" | "Floor"
        | "Ceil" | "Reciprocal" | "Sign" | "Sin" | "Cos" | "Tan" | "Round" | "Identity"
        | "Equal" | "Less" | "LessOrEqual" | "Greater" | "GreaterOrEqual" | "And" | "Or"
        | "Xor" | "Not" | "Where" | "LeakyRelu" | "Elu" | "Selu" | "HardSigmoid" | "HardSwish"
        | "Softsign" | "Softplus" | "Gelu" | "Clip" | "Cast" | "CastLike" | "Shape" | "Reshape"
        | "Flatten" | "Transpose" | "Unsqueeze" | "Squeeze" | "Concat" | "Gather" | "Slice"
        | "Split" | "Softmax" | "LogSoftmax" | "MatMul" | "Gemm" | "LayerNormalization"
        | "ArgMax" | "ArgMin" | "ReduceMean" | "ReduceSum" | "ReduceMax" | "ReduceMin"
        | "ReduceProd" | "ReduceL1" | "ReduceL2" | "ReduceSumSquare" | "ReduceLogSum"
        | "ReduceLogSumExp" | "IsNaN" | "IsInf" | "Asin" | "Acos" | "Atan" | "Sinh" | "Cosh"
        | "Asinh" | "Acosh" | "Atanh" | "BitwiseAnd" | "BitwiseOr" | "BitwiseXor"
        | "BitwiseNot" | "BitShift" | "Celu" | "Mish" | "ThresholdedRelu" | "Shrink"
        | "SequenceInsert" | "ConcatFromSequence" | "Range" | "ConstantOfShape" | "Expand"
        | "Tile" | "NonZero" | "GatherND" => Some(true),
        "Dropout" if !second_output => Some(true),
        "Conv" | "MaxPool" | "AveragePool" | "BatchNormalization" if rank == 5 || second_output => {
            None
        }
        "Conv"
        | "MaxPool"
        | "AveragePool"
        | "GlobalAveragePool"
        | "GlobalMaxPool"
        | "BatchNormalization"
        | "InstanceNormalization"
        | "PRelu" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const B: i64 = ANY - 1;
    const S: i64 = ANY - 2;

    #[test]
    fn reshape_codes_copy_dimensions_in_place_and_infer_one() {
        assert_eq!(
            newshape(&[B, S, 768], &[B, S, 12, 64]),
            Some(vec![0, 0, 12, 64])
        );
        assert_eq!(newshape(&[B, 512, 1, 1], &[ANY, 512]), Some(vec![-1, 512]));
        assert_eq!(newshape(&[B, S], &[1, B, S]), None);
        assert_eq!(newshape(&[2, 3], &[6]), Some(vec![6]));
    }

    #[test]
    fn reshape_specs_resolve_symbolically() {
        assert_eq!(
            resolve(&[B, S, 768], &[B, S, -1, 64], false),
            Ok(vec![B, S, 12, 64])
        );
        assert_eq!(
            resolve(&[B, S, 12, 64], &[0, 0, -1], false),
            Ok(vec![B, S, 768])
        );
        assert_eq!(
            resolve(&[B, S, 12, 64], &[B, -1, 768], false),
            Ok(vec![B, S, 768])
        );
        assert_eq!(
            resolve(&[B, S, 12, 64], &[-1, 64], false),
            Ok(vec![ANY, 64])
        );
        assert_eq!(resolve(&[2, 3, 4], &[-1, 4], false), Ok(vec![6, 4]));
        assert!(resolve(&[2, 3, 4], &[-1, 5], false).is_err());
        assert!(resolve(&[B, 4], &[-1, -1], false).is_err());
    }

    #[test]
    fn dynamic_dimensions_broadcast_to_the_static_ones() {
        assert_eq!(broadcast_dim(B, 1), Some(B));
        assert_eq!(broadcast_dim(B, 7), Some(7));
        assert_eq!(broadcast_dim(B, S), Some(ANY));
        assert_eq!(broadcast_dim(B, B), Some(B));
        assert_eq!(broadcast_dim(3, 4), None);
    }
}
