//! Shape and layout manipulation: reshaping, transposing, joining, splitting, slicing, gathering,
//! layout transforms, and the sorting and searching operators (reference §14.4).
//!
//! The Tier 1 shape operators carry TVM's type relations (with `?` dimensions propagated) and
//! reference evaluations. Evaluation is pure data movement: each output element is copied as
//! `dtype.size_bytes()` bytes from the input position it comes from, so every dtype is handled
//! alike, and every position is bounds-checked (`take` with `mode="fast"` reports an
//! out-of-range index instead of reading it). Output shapes at run time come from the same
//! functions as the relations, applied to the concrete input shapes.

use relay_ir::te::{BinaryOp, CmpOp, TExpr, TeValue, Tensor};
use relay_ir::{
    AttrDefault as D, AttrField, AttrKind as K, AttrValue, Attrs, DType, Dim, NDArray,
    OpPattern as P, OpSchema, Type, TypeKind, Value,
};

use crate::compute::{self, ComputeResult, const_index, ix_add};

use crate::support::{
    arg_tensor, arg_tensors, attr_bool, attr_int, attr_ints, attr_opt_int, attr_opt_ints, attr_str,
    axis_index, element_count, expect_inputs, insert_index, known, shape_text, strides, tensor,
    tensor_type, tuple_of_tensors, value,
};
use crate::{dtype, field, nullable, op, plain, required, required_nullable};

const DATA: &[&str] = &["data"];

/// `ReshapeAttrs`, shared by `reshape` and `contrib_reverse_reshape`.
const RESHAPE_ATTRS: &[AttrField] = &[
    required("newshape", K::IntArray),
    field("allowzero", K::Bool, D::Bool(false)),
];

/// `SqueezeAttrs`; `axis=None` squeezes every dimension of size 1.
pub(crate) const SQUEEZE_ATTRS: &[AttrField] = &[nullable("axis", K::IntArray)];

/// `StridedSliceAttrs`. Every array is an `Optional`, left `None` by `dyn.strided_slice`; TVM
/// always prints `axes`, as `axes=None` when it is unset.
pub(crate) const STRIDED_SLICE_ATTRS: &[AttrField] = &[
    required_nullable("begin", K::IntArray),
    required_nullable("end", K::IntArray),
    required_nullable("strides", K::IntArray),
    field("slice_mode", K::Str, D::Str("end")),
    required_nullable("axes", K::IntArray),
];

/// `TopkAttrs` (the C++ struct is `TopKAttrs`, its type key `relay.attrs.TopkAttrs`).
pub(crate) const TOPK_ATTRS: &[AttrField] = &[
    required_nullable("k", K::Int),
    field("axis", K::Int, D::Int(-1)),
    field("ret_type", K::Str, D::Str("both")),
    field("is_ascend", K::Bool, D::Bool(false)),
    dtype("dtype"),
];

/// `ArgsortAttrs`, shared by `argsort` and `sort`; Python's `argsort` passes `dtype="int32"`.
const ARGSORT_ATTRS: &[AttrField] = &[
    field("axis", K::Int, D::Int(-1)),
    field("is_ascend", K::Bool, D::Bool(true)),
    dtype("dtype"),
];

/// `LayoutTransformAttrs` and `AutoSchedulerLayoutTransformAttrs`.
const LAYOUT_TRANSFORM_ATTRS: &[AttrField] = &[
    required("src_layout", K::Str),
    required("dst_layout", K::Str),
];

pub(crate) static OPS: &[OpSchema] = &[
    // Reshaping.
    op("reshape", DATA, "relay.attrs.ReshapeAttrs", RESHAPE_ATTRS)
        .with(P::Injective, reshape_rel, reshape_eval)
        .with_compute(|i, _, o| reshape_te("T_reshape", i, o)),
    op(
        "contrib_reverse_reshape",
        DATA,
        "relay.attrs.ReshapeAttrs",
        RESHAPE_ATTRS,
    )
    .with(P::Injective, reverse_reshape_rel, reverse_reshape_eval)
    .with_compute(|i, _, o| reshape_te("T_reverse_reshape", i, o)),
    op(
        "reshape_like",
        &["data", "shape_like"],
        "relay.attrs.ReshapeLikeAttrs",
        &[
            field("lhs_begin", K::Int, D::Int(0)),
            nullable("lhs_end", K::Int),
            field("rhs_begin", K::Int, D::Int(0)),
            nullable("rhs_end", K::Int),
        ],
    )
    .with(P::Injective, reshape_like_rel, reshape_like_eval)
    .with_compute(|i, _, o| reshape_te("T_reshape_like", i, o)),
    op(
        "transpose",
        DATA,
        "relay.attrs.TransposeAttrs",
        &[required_nullable("axes", K::IntArray)],
    )
    .with(P::Injective, transpose_rel, transpose_eval)
    .with_compute(transpose_te),
    op(
        "expand_dims",
        DATA,
        "relay.attrs.ExpandDimsAttrs",
        &[
            required("axis", K::Int),
            field("num_newaxis", K::Int, D::Int(1)),
        ],
    )
    .with(P::Injective, expand_dims_rel, expand_dims_eval)
    .with_compute(|i, _, o| reshape_te("T_expand_dims", i, o)),
    op("squeeze", DATA, "relay.attrs.SqueezeAttrs", SQUEEZE_ATTRS)
        .with(P::Injective, squeeze_rel, squeeze_eval)
        .with_compute(|i, _, o| reshape_te("T_squeeze", i, o)),
    // Joining and splitting; `concatenate` and `stack` take one tuple.
    op(
        "concatenate",
        DATA,
        "relay.attrs.ConcatenateAttrs",
        &[field("axis", K::Int, D::Int(0))],
    )
    .with(P::Injective, concatenate_rel, concatenate_eval)
    .with_compute(concatenate_te),
    op(
        "stack",
        DATA,
        "relay.attrs.StackAttrs",
        &[field("axis", K::Int, D::Int(0))],
    )
    .with(P::Injective, stack_rel, stack_eval)
    .with_compute(stack_te),
    op(
        "split",
        DATA,
        "relay.attrs.SplitAttrs",
        &[
            required("indices_or_sections", K::IntOrIntArray),
            field("axis", K::Int, D::Int(0)),
        ],
    )
    .with(P::Injective, split_rel, split_eval)
    .with_compute(split_te),
    // Slicing.
    op(
        "strided_slice",
        DATA,
        "relay.attrs.StridedSliceAttrs",
        STRIDED_SLICE_ATTRS,
    )
    .with(P::Injective, strided_slice_rel, strided_slice_eval)
    .with_compute(strided_slice_te),
    plain("strided_set", &["data", "v", "begin", "end", "strides"]),
    op(
        "slice_like",
        &["data", "shape_like"],
        "relay.attrs.SliceLikeAttrs",
        &[required_nullable("axes", K::IntArray)],
    ),
    // Gathering.
    op(
        "take",
        &["data", "indices"],
        "relay.attrs.TakeAttrs",
        &[
            field("batch_dims", K::Int, D::Int(0)),
            nullable("axis", K::Int),
            field("mode", K::Str, D::Str("clip")),
        ],
    )
    .with(P::Injective, take_rel, take_eval)
    .with_compute(take_te),
    op(
        "gather",
        &["data", "indices"],
        "relay.attrs.GatherAttrs",
        &[nullable("axis", K::Int)],
    ),
    op(
        "gather_nd",
        &["data", "indices"],
        "relay.attrs.GatherNDAttrs",
        &[
            field("batch_dims", K::Int, D::Int(0)),
            nullable("index_rank", K::Int),
        ],
    ),
    plain("adv_index", &["inputs"]),
    // Repetition and reversal.
    op(
        "tile",
        DATA,
        "relay.attrs.TileAttrs",
        &[required("reps", K::IntArray)],
    )
    .with(P::Injective, tile_rel, tile_eval)
    .with_compute(tile_te),
    op(
        "repeat",
        DATA,
        "relay.attrs.RepeatAttrs",
        &[required("repeats", K::Int), nullable("axis", K::Int)],
    )
    .with(P::Injective, repeat_rel, repeat_eval)
    .with_compute(repeat_te),
    op(
        "reverse",
        DATA,
        "relay.attrs.ReverseAttrs",
        &[nullable("axis", K::Int)],
    )
    .with(P::Injective, reverse_rel, reverse_eval)
    .with_compute(reverse_te),
    op(
        "reverse_sequence",
        &["data", "seq_lengths"],
        "relay.attrs.ReverseSequenceAttrs",
        &[
            field("seq_axis", K::Int, D::Int(1)),
            field("batch_axis", K::Int, D::Int(0)),
        ],
    ),
    // Layout transforms.
    op(
        "layout_transform",
        DATA,
        "relay.attrs.LayoutTransformAttrs",
        LAYOUT_TRANSFORM_ATTRS,
    ),
    op(
        "auto_scheduler_layout_transform",
        DATA,
        "relay.attrs.AutoSchedulerLayoutTransformAttrs",
        LAYOUT_TRANSFORM_ATTRS,
    ),
    op(
        "meta_schedule_layout_transform",
        DATA,
        "relay.attrs.MetaScheduleLayoutTransformAttrs",
        &[required("index_map", K::Any)],
    ),
    // Masks, grids, windows and diagonals.
    op(
        "sequence_mask",
        &["data", "valid_length"],
        "relay.attrs.SequenceMaskAttrs",
        &[
            field("mask_value", K::Float, D::Float(0.0)),
            field("axis", K::Int, D::Int(0)),
        ],
    ),
    op(
        "meshgrid",
        DATA,
        "relay.attrs.MeshgridAttrs",
        &[field("indexing", K::Str, D::Str("ij"))],
    ),
    op(
        "sliding_window",
        DATA,
        "relay.attrs.SlidingWindowAttrs",
        &[
            required("axis", K::Int),
            required("window_shape", K::IntArray),
            required("strides", K::IntArray),
        ],
    ),
    op(
        "matrix_set_diag",
        &["input", "diagonal"],
        "relay.attrs.MatrixSetDiagAttrs",
        &[
            field("k1", K::Int, D::Int(0)),
            field("k2", K::Int, D::Int(0)),
            field("super_diag_right_align", K::Bool, D::Bool(true)),
            field("sub_diag_right_align", K::Bool, D::Bool(false)),
        ],
    ),
    // Sparse helpers and index arithmetic.
    op(
        "sparse_to_dense",
        &["indices", "values", "default"],
        "relay.attrs.SparseToDenseAttrs",
        &[required("output_shape", K::IntArray)],
    ),
    plain(
        "sparse_fill_empty_rows",
        &[
            "sparse_indices",
            "sparse_values",
            "dense_shape",
            "default_value",
        ],
    ),
    plain(
        "sparse_reshape",
        &["sparse_indices", "prev_shape", "new_shape"],
    ),
    plain("unravel_index", &["data", "shape"]),
    plain("invert_permutation", DATA),
    // `collapse_sum_to` builds `InitOpAttrs` but its registration declares no attrs type.
    plain("collapse_sum_to", &["data", "shape"]),
    op(
        "einsum",
        DATA,
        "relay.attrs.EinsumAttrs",
        &[required("equation", K::Str)],
    ),
    // Sorting and searching.
    op("topk", DATA, "relay.attrs.TopkAttrs", TOPK_ATTRS),
    op("argsort", DATA, "relay.attrs.ArgsortAttrs", ARGSORT_ATTRS),
    op("sort", DATA, "relay.attrs.ArgsortAttrs", ARGSORT_ATTRS),
    op(
        "searchsorted",
        &["sorted_sequence", "values"],
        "relay.attrs.SearchSortedAttrs",
        &[
            field("right", K::Bool, D::Bool(false)),
            field("dtype", K::DType, D::Str("int32")),
        ],
    ),
];

// ----- Shared helpers -----

/// The most dimensions `expand_dims` adds at once; more is surely a mistake, and would
/// exhaust memory.
const MAX_RANK: i64 = 1024;

/// The most pieces `split` makes from a number of sections, for the same reason.
const MAX_PIECES: i64 = 1 << 16;

/// The single tensor input.
fn data_type(inputs: &[Type]) -> Result<(&[Dim], DType), String> {
    expect_inputs(inputs, 1)?;
    tensor_type(&inputs[0], "the data")
}

/// Known dimensions as `Dim`s.
fn dims(shape: &[i64]) -> Vec<Dim> {
    shape.iter().map(|&d| Dim::Known(d)).collect()
}

/// A shape computed from known dimensions, as numbers.
fn concrete(shape: &[Dim]) -> Result<Vec<i64>, String> {
    known(shape).ok_or_else(|| {
        format!(
            "internal error: shape {} is not known at run time",
            shape_text(shape)
        )
    })
}

/// The product of two dimensions.
fn dim_mul(a: Dim, b: Dim) -> Result<Dim, String> {
    match (a, b) {
        (Dim::Known(x), Dim::Known(y)) => x
            .checked_mul(y)
            .map(Dim::Known)
            .ok_or_else(|| format!("dimension {x} * {y} overflows")),
        _ => Ok(Dim::Any),
    }
}

/// Text of a list of integers in parentheses, e.g. `(5, -1)`.
fn list_text(values: &[i64]) -> String {
    let items: Vec<String> = values.iter().map(i64::to_string).collect();
    format!("({})", items.join(", "))
}

/// Steps a row-major multi-index one element forward.
fn next_index(idx: &mut [i64], shape: &[i64]) {
    for d in (0..shape.len()).rev() {
        idx[d] += 1;
        if idx[d] < shape[d] {
            return;
        }
        idx[d] = 0;
    }
}

/// A tensor of `out_shape` and `src`'s dtype whose element at each multi-index is `src`'s
/// element at the flat position `source` gives. Pure data movement: whole elements are copied
/// as bytes, so every dtype is handled alike. A position outside `src` is an error, never a
/// read out of bounds.
fn gather(
    src: &NDArray,
    out_shape: &[i64],
    mut source: impl FnMut(&[i64]) -> Result<i64, String>,
) -> Result<NDArray, String> {
    let size = src.dtype().size_bytes();
    let mut out = NDArray::zeros(src.dtype(), out_shape).map_err(|e| e.to_string())?;
    let n = out.num_elements();
    let from = src.as_bytes();
    let to = out.as_bytes_mut();
    let mut idx = vec![0i64; out_shape.len()];
    for i in 0..n {
        let s = source(&idx)?;
        let bytes = usize::try_from(s)
            .ok()
            .and_then(|s| from.get(s * size..(s + 1) * size))
            .ok_or_else(|| {
                format!(
                    "internal error: element {s} is outside an input of shape {:?}",
                    src.shape()
                )
            })?;
        to[i * size..(i + 1) * size].copy_from_slice(bytes);
        next_index(&mut idx, out_shape);
    }
    Ok(out)
}

/// The elements of `src` in a new shape of the same size.
fn reshaped(src: &NDArray, shape: &[Dim]) -> Result<Value, String> {
    let shape = concrete(shape)?;
    value(NDArray::from_bytes(src.dtype(), &shape, src.as_bytes()))
}

/// The part of `src` starting at `begin` with step `step` in every dimension, of
/// `out_shape`.
fn strided(
    src: &NDArray,
    begin: &[i64],
    step: &[i64],
    out_shape: &[i64],
) -> Result<NDArray, String> {
    let st = strides(src.shape());
    gather(src, out_shape, |idx| {
        Ok(idx
            .iter()
            .enumerate()
            .map(|(d, &i)| (begin[d] + i * step[d]) * st[d])
            .sum())
    })
}

// ----- reshape, contrib_reverse_reshape, reshape_like -----

