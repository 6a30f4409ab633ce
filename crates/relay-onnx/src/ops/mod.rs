//! ONNX operators as Relay calls, by family: elementwise arithmetic and activations
//! ([`elementwise`]), neural-network layers ([`nn`]), shapes and layout ([`shape`]), and the
//! others, one file each. A converter reads its node's inputs from the [`Graph`] and writes
//! calls with the typed builder it dereferences to ([`crate::builder`]).

mod activation;
mod control;
mod conv3d;
mod dynamic;
mod elementwise;
mod index;
mod nn;
mod norm;
mod pool_indices;
mod resample;
mod rnn;
mod sequence;
mod shape;
mod slice;

use crate::attrs::Attrs;
use crate::builder::{Value, attr};
use crate::error::ConvertError;
use crate::graph::Graph;
use crate::proto::NodeProto;

/// Whether inputs `inputs` of `node` are known at import (constants).
fn known(g: &Graph, node: &NodeProto, inputs: &[usize]) -> bool {
    inputs
        .iter()
        .all(|&i| g.input(node, i).is_ok_and(|v| v.konst.is_some()))
}

/// Whether `node`'s data (its first input) has a dynamic dimension.
fn dynamic_data(g: &Graph, node: &NodeProto) -> bool {
    g.input(node, 0)
        .is_ok_and(|v| crate::symbolic::is_dynamic(&v.shape))
}