/// TVM's `InferNewShape`: the shape `newshape` asks of a tensor of shape `ishape`, with the
/// special values `0` (copy a dimension, unless `allowzero`), `-1` (infer one dimension), `-2`
/// (copy the rest), `-3` (merge two dimensions) and `-4` (split one dimension in two, the next
/// two values, one of which may be `-1`). Unlike TVM, `-1` after `-2`, `-3` or `-4` fills its
/// own output position. The element counts must agree when every dimension is known.
fn infer_reshape(ishape: &[Dim], newshape: &[i64], allowzero: bool) -> Result<Vec<Dim>, String> {
    let fail = |why: String| {
        format!(
            "reshape cannot turn {} into {}: {why}",
            shape_text(ishape),
            list_text(newshape)
        )
    };
    let rank = ishape.len();
    let mut out: Vec<Dim> = Vec::with_capacity(newshape.len());
    // Whether each input (output) dimension was copied, merged or split, so that inference
    // can skip the dimensions that cancel out.
    let mut used_in = vec![false; rank];
    let mut used_out: Vec<bool> = Vec::with_capacity(newshape.len());
    let mut src = 0usize;
    let mut infer: Option<usize> = None;
    let mut i = 0usize;
    while i < newshape.len() {
        match newshape[i] {
            v if v > 0 || (v == 0 && allowzero) => {
                out.push(Dim::Known(v));
                used_out.push(false);
                src += 1;
            }
            0 => {
                let d = *ishape.get(src).ok_or_else(|| {
                    fail(format!(
                        "`0` at position {i} copies input dimension {src}, which does not exist"
                    ))
                })?;
                used_in[src] = true;
                out.push(d);
                used_out.push(true);
                src += 1;
            }
            -1 => {
                if infer.is_some() {
                    return Err(fail("only one dimension can be -1".into()));
                }
                infer = Some(out.len());
                out.push(Dim::Known(1));
                used_out.push(false);
                src += 1;
            }
            -2 => {
                while src < rank {
                    used_in[src] = true;
                    out.push(ishape[src]);
                    used_out.push(true);
                    src += 1;
                }
            }
            -3 => {
                if src + 1 >= rank {
                    return Err(fail(format!(
                        "`-3` at position {i} merges input dimensions {src} and {}, which do not both exist",
                        src + 1
                    )));
                }
                used_in[src] = true;
                used_in[src + 1] = true;
                out.push(dim_mul(ishape[src], ishape[src + 1])?);
                used_out.push(true);
                src += 2;
            }
            -4 => {
                let (Some(&a), Some(&b)) = (newshape.get(i + 1), newshape.get(i + 2)) else {
                    return Err(fail(format!(
                        "`-4` at position {i} must be followed by two values"
                    )));
                };
                let d0 = *ishape.get(src).ok_or_else(|| {
                    fail(format!(
                        "`-4` at position {i} splits input dimension {src}, which does not exist"
                    ))
                })?;
                if a < -1 || b < -1 || (a == -1 && b == -1) {
                    return Err(fail(format!(
                        "`-4` must be followed by two sizes, at most one of them -1, got {a} and {b}"
                    )));
                }
                let split = |d0: Dim, by: i64| -> Result<Dim, String> {
                    match d0 {
                        Dim::Known(n) if by == 0 || n % by != 0 => Err(fail(format!(
                            "dimension {n} does not split into ({a}, {b})"
                        ))),
                        Dim::Known(n) => Ok(Dim::Known(n / by)),
                        Dim::Any => Ok(Dim::Any),
                    }
                };
                let (x, y) = match (a, b) {
                    (-1, b) => (split(d0, b)?, Dim::Known(b)),
                    (a, -1) => (Dim::Known(a), split(d0, a)?),
                    (a, b) => (Dim::Known(a), Dim::Known(b)),
                };
                used_in[src] = true;
                out.extend([x, y]);
                used_out.extend([true, true]);
                src += 1;
                i += 2;
            }
            v => {
                return Err(fail(format!(
                    "{v} is not a size or a special value (0, -1, -2, -3, -4)"
                )));
            }
        }
        i += 1;
    }
    if let Some(k) = infer {
        let others: Vec<Dim> = out
            .iter()
            .enumerate()
            .filter(|&(j, _)| j != k)
            .map(|(_, &d)| d)
            .collect();
        out[k] = match (element_count(ishape), element_count(&others)) {
            // Every dimension known: divide the element counts.
            (Some(total), Some(rest)) => {
                if rest == 0 {
                    return Err(fail(
                        "the -1 cannot be inferred next to a dimension of size 0".into(),
                    ));
                }
                if total % rest != 0 {
                    return Err(fail(format!("{total} elements do not divide by {rest}")));
                }
                Dim::Known((total / rest) as i64)
            }
            // Otherwise only the dimensions not copied, merged or split count, as in TVM.
            _ => {
                let free_in: Vec<Dim> = (0..rank)
                    .filter(|&j| !used_in[j])
                    .map(|j| ishape[j])
                    .collect();
                let free_out: Vec<Dim> = (0..out.len())
                    .filter(|&j| !used_out[j] && j != k)
                    .map(|j| out[j])
                    .collect();
                match (element_count(&free_in), element_count(&free_out)) {
                    (Some(a), Some(b)) if b != 0 && a % b == 0 => Dim::Known((a / b) as i64),
                    (Some(a), Some(b)) if b != 0 => {
                        return Err(fail(format!("{a} elements do not divide by {b}")));
                    }
                    _ => Dim::Any,
                }
            }
        };
    }
    if let (Some(a), Some(b)) = (element_count(ishape), element_count(&out))
        && a != b
    {
        return Err(fail(format!(
            "the input has {a} elements, the new shape {b}"
        )));
    }
    Ok(out)
}

/// The new shape of a `reshape` (or, `reverse`, of a `contrib_reverse_reshape`, which reads
/// both shapes from the right).
fn reshape_shape(shape: &[Dim], attrs: &Attrs, reverse: bool) -> Result<Vec<Dim>, String> {
    let newshape = attr_ints(attrs, "newshape")?;
    let allowzero = attr_bool(attrs, "allowzero")?;
    if !reverse {
        return infer_reshape(shape, &newshape, allowzero);
    }
    let rshape: Vec<Dim> = shape.iter().rev().copied().collect();
    let rnew: Vec<i64> = newshape.iter().rev().copied().collect();
    let mut out = infer_reshape(&rshape, &rnew, allowzero)?;
    out.reverse();
    Ok(out)
}

fn reshape_rel(inputs: &[Type], attrs: &Attrs) -> Result<Type, String> {
    let (shape, dtype) = data_type(inputs)?;
    Ok(tensor(reshape_shape(shape, attrs, false)?, dtype))
}

fn reshape_eval(args: &[Value], attrs: &Attrs) -> Result<Value, String> {
    let x = arg_tensor(args, 0)?;
    reshaped(x, &reshape_shape(&dims(x.shape()), attrs, false)?)
}

fn reverse_reshape_rel(inputs: &[Type], attrs: &Attrs) -> Result<Type, String> {
    let (shape, dtype) = data_type(inputs)?;
    Ok(tensor(reshape_shape(shape, attrs, true)?, dtype))
}

fn reverse_reshape_eval(args: &[Value], attrs: &Attrs) -> Result<Value, String> {
    let x = arg_tensor(args, 0)?;
    reshaped(x, &reshape_shape(&dims(x.shape()), attrs, true)?)
}

/// `reshape_like`: `data`'s dimensions `lhs_begin..lhs_end` replaced by `shape_like`'s
/// `rhs_begin..rhs_end` (ends default to the rank; negative values count from the end).
fn reshape_like_shape(lhs: &[Dim], rhs: &[Dim], attrs: &Attrs) -> Result<Vec<Dim>, String> {
    let range = |side: &str, rank: usize| -> Result<(usize, usize), String> {
        let r = rank as i64;
        let norm = |v: i64| if v < 0 { v + r } else { v };
        let begin = norm(attr_int(attrs, &format!("{side}_begin"))?);
        let end = norm(attr_opt_int(attrs, &format!("{side}_end"))?.unwrap_or(r));
        if !(0 <= begin && begin <= end && end <= r) {
            return Err(format!(
                "`{side}_begin` and `{side}_end` select dimensions {begin}..{end}, outside a tensor of rank {rank}"
            ));
        }
        Ok((begin as usize, end as usize))
    };
    let (lb, le) = range("lhs", lhs.len())?;
    let (rb, re) = range("rhs", rhs.len())?;
    let out: Vec<Dim> = lhs[..lb]
        .iter()
        .chain(&rhs[rb..re])
        .chain(&lhs[le..])
        .copied()
        .collect();
    if let (Some(a), Some(b)) = (element_count(lhs), element_count(&out))
        && a != b
    {
        return Err(format!(
            "reshape_like cannot turn {} into {}: {a} elements, not {b}",
            shape_text(lhs),
            shape_text(&out)
        ));
    }
    Ok(out)
}

fn reshape_like_rel(inputs: &[Type], attrs: &Attrs) -> Result<Type, String> {
    expect_inputs(inputs, 2)?;
    let (lhs, dtype) = tensor_type(&inputs[0], "the data")?;
    let (rhs, _) = tensor_type(&inputs[1], "`shape_like`")?;
    Ok(tensor(reshape_like_shape(lhs, rhs, attrs)?, dtype))
}

fn reshape_like_eval(args: &[Value], attrs: &Attrs) -> Result<Value, String> {
    let x = arg_tensor(args, 0)?;
    let like = arg_tensor(args, 1)?;
    reshaped(
        x,
        &reshape_like_shape(&dims(x.shape()), &dims(like.shape()), attrs)?,
    )
}

// ----- transpose, expand_dims, squeeze -----

/// The permutation `transpose` applies: `axes`, or the reversed axes when `None` or empty.
fn permutation(rank: usize, attrs: &Attrs) -> Result<Vec<usize>, String> {
    let axes = attr_opt_ints(attrs, "axes")?.unwrap_or_default();
    if axes.is_empty() {
        return Ok((0..rank).rev().collect());
    }
    if axes.len() != rank {
        return Err(format!(
            "`axes` must have {rank} values for a tensor of rank {rank}, got {}",
            axes.len()
        ));
    }
    let mut seen = vec![false; rank];
    let mut perm = Vec::with_capacity(rank);
    for &a in &axes {
        let d = axis_index(a, rank)?;
        if seen[d] {
            return Err(format!("`axes` lists dimension {d} twice"));
        }
        seen[d] = true;
        perm.push(d);
    }
    Ok(perm)
}

fn transpose_rel(inputs: &[Type], attrs: &Attrs) -> Result<Type, String> {
    let (shape, dtype) = data_type(inputs)?;
    let perm = permutation(shape.len(), attrs)?;
    Ok(tensor(perm.iter().map(|&p| shape[p]).collect(), dtype))
}

fn transpose_eval(args: &[Value], attrs: &Attrs) -> Result<Value, String> {
    let x = arg_tensor(args, 0)?;
    let perm = permutation(x.ndim(), attrs)?;
    let out_shape: Vec<i64> = perm.iter().map(|&p| x.shape()[p]).collect();
    let st = strides(x.shape());
    value(gather(x, &out_shape, |idx| {
        Ok(idx.iter().zip(&perm).map(|(&i, &p)| i * st[p]).sum())
    }))
}

fn expand_dims_shape(shape: &[Dim], attrs: &Attrs) -> Result<Vec<Dim>, String> {
    let axis = attr_int(attrs, "axis")?;
    let count = attr_int(attrs, "num_newaxis")?;
    if !(0..=MAX_RANK).contains(&count) {
        return Err(format!(
            "`num_newaxis` must be between 0 and {MAX_RANK}, got {count}"
        ));
    }
    let at = insert_index(axis, shape.len())?;
    let mut out = shape[..at].to_vec();
    out.extend(std::iter::repeat_n(Dim::Known(1), count as usize));
    out.extend_from_slice(&shape[at..]);
    Ok(out)
}

fn expand_dims_rel(inputs: &[Type], attrs: &Attrs) -> Result<Type, String> {
    let (shape, dtype) = data_type(inputs)?;
    Ok(tensor(expand_dims_shape(shape, attrs)?, dtype))
}

fn expand_dims_eval(args: &[Value], attrs: &Attrs) -> Result<Value, String> {
    let x = arg_tensor(args, 0)?;
    reshaped(x, &expand_dims_shape(&dims(x.shape()), attrs)?)
}

/// `squeeze`: the listed dimensions removed (each must be 1), or with `axis=None` every
/// dimension known to be 1.
fn squeeze_shape(shape: &[Dim], attrs: &Attrs) -> Result<Vec<Dim>, String> {
    let Some(axes) = attr_opt_ints(attrs, "axis")? else {
        return Ok(shape
            .iter()
            .copied()
            .filter(|&d| d != Dim::Known(1))
            .collect());
    };
    let mut drop = vec![false; shape.len()];
    for &a in &axes {
        let d = axis_index(a, shape.len())?;
        if let Dim::Known(n) = shape[d]
            && n != 1
        {
            return Err(format!(
                "cannot squeeze axis {a}: its dimension is {n}, not 1"
            ));
        }
        drop[d] = true;
    }
    Ok(shape
        .iter()
        .zip(&drop)
        .filter(|&(_, &dropped)| !dropped)
        .map(|(&d, _)| d)
        .collect())
}

fn squeeze_rel(inputs: &[Type], attrs: &Attrs) -> Result<Type, String> {
    let (shape, dtype) = data_type(inputs)?;
    Ok(tensor(squeeze_shape(shape, attrs)?, dtype))
}

fn squeeze_eval(args: &[Value], attrs: &Attrs) -> Result<Value, String> {
    let x = arg_tensor(args, 0)?;
    reshaped(x, &squeeze_shape(&dims(x.shape()), attrs)?)
}

// ----- concatenate, stack, split -----

/// The dimension several tensors must share: the known one (they must agree), or `?`.
fn agree(
    dims: impl Iterator<Item = Dim>,
    what: impl Fn(i64, i64) -> String,
) -> Result<Dim, String> {
    let mut out = Dim::Any;
    for d in dims {
        match (out, d) {
            (Dim::Known(a), Dim::Known(b)) if a != b => return Err(what(a, b)),
            (Dim::Any, d) => out = d,
            _ => {}
        }
    }
    Ok(out)
}

/// The shapes and common dtype of a tuple of tensors, all of one rank.
fn joined_inputs<'t>(inputs: &'t [Type], op: &str) -> Result<(Vec<&'t [Dim]>, DType), String> {
    expect_inputs(inputs, 1)?;
    let fields = tuple_of_tensors(&inputs[0], "the input")?;
    let Some(&(first, dtype)) = fields.first() else {
        return Err(format!(
            "{op} needs at least one tensor, got an empty tuple"
        ));
    };
    for (i, &(shape, d)) in fields.iter().enumerate() {
        if d != dtype {
            return Err(format!(
                "{op} needs tensors of one dtype: tensor 0 is {dtype}, tensor {i} is {d}"
            ));
        }
        if shape.len() != first.len() {
            return Err(format!(
                "{op} needs tensors of one rank: tensor 0 has rank {}, tensor {i} rank {}",
                first.len(),
                shape.len()
            ));
        }
    }
    Ok((fields.iter().map(|&(s, _)| s).collect(), dtype))
}

/// `concatenate`'s result shape and its (non-negative) axis.
fn concatenate_shape(shapes: &[&[Dim]], attrs: &Attrs) -> Result<(Vec<Dim>, usize), String> {
    let rank = shapes.first().map_or(0, |s| s.len());
    let axis = axis_index(attr_int(attrs, "axis")?, rank)?;
    let mut out = Vec::with_capacity(rank);
    for d in 0..rank {
        if d == axis {
            let mut total = Dim::Known(0);
            for s in shapes {
                total = match (total, s[d]) {
                    (Dim::Known(a), Dim::Known(b)) => Dim::Known(a + b),
                    _ => Dim::Any,
                };
            }
            out.push(total);
        } else {
            out.push(agree(shapes.iter().map(|s| s[d]), |a, b| {
                format!(
                    "concatenate needs equal dimensions off axis {axis}, got {a} and {b} on axis {d}"
                )
            })?);
        }
    }
    Ok((out, axis))
}

fn concatenate_rel(inputs: &[Type], attrs: &Attrs) -> Result<Type, String> {
    let (shapes, dtype) = joined_inputs(inputs, "concatenate")?;
    Ok(tensor(concatenate_shape(&shapes, attrs)?.0, dtype))
}

/// Interleaves the row-major blocks of `parts` from `axis` on: for every index before `axis`,
/// each part's block in turn.
fn interleave(
    parts: &[std::sync::Arc<NDArray>],
    axis: usize,
    out_shape: &[i64],
) -> Result<Value, String> {
    let Some(first) = parts.first() else {
        return Err("internal error: nothing to join".into());
    };
    let dtype = first.dtype();
    let size = dtype.size_bytes();
    let outer: i64 = out_shape[..axis].iter().product();
    let mut bytes = Vec::new();
    let blocks: Vec<usize> = parts
        .iter()
        .map(|p| p.shape()[axis.min(p.ndim())..].iter().product::<i64>() as usize * size)
        .collect();
    for o in 0..outer.max(0) as usize {
        for (p, &block) in parts.iter().zip(&blocks) {
            let from = p
                .as_bytes()
                .get(o * block..(o + 1) * block)
                .ok_or_else(|| {
                    format!(
                        "internal error: block {o} is outside a part of shape {:?}",
                        p.shape()
                    )
                })?;
            bytes.extend_from_slice(from);
        }
    }
    value(NDArray::from_bytes(dtype, out_shape, &bytes))
}

fn concatenate_eval(args: &[Value], attrs: &Attrs) -> Result<Value, String> {
    let parts = arg_tensors(args, 0)?;
    check_dtypes(&parts)?;
    let shapes: Vec<Vec<Dim>> = parts.iter().map(|p| dims(p.shape())).collect();
    let refs: Vec<&[Dim]> = shapes.iter().map(Vec::as_slice).collect();
    if refs.iter().any(|s| s.len() != refs[0].len()) {
        return Err("concatenate needs tensors of one rank".into());
    }
    let (out, axis) = concatenate_shape(&refs, attrs)?;
    interleave(&parts, axis, &concrete(&out)?)
}

/// Run-time check that the joined tensors share a dtype (the byte copy relies on it).
fn check_dtypes(parts: &[std::sync::Arc<NDArray>]) -> Result<(), String> {
    match parts.first() {
        None => Err("needs at least one tensor, got an empty tuple".into()),
        Some(first) if parts.iter().any(|p| p.dtype() != first.dtype()) => {
            Err("needs tensors of one dtype".into())
        }
        Some(_) => Ok(()),
    }
}

/// `stack`'s result shape and its insertion axis.
fn stack_shape(shapes: &[&[Dim]], attrs: &Attrs) -> Result<(Vec<Dim>, usize), String> {
    let rank = shapes.first().map_or(0, |s| s.len());
    let axis = insert_index(attr_int(attrs, "axis")?, rank)?;
    let mut out = Vec::with_capacity(rank + 1);
    for d in 0..rank {
        out.push(agree(shapes.iter().map(|s| s[d]), |a, b| {
            format!("stack needs tensors of one shape, got {a} and {b} on axis {d}")
        })?);
    }
    out.insert(axis, Dim::Known(shapes.len() as i64));
    Ok((out, axis))
}

fn stack_rel(inputs: &[Type], attrs: &Attrs) -> Result<Type, String> {
    let (shapes, dtype) = joined_inputs(inputs, "stack")?;
    Ok(tensor(stack_shape(&shapes, attrs)?.0, dtype))
}

fn stack_eval(args: &[Value], attrs: &Attrs) -> Result<Value, String> {
    let parts = arg_tensors(args, 0)?;
    check_dtypes(&parts)?;
    let shapes: Vec<Vec<Dim>> = parts.iter().map(|p| dims(p.shape())).collect();
    let refs: Vec<&[Dim]> = shapes.iter().map(Vec::as_slice).collect();
    if refs.iter().any(|s| s.len() != refs[0].len()) {
        return Err("stack needs tensors of one rank".into());
    }
    let (out, axis) = stack_shape(&refs, attrs)?;
    interleave(&parts, axis, &concrete(&out)?)
}

/// `split`'s axis and the length of every piece along it: `indices_or_sections` is either a
/// number of equal sections or the ascending split points (TVM requires each piece to be
/// non-empty).
fn split_pieces(shape: &[Dim], attrs: &Attrs) -> Result<(usize, Vec<Dim>), String> {
    let axis = axis_index(attr_int(attrs, "axis")?, shape.len())?;
    let dim = shape[axis];
    let how = attrs
        .get("indices_or_sections")
        .ok_or("attribute `indices_or_sections` is missing")?;
    if let AttrValue::Int(sections) = *how {
        if !(1..=MAX_PIECES).contains(&sections) {
            return Err(format!(
                "`indices_or_sections` must be a number of sections between 1 and {MAX_PIECES}, got {sections}"
            ));
        }
        let piece = match dim {
            Dim::Known(n) if n % sections != 0 => {
                return Err(format!(
                    "`indices_or_sections` {sections} does not divide dimension {n}"
                ));
            }
            Dim::Known(n) => Dim::Known(n / sections),
            Dim::Any => Dim::Any,
        };
        return Ok((axis, vec![piece; sections as usize]));
    }
    let points = how
        .as_ints()
        .ok_or("attribute `indices_or_sections` must be an integer or a list of integers")?;
    let mut pieces = Vec::with_capacity(points.len() + 1);
    let mut begin = 0i64;
    for &p in &points {
        if p <= begin {
            return Err(format!(
                "`indices_or_sections` must be ascending split points above 0, got {}",
                list_text(&points)
            ));
        }
        pieces.push(Dim::Known(p - begin));
        begin = p;
    }
    pieces.push(match dim {
        Dim::Known(n) if begin >= n && !points.is_empty() => {
            return Err(format!(
                "split point {begin} is not inside dimension {n} of axis {axis}"
            ));
        }
        Dim::Known(n) => Dim::Known(n - begin),
        Dim::Any => Dim::Any,
    });
    Ok((axis, pieces))
}

fn split_rel(inputs: &[Type], attrs: &Attrs) -> Result<Type, String> {
    let (shape, dtype) = data_type(inputs)?;
    let (axis, pieces) = split_pieces(shape, attrs)?;
    let fields = pieces
        .into_iter()
        .map(|len| {
            let mut s = shape.to_vec();
            s[axis] = len;
            tensor(s, dtype)
        })
        .collect();
    Ok(Type::tuple(fields))
}

fn split_eval(args: &[Value], attrs: &Attrs) -> Result<Value, String> {
    let x = arg_tensor(args, 0)?;
    let (axis, pieces) = split_pieces(&dims(x.shape()), attrs)?;
    let lens = concrete(&pieces)?;
    let step = vec![1i64; x.ndim()];
    let mut begin = vec![0i64; x.ndim()];
    let mut out = Vec::with_capacity(lens.len());
    for len in lens {
        let mut shape = x.shape().to_vec();
        shape[axis] = len;
        out.push(Value::tensor(strided(x, &begin, &step, &shape)?));
        begin[axis] += len;
    }
    Ok(Value::tuple(out))
}

// ----- strided_slice -----

/// TVM's `CanonicalizeIndex`: a negative index counts from the end, then the index is
/// clamped to `0..=extent` (`-1..=extent - 1` for a negative stride).
fn canonical_index(index: i64, extent: i64, stride: i64) -> i64 {
    let (lo, hi) = if stride < 0 {
        (-1, extent - 1)
    } else {
        (0, extent)
    };
    let index = if index < 0 {
        index.saturating_add(extent)
    } else {
        index
    };
    index.clamp(lo, hi)
}

/// One sliced dimension: its first input index, its step and its length.
#[derive(Clone, Copy)]
struct SliceDim {
    begin: i64,
    step: i64,
    len: Dim,
}

/// What `strided_slice` takes from each dimension of a tensor of `shape` (TVM's
/// `StridedSliceRel` and `StridedSliceOutputShape`). With `axes=None`, `begin`, `end` and
/// `strides` cover the leading dimensions and the rest are taken whole; with
/// `slice_mode="size"`, `end` holds sizes (negative: to the end) and `strides` is ignored.
fn slice_dims(shape: &[Dim], attrs: &Attrs) -> Result<Vec<SliceDim>, String> {
    const MAX: i64 = i64::MAX;
    let rank = shape.len();
    let mut begin = attr_ints(attrs, "begin")?;
    let mut end = attr_ints(attrs, "end")?;
    let mut steps = attr_opt_ints(attrs, "strides")?.unwrap_or_default();
    let by_size = match attr_str(attrs, "slice_mode")? {
        "end" => false,
        "size" => true,
        other => {
            return Err(format!(
                "`slice_mode` must be \"end\" or \"size\", got \"{other}\""
            ));
        }
    };
    let axes: Vec<usize> = match attr_opt_ints(attrs, "axes")? {
        Some(axes) => {
            if begin.len() != axes.len() || end.len() != axes.len() || steps.len() > axes.len() {
                return Err(format!(
                    "`begin`, `end` and `strides` must have one value per axis in `axes` ({}), got {}, {} and {}",
                    axes.len(),
                    begin.len(),
                    end.len(),
                    steps.len()
                ));
            }
            steps.resize(axes.len(), 1);
            let mut seen = vec![false; rank];
            let mut out = Vec::with_capacity(axes.len());
            for &a in &axes {
                let d = axis_index(a, rank)?;
                if seen[d] {
                    return Err(format!("`axes` lists dimension {d} twice"));
                }
                seen[d] = true;
                out.push(d);
            }
            out
        }
        None => {
            for (name, len) in [
                ("begin", begin.len()),
                ("end", end.len()),
                ("strides", steps.len()),
            ] {
                if len > rank {
                    return Err(format!(
                        "`{name}` has {len} values for a tensor of rank {rank}"
                    ));
                }
            }
            steps.resize(rank, 1);
            let pad_begin = steps[begin.len()..]
                .iter()
                .map(|&s| if s > 0 { 0 } else { MAX });
            let pad_end = steps[end.len()..]
                .iter()
                .map(|&s| if s < 0 { 0 } else { MAX });
            begin.extend(pad_begin.collect::<Vec<_>>());
            end.extend(pad_end.collect::<Vec<_>>());
            (0..rank).collect()
        }
    };
    if by_size {
        steps.iter_mut().for_each(|s| *s = 1);
        for (e, &b) in end.iter_mut().zip(&begin) {
            *e = if *e < 0 { MAX } else { b.saturating_add(*e) };
        }
    } else if steps.contains(&0) {
        return Err(format!(
            "`strides` must not contain 0, got {}",
            list_text(&steps)
        ));
    }
    let mut out: Vec<SliceDim> = shape
        .iter()
        .map(|&len| SliceDim {
            begin: 0,
            step: 1,
            len,
        })
        .collect();
    for (i, &ax) in axes.iter().enumerate() {
        let (b, e, s) = (begin[i], end[i], steps[i]);
        out[ax] = match shape[ax] {
            Dim::Known(n) => {
                let cb = canonical_index(b, n, s);
                let ce = canonical_index(e, n, s);
                if (s < 0 && ce > cb) || (s > 0 && cb > ce) {
                    return Err(format!(
                        "strided_slice `begin` {b} and `end` {e} are in the wrong order for stride {s} on axis {ax}"
                    ));
                }
                // In `i128`, so that a stride of `i64::MIN` cannot overflow.
                let step = i128::from(s).abs();
                let len = (i128::from(ce - cb).abs() + step - 1) / step;
                SliceDim {
                    begin: cb,
                    step: s,
                    len: Dim::Known(len as i64),
                }
            }
            Dim::Any => SliceDim {
                begin: 0,
                step: s,
                len: Dim::Any,
            },
        };
    }
    Ok(out)
}

fn strided_slice_rel(inputs: &[Type], attrs: &Attrs) -> Result<Type, String> {
    let (shape, dtype) = data_type(inputs)?;
    let plan = slice_dims(shape, attrs)?;
    Ok(tensor(plan.iter().map(|p| p.len).collect(), dtype))
}

fn strided_slice_eval(args: &[Value], attrs: &Attrs) -> Result<Value, String> {
    let x = arg_tensor(args, 0)?;
    let plan = slice_dims(&dims(x.shape()), attrs)?;
    let lens: Vec<Dim> = plan.iter().map(|p| p.len).collect();
    let begin: Vec<i64> = plan.iter().map(|p| p.begin).collect();
    let step: Vec<i64> = plan.iter().map(|p| p.step).collect();
    value(strided(x, &begin, &step, &concrete(&lens)?))
}

// ----- take -----

/// How `take` treats an index outside `0..n`.
#[derive(Clone, Copy)]
enum TakeMode {
    Clip,
    Wrap,
    Fast,
}

fn take_mode(attrs: &Attrs) -> Result<TakeMode, String> {
    match attr_str(attrs, "mode")? {
        "clip" => Ok(TakeMode::Clip),
        "wrap" => Ok(TakeMode::Wrap),
        "fast" => Ok(TakeMode::Fast),
        other => Err(format!(
            "`mode` must be \"clip\", \"wrap\" or \"fast\", got \"{other}\""
        )),
    }
}

/// The axis and the non-negative `batch_dims` of a `take` with an axis.
fn take_axes(
    data_rank: usize,
    indices_rank: usize,
    attrs: &Attrs,
) -> Result<Option<(usize, usize)>, String> {
    let Some(axis) = attr_opt_int(attrs, "axis")? else {
        return Ok(None);
    };
    let axis = axis_index(axis, data_rank)?;
    let given = attr_int(attrs, "batch_dims")?;
    let batch = if given < 0 {
        given + indices_rank as i64
    } else {
        given
    };
    if batch < 0 || batch > indices_rank as i64 || batch > axis as i64 {
        return Err(format!(
            "`batch_dims` {given} must be within the indices' rank {indices_rank} and at most the axis {axis}"
        ));
    }
    Ok(Some((axis, batch as usize)))
}

/// The result shape of `take`: the indices' shape without an axis (the data is flattened),
/// else `data[..axis] ++ indices[batch_dims..] ++ data[axis + 1..]`.
fn take_shape(data: &[Dim], indices: &[Dim], attrs: &Attrs) -> Result<Vec<Dim>, String> {
    take_mode(attrs)?;
    let Some((axis, batch)) = take_axes(data.len(), indices.len(), attrs)? else {
        return Ok(indices.to_vec());
    };
    for d in 0..batch {
        if let (Dim::Known(a), Dim::Known(b)) = (data[d], indices[d])
            && a != b
        {
            return Err(format!(
                "batch dimension {d} differs: {a} in the data, {b} in the indices"
            ));
        }
    }
    Ok(data[..axis]
        .iter()
        .chain(&indices[batch..])
        .chain(&data[axis + 1..])
        .copied()
        .collect())
}

fn take_rel(inputs: &[Type], attrs: &Attrs) -> Result<Type, String> {
    expect_inputs(inputs, 2)?;
    let (data, dtype) = tensor_type(&inputs[0], "the data")?;
    let (indices, index_dtype) = tensor_type(&inputs[1], "the indices")?;
    if !index_dtype.is_int() {
        return Err(format!(
            "the indices must be an integer tensor, got `{}`",
            inputs[1]
        ));
    }
    Ok(tensor(take_shape(data, indices, attrs)?, dtype))
}

/// The position an index selects along a dimension of `n` elements.
fn resolve(index: i128, n: i64, mode: TakeMode) -> Result<i64, String> {
    let n128 = i128::from(n);
    if n <= 0 {
        return Err(format!(
            "take index {index} is out of bounds for an empty axis"
        ));
    }
    Ok(match mode {
        TakeMode::Clip => index.clamp(0, n128 - 1) as i64,
        TakeMode::Wrap => index.rem_euclid(n128) as i64,
        TakeMode::Fast if (0..n128).contains(&index) => index as i64,
        TakeMode::Fast => {
            return Err(format!(
                "take index {index} is out of bounds for an axis of {n} elements (mode \"fast\")"
            ));
        }
    })
}

fn take_eval(args: &[Value], attrs: &Attrs) -> Result<Value, String> {
    let x = arg_tensor(args, 0)?;
    let ind = arg_tensor(args, 1)?;
    let mode = take_mode(attrs)?;
    let out_shape = concrete(&take_shape(&dims(x.shape()), &dims(ind.shape()), attrs)?)?;
    let indices = ind.to_i128_vec();
    let ind_strides = strides(ind.shape());
    let flat_at = |idx: &[i64]| -> usize {
        idx.iter()
            .zip(&ind_strides)
            .map(|(i, s)| i * s)
            .sum::<i64>() as usize
    };
    let index_at = |pos: usize| -> Result<i128, String> {
        indices
            .get(pos)
            .copied()
            .ok_or_else(|| "internal error: index position out of range".to_owned())
    };
    let Some((axis, batch)) = take_axes(x.ndim(), ind.ndim(), attrs)? else {
        let n = x.num_elements() as i64;
        return value(gather(x, &out_shape, |idx| {
            resolve(index_at(flat_at(idx))?, n, mode)
        }));
    };
    let xs = x.shape().to_vec();
    let st = strides(&xs);
    let ir = ind.ndim();
    let picked = ir - batch;
    value(gather(x, &out_shape, |idx| {
        // The output index is `data[..axis] ++ indices[batch..] ++ data[axis + 1..]`.
        let mut at: Vec<i64> = idx[..batch].to_vec();
        at.extend_from_slice(&idx[axis..axis + picked]);
        let chosen = resolve(index_at(flat_at(&at))?, xs[axis], mode)?;
        let mut flat = 0i64;
        for d in 0..axis {
            flat += idx[d] * st[d];
        }
        flat += chosen * st[axis];
        for d in axis + 1..xs.len() {
            flat += idx[d - 1 + picked] * st[d];
        }
        Ok(flat)
    }))
}

// ----- tile, repeat, reverse -----

/// `tile`: the shape and the `reps` both padded with leading 1s to the longer rank, then
/// multiplied. Every repetition count must be positive (TVM).
fn tile_shape(shape: &[Dim], attrs: &Attrs) -> Result<Vec<Dim>, String> {
    let reps = attr_ints(attrs, "reps")?;
    if let Some(&r) = reps.iter().find(|&&r| r <= 0) {
        return Err(format!(
            "`reps` must be positive, got {r} in {}",
            list_text(&reps)
        ));
    }
    let rank = shape.len().max(reps.len());
    let mut out = Vec::with_capacity(rank);
    for i in 0..rank {
        let d = if i + shape.len() >= rank {
            shape[i + shape.len() - rank]
        } else {
            Dim::Known(1)
        };
        let r = if i + reps.len() >= rank {
            reps[i + reps.len() - rank]
        } else {
            1
        };
        out.push(dim_mul(d, Dim::Known(r))?);
    }
    Ok(out)
}

fn tile_rel(inputs: &[Type], attrs: &Attrs) -> Result<Type, String> {
    let (shape, dtype) = data_type(inputs)?;
    Ok(tensor(tile_shape(shape, attrs)?, dtype))
}

fn tile_eval(args: &[Value], attrs: &Attrs) -> Result<Value, String> {
    let x = arg_tensor(args, 0)?;
    let out_shape = concrete(&tile_shape(&dims(x.shape()), attrs)?)?;
    let xs = x.shape().to_vec();
    let st = strides(&xs);
    let offset = out_shape.len() - xs.len();
    value(gather(x, &out_shape, |idx| {
        Ok(xs
            .iter()
            .enumerate()
            .map(|(d, &n)| (idx[offset + d] % n.max(1)) * st[d])
            .sum())
    }))
}

/// `repeat`'s axis (`None`: the data is flattened first, as numpy does) and count.
fn repeat_args(rank: usize, attrs: &Attrs) -> Result<(Option<usize>, i64), String> {
    let repeats = attr_int(attrs, "repeats")?;
    if repeats < 1 {
        return Err(format!("`repeats` must be at least 1, got {repeats}"));
    }
    let axis = match attr_opt_int(attrs, "axis")? {
        Some(a) => Some(axis_index(a, rank)?),
        None => None,
    };
    Ok((axis, repeats))
}