/// The values `node` computes (one per output, in order).
pub(crate) fn convert(g: &mut Graph, node: &NodeProto) -> Result<Vec<Value>, ConvertError> {
    let a = Attrs(&node.attribute);
    let one = |v: Value| Ok(vec![v]);
    match node.op_type.as_str() {
        "Add" | "Sub" | "Mul" | "Div" | "Pow" | "Max" | "Min" | "Sum" | "Mod" => {
            one(elementwise::variadic(g, node)?)
        }
        "Relu" | "Sigmoid" | "Tanh" | "Erf" | "Exp" | "Log" | "Sqrt" | "Neg" | "Abs" | "Floor"
        | "Ceil" | "Reciprocal" | "Sign" | "Sin" | "Cos" | "Tan" | "Round" | "Asin" | "Acos"
        | "Atan" | "Sinh" | "Cosh" | "Asinh" | "Acosh" | "Atanh" => {
            one(elementwise::unary(g, node)?)
        }
        "IsNaN" | "IsInf" => one(elementwise::float_class(g, node, &a)?),
        "BitwiseAnd" | "BitwiseOr" | "BitwiseXor" | "BitwiseNot" | "BitShift" => {
            one(elementwise::bitwise(g, node, &a)?)
        }
        "Trilu" => one(index::trilu(g, node, &a)?),
        "ScatterND" => one(index::scatter_nd(g, node, &a)?),
        "EyeLike" => one(index::eye_like(g, node, &a)?),
        "Identity" => one(g.input(node, 0)?),
        "SequenceEmpty" => one(sequence::empty(g, node, &a)?),
        "SequenceInsert" => one(sequence::insert(g, node)?),
        "ConcatFromSequence" => one(sequence::concat(g, node, &a)?),
        "Dropout" => elementwise::dropout(g, node),
        "Mean" => one(elementwise::mean(g, node)?),
        "Equal" | "Less" | "LessOrEqual" | "Greater" | "GreaterOrEqual" | "And" | "Or" | "Xor"
        | "Not" => one(elementwise::predicate(g, node)?),
        "Where" => one(elementwise::select(g, node)?),
        "LeakyRelu" | "PRelu" | "Elu" | "Selu" | "HardSigmoid" | "HardSwish" | "Softsign"
        | "Softplus" | "Gelu" | "Celu" | "Mish" | "ThresholdedRelu" | "Shrink" => {
            one(activation::activation(g, node, &a)?)
        }
        "Slice" => one(slice::slice(g, node, &a)?),
        "Split" => slice::split(g, node, &a),
        "LSTM" => rnn::lstm(g, node, &a),
        "GRU" => rnn::gru(g, node, &a),
        "RNN" => rnn::rnn(g, node, &a),
        "If" => control::if_(g, node),
        "InstanceNormalization" => one(norm::instance_norm(g, node, &a)?),
        "LRN" => one(norm::lrn(g, node, &a)?),
        "Resize" => one(resample::resize(g, node, &a)?),
        "Upsample" => one(resample::upsample(g, node, &a)?),
        "DepthToSpace" | "SpaceToDepth" => one(resample::depth_space(g, node, &a)?),
        "OneHot" => one(index::one_hot(g, node, &a)?),
        "CumSum" => one(index::cumsum(g, node, &a)?),
        "Einsum" => one(index::einsum(g, node, &a)?),
        "Loop" => control::loop_(g, node),
        "Scan" => control::scan(g, node, &a),
        "Pad" => one(slice::pad(g, node, &a)?),
        "Tile" if known(g, node, &[1]) && !dynamic_data(g, node) => one(slice::tile(g, node)?),
        "Tile" => one(dynamic::tile(g, node)?),
        "Range" if !known(g, node, &[0, 1, 2]) => one(dynamic::range(g, node)?),
        "ConstantOfShape" if !known(g, node, &[0]) => one(dynamic::constant_of_shape(g, node, &a)?),
        "Range" | "ConstantOfShape" | "Size" => one(slice::known(g, node, &a)?),
        "NonZero" => one(dynamic::non_zero(g, node)?),
        "ArgMax" | "ArgMin" => one(nn::arg(g, node, &a)?),
        "Clip" => one(elementwise::clip(g, node, &a)?),
        "Cast" => one(elementwise::cast(g, node, &a)?),
        "CastLike" => one(elementwise::cast_like(g, node, &a)?),
        "Conv" | "ConvTranspose" | "MaxPool" | "AveragePool" if rank_of(g, node) == Some(3) => {
            one(lifted(g, node)?)
        }
        "Conv" if rank_of(g, node) == Some(5) => one(conv3d::conv3d(g, node, &a)?),
        "Conv" => one(nn::conv(g, node, &a)?),
        "ConvTranspose" if rank_of(g, node) == Some(5) => {
            one(conv3d::conv_transpose3d(g, node, &a)?)
        }
        "ConvTranspose" => one(norm::conv_transpose(g, node, &a)?),
        "MaxPool" | "AveragePool" if rank_of(g, node) == Some(5) => one(pool3d(g, node)?),
        "MaxPool"
            if rank_of(g, node) == Some(4) && node.output.get(1).is_some_and(|o| !o.is_empty()) =>
        {
            pool_indices::max_pool_with_indices(g, node, &a)
        }
        "MaxPool" | "AveragePool" => one(nn::pool(g, node, &a)?),
        "GlobalAveragePool" | "GlobalMaxPool" => one(nn::global_pool(g, node)?),
        "BatchNormalization" if g.opset >= 14 && a.int("training_mode", 0)? != 0 => {
            nn::batch_norm_training(g, node, &a)
        }
        "BatchNormalization" => one(nn::batch_norm(g, node, &a)?),
        "LayerNormalization" => nn::layer_norm(g, node, &a),
        "Softmax" | "LogSoftmax" => one(nn::softmax(g, node, &a)?),
        "MatMul" => one(nn::matmul(g, node)?),
        "Gemm" => one(nn::gemm(g, node, &a)?),
        "Reshape" => one(shape::reshape(g, node)?),
        "Flatten" => one(shape::flatten(g, node, &a)?),
        "Transpose" => one(shape::transpose(g, node, &a)?),
        "Unsqueeze" | "Squeeze" => one(shape::squeeze(g, node, &a)?),
        "Concat" => one(shape::concat(g, node, &a)?),
        "Gather" => one(shape::gather(g, node, &a)?),
        "GatherElements" => one(shape::gather_elements(g, node, &a)?),
        "GatherND" => one(index::gather_nd(g, node, &a)?),
        "TopK" => index::top_k(g, node, &a),
        "ScatterElements" | "Scatter" => one(index::scatter_elements(g, node, &a)?),
        "Expand" if known(g, node, &[1]) && !dynamic_data(g, node) => one(shape::expand(g, node)?),
        "Expand" => one(dynamic::expand(g, node)?),
        "Constant" => one(shape::constant(g, node, &a)?),
        "Shape" => one(shape::shape_of(g, node, &a)?),
        "ReduceMean" | "ReduceSum" | "ReduceMax" | "ReduceMin" | "ReduceProd" | "ReduceL1"
        | "ReduceL2" | "ReduceSumSquare" | "ReduceLogSum" | "ReduceLogSumExp" => {
            one(shape::reduce(g, node, &a)?)
        }
        other => Err(format!("operator `{other}` is not supported").into()),
    }
}

/// The rank of `node`'s first input, if it is computed.
fn rank_of(g: &Graph, node: &NodeProto) -> Option<usize> {
    g.input(node, 0).ok().map(|x| x.shape.len())
}