fn repeat_shape(shape: &[Dim], attrs: &Attrs) -> Result<Vec<Dim>, String> {
    let (axis, repeats) = repeat_args(shape.len(), attrs)?;
    Ok(match axis {
        Some(a) => {
            let mut out = shape.to_vec();
            out[a] = dim_mul(shape[a], Dim::Known(repeats))?;
            out
        }
        None => {
            let total = element_count(shape).map_or(Dim::Any, |n| Dim::Known(n as i64));
            vec![dim_mul(total, Dim::Known(repeats))?]
        }
    })
}

fn repeat_rel(inputs: &[Type], attrs: &Attrs) -> Result<Type, String> {
    let (shape, dtype) = data_type(inputs)?;
    Ok(tensor(repeat_shape(shape, attrs)?, dtype))
}

fn repeat_eval(args: &[Value], attrs: &Attrs) -> Result<Value, String> {
    let x = arg_tensor(args, 0)?;
    let (axis, repeats) = repeat_args(x.ndim(), attrs)?;
    let out_shape = concrete(&repeat_shape(&dims(x.shape()), attrs)?)?;
    let st = strides(x.shape());
    value(gather(x, &out_shape, |idx| {
        Ok(match axis {
            Some(a) => idx
                .iter()
                .enumerate()
                .map(|(d, &i)| if d == a { i / repeats } else { i } * st[d])
                .sum(),
            None => idx[0] / repeats,
        })
    }))
}

/// The dimensions `reverse` flips: `axis`, or every one when `None`.
fn reversed_axes(rank: usize, attrs: &Attrs) -> Result<Vec<bool>, String> {
    match attr_opt_int(attrs, "axis")? {
        Some(a) => {
            let d = axis_index(a, rank)?;
            Ok((0..rank).map(|i| i == d).collect())
        }
        None => Ok(vec![true; rank]),
    }
}

fn reverse_rel(inputs: &[Type], attrs: &Attrs) -> Result<Type, String> {
    let (shape, dtype) = data_type(inputs)?;
    reversed_axes(shape.len(), attrs)?;
    Ok(tensor(shape.to_vec(), dtype))
}

fn reverse_eval(args: &[Value], attrs: &Attrs) -> Result<Value, String> {
    let x = arg_tensor(args, 0)?;
    let flip = reversed_axes(x.ndim(), attrs)?;
    let xs = x.shape().to_vec();
    let st = strides(&xs);
    value(gather(x, &xs, |idx| {
        Ok(idx
            .iter()
            .enumerate()
            .map(|(d, &i)| if flip[d] { xs[d] - 1 - i } else { i } * st[d])
            .sum())
    }))
}

// ----- Compute definitions -----
//
// Every shape operator is pure data movement: its compute definition reads each output element
// from the input position the reference evaluation copies it from. Index expressions are folded
// where their operands are constants, so that the common cases (a size-1 dimension, a unit
// stride) stay plain loop variables. An output with no elements reads nothing.

/// `a + c` on indices.
fn ix_add_c(a: TExpr, c: i64) -> TExpr {
    ix_add(a, TExpr::index(c))
}

/// `a * c` on indices.
fn ix_mul_c(a: TExpr, c: i64) -> TExpr {
    match (const_index(&a), c) {
        (_, 0) | (Some(0), _) => TExpr::index(0),
        (_, 1) => a,
        (Some(x), _) => TExpr::int(x * i128::from(c), DType::I64),
        _ => a.binary(BinaryOp::Mul, TExpr::index(c)),
    }
}

/// `a / c` on non-negative indices (`c > 0`).
fn ix_div_c(a: TExpr, c: i64) -> TExpr {
    match const_index(&a) {
        _ if c == 1 => a,
        Some(x) => TExpr::int(x / i128::from(c), DType::I64),
        None => a.binary(BinaryOp::Div, TExpr::index(c)),
    }
}

/// `a % c` on non-negative indices (`c > 0`).
fn ix_mod_c(a: TExpr, c: i64) -> TExpr {
    match const_index(&a) {
        _ if c == 1 => TExpr::index(0),
        Some(x) => TExpr::int(x % i128::from(c), DType::I64),
        None => a.binary(BinaryOp::Mod, TExpr::index(c)),
    }
}

/// `min(max(a, lo), hi)` on indices, either bound left out when `None`.
fn ix_clamp(a: TExpr, lo: Option<i64>, hi: Option<i64>) -> TExpr {
    let a = match lo {
        Some(lo) => a.binary(BinaryOp::Max, TExpr::index(lo)),
        None => a,
    };
    match hi {
        Some(hi) => a.binary(BinaryOp::Min, TExpr::index(hi)),
        None => a,
    }
}

/// The number of elements of a static shape.
fn num_elements(shape: &[i64]) -> i64 {
    shape.iter().product()
}

/// The output of `name` when it has no elements: nothing to read, so zeros.
fn empty_output(name: &str, shape: &[i64], dtype: DType) -> TeValue {
    TeValue::Tensor(Tensor::compute(name, shape, |_| compute::zero(dtype)))
}

/// The row-major position of `index` in `shape`.
fn flat_position(index: &[TExpr], shape: &[i64]) -> TExpr {
    let mut flat = TExpr::index(0);
    let mut stride = 1i64;
    for (i, &n) in index.iter().zip(shape).rev() {
        // A dimension of size 1 is only ever indexed at 0.
        if n != 1 {
            flat = ix_add(ix_mul_c(i.clone(), stride), flat);
        }
        stride = stride.saturating_mul(n);
    }
    flat
}

/// The multi-index of the row-major position `flat` in `shape` (every dimension positive).
fn unflatten(flat: TExpr, shape: &[i64]) -> Vec<TExpr> {
    let mut out = Vec::with_capacity(shape.len());
    let mut stride: i64 = shape.iter().product();
    // The outermost dimension above 1 needs no modulo: `flat` is below the element count.
    let mut outermost = true;
    for &n in shape {
        stride /= n;
        if n == 1 {
            out.push(TExpr::index(0));
            continue;
        }
        let q = ix_div_c(flat.clone(), stride);
        out.push(if outermost { q } else { ix_mod_c(q, n) });
        outermost = false;
    }
    out
}

/// The index into a tensor of shape `from` of the element a reshape to `to` puts at `index`
/// (both shapes of the same positive number of elements). The shapes are cut into the shortest
/// groups of consecutive dimensions with equal products, and each group is mapped on its own,
/// so that dimensions a reshape leaves alone keep their loop variables.
fn reshape_index(index: &[TExpr], to: &[i64], from: &[i64]) -> Vec<TExpr> {
    let mut out = Vec::with_capacity(from.len());
    let (mut i, mut j) = (0usize, 0usize);
    while i < from.len() || j < to.len() {
        let (i0, j0) = (i, j);
        let (mut pi, mut pj) = (1i64, 1i64);
        loop {
            if (pi <= pj && i < from.len()) || j >= to.len() {
                pi *= from[i];
                i += 1;
            } else {
                pj *= to[j];
                j += 1;
            }
            if pi == pj || (i >= from.len() && j >= to.len()) {
                break;
            }
        }
        let flat = flat_position(&index[j0..j], &to[j0..j]);
        out.extend(unflatten(flat, &from[i0..i]));
    }
    out
}

/// Checks that the output type's shape is the one the operator's shape function gives for
/// the inputs (the compute definitions index by both).
fn expect_shape(op: &str, shape: &[i64], want: &[Dim]) -> Result<(), String> {
    if known(want).as_deref() == Some(shape) {
        Ok(())
    } else {
        Err(format!(
            "internal error: {op}'s output shape is {shape:?}, its inputs give {}",
            shape_text(want)
        ))
    }
}

/// The tensor inputs of a tuple input (`concatenate`, `stack`).
fn tuple_input(inputs: &[TeValue]) -> Result<Vec<&Tensor>, String> {
    match inputs {
        [TeValue::Tuple(fields)] => fields
            .iter()
            .enumerate()
            .map(|(i, f)| {
                f.as_tensor()
                    .ok_or_else(|| format!("field {i} of the input must be a tensor"))
            })
            .collect(),
        _ => Err("expects one input, a tuple of tensors".into()),
    }
}

/// `data` read in the output's shape, row-major order kept: `reshape`,
/// `contrib_reverse_reshape`, `reshape_like`, `expand_dims` and `squeeze`.
fn reshape_te(name: &str, inputs: &[TeValue], out: &Type) -> ComputeResult {
    let (shape, dtype) = compute::static_tensor(out)?;
    let x = compute::input(inputs, 0)?;
    if num_elements(&x.shape) != num_elements(&shape) {
        return Err(format!(
            "{name} cannot turn shape {:?} into {shape:?}",
            x.shape
        ));
    }
    if num_elements(&shape) == 0 {
        return Ok(empty_output(name, &shape, dtype));
    }
    let t = Tensor::compute(name, &shape, |i| x.at(&reshape_index(i, &shape, &x.shape)));
    compute::tensor_value(t)
}

/// `transpose`: output dimension `k` indexes input dimension `perm[k]`.
fn transpose_te(inputs: &[TeValue], attrs: &Attrs, out: &Type) -> ComputeResult {
    let (shape, _) = compute::static_tensor(out)?;
    let x = compute::input(inputs, 0)?;
    let perm = permutation(x.shape.len(), attrs)?;
    let want: Vec<Dim> = perm.iter().map(|&p| Dim::Known(x.shape[p])).collect();
    expect_shape("transpose", &shape, &want)?;
    let t = Tensor::compute("T_transpose", &shape, |i| {
        let mut at = vec![TExpr::index(0); perm.len()];
        for (k, &p) in perm.iter().enumerate() {
            at[p] = i[k].clone();
        }
        x.at(&at)
    });
    compute::tensor_value(t)
}

/// `concatenate`: along the axis, a chain of selects on the output position, each piece read
/// at that position less its offset, clamped into the piece (a select evaluates both
/// branches). Empty pieces are skipped.
fn concatenate_te(inputs: &[TeValue], attrs: &Attrs, out: &Type) -> ComputeResult {
    let (shape, dtype) = compute::static_tensor(out)?;
    let parts = tuple_input(inputs)?;
    let shapes: Vec<Vec<Dim>> = parts.iter().map(|p| dims(&p.shape)).collect();
    let refs: Vec<&[Dim]> = shapes.iter().map(Vec::as_slice).collect();
    if refs.iter().any(|s| s.len() != shape.len()) {
        return Err("concatenate needs tensors of the output's rank".into());
    }
    let (want, axis) = concatenate_shape(&refs, attrs)?;
    expect_shape("concatenate", &shape, &want)?;
    if num_elements(&shape) == 0 {
        return Ok(empty_output("T_concat", &shape, dtype));
    }
    let total = shape[axis];
    // Each non-empty piece with its offset along the axis.
    let mut pieces = Vec::with_capacity(parts.len());
    let mut offset = 0i64;
    for p in parts {
        let n = p.shape[axis];
        if n > 0 {
            pieces.push((p, offset, n));
        }
        offset += n;
    }
    let t = Tensor::compute("T_concat", &shape, |i| {
        let read = |&(p, off, n): &(&Tensor, i64, i64)| {
            let lo = (off > 0).then_some(0);
            let hi = (off + n < total).then_some(n - 1);
            let mut at = i.to_vec();
            at[axis] = ix_clamp(ix_add_c(i[axis].clone(), -off), lo, hi);
            p.at(&at)
        };
        let mut rest = pieces.iter().rev();
        let mut body = rest.next().map_or_else(|| compute::zero(dtype), read);
        for piece in rest {
            let end = TExpr::index(piece.1 + piece.2);
            body = i[axis]
                .clone()
                .compare(CmpOp::Lt, end)
                .select(read(piece), body);
        }
        body
    });
    compute::tensor_value(t)
}

/// `stack`: the output index without the new axis, in the piece that axis selects.
fn stack_te(inputs: &[TeValue], attrs: &Attrs, out: &Type) -> ComputeResult {
    let (shape, dtype) = compute::static_tensor(out)?;
    let parts = tuple_input(inputs)?;
    let shapes: Vec<Vec<Dim>> = parts.iter().map(|p| dims(&p.shape)).collect();
    let refs: Vec<&[Dim]> = shapes.iter().map(Vec::as_slice).collect();
    if refs.iter().any(|s| s.len() + 1 != shape.len()) {
        return Err("stack needs tensors of one rank less than the output's".into());
    }
    let (want, axis) = stack_shape(&refs, attrs)?;
    expect_shape("stack", &shape, &want)?;
    if num_elements(&shape) == 0 {
        return Ok(empty_output("T_stack", &shape, dtype));
    }
    let t = Tensor::compute("T_stack", &shape, |i| {
        let mut at = i.to_vec();
        at.remove(axis);
        let mut rest = parts.iter().enumerate().rev();
        let mut body = rest
            .next()
            .map_or_else(|| compute::zero(dtype), |(_, p)| p.at(&at));
        for (k, p) in rest {
            body = i[axis]
                .clone()
                .compare(CmpOp::Eq, TExpr::index(k as i64))
                .select(p.at(&at), body);
        }
        body
    });
    compute::tensor_value(t)
}

/// `split`: a tuple of slices along the axis.
fn split_te(inputs: &[TeValue], attrs: &Attrs, out: &Type) -> ComputeResult {
    let x = compute::input(inputs, 0)?;
    let (axis, pieces) = split_pieces(&dims(&x.shape), attrs)?;
    let lens = concrete(&pieces)?;
    let TypeKind::Tuple(fields) = out.kind() else {
        return Err(format!("split's output must be a tuple, got `{out}`"));
    };
    if fields.len() != lens.len() {
        return Err(format!(
            "split makes {} pieces, its output type has {}",
            lens.len(),
            fields.len()
        ));
    }
    let mut begin = 0i64;
    let mut outs = Vec::with_capacity(lens.len());
    for (field, len) in fields.iter().zip(lens) {
        let (shape, dtype) = compute::static_tensor(field)?;
        let mut want = dims(&x.shape);
        want[axis] = Dim::Known(len);
        expect_shape("split", &shape, &want)?;
        outs.push(if num_elements(&shape) == 0 {
            empty_output("T_split", &shape, dtype)
        } else {
            let start = begin;
            TeValue::Tensor(Tensor::compute("T_split", &shape, |i| {
                let mut at = i.to_vec();
                at[axis] = ix_add_c(i[axis].clone(), start);
                x.at(&at)
            }))
        });
        begin += len;
    }
    Ok(TeValue::Tuple(outs))
}

/// `strided_slice`: `begin + i * step` in every dimension, as the reference plans it.
fn strided_slice_te(inputs: &[TeValue], attrs: &Attrs, out: &Type) -> ComputeResult {
    let (shape, dtype) = compute::static_tensor(out)?;
    let x = compute::input(inputs, 0)?;
    let plan = slice_dims(&dims(&x.shape), attrs)?;
    let lens = concrete(&plan.iter().map(|p| p.len).collect::<Vec<_>>())?;
    if lens != shape {
        return Err(format!(
            "strided_slice makes shape {lens:?}, its output type is `{out}`"
        ));
    }
    if num_elements(&shape) == 0 {
        return Ok(empty_output("T_strided_slice", &shape, dtype));
    }
    let t = Tensor::compute("T_strided_slice", &shape, |i| {
        let at: Vec<TExpr> = plan
            .iter()
            .zip(i)
            .zip(&shape)
            .map(|((p, i), &n)| {
                if n == 1 {
                    TExpr::index(p.begin)
                } else {
                    ix_add_c(ix_mul_c(i.clone(), p.step), p.begin)
                }
            })
            .collect();
        x.at(&at)
    });
    compute::tensor_value(t)
}

/// The position an index read from `take`'s indices selects along `n > 0` elements, as an
/// `int64` inside `0..n`: clipped (modes `clip` and `fast`, which must not read out of bounds
/// either) or wrapped. A `uint64` index is resolved before it is converted, since it may not
/// fit an `int64`.
fn take_position(index: TExpr, n: i64, mode: TakeMode) -> TExpr {
    let dtype = index.dtype();
    let unsigned64 = dtype == DType::U64;
    match mode {
        TakeMode::Wrap if unsigned64 => index
            .binary(BinaryOp::FloorMod, compute::int_const(i128::from(n), dtype))
            .cast(DType::I64),
        TakeMode::Wrap => index
            .cast(DType::I64)
            .binary(BinaryOp::FloorMod, TExpr::index(n)),
        TakeMode::Clip | TakeMode::Fast if unsigned64 => index
            .binary(BinaryOp::Min, compute::int_const(i128::from(n - 1), dtype))
            .cast(DType::I64),
        TakeMode::Clip | TakeMode::Fast => ix_clamp(index.cast(DType::I64), Some(0), Some(n - 1)),
    }
}

/// `take`: the data (flattened without an axis) at positions read from the indices.
fn take_te(inputs: &[TeValue], attrs: &Attrs, out: &Type) -> ComputeResult {
    let (shape, dtype) = compute::static_tensor(out)?;
    let x = compute::input(inputs, 0)?;
    let ind = compute::input(inputs, 1)?;
    let mode = take_mode(attrs)?;
    if !ind.dtype.is_int() {
        return Err(format!(
            "take's indices must be integers, got {}",
            ind.dtype
        ));
    }
    expect_shape(
        "take",
        &shape,
        &take_shape(&dims(&x.shape), &dims(&ind.shape), attrs)?,
    )?;
    if num_elements(&shape) == 0 {
        return Ok(empty_output("T_take", &shape, dtype));
    }
    let axes = take_axes(x.shape.len(), ind.shape.len(), attrs)?;
    let n = match axes {
        Some((axis, _)) => x.shape[axis],
        None => num_elements(&x.shape),
    };
    if n == 0 {
        return Err("take selects from an empty axis: every index is out of bounds".into());
    }
    let t = Tensor::compute("T_take", &shape, |i| match axes {
        None => {
            let pos = take_position(ind.at(i), n, mode);
            x.at(&unflatten(pos, &x.shape))
        }
        Some((axis, batch)) => {
            let picked = ind.shape.len() - batch;
            let mut at: Vec<TExpr> = i[..batch].to_vec();
            at.extend_from_slice(&i[axis..axis + picked]);
            let pos = take_position(ind.at(&at), n, mode);
            let mut from: Vec<TExpr> = i[..axis].to_vec();
            from.push(pos);
            from.extend_from_slice(&i[axis + picked..]);
            x.at(&from)
        }
    });
    compute::tensor_value(t)
}

/// `tile`: every input dimension read at the output index modulo its extent.
fn tile_te(inputs: &[TeValue], attrs: &Attrs, out: &Type) -> ComputeResult {
    let (shape, dtype) = compute::static_tensor(out)?;
    let x = compute::input(inputs, 0)?;
    expect_shape("tile", &shape, &tile_shape(&dims(&x.shape), attrs)?)?;
    let offset = shape
        .len()
        .checked_sub(x.shape.len())
        .ok_or("tile's output has a lower rank than its input")?;
    if num_elements(&shape) == 0 {
        return Ok(empty_output("T_tile", &shape, dtype));
    }
    let t = Tensor::compute("T_tile", &shape, |i| {
        let at: Vec<TExpr> = x
            .shape
            .iter()
            .enumerate()
            .map(|(d, &n)| {
                if n == shape[offset + d] {
                    i[offset + d].clone()
                } else {
                    ix_mod_c(i[offset + d].clone(), n)
                }
            })
            .collect();
        x.at(&at)
    });
    compute::tensor_value(t)
}

/// `repeat`: the output index along the axis (or the flat output position) divided by the
/// count.
fn repeat_te(inputs: &[TeValue], attrs: &Attrs, out: &Type) -> ComputeResult {
    let (shape, dtype) = compute::static_tensor(out)?;
    let x = compute::input(inputs, 0)?;
    let (axis, repeats) = repeat_args(x.shape.len(), attrs)?;
    expect_shape("repeat", &shape, &repeat_shape(&dims(&x.shape), attrs)?)?;
    if num_elements(&shape) == 0 {
        return Ok(empty_output("T_repeat", &shape, dtype));
    }
    let t = Tensor::compute("T_repeat", &shape, |i| match axis {
        Some(a) => {
            let mut at = i.to_vec();
            at[a] = ix_div_c(i[a].clone(), repeats);
            x.at(&at)
        }
        None => x.at(&unflatten(ix_div_c(i[0].clone(), repeats), &x.shape)),
    });
    compute::tensor_value(t)
}

/// `reverse`: `n - 1 - i` along the flipped dimensions.
fn reverse_te(inputs: &[TeValue], attrs: &Attrs, out: &Type) -> ComputeResult {
    let (shape, dtype) = compute::static_tensor(out)?;
    let x = compute::input(inputs, 0)?;
    let flip = reversed_axes(x.shape.len(), attrs)?;
    expect_shape("reverse", &shape, &dims(&x.shape))?;
    if num_elements(&shape) == 0 {
        return Ok(empty_output("T_reverse", &shape, dtype));
    }
    let t = Tensor::compute("T_reverse", &shape, |i| {
        let at: Vec<TExpr> = i
            .iter()
            .zip(&flip)
            .zip(&x.shape)
            .map(|((i, &f), &n)| {
                if f && n > 1 {
                    TExpr::index(n - 1).binary(BinaryOp::Sub, i.clone())
                } else if f {
                    TExpr::index(0)
                } else {
                    i.clone()
                }
            })
            .collect();
        x.at(&at)
    });
    compute::tensor_value(t)
}

#[cfg(test)]
mod tests {
    use crate::testing::{attrs, ints};

    use super::*;

    fn int(i: i64) -> AttrValue {
        AttrValue::Int(i)
    }

    fn text(s: &str) -> AttrValue {
        AttrValue::Str(s.into())
    }

    fn ty(shape: &[i64], dtype: DType) -> Type {
        Type::tensor(shape, dtype)
    }

    fn f32ty(shape: &[i64]) -> Type {
        ty(shape, DType::F32)
    }

    /// A tensor type where `-1` stands for an unknown dimension.
    fn any_ty(shape: &[i64]) -> Type {
        tensor(
            shape
                .iter()
                .map(|&d| if d < 0 { Dim::Any } else { Dim::Known(d) })
                .collect(),
            DType::F32,
        )
    }

    /// The relation of `op` on `inputs`, printed.
    fn rel(op: &str, inputs: &[&Type], set: &[(&str, AttrValue)]) -> Result<String, String> {
        let f = crate::lookup(op).unwrap().relation.unwrap();
        let inputs: Vec<Type> = inputs.iter().map(|&t| t.clone()).collect();
        f(&inputs, &attrs(op, set)).map(|t| t.to_string())
    }

    fn eval(op: &str, args: &[&Value], set: &[(&str, AttrValue)]) -> Result<Value, String> {
        let f = crate::lookup(op).unwrap().eval.unwrap();
        let args: Vec<Value> = args.iter().map(|&v| v.clone()).collect();
        f(&args, &attrs(op, set))
    }

    fn typed(dtype: DType, shape: &[i64], v: &[i128]) -> Value {
        Value::tensor(NDArray::from_i128_slice(dtype, shape, v).unwrap())
    }

    /// 0, 1, 2, ... as a tensor of `dtype` (bool: alternating false and true).
    fn iota(dtype: DType, shape: &[i64]) -> Value {
        let n: i64 = shape.iter().product();
        let v: Vec<i128> = (0..n as i128)
            .map(|i| if dtype == DType::BOOL { i % 2 } else { i })
            .collect();
        typed(dtype, shape, &v)
    }

    /// Shape, dtype and elements (as integers) of a tensor value.
    fn parts(v: &Value) -> (Vec<i64>, DType, Vec<i128>) {
        let t = v.as_tensor().unwrap();
        (t.shape().to_vec(), t.dtype(), t.to_i128_vec())
    }

    /// Shape and elements of a tensor value.
    fn shape_values(v: &Value) -> (Vec<i64>, Vec<i128>) {
        let (s, _, v) = parts(v);
        (s, v)
    }

    const DTYPES: [DType; 8] = [
        DType::BOOL,
        DType::I8,
        DType::U16,
        DType::I32,
        DType::I64,
        DType::F16,
        DType::F32,
        DType::F64,
    ];

    #[test]
    fn reshape_special_values() {
        let x = f32ty(&[2, 3, 4]);
        let r = |ns: &[i64]| rel("reshape", &[&x], &[("newshape", ints(ns))]);
        assert_eq!(r(&[0, -1]).unwrap(), "Tensor[(2, 12), float32]");
        assert_eq!(r(&[4, 0, 2]).unwrap(), "Tensor[(4, 3, 2), float32]");
        assert_eq!(r(&[2, 0, 0]).unwrap(), "Tensor[(2, 3, 4), float32]");
        assert_eq!(r(&[6, 1, -1]).unwrap(), "Tensor[(6, 1, 4), float32]");
        assert_eq!(r(&[3, -1, 8]).unwrap(), "Tensor[(3, 1, 8), float32]");
        assert_eq!(r(&[-1]).unwrap(), "Tensor[(24), float32]");
        assert_eq!(r(&[-2]).unwrap(), "Tensor[(2, 3, 4), float32]");
        assert_eq!(r(&[2, -2]).unwrap(), "Tensor[(2, 3, 4), float32]");
        assert_eq!(r(&[-2, 1, 1]).unwrap(), "Tensor[(2, 3, 4, 1, 1), float32]");
        assert_eq!(r(&[-3, 4]).unwrap(), "Tensor[(6, 4), float32]");
        assert_eq!(r(&[0, -3]).unwrap(), "Tensor[(2, 12), float32]");
        assert_eq!(r(&[-3, -2]).unwrap(), "Tensor[(6, 4), float32]");
        assert_eq!(r(&[-4, 1, 2, -2]).unwrap(), "Tensor[(1, 2, 3, 4), float32]");
        assert_eq!(
            r(&[2, -4, -1, 3, 4]).unwrap(),
            "Tensor[(2, 1, 3, 4), float32]"
        );
        assert_eq!(
            r(&[-4, 2, -1, -2]).unwrap(),
            "Tensor[(2, 1, 3, 4), float32]"
        );
        assert_eq!(
            rel(
                "reshape",
                &[&f32ty(&[2, 3, 4, 5])],
                &[("newshape", ints(&[-3, -3]))]
            )
            .unwrap(),
            "Tensor[(6, 20), float32]"
        );
        // `allowzero` makes 0 a size.
        assert_eq!(
            rel(
                "reshape",
                &[&f32ty(&[0, 3])],
                &[
                    ("newshape", ints(&[3, 0])),
                    ("allowzero", AttrValue::Bool(true))
                ]
            )
            .unwrap(),
            "Tensor[(3, 0), float32]"
        );
        // Errors.
        assert_eq!(
            r(&[5, -1]).unwrap_err(),
            "reshape cannot turn (2, 3, 4) into (5, -1): 24 elements do not divide by 5"
        );
        assert_eq!(
            r(&[5, 5]).unwrap_err(),
            "reshape cannot turn (2, 3, 4) into (5, 5): the input has 24 elements, the new shape 25"
        );
        assert!(
            r(&[-1, -1])
                .unwrap_err()
                .contains("only one dimension can be -1")
        );
        assert!(r(&[0, 0, 0, 0]).unwrap_err().contains("does not exist"));
        assert!(r(&[2, -3, 1]).is_ok());
        assert!(r(&[2, 3, -3]).unwrap_err().contains("`-3` at position 2"));
        assert!(r(&[-4, 2]).unwrap_err().contains("followed by two values"));
        assert!(r(&[-4, -1, -1, -2]).is_err());
        assert!(
            r(&[-4, 4, -1, -2])
                .unwrap_err()
                .contains("dimension 2 does not split into (4, -1)")
        );
        assert!(r(&[-5]).unwrap_err().contains("-5 is not a size"));
        // Unknown dimensions.
        let d = any_ty(&[-1, 3, 4]);
        let r = |ns: &[i64]| rel("reshape", &[&d], &[("newshape", ints(ns))]);
        assert_eq!(r(&[0, -1]).unwrap(), "Tensor[(?, 12), float32]");
        assert_eq!(r(&[-1, 4]).unwrap(), "Tensor[(?, 4), float32]");
        assert_eq!(r(&[-3, 4]).unwrap(), "Tensor[(?, 4), float32]");
        assert_eq!(
            r(&[-4, 2, -1, -2]).unwrap(),
            "Tensor[(2, ?, 3, 4), float32]"
        );
        assert_eq!(r(&[0, 0, 2, 2]).unwrap(), "Tensor[(?, 3, 2, 2), float32]");
        // contrib_reverse_reshape reads from the right.
        assert_eq!(
            rel(
                "contrib_reverse_reshape",
                &[&f32ty(&[10, 5, 4])],
                &[("newshape", ints(&[-1, 0]))]
            )
            .unwrap(),
            "Tensor[(50, 4), float32]"
        );
    }

    #[test]
    fn reshape_moves_no_data() {
        for dtype in DTYPES {
            let x = iota(dtype, &[2, 3, 4]);
            let y = eval("reshape", &[&x], &[("newshape", ints(&[-4, 1, 2, -2]))]).unwrap();
            let (s, d, v) = parts(&y);
            assert_eq!((s, d), (vec![1, 2, 3, 4], dtype));
            assert_eq!(v, parts(&x).2);
        }
        let e = iota(DType::F32, &[0, 3]);
        let (s, _) =
            shape_values(&eval("reshape", &[&e], &[("newshape", ints(&[-1, 3]))]).unwrap());
        assert_eq!(s, vec![0, 3]);
        let (s, _) =
            shape_values(&eval("reshape", &[&e], &[("newshape", ints(&[3, -1]))]).unwrap());
        assert_eq!(s, vec![3, 0]);
        let zero = [
            ("newshape", ints(&[-1, 0])),
            ("allowzero", AttrValue::Bool(true)),
        ];
        assert!(
            eval("reshape", &[&e], &zero)
                .unwrap_err()
                .contains("size 0")
        );
        let like = iota(DType::I8, &[3, 8]);
        let x = iota(DType::I32, &[2, 3, 4]);
        let (s, v) = shape_values(&eval("reshape_like", &[&x, &like], &[]).unwrap());
        assert_eq!(s, vec![3, 8]);
        assert_eq!(v, (0..24).collect::<Vec<i128>>());
    }

    #[test]
    fn reshape_like_ranges() {
        let x = f32ty(&[2, 3, 4]);
        let like = ty(&[6, 2, 2], DType::I8);
        assert_eq!(
            rel("reshape_like", &[&x, &like], &[]).unwrap(),
            "Tensor[(6, 2, 2), float32]"
        );
        assert_eq!(
            rel(
                "reshape_like",
                &[&x, &ty(&[12, 5], DType::I8)],
                &[("lhs_begin", int(1)), ("rhs_end", int(1))]
            )
            .unwrap(),
            "Tensor[(2, 12), float32]"
        );
        assert_eq!(
            rel(
                "reshape_like",
                &[&x, &ty(&[6, 7], DType::I8)],
                &[("lhs_end", int(-1)), ("rhs_end", int(-1))]
            )
            .unwrap(),
            "Tensor[(6, 4), float32]"
        );
        assert_eq!(
            rel("reshape_like", &[&x, &ty(&[5], DType::I8)], &[]).unwrap_err(),
            "reshape_like cannot turn (2, 3, 4) into (5): 24 elements, not 5"
        );
        assert!(rel("reshape_like", &[&x, &like], &[("lhs_begin", int(4))]).is_err());
        assert_eq!(
            rel("reshape_like", &[&any_ty(&[-1, 4]), &like], &[]).unwrap(),
            "Tensor[(6, 2, 2), float32]"
        );
    }

    #[test]
    fn transpose_expand_squeeze() {
        let x = f32ty(&[2, 3, 4]);
        let axes = |a: Option<&[i64]>| [("axes", a.map_or(AttrValue::Null, ints))];
        assert_eq!(
            rel("transpose", &[&x], &axes(Some(&[2, 0, 1]))).unwrap(),
            "Tensor[(4, 2, 3), float32]"
        );
        assert_eq!(
            rel("transpose", &[&x], &axes(None)).unwrap(),
            "Tensor[(4, 3, 2), float32]"
        );
        assert_eq!(
            rel("transpose", &[&x], &axes(Some(&[-1, 0, 1]))).unwrap(),
            "Tensor[(4, 2, 3), float32]"
        );
        assert!(rel("transpose", &[&x], &axes(Some(&[0, 1]))).is_err());
        assert_eq!(
            rel("transpose", &[&x], &axes(Some(&[0, 0, 1]))).unwrap_err(),
            "`axes` lists dimension 0 twice"
        );
        assert_eq!(
            rel("transpose", &[&x], &axes(Some(&[0, 1, 3]))).unwrap_err(),
            "axis 3 is out of range for a tensor of rank 3"
        );
        let e = |axis: i64, n: i64| {
            rel(
                "expand_dims",
                &[&x],
                &[("axis", int(axis)), ("num_newaxis", int(n))],
            )
        };
        assert_eq!(e(1, 2).unwrap(), "Tensor[(2, 1, 1, 3, 4), float32]");
        assert_eq!(e(-1, 1).unwrap(), "Tensor[(2, 3, 4, 1), float32]");
        assert_eq!(e(-4, 1).unwrap(), "Tensor[(1, 2, 3, 4), float32]");
        assert_eq!(e(3, 0).unwrap(), "Tensor[(2, 3, 4), float32]");
        assert!(e(4, 1).is_err() && e(-5, 1).is_err() && e(0, -1).is_err());
        let y = f32ty(&[1, 3, 1]);
        let sq = |a: Option<&[i64]>| {
            rel(
                "squeeze",
                &[&y],
                &[("axis", a.map_or(AttrValue::Null, ints))],
            )
        };
        assert_eq!(sq(None).unwrap(), "Tensor[(3), float32]");
        assert_eq!(sq(Some(&[-1])).unwrap(), "Tensor[(1, 3), float32]");
        assert_eq!(
            sq(Some(&[1])).unwrap_err(),
            "cannot squeeze axis 1: its dimension is 3, not 1"
        );
        assert_eq!(
            rel("squeeze", &[&any_ty(&[-1, 1])], &[]).unwrap(),
            "Tensor[(?), float32]"
        );
        for dtype in DTYPES {
            let x = iota(dtype, &[2, 3, 4]);
            let (s, d, v) = parts(&eval("transpose", &[&x], &axes(Some(&[2, 0, 1]))).unwrap());
            assert_eq!((s, d), (vec![4, 2, 3], dtype));
            let expect: Vec<i128> = [
                0, 4, 8, 12, 16, 20, 1, 5, 9, 13, 17, 21, 2, 6, 10, 14, 18, 22, 3, 7, 11, 15, 19,
                23,
            ]
            .iter()
            .map(|&i| if dtype == DType::BOOL { i % 2 } else { i })
            .collect();
            assert_eq!(v, expect, "{dtype}");
            let z = eval(
                "expand_dims",
                &[&x],
                &[("axis", int(1)), ("num_newaxis", int(2))],
            )
            .unwrap();
            let (s, _, v) = parts(&z);
            assert_eq!(s, vec![2, 1, 1, 3, 4]);
            let back = eval("squeeze", &[&z], &[("axis", ints(&[1, 2]))]).unwrap();
            assert_eq!(parts(&back), (vec![2, 3, 4], dtype, v));
        }
        let m = iota(DType::I32, &[2, 3]);
        let (s, v) = shape_values(&eval("transpose", &[&m], &axes(None)).unwrap());
        assert_eq!((s, v), (vec![3, 2], vec![0, 3, 1, 4, 2, 5]));
        let (s, _) =
            shape_values(&eval("transpose", &[&iota(DType::F32, &[0, 2])], &axes(None)).unwrap());
        assert_eq!(s, vec![2, 0]);
        let (s, _) = shape_values(&eval("squeeze", &[&iota(DType::I8, &[1, 1])], &[]).unwrap());
        assert_eq!(s, Vec::<i64>::new());
        assert!(eval("squeeze", &[&m], &[("axis", ints(&[0]))]).is_err());
    }