/// A 1-D `Conv`, `ConvTranspose` or pool (`[N, C, L]`) as the 2-D one of height 1: the input (and weights)
/// reshaped to `[N, C, 1, L]`, each window attribute given a leading 1 (pads a leading 0),
/// and the result reshaped back.
fn lifted(g: &mut Graph, node: &NodeProto) -> Result<Value, ConvertError> {
    use crate::proto::AttributeProto;
    let mut lifted = node.clone();
    for (i, name) in node.input.iter().enumerate().take(2) {
        if name.is_empty() || (i == 1 && !node.op_type.starts_with("Conv")) {
            continue;
        }
        let v = g.input(node, i)?;
        let mut shape = v.shape.clone();
        if shape.len() != 3 {
            return Err(format!("input {i} of shape {shape:?}").into());
        }
        shape.insert(2, 1);
        let key = format!("\u{0}lift{i}:{name}");
        let r = g.reshape(&v, shape)?;
        g.define(key.clone(), r);
        lifted.input[i] = key;
    }
    lifted.attribute = node
        .attribute
        .iter()
        .map(|attr| {
            let ints = match attr.name.as_str() {
                "kernel_shape" | "strides" | "dilations" | "output_shape" => {
                    [vec![1], attr.ints.clone()].concat()
                }
                "output_padding" => [vec![0], attr.ints.clone()].concat(),
                "pads" if attr.ints.len() == 2 => vec![0, attr.ints[0], 0, attr.ints[1]],
                _ => return attr.clone(),
            };
            AttributeProto {
                ints,
                ..attr.clone()
            }
        })
        .collect();
    let a = Attrs(&lifted.attribute);
    let y = match node.op_type.as_str() {
        "Conv" => nn::conv(g, &lifted, &a)?,
        "ConvTranspose" => norm::conv_transpose(g, &lifted, &a)?,
        _ => nn::pool(g, &lifted, &a)?,
    };
    let mut shape = y.shape.clone();
    shape.remove(2);
    g.reshape(&y, shape)
}

/// A 3-D `MaxPool` or `AveragePool` (`[N, C, D, H, W]`) as two 2-D ones: over `H × W` on
/// `[N, C·D, H, W]`, then over `D` on `[N, C, D, H'·W']` with a `k × 1` window. The max and
/// the average both separate so (an average's divisor, with or without padding counted, is
/// the product of the axes' counts).
fn pool3d(g: &mut Graph, node: &NodeProto) -> Result<Value, ConvertError> {
    let x = g.input(node, 0)?;
    let &[n, c, d, h, w] = x.shape.as_slice() else {
        return Err(format!("input of shape {:?}", x.shape).into());
    };
    if node.output.get(1).is_some_and(|o| !o.is_empty()) {
        return Err("MaxPool's indices output is not supported".into());
    }
    // Each step's attributes: per axis values picked from the three (`None`: 1, or 0 pads).
    let step = |node: &NodeProto, axes: [Option<usize>; 2]| -> Result<NodeProto, ConvertError> {
        let mut out = node.clone();
        for attr in &mut out.attribute {
            let pick = |v: &[i64], k: Option<usize>, default: i64| {
                k.map_or(Ok(default), |k| {
                    v.get(k)
                        .copied()
                        .ok_or(format!("`{}` {v:?} for a 3-D window", attr.name))
                })
            };
            attr.ints = match attr.name.as_str() {
                "kernel_shape" | "strides" | "dilations" => {
                    vec![pick(&attr.ints, axes[0], 1)?, pick(&attr.ints, axes[1], 1)?]
                }
                "pads" => {
                    let end = |k: Option<usize>| k.map(|k| k + 3);
                    vec![
                        pick(&attr.ints, axes[0], 0)?,
                        pick(&attr.ints, axes[1], 0)?,
                        pick(&attr.ints, end(axes[0]), 0)?,
                        pick(&attr.ints, end(axes[1]), 0)?,
                    ]
                }
                _ => continue,
            };
        }
        Ok(out)
    };
    let key = |s: &str| format!("\u{0}pool3d{s}:{}", node.output.first().map_or("", |o| o));
    let x4 = g.call(
        "reshape",
        &[&x],
        &[("newshape", attr::ints(&[n, c * d, h, w]))],
    )?;
    g.define(key("in"), x4);
    let mut first = step(node, [Some(1), Some(2)])?;
    first.input = vec![key("in")];
    let hw = nn::pool(g, &first, &Attrs(&first.attribute))?;
    let (oh, ow) = (hw.shape[2], hw.shape[3]);
    let y4 = g.call(
        "reshape",
        &[&hw],
        &[("newshape", attr::ints(&[n, c, d, oh * ow]))],
    )?;
    g.define(key("mid"), y4);
    let mut second = step(node, [Some(0), None])?;
    second.input = vec![key("mid")];
    let y = nn::pool(g, &second, &Attrs(&second.attribute))?;
    let shape = vec![n, c, y.shape[2], oh, ow];
    g.call("reshape", &[&y], &[("newshape", attr::ints(&shape))])
}