    fn tuple_ty(fields: &[Type]) -> Type {
        Type::tuple(fields.to_vec())
    }

    fn tuple(fields: &[&Value]) -> Value {
        Value::tuple(fields.iter().map(|&v| v.clone()).collect())
    }

    #[test]
    fn concatenate_and_stack() {
        let a = f32ty(&[2, 2]);
        let b = f32ty(&[2, 3]);
        let axis = |a: i64| [("axis", int(a))];
        assert_eq!(
            rel(
                "concatenate",
                &[&tuple_ty(&[a.clone(), b.clone()])],
                &axis(1)
            )
            .unwrap(),
            "Tensor[(2, 5), float32]"
        );
        assert_eq!(
            rel(
                "concatenate",
                &[&tuple_ty(&[a.clone(), b.clone()])],
                &axis(-1)
            )
            .unwrap(),
            "Tensor[(2, 5), float32]"
        );
        assert_eq!(
            rel(
                "concatenate",
                &[&tuple_ty(&[a.clone(), b.clone()])],
                &axis(0)
            )
            .unwrap_err(),
            "concatenate needs equal dimensions off axis 0, got 2 and 3 on axis 1"
        );
        assert!(
            rel(
                "concatenate",
                &[&tuple_ty(&[a.clone(), b.clone()])],
                &axis(2)
            )
            .is_err()
        );
        assert!(rel("concatenate", &[&tuple_ty(&[])], &axis(0)).is_err());
        assert!(
            rel(
                "concatenate",
                &[&tuple_ty(&[a.clone(), ty(&[2, 2], DType::I32)])],
                &axis(0)
            )
            .is_err()
        );
        assert!(
            rel(
                "concatenate",
                &[&tuple_ty(&[a.clone(), f32ty(&[4])])],
                &axis(0)
            )
            .is_err()
        );
        assert!(rel("concatenate", &[&a], &axis(0)).is_err());
        assert_eq!(
            rel(
                "concatenate",
                &[&tuple_ty(&[any_ty(&[-1, 3]), any_ty(&[2, -1])])],
                &axis(0)
            )
            .unwrap(),
            "Tensor[(?, 3), float32]"
        );
        assert_eq!(
            rel(
                "stack",
                &[&tuple_ty(&[a.clone(), a.clone(), a.clone()])],
                &axis(1)
            )
            .unwrap(),
            "Tensor[(2, 3, 2), float32]"
        );
        assert_eq!(
            rel("stack", &[&tuple_ty(&[a.clone(), a.clone()])], &axis(-1)).unwrap(),
            "Tensor[(2, 2, 2), float32]"
        );
        assert!(rel("stack", &[&tuple_ty(&[a.clone(), a.clone()])], &axis(3)).is_err());
        assert_eq!(
            rel("stack", &[&tuple_ty(&[a.clone(), b.clone()])], &axis(0)).unwrap_err(),
            "stack needs tensors of one shape, got 2 and 3 on axis 1"
        );
        for dtype in DTYPES {
            let map = |v: &[i128]| -> Vec<i128> {
                v.iter()
                    .map(|&i| {
                        if dtype == DType::BOOL {
                            i128::from(i % 2 != 0)
                        } else {
                            i
                        }
                    })
                    .collect()
            };
            let x = typed(dtype, &[2, 2], &map(&[0, 1, 2, 3]));
            let y = typed(dtype, &[2, 3], &map(&[10, 11, 12, 13, 14, 15]));
            let (s, d, v) = parts(&eval("concatenate", &[&tuple(&[&x, &y])], &axis(1)).unwrap());
            assert_eq!((s, d), (vec![2, 5], dtype));
            assert_eq!(v, map(&[0, 1, 10, 11, 12, 2, 3, 13, 14, 15]));
            let z = typed(dtype, &[2, 2], &map(&[10, 11, 12, 13]));
            let (s, _, v) = parts(&eval("stack", &[&tuple(&[&x, &z])], &axis(1)).unwrap());
            assert_eq!(s, vec![2, 2, 2]);
            assert_eq!(v, map(&[0, 1, 10, 11, 2, 3, 12, 13]));
            let (_, _, v) = parts(&eval("stack", &[&tuple(&[&x, &z])], &axis(-1)).unwrap());
            assert_eq!(v, map(&[0, 10, 1, 11, 2, 12, 3, 13]));
        }
        let e = iota(DType::F32, &[0, 2]);
        let x = iota(DType::F32, &[1, 2]);
        let (s, v) =
            shape_values(&eval("concatenate", &[&tuple(&[&e, &x, &e])], &axis(0)).unwrap());
        assert_eq!((s, v), (vec![1, 2], vec![0, 1]));
        assert!(
            eval(
                "concatenate",
                &[&tuple(&[&x, &iota(DType::F32, &[1, 3])])],
                &axis(0)
            )
            .is_err()
        );
        assert!(eval("stack", &[&tuple(&[])], &axis(0)).is_err());
    }

    #[test]
    fn split_pieces_and_values() {
        let x = f32ty(&[2, 3, 4]);
        let s = |how: AttrValue, axis: i64| {
            rel(
                "split",
                &[&x],
                &[("indices_or_sections", how), ("axis", int(axis))],
            )
        };
        assert_eq!(
            s(int(2), 2).unwrap(),
            "(Tensor[(2, 3, 2), float32], Tensor[(2, 3, 2), float32])"
        );
        assert_eq!(
            s(ints(&[1, 3]), -1).unwrap(),
            "(Tensor[(2, 3, 1), float32], Tensor[(2, 3, 2), float32], Tensor[(2, 3, 1), float32])"
        );
        assert_eq!(s(ints(&[]), 0).unwrap(), "(Tensor[(2, 3, 4), float32],)");
        assert_eq!(
            s(int(5), 2).unwrap_err(),
            "`indices_or_sections` 5 does not divide dimension 4"
        );
        assert!(s(int(0), 2).is_err());
        assert!(s(ints(&[2, 1]), 2).is_err());
        assert!(s(ints(&[0, 2]), 2).is_err());
        assert!(
            s(ints(&[4]), 2)
                .unwrap_err()
                .contains("not inside dimension 4")
        );
        assert!(s(int(1), 3).is_err());
        assert_eq!(
            rel(
                "split",
                &[&any_ty(&[-1, 2])],
                &[("indices_or_sections", ints(&[1]))]
            )
            .unwrap(),
            "(Tensor[(1, 2), float32], Tensor[(?, 2), float32])"
        );
        for dtype in DTYPES {
            let v = iota(dtype, &[2, 3, 4]);
            let r = eval(
                "split",
                &[&v],
                &[("indices_or_sections", ints(&[1, 3])), ("axis", int(2))],
            )
            .unwrap();
            let fields = r.as_tuple().unwrap();
            assert_eq!(fields.len(), 3);
            let (s, d, got) = parts(&fields[1]);
            assert_eq!((s, d), (vec![2, 3, 2], dtype));
            let expect: Vec<i128> = [1, 2, 5, 6, 9, 10, 13, 14, 17, 18, 21, 22]
                .iter()
                .map(|&i| if dtype == DType::BOOL { i % 2 } else { i })
                .collect();
            assert_eq!(got, expect);
        }
        let v = iota(DType::I32, &[6]);
        let r = eval("split", &[&v], &[("indices_or_sections", int(3))]).unwrap();
        let pieces: Vec<_> = r.as_tuple().unwrap().iter().map(shape_values).collect();
        assert_eq!(
            pieces,
            [
                (vec![2], vec![0, 1]),
                (vec![2], vec![2, 3]),
                (vec![2], vec![4, 5])
            ]
        );
    }

    fn slice_attrs(begin: &[i64], end: &[i64], strides: &[i64]) -> Vec<(&'static str, AttrValue)> {
        vec![
            ("begin", ints(begin)),
            ("end", ints(end)),
            ("strides", ints(strides)),
        ]
    }

    #[test]
    fn strided_slice_shapes() {
        let x = f32ty(&[2, 3, 4]);
        let r = |set: &[(&str, AttrValue)]| rel("strided_slice", &[&x], set);
        assert_eq!(
            r(&slice_attrs(&[0, 2, 3], &[2, 0, 0], &[1, -1, -2])).unwrap(),
            "Tensor[(2, 2, 2), float32]"
        );
        // Short lists cover the leading axes; ends clamp.
        assert_eq!(
            r(&slice_attrs(&[1], &[100], &[1])).unwrap(),
            "Tensor[(1, 3, 4), float32]"
        );
        assert_eq!(
            r(&slice_attrs(&[0, -1], &[2, -4], &[1, -1])).unwrap(),
            "Tensor[(2, 3, 4), float32]"
        );
        assert_eq!(
            r(&slice_attrs(&[0, 0, 0], &[2, 3, 4], &[1, 2, 3])).unwrap(),
            "Tensor[(2, 2, 2), float32]"
        );
        // Axes.
        let mut with_axes = slice_attrs(&[1], &[3], &[1]);
        with_axes.push(("axes", ints(&[-1])));
        assert_eq!(r(&with_axes).unwrap(), "Tensor[(2, 3, 2), float32]");
        // Size mode: `end` holds sizes, -1 meaning to the end; strides are ignored.
        let mut sized = slice_attrs(&[1, 0, 1], &[1, -1, 2], &[1, 1, 5]);
        sized.push(("slice_mode", text("size")));
        assert_eq!(r(&sized).unwrap(), "Tensor[(1, 3, 2), float32]");
        // Errors.
        assert!(
            r(&slice_attrs(&[3], &[1], &[1]))
                .unwrap_err()
                .contains("wrong order")
        );
        assert!(
            r(&slice_attrs(&[0], &[1], &[0]))
                .unwrap_err()
                .contains("must not contain 0")
        );
        assert!(r(&slice_attrs(&[0, 0, 0, 0], &[1], &[1])).is_err());
        let mut bad_mode = slice_attrs(&[0], &[1], &[1]);
        bad_mode.push(("slice_mode", text("sizes")));
        assert!(r(&bad_mode).is_err());
        let mut bad_axes = slice_attrs(&[0, 0], &[1, 1], &[1]);
        bad_axes.push(("axes", ints(&[0])));
        assert!(r(&bad_axes).is_err());
        assert_eq!(
            rel(
                "strided_slice",
                &[&any_ty(&[-1, 4])],
                &slice_attrs(&[0, 1], &[1, 3], &[1, 1])
            )
            .unwrap(),
            "Tensor[(?, 2), float32]"
        );
    }

    #[test]
    fn strided_slice_values() {
        for dtype in DTYPES {
            let x = iota(dtype, &[2, 3, 4]);
            let (s, d, v) = parts(
                &eval(
                    "strided_slice",
                    &[&x],
                    &slice_attrs(&[0, 2, 3], &[2, 0, 0], &[1, -1, -2]),
                )
                .unwrap(),
            );
            assert_eq!((s, d), (vec![2, 2, 2], dtype));
            let expect: Vec<i128> = [11, 9, 7, 5, 23, 21, 19, 17]
                .iter()
                .map(|&i| if dtype == DType::BOOL { i % 2 } else { i })
                .collect();
            assert_eq!(v, expect);
        }
        let x = iota(DType::I32, &[2, 3, 4]);
        let (s, v) = shape_values(
            &eval(
                "strided_slice",
                &[&x],
                &slice_attrs(&[0, -1, 0], &[2, -4, 4], &[1, -1, 2]),
            )
            .unwrap(),
        );
        assert_eq!(s, vec![2, 3, 2]);
        assert_eq!(v, [8, 10, 4, 6, 0, 2, 20, 22, 16, 18, 12, 14]);
        let mut sized = slice_attrs(&[1, 0, 1], &[1, -1, 2], &[1]);
        sized.push(("slice_mode", text("size")));
        let (s, v) = shape_values(&eval("strided_slice", &[&x], &sized).unwrap());
        assert_eq!((s, v), (vec![1, 3, 2], vec![13, 14, 17, 18, 21, 22]));
        // An empty slice.
        let (s, v) =
            shape_values(&eval("strided_slice", &[&x], &slice_attrs(&[1], &[1], &[1])).unwrap());
        assert_eq!((s, v), (vec![0, 3, 4], vec![]));
    }

    #[test]
    fn take_shapes() {
        let x = f32ty(&[2, 3, 4]);
        let i = ty(&[2, 2], DType::I32);
        let t = |set: &[(&str, AttrValue)]| rel("take", &[&x, &i], set);
        assert_eq!(t(&[]).unwrap(), "Tensor[(2, 2), float32]");
        assert_eq!(
            t(&[("axis", int(1))]).unwrap(),
            "Tensor[(2, 2, 2, 4), float32]"
        );
        assert_eq!(
            t(&[("axis", int(-1))]).unwrap(),
            "Tensor[(2, 3, 2, 2), float32]"
        );
        assert_eq!(
            t(&[("axis", int(2)), ("batch_dims", int(1))]).unwrap(),
            "Tensor[(2, 3, 2), float32]"
        );
        assert_eq!(
            t(&[("axis", int(2)), ("batch_dims", int(-1))]).unwrap(),
            "Tensor[(2, 3, 2), float32]"
        );
        assert!(t(&[("axis", int(3))]).is_err());
        assert!(t(&[("axis", int(0)), ("batch_dims", int(1))]).is_err());
        assert!(t(&[("axis", int(2)), ("batch_dims", int(3))]).is_err());
        assert!(t(&[("mode", text("nearest"))]).is_err());
        assert_eq!(
            rel("take", &[&x, &f32ty(&[2])], &[]).unwrap_err(),
            "the indices must be an integer tensor, got `Tensor[(2), float32]`"
        );
        assert_eq!(
            rel("take", &[&x, &ty(&[], DType::I64)], &[("axis", int(0))]).unwrap(),
            "Tensor[(3, 4), float32]"
        );
        assert!(
            rel(
                "take",
                &[&x, &ty(&[3, 2], DType::I32)],
                &[("axis", int(1)), ("batch_dims", int(1))]
            )
            .is_err()
        );
    }

    #[test]
    fn take_values() {
        let idx = typed(DType::I32, &[2, 2], &[0, 4, -1, 2]);
        for dtype in DTYPES {
            let x = iota(dtype, &[2, 3, 4]);
            let map = |v: &[i128]| -> Vec<i128> {
                v.iter()
                    .map(|&i| if dtype == DType::BOOL { i % 2 } else { i })
                    .collect()
            };
            let (s, d, v) = parts(
                &eval(
                    "take",
                    &[&x, &idx],
                    &[("axis", int(1)), ("mode", text("wrap"))],
                )
                .unwrap(),
            );
            assert_eq!((s, d), (vec![2, 2, 2, 4], dtype));
            assert_eq!(
                v,
                map(&[
                    0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18,
                    19, 20, 21, 22, 23, 20, 21, 22, 23
                ])
            );
            let (s, _, v) = parts(&eval("take", &[&x, &idx], &[("axis", int(2))]).unwrap());
            assert_eq!(s, vec![2, 3, 2, 2]);
            assert_eq!(
                v,
                map(&[
                    0, 3, 0, 2, 4, 7, 4, 6, 8, 11, 8, 10, 12, 15, 12, 14, 16, 19, 16, 18, 20, 23,
                    20, 22
                ])
            );
        }
        let x = iota(DType::I64, &[2, 3, 4]);
        // Without an axis the data is flattened.
        let flat = typed(DType::U8, &[2, 2], &[23, 0, 5, 7]);
        let (s, v) = shape_values(&eval("take", &[&x, &flat], &[]).unwrap());
        assert_eq!((s, v), (vec![2, 2], vec![23, 0, 5, 7]));
        // Batch dimensions pair the leading axes of data and indices.
        let b = typed(DType::I64, &[2, 2], &[2, 0, 1, 1]);
        let (s, v) = shape_values(
            &eval(
                "take",
                &[&x, &b],
                &[("axis", int(2)), ("batch_dims", int(1))],
            )
            .unwrap(),
        );
        assert_eq!(s, vec![2, 3, 2]);
        assert_eq!(v, [2, 0, 6, 4, 10, 8, 13, 13, 17, 17, 21, 21]);
        // "fast" never reads out of bounds: it reports the bad index.
        let fast = [("axis", int(1)), ("mode", text("fast"))];
        assert_eq!(
            eval("take", &[&x, &idx], &fast).unwrap_err(),
            "take index 4 is out of bounds for an axis of 3 elements (mode \"fast\")"
        );
        let ok = typed(DType::I32, &[2], &[2, 0]);
        let (s, _) = shape_values(&eval("take", &[&x, &ok], &fast).unwrap());
        assert_eq!(s, vec![2, 2, 4]);
        // Nothing to take from.
        let empty = iota(DType::F32, &[0, 2]);
        assert!(eval("take", &[&empty, &ok], &[("axis", int(0))]).is_err());
        let none = typed(DType::I32, &[0], &[]);
        let (s, _) = shape_values(&eval("take", &[&empty, &none], &[("axis", int(0))]).unwrap());
        assert_eq!(s, vec![0, 2]);
    }

    #[test]
    fn tile_repeat_reverse() {
        let x = f32ty(&[2, 3]);
        let reps = |r: &[i64]| rel("tile", &[&x], &[("reps", ints(r))]);
        assert_eq!(reps(&[2, 2]).unwrap(), "Tensor[(4, 6), float32]");
        assert_eq!(reps(&[2, 1, 2]).unwrap(), "Tensor[(2, 2, 6), float32]");
        assert_eq!(reps(&[3]).unwrap(), "Tensor[(2, 9), float32]");
        assert!(reps(&[0, 1]).is_err());
        let rep =
            |n: i64, axis: AttrValue| rel("repeat", &[&x], &[("repeats", int(n)), ("axis", axis)]);
        assert_eq!(rep(2, int(1)).unwrap(), "Tensor[(2, 6), float32]");
        assert_eq!(rep(3, int(-2)).unwrap(), "Tensor[(6, 3), float32]");
        assert_eq!(rep(2, AttrValue::Null).unwrap(), "Tensor[(12), float32]");
        assert!(rep(0, int(0)).is_err() && rep(2, int(2)).is_err());
        assert_eq!(
            rel("reverse", &[&x], &[("axis", int(-1))]).unwrap(),
            "Tensor[(2, 3), float32]"
        );
        assert!(rel("reverse", &[&x], &[("axis", int(2))]).is_err());
        assert_eq!(
            rel("tile", &[&any_ty(&[-1, 3])], &[("reps", ints(&[2, 2]))]).unwrap(),
            "Tensor[(?, 6), float32]"
        );
        for dtype in DTYPES {
            let map = |v: &[i128]| -> Vec<i128> {
                v.iter()
                    .map(|&i| if dtype == DType::BOOL { i % 2 } else { i })
                    .collect()
            };
            let m = iota(dtype, &[2, 3]);
            let (s, d, v) = parts(&eval("tile", &[&m], &[("reps", ints(&[2, 1, 2]))]).unwrap());
            assert_eq!((s, d), (vec![2, 2, 6], dtype));
            assert_eq!(
                v,
                map(&[
                    0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5, 0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5
                ])
            );
            let (s, _, v) =
                parts(&eval("repeat", &[&m], &[("repeats", int(2)), ("axis", int(1))]).unwrap());
            assert_eq!(s, vec![2, 6]);
            assert_eq!(v, map(&[0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5]));
            let x = iota(dtype, &[2, 3, 4]);
            let (s, _, v) = parts(&eval("reverse", &[&x], &[("axis", int(1))]).unwrap());
            assert_eq!(s, vec![2, 3, 4]);
            assert_eq!(
                v,
                map(&[
                    8, 9, 10, 11, 4, 5, 6, 7, 0, 1, 2, 3, 20, 21, 22, 23, 16, 17, 18, 19, 12, 13,
                    14, 15
                ])
            );
        }
        let m = iota(DType::I32, &[2, 2]);
        let (s, v) = shape_values(&eval("repeat", &[&m], &[("repeats", int(2))]).unwrap());
        assert_eq!((s, v), (vec![8], vec![0, 0, 1, 1, 2, 2, 3, 3]));
        let (s, v) = shape_values(&eval("reverse", &[&m], &[]).unwrap());
        assert_eq!((s, v), (vec![2, 2], vec![3, 2, 1, 0]));
        let e = iota(DType::F32, &[0, 2]);
        let (s, _) = shape_values(&eval("tile", &[&e], &[("reps", ints(&[3, 1]))]).unwrap());
        assert_eq!(s, vec![0, 2]);
        let (s, _) = shape_values(&eval("reverse", &[&e], &[("axis", int(0))]).unwrap());
        assert_eq!(s, vec![0, 2]);
        let one = iota(DType::I8, &[1]);
        let (s, v) = shape_values(&eval("tile", &[&one], &[("reps", ints(&[3]))]).unwrap());
        assert_eq!((s, v), (vec![3], vec![0, 0, 0]));
    }

    #[test]
    fn patterns() {
        for name in [
            "reshape",
            "contrib_reverse_reshape",
            "reshape_like",
            "transpose",
            "expand_dims",
            "squeeze",
            "concatenate",
            "stack",
            "split",
            "strided_slice",
            "take",
            "tile",
            "repeat",
            "reverse",
        ] {
            let op = crate::lookup(name).unwrap();
            assert_eq!(op.pattern, P::Injective, "{name}");
            assert!(op.relation.is_some() && op.eval.is_some(), "{name}");
        }
    }

    #[test]
    fn extreme_attributes_are_errors_not_panics() {
        let x = iota(DType::F32, &[2, 3]);
        let xt = f32ty(&[2, 3]);
        let big = [i64::MIN, i64::MIN + 1, -1 << 40, 1 << 40, i64::MAX];
        for &v in &big {
            let _ = eval("strided_slice", &[&x], &slice_attrs(&[v], &[v], &[v]));
            let _ = eval("strided_slice", &[&x], &slice_attrs(&[0], &[v], &[v]));
            let _ = rel("reshape", &[&xt], &[("newshape", ints(&[v, -1]))]);
            let _ = rel("reshape", &[&xt], &[("newshape", ints(&[-4, v, -1, 3]))]);
            let _ = rel("tile", &[&xt], &[("reps", ints(&[v, v]))]);
            let _ = rel("repeat", &[&xt], &[("repeats", int(v)), ("axis", int(0))]);
            let _ = rel(
                "expand_dims",
                &[&xt],
                &[("axis", int(v)), ("num_newaxis", int(v))],
            );
            let _ = rel("transpose", &[&xt], &[("axes", ints(&[v, 0]))]);
            let _ = rel("take", &[&xt, &ty(&[1], DType::I32)], &[("axis", int(v))]);
            let idx = typed(DType::I64, &[1], &[i128::from(v)]);
            for mode in ["clip", "wrap", "fast"] {
                let _ = eval(
                    "take",
                    &[&x, &idx],
                    &[("axis", int(1)), ("mode", text(mode))],
                );
            }
        }
        let empty = f32ty(&[0]);
        assert!(
            rel(
                "split",
                &[&empty],
                &[("indices_or_sections", int(i64::MAX))]
            )
            .is_err()
        );
        let (s, _) = shape_values(
            &eval(
                "strided_slice",
                &[&x],
                &slice_attrs(&[0, 2], &[2, 0], &[1, i64::MIN]),
            )
            .unwrap(),
        );
        assert_eq!(s, vec![2, 1]);
        assert!(rel("take", &[&xt, &ty(&[1], DType::BOOL)], &[]).is_err());
    }
}

#[cfg(test)]
mod te_tests {
    //! The compute definitions against the reference evaluations, on random inputs of every
    //! dtype (`crate::compute::op_tests`).

    use std::collections::HashMap;
    use std::sync::Arc;

    use relay_ir::te::BinaryOp::{Add, Div, FloorDiv, FloorMod, Max, Min, Mod, Mul, Sub};
    use relay_ir::te::{TExpr, TExprKind, TeValue, Tensor, TensorOp};
    use relay_ir::{AttrValue, Attrs, DType, NDArray, Type, Value};

    use crate::compute::interp::Interp;
    use crate::compute::op_tests::{DTYPES, Rng, agree_within, check, random};
    use crate::compute::wrap;
    use crate::testing::{attrs, ints};

    fn int(i: i64) -> AttrValue {
        AttrValue::Int(i)
    }

    fn text(s: &str) -> AttrValue {
        AttrValue::Str(s.into())
    }

    /// Checks `name` on one random tensor of every dtype and of `shape`, asserting that the
    /// relation accepts it.
    fn check_all(rng: &mut Rng, name: &str, shape: &[i64], set: &[(&str, AttrValue)]) {
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
    fn te_leaves(v: &TeValue, out: &mut Vec<Tensor>) {
        match v {
            TeValue::Tensor(t) => out.push(t.clone()),
            TeValue::Tuple(fields) => fields.iter().for_each(|f| te_leaves(f, out)),
        }
    }

    /// The input types, the compute definition's result and the reference evaluation's.
    type Compiled = (Vec<Type>, Result<TeValue, String>, Result<Value, String>);

    /// The input types, the compute definition's result of `name` on placeholders for
    /// `parts` (one tuple of them when `tuple_in`), and the reference evaluation's result;
    /// `None` when the relation rejects the inputs.
    fn compile(name: &str, parts: &[NDArray], tuple_in: bool, attrs: &Attrs) -> Option<Compiled> {
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
    fn visit(e: &TExpr, env: &HashMap<u32, i64>, inputs: &[NDArray]) -> Option<i128> {
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
                    TensorOp::Placeholder(k) if !d.is_float() => {
                        Some(inputs[k].to_i128_vec()[flat])
                    }
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
    fn assert_reads_in_bounds(name: &str, parts: &[NDArray], tuple_in: bool, attrs: &Attrs) {
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
    fn check_op(name: &str, inputs: &[NDArray], attrs: &Attrs) -> bool {
        let ok = check(name, inputs, attrs);
        if ok {
            assert_reads_in_bounds(name, inputs, false, attrs);
        }
        ok
    }

    /// As `check_op` for the operators with a tuple input (`concatenate` and `stack`, when
    /// `tuple_in`) or a tuple output (`split`): every output tensor must equal the reference
    /// evaluation's exactly. Returns whether the relation accepted the inputs.
    fn check_tuple(name: &str, parts: &[NDArray], tuple_in: bool, attrs: &Attrs) -> bool {
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

    #[test]
    fn reshape_every_special_value() {
        let mut rng = Rng(0x5eed_0001);
        let cases: &[(&[i64], &[i64])] = &[
            (&[2, 3, 4], &[0, -1]),
            (&[2, 3, 4], &[-1]),
            (&[2, 3, 4], &[4, -1, 2]),
            (&[2, 3, 4], &[-2]),
            (&[2, 3, 4], &[0, 0, -2]),
            (&[2, 3, 4], &[-3, 4]),
            (&[2, 3, 4], &[2, -3]),
            (&[2, 3, 4], &[-3, -1]),
            (&[2, 3, 4], &[-4, 1, 2, -2]),
            (&[2, 3, 4], &[-4, 2, -1, 3, 4]),
            (&[2, 3, 4], &[0, -4, -1, 1, 4]),
            (&[2, 3, 4], &[1, 24, 1]),
            (&[2, 3, 4], &[3, 2, 4]),
            (&[2, 3, 4], &[4, 3, 2]),
            (&[2, 3, 4], &[-1, 1, 6]),
            (&[2, 3, 4], &[8, 3]),
            (&[3, 5, 7], &[5, 3, 7]),
            (&[3, 5, 7], &[-1, 7]),
            (&[3, 5, 7], &[35, 3]),
            (&[3, 5, 7], &[7, 15]),
            (&[3, 5, 7], &[0, -3]),
            (&[2, 1, 3], &[3, 2]),
            (&[2, 1, 3], &[6]),
            (&[2, 1, 3], &[1, 6, 1]),
            (&[2, 1, 3], &[0, 0, 0]),
            (&[2, 1, 3], &[-3, -2]),
            (&[], &[1]),
            (&[], &[1, 1]),
            (&[], &[-1]),
            (&[], &[]),
            (&[1], &[]),
            (&[5], &[1, 5, 1]),
            (&[5], &[-4, 5, -1]),
            (&[6], &[-4, -1, 3]),
            (&[0, 3], &[0, 1, 3]),
            (&[0, 3], &[0, 0]),
            (&[0, 3], &[-2]),
            (&[0, 3], &[-3]),
            (&[2, 0, 3], &[0, -3]),
        ];
        for &(shape, newshape) in cases {
            check_all(&mut rng, "reshape", shape, &[("newshape", ints(newshape))]);
        }
        // `allowzero`: a 0 in `newshape` is a size.
        for (shape, newshape) in [(&[0, 3][..], &[3, 0][..]), (&[2, 0], &[0, 5, 7])] {
            let set = [
                ("newshape", ints(newshape)),
                ("allowzero", AttrValue::Bool(true)),
            ];
            check_all(&mut rng, "reshape", shape, &set);
        }
        for (shape, newshape) in [
            (&[2, 3, 4][..], &[-1, 0][..]),
            (&[2, 3, 4], &[0, -1]),
            (&[2, 3, 4], &[6, -1]),
            (&[10, 5, 4], &[-1, 0]),
            (&[3, 5, 7], &[-3, 0]),
        ] {
            let set = [("newshape", ints(newshape))];
            check_all(&mut rng, "contrib_reverse_reshape", shape, &set);
        }
    }

    #[test]
    fn reshape_like_ranges() {
        let mut rng = Rng(0x5eed_0002);
        /// Data shape, `shape_like` shape and the integer attributes set.
        type Case<'a> = (&'a [i64], &'a [i64], &'a [(&'a str, i64)]);
        let cases: &[Case] = &[
            (&[2, 3, 4], &[6, 4], &[]),
            (&[2, 3, 4], &[24], &[]),
            (&[2, 3, 4], &[3, 12], &[("lhs_begin", 1), ("rhs_begin", 1)]),
            (&[2, 3, 4], &[3, 1], &[("lhs_begin", -2), ("lhs_end", -1)]),
            (
                &[2, 3, 4],
                &[1, 2, 12, 9],
                &[("rhs_begin", 1), ("rhs_end", -1)],
            ),
            (
                &[2, 3, 4],
                &[5, 1],
                &[("lhs_begin", 1), ("lhs_end", 1), ("rhs_begin", 1)],
            ),
            (&[0, 4], &[2, 0, 2], &[]),
            (&[], &[1, 1], &[]),
        ];
        for &(lhs, rhs, set) in cases {
            let set: Vec<(&str, AttrValue)> = set.iter().map(|&(k, v)| (k, int(v))).collect();
            let a = attrs("reshape_like", &set);
            for dtype in DTYPES {
                let x = random(&mut rng, dtype, lhs);
                let like = random(&mut rng, DType::F32, rhs);
                assert!(
                    check_op("reshape_like", &[x, like], &a),
                    "{lhs:?} {rhs:?} {set:?}"
                );
            }
        }
    }

    #[test]
    fn transpose_expand_dims_squeeze() {
        let mut rng = Rng(0x5eed_0003);
        let transposes: &[(&[i64], Option<&[i64]>)] = &[
            (&[2, 3, 4], None),
            (&[2, 3, 4], Some(&[])),
            (&[2, 3, 4], Some(&[0, 1, 2])),
            (&[2, 3, 4], Some(&[2, 0, 1])),
            (&[2, 3, 4], Some(&[-1, 0, -2])),
            (&[2, 3, 4], Some(&[1, 0, 2])),
            (&[3, 0, 1], Some(&[2, 0, 1])),
            (&[1, 5], None),
            (&[5], Some(&[-1])),
            (&[], None),
            (&[2, 1, 3, 2], Some(&[3, 1, 0, 2])),
        ];
        for &(shape, axes) in transposes {
            let axes = axes.map_or(AttrValue::Null, ints);
            check_all(&mut rng, "transpose", shape, &[("axes", axes)]);
        }
        for (shape, axis, count) in [
            (&[2, 3][..], 0, 1),
            (&[2, 3], 1, 2),
            (&[2, 3], 2, 1),
            (&[2, 3], -1, 3),
            (&[2, 3], -3, 1),
            (&[2, 3], 1, 0),
            (&[], 0, 2),
            (&[0, 2], -2, 1),
        ] {
            let set = [("axis", int(axis)), ("num_newaxis", int(count))];
            check_all(&mut rng, "expand_dims", shape, &set);
        }
        let squeezes: &[(&[i64], Option<&[i64]>)] = &[
            (&[1, 2, 1, 3], None),
            (&[1, 2, 1, 3], Some(&[0])),
            (&[1, 2, 1, 3], Some(&[-2])),
            (&[1, 2, 1, 3], Some(&[0, 2])),
            (&[1, 2, 1, 3], Some(&[])),
            (&[1], None),
            (&[1, 0, 1], None),
            (&[1, 0, 1], Some(&[-1])),
            (&[], None),
            (&[3, 5], None),
        ];
        for &(shape, axis) in squeezes {
            let axis = axis.map_or(AttrValue::Null, ints);
            check_all(&mut rng, "squeeze", shape, &[("axis", axis)]);
        }
    }

    #[test]
    fn concatenate_and_stack() {
        let mut rng = Rng(0x5eed_0004);
        let concats: &[(&[&[i64]], i64)] = &[
            (&[&[2, 3], &[4, 3]], 0),
            (&[&[2, 3], &[2, 1], &[2, 0], &[2, 5]], 1),
            (&[&[2, 3], &[2, 1], &[2, 0], &[2, 5]], -1),
            (&[&[0, 3], &[2, 3]], 0),
            (&[&[2, 3], &[0, 3]], 0),
            (&[&[0, 2], &[3, 2], &[0, 2], &[1, 2], &[0, 2]], -2),
            (&[&[1], &[1], &[1]], 0),
            (&[&[3, 2]], 1),
            (&[&[2, 0], &[2, 0]], 0),
            (&[&[0, 2], &[0, 3]], 1),
            (&[&[2, 1, 3], &[2, 2, 3], &[2, 1, 3]], 1),
            (&[&[0], &[0]], 0),
        ];
        for &(shapes, axis) in concats {
            let a = attrs("concatenate", &[("axis", int(axis))]);
            for dtype in DTYPES {
                let parts: Vec<NDArray> =
                    shapes.iter().map(|s| random(&mut rng, dtype, s)).collect();
                assert!(
                    check_tuple("concatenate", &parts, true, &a),
                    "{shapes:?} {axis}"
                );
            }
        }
        for (shape, count, axis) in [
            (&[2, 3][..], 3, 0),
            (&[2, 3], 3, 1),
            (&[2, 3], 2, 2),
            (&[2, 3], 3, -1),
            (&[2, 3], 2, -3),
            (&[], 2, 0),
            (&[], 1, -1),
            (&[0, 2], 2, 1),
            (&[1], 1, 0),
            (&[3, 1], 4, 1),
        ] {
            let a = attrs("stack", &[("axis", int(axis))]);
            for dtype in DTYPES {
                let parts: Vec<NDArray> =
                    (0..count).map(|_| random(&mut rng, dtype, shape)).collect();
                assert!(
                    check_tuple("stack", &parts, true, &a),
                    "{shape:?} {count} {axis}"
                );
            }
        }
        // A mismatched piece is the relation's error, not the compute's.
        let bad = [
            random(&mut rng, DType::F32, &[2, 3]),
            random(&mut rng, DType::F32, &[3, 3]),
        ];
        assert!(!check_tuple(
            "concatenate",
            &bad,
            true,
            &attrs("concatenate", &[("axis", int(1))])
        ));
    }

    #[test]
    fn split_sections_and_indices() {
        let mut rng = Rng(0x5eed_0005);
        let cases: &[(&[i64], AttrValue, i64)] = &[
            (&[6, 4], int(1), 0),
            (&[6, 4], int(2), 0),
            (&[6, 4], int(3), 0),
            (&[6, 4], int(6), 0),
            (&[6, 4], int(2), -1),
            (&[6, 4], int(4), 1),
            (&[6, 4], ints(&[1, 3]), 0),
            (&[6, 4], ints(&[2]), 1),
            (&[6, 4], ints(&[]), 0),
            (&[0, 3], int(1), 0),
            (&[0, 3], int(3), 0),
            (&[0, 3], int(3), 1),
            (&[5, 1], ints(&[1, 4]), 0),
            (&[7], ints(&[1, 2, 6]), 0),
            (&[3, 5, 2], ints(&[2, 3]), -2),
        ];
        for (shape, how, axis) in cases {
            let a = attrs(
                "split",
                &[("indices_or_sections", how.clone()), ("axis", int(*axis))],
            );
            for dtype in DTYPES {
                let x = random(&mut rng, dtype, shape);
                assert!(
                    check_tuple("split", &[x], false, &a),
                    "{shape:?} {how:?} {axis}"
                );
            }
        }
    }

    #[test]
    fn strided_slice_fixed_cases() {
        let mut rng = Rng(0x5eed_0006);
        type Case<'a> = (
            &'a [i64],
            &'a [i64],
            &'a [i64],
            Option<&'a [i64]>,
            Option<&'a [i64]>,
            &'a str,
        );
        let cases: &[Case] = &[
            (&[4, 5, 3], &[1, 0], &[3, 5], Some(&[1, 2]), None, "end"),
            (&[4, 5, 3], &[0], &[4], None, None, "end"),
            (&[4, 5, 3], &[3, 4], &[0, 0], Some(&[-1, -2]), None, "end"),
            (
                &[4, 5, 3],
                &[-1, -1, -1],
                &[-10, -10, -10],
                Some(&[-1, -2, -3]),
                None,
                "end",
            ),
            (&[4, 5, 3], &[-10], &[100], None, None, "end"),
            (&[4, 5, 3], &[1, 1], &[2, 3], None, Some(&[2, 0]), "end"),
            (
                &[4, 5, 3],
                &[2, -3],
                &[1, -1],
                Some(&[-1, 1]),
                Some(&[-1, 1]),
                "end",
            ),
            (&[4, 5, 3], &[1, 2], &[2, -1], None, None, "size"),
            (
                &[4, 5, 3],
                &[-3, 0],
                &[2, 5],
                Some(&[-1, 1]),
                Some(&[0, 1]),
                "size",
            ),
            (&[4, 5, 3], &[0], &[0], None, None, "end"),
            (&[0, 3], &[0, 1], &[0, 3], None, None, "end"),
            (&[5], &[4], &[0], Some(&[i64::MIN]), None, "end"),
            (&[5], &[i64::MIN], &[i64::MAX], Some(&[3]), None, "end"),
            (&[1, 1], &[0, 0], &[1, 1], None, None, "end"),
            (&[], &[], &[], None, None, "end"),
        ];
        for &(shape, begin, end, strides, axes, mode) in cases {
            let set = [
                ("begin", ints(begin)),
                ("end", ints(end)),
                ("strides", strides.map_or(AttrValue::Null, ints)),
                ("axes", axes.map_or(AttrValue::Null, ints)),
                ("slice_mode", text(mode)),
            ];
            check_all(&mut rng, "strided_slice", shape, &set);
        }
    }

    #[test]
    fn strided_slice_random_attributes() {
        let mut rng = Rng(0x5eed_0007);
        let shapes: [&[i64]; 5] = [&[4, 5, 3], &[7], &[2, 0, 3], &[1, 6], &[3, 1, 2, 2]];
        let mut accepted = 0;
        for trial in 0..1500 {
            let shape = shapes[trial % shapes.len()];
            let rank = shape.len();
            let pick =
                |rng: &mut Rng, choices: &[i64]| choices[rng.below(choices.len() as u64) as usize];
            let value = |rng: &mut Rng| -> i64 {
                if rng.below(8) == 0 {
                    pick(rng, &[i64::MIN, i64::MAX, -100, 100])
                } else {
                    rng.below(17) as i64 - 8
                }
            };
            let axes: Option<Vec<i64>> = if rng.below(2) == 0 {
                None
            } else {
                let mut axes: Vec<i64> = Vec::new();
                for d in 0..rank as i64 {
                    match rng.below(3) {
                        0 => axes.push(d),
                        1 => axes.push(d - rank as i64),
                        _ => {}
                    }
                }
                // Shuffle.
                for k in (1..axes.len()).rev() {
                    axes.swap(k, rng.below(k as u64 + 1) as usize);
                }
                Some(axes)
            };
            let n = axes
                .as_ref()
                .map_or_else(|| rng.below(rank as u64 + 1) as usize, Vec::len);
            let begin: Vec<i64> = (0..n).map(|_| value(&mut rng)).collect();
            let end: Vec<i64> = (0..n).map(|_| value(&mut rng)).collect();
            let steps = rng.below(n as u64 + 2) as usize;
            let strides = if steps > n {
                AttrValue::Null
            } else {
                let s: Vec<i64> = (0..steps)
                    .map(|_| pick(&mut rng, &[1, 1, 2, 3, -1, -1, -2, -3, 7]))
                    .collect();
                ints(&s)
            };
            let mode = if rng.below(4) == 0 { "size" } else { "end" };
            let set = [
                ("begin", ints(&begin)),
                ("end", ints(&end)),
                ("strides", strides),
                ("axes", axes.as_deref().map_or(AttrValue::Null, ints)),
                ("slice_mode", text(mode)),
            ];
            let dtype = DTYPES[rng.below(DTYPES.len() as u64) as usize];
            let x = random(&mut rng, dtype, shape);
            accepted += usize::from(check_op(
                "strided_slice",
                &[x],
                &attrs("strided_slice", &set),
            ));
        }
        assert!(accepted > 500, "only {accepted} slices accepted");
    }

    /// Random indices of `dtype`: anything (`in_range` false) or inside `0..n`.
    fn indices(rng: &mut Rng, dtype: DType, shape: &[i64], n: i64, in_range: bool) -> NDArray {
        if !in_range {
            return random(rng, dtype, shape);
        }
        let count: i64 = shape.iter().product();
        let v: Vec<i128> = (0..count)
            .map(|_| i128::from(rng.below(n.max(1) as u64)))
            .collect();
        NDArray::from_i128_slice(dtype, shape, &v).unwrap()
    }

    #[test]
    fn take_every_mode_axis_and_index_dtype() {
        let mut rng = Rng(0x5eed_0008);
        let index_dtypes = [
            DType::I8,
            DType::I16,
            DType::I32,
            DType::I64,
            DType::U8,
            DType::U16,
            DType::U32,
            DType::U64,
        ];
        /// Data shape, indices shape, axis and `batch_dims`.
        type Case<'a> = (&'a [i64], &'a [i64], Option<i64>, i64);
        let cases: &[Case] = &[
            (&[5], &[4], None, 0),
            (&[3, 4], &[2, 3], None, 0),
            (&[3, 4], &[], None, 0),
            (&[3, 4], &[0], None, 0),
            (&[0, 3], &[0], None, 0),
            (&[5], &[4], Some(0), 0),
            (&[3, 4], &[2, 3], Some(0), 0),
            (&[3, 4], &[2, 3], Some(1), 0),
            (&[3, 4], &[5], Some(-1), 0),
            (&[3, 4], &[], Some(1), 0),
            (&[2, 3, 4], &[2, 5], Some(1), 1),
            (&[2, 3, 4], &[2, 5], Some(2), 1),
            (&[2, 3, 4], &[2, 3, 2], Some(2), -1),
            (&[2, 3, 4], &[2, 3], Some(2), 2),
            (&[2, 1, 4], &[3], Some(1), 0),
            (&[2, 0, 4], &[0], Some(1), 0),
            (&[2, 3, 0], &[2], Some(1), 0),
        ];
        for &(data, ind, axis, batch) in cases {
            let n = match axis {
                Some(a) => data[(a + data.len() as i64) as usize % data.len()],
                None => data.iter().product(),
            };
            for mode in ["clip", "wrap", "fast"] {
                let set = [
                    ("axis", axis.map_or(AttrValue::Null, int)),
                    ("batch_dims", int(batch)),
                    ("mode", text(mode)),
                ];
                let a = attrs("take", &set);
                for dtype in DTYPES {
                    for index_dtype in index_dtypes {
                        let x = random(&mut rng, dtype, data);
                        // `fast` assumes the indices are in range; the reference reports those
                        // that are not.
                        let i = indices(&mut rng, index_dtype, ind, n, mode == "fast");
                        assert!(check_op("take", &[x, i], &a), "{data:?} {ind:?} {set:?}");
                    }
                }
            }
        }
        // `fast` with indices out of range: the reference reports them, the kernel clamps
        // them, and never reads out of bounds.
        for &(data, ind, axis, batch) in cases {
            let set = [
                ("axis", axis.map_or(AttrValue::Null, int)),
                ("batch_dims", int(batch)),
                ("mode", text("fast")),
            ];
            for index_dtype in index_dtypes {
                let x = random(&mut rng, DType::F32, data);
                let i = random(&mut rng, index_dtype, ind);
                assert_reads_in_bounds("take", &[x, i], false, &attrs("take", &set));
            }
        }
        // Taking from an empty axis fails in both.
        let x = random(&mut rng, DType::F32, &[2, 0]);
        let i = random(&mut rng, DType::I32, &[3]);
        assert!(check_op(
            "take",
            &[x, i],
            &attrs("take", &[("axis", int(1))])
        ));
    }

    #[test]
    fn tile_repeat_reverse() {
        let mut rng = Rng(0x5eed_0009);
        for (shape, reps) in [
            (&[2, 3][..], &[1][..]),
            (&[2, 3], &[2]),
            (&[2, 3], &[2, 1]),
            (&[2, 3], &[3, 2, 2]),
            (&[2, 3], &[1, 1, 1]),
            (&[], &[3]),
            (&[], &[2, 2]),
            (&[0, 2], &[2, 2]),
            (&[1, 3], &[4, 1]),
            (&[3, 1, 2], &[2, 5]),
        ] {
            check_all(&mut rng, "tile", shape, &[("reps", ints(reps))]);
        }
        for (shape, repeats, axis) in [
            (&[2, 3][..], 1, None),
            (&[2, 3], 2, None),
            (&[2, 3], 3, Some(0)),
            (&[2, 3], 2, Some(1)),
            (&[2, 3], 2, Some(-1)),
            (&[2, 3], 3, Some(-2)),
            (&[], 3, None),
            (&[0, 2], 2, Some(1)),
            (&[0, 2], 2, None),
            (&[1, 5, 1], 4, Some(2)),
        ] {
            let set = [
                ("repeats", int(repeats)),
                ("axis", axis.map_or(AttrValue::Null, int)),
            ];
            check_all(&mut rng, "repeat", shape, &set);
        }
        for (shape, axis) in [
            (&[2, 3, 4][..], None),
            (&[2, 3, 4], Some(0)),
            (&[2, 3, 4], Some(1)),
            (&[2, 3, 4], Some(-1)),
            (&[2, 3, 4], Some(-3)),
            (&[1], None),
            (&[5], Some(0)),
            (&[0, 3], Some(1)),
            (&[3, 1], Some(1)),
            (&[], None),
        ] {
            check_all(
                &mut rng,
                "reverse",
                shape,
                &[("axis", axis.map_or(AttrValue::Null, int))],
            );
        }
    }

    #[test]
    fn reshape_keeps_untouched_dimensions_as_loop_variables() {
        use relay_ir::te::{TExprKind, TensorOp};
        // (2, 3, 4) -> (6, 4): the last dimension is read at the output's own loop variable.
        let x = Tensor::placeholder("p", vec![2, 3, 4], DType::F32, 0);
        let out = Type::tensor(&[6, 4], DType::F32);
        let te = super::reshape_te("T_reshape", &[TeValue::Tensor(x)], &out).unwrap();
        let t = te.as_tensor().unwrap();
        let TensorOp::Compute { axes, body } = &t.op else {
            panic!("expected a compute")
        };
        let TExprKind::Read { indices, .. } = body.kind() else {
            panic!("expected a read")
        };
        assert!(matches!(indices[2].kind(), TExprKind::Var(v) if v.id == axes[1].id));
        // A mismatched output type is an error.
        let x = TeValue::Tensor(Tensor::placeholder("p", vec![2, 3], DType::F32, 0));
        assert!(super::reshape_te("T_reshape", &[x], &out).is_err());
    }

    #[test]
    fn inconsistent_output_types_are_errors() {
        let x = Tensor::placeholder("p", vec![2, 3], DType::F32, 0);
        let one = [TeValue::Tensor(x.clone())];
        let pair = [TeValue::Tuple(vec![
            TeValue::Tensor(x.clone()),
            TeValue::Tensor(x),
        ])];
        let wrong = Type::tensor(&[3, 3], DType::F32);
        let cases: [(&str, &[TeValue], Attrs); 8] = [
            ("transpose", &one, attrs("transpose", &[])),
            ("concatenate", &pair, attrs("concatenate", &[])),
            ("stack", &pair, attrs("stack", &[])),
            ("tile", &one, attrs("tile", &[("reps", ints(&[2]))])),
            ("repeat", &one, attrs("repeat", &[("repeats", int(2))])),
            ("reverse", &one, attrs("reverse", &[])),
            (
                "strided_slice",
                &one,
                attrs(
                    "strided_slice",
                    &[("begin", ints(&[0])), ("end", ints(&[1]))],
                ),
            ),
            (
                "split",
                &one,
                attrs("split", &[("indices_or_sections", int(2))]),
            ),
        ];
        for (name, inputs, a) in cases {
            let compute = crate::lookup(name).unwrap().compute.unwrap();
            assert!(compute(inputs, &a, &wrong).is_err(), "{name}");
        }
        // A stack's output has a rank.
        let scalar = Type::tensor(&[], DType::F32);
        let compute = crate::lookup("stack").unwrap().compute.unwrap();
        assert!(compute(&pair, &attrs("stack", &[]), &scalar).is_err());
    }
}
