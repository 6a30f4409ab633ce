//! Shape and layout manipulation: reshaping, transposing, joining, splitting, slicing, gathering,
//! layout transforms, and the sorting and searching operators (reference §14.4), one file per
//! family, each holding its operators' table entries with the type relations (TVM's, with `?`
//! dimensions propagated), reference evaluations and compute definitions of the Tier 1
//! operators side by side:
//!
//! - [`reshape`]: `reshape`, `contrib_reverse_reshape`, `reshape_like`;
//! - [`transpose`]: `transpose`, `expand_dims`, `squeeze`;
//! - [`join`]: `concatenate`, `stack`, `split`;
//! - [`slice`]: `strided_slice` (and the entries of `strided_set`, `slice_like`);
//! - [`take`]: `take` (and the entries of `gather`, `gather_nd`, `adv_index`);
//! - [`tile`]: `tile`, `repeat`, `reverse` (and the entry of `reverse_sequence`).
//!
//! This file holds what they share and the table entries of the operators that have no
//! relation yet (layout transforms, masks and grids, sparse helpers, sorting and searching).
//!
//! Evaluation is pure data movement: each output element is copied as `dtype.size_bytes()`
//! bytes from the input position it comes from, so every dtype is handled alike, and every
//! position is bounds-checked (`take` with `mode="fast"` reports an out-of-range index instead
//! of reading it). Output shapes at run time come from the same functions as the relations,
//! applied to the concrete input shapes.

use relay_ir::OpError;
use relay_ir::te::{BinaryOp, TExpr, TeValue, Tensor};
use relay_ir::{
    AttrDefault as D, AttrField, AttrKind as K, Attrs, DType, Dim, NDArray, OpSchema, Type, Value,
};

use crate::compute::{self, const_index, ix_add};
use crate::support::{expect_inputs, known, shape_text, strides, tensor_type, value};
use crate::{dtype, field, op, plain, required, required_nullable};

mod join;
mod layout;
mod reshape;
mod slice;
mod take;
#[cfg(test)]
mod testing;
mod tile;
mod transpose;

pub(crate) use layout::Reblock;
pub(crate) use slice::slice_steps;
pub use slice::strided_set_region;
pub(crate) use take::take_view;
pub(crate) use transpose::{permutation, transposed};

pub(crate) use transpose::SQUEEZE_ATTRS;

/// The family tables in their stable order, the order in which [`crate::all`] lists them.
pub(crate) fn tables() -> [&'static [OpSchema]; 7] {
    [
        reshape::OPS,
        transpose::OPS,
        join::OPS,
        slice::OPS,
        take::OPS,
        tile::OPS,
        LAYOUT_AND_SORTING_OPS,
    ]
}

const DATA: &[&str] = &["data"];

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

/// Layout transforms (`transform/layout.rs`); masks, grids, windows, diagonals, sparse helpers,
/// sorting and searching: table entries only.
static LAYOUT_AND_SORTING_OPS: &[OpSchema] = &[
    // Layout transforms.
    op(
        "layout_transform",
        DATA,
        "relay.attrs.LayoutTransformAttrs",
        LAYOUT_TRANSFORM_ATTRS,
    )
    .with(
        relay_ir::OpPattern::Injective,
        layout::layout_transform_rel,
        layout::layout_transform_eval,
    )
    .with_compute(layout::layout_transform_te),
    op(
        "auto_scheduler_layout_transform",
        DATA,
        "relay.attrs.AutoSchedulerLayoutTransformAttrs",
        LAYOUT_TRANSFORM_ATTRS,
    )
    .with(
        relay_ir::OpPattern::Injective,
        layout::layout_transform_rel,
        layout::layout_transform_eval,
    )
    .with_compute(layout::layout_transform_te),
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

/// The single tensor input.
fn data_type(inputs: &[Type]) -> Result<(&[Dim], DType), OpError> {
    expect_inputs(inputs, 1)?;
    tensor_type(&inputs[0], "the data")
}

/// A shape computed from known dimensions, as numbers.
fn concrete(shape: &[Dim]) -> Result<Vec<i64>, OpError> {
    known(shape).ok_or_else(|| {
        OpError::shape(format!(
            "internal error: shape {} is not known at run time",
            shape_text(shape)
        ))
    })
}

/// The product of two dimensions.
fn dim_mul(a: Dim, b: Dim) -> Result<Dim, OpError> {
    match (a, b) {
        (Dim::Known(x), Dim::Known(y)) => x
            .checked_mul(y)
            .map(Dim::Known)
            .ok_or_else(|| OpError::shape(format!("dimension {x} * {y} overflows"))),
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
    mut source: impl FnMut(&[i64]) -> Result<i64, OpError>,
) -> Result<NDArray, OpError> {
    let size = src.dtype().size_bytes();
    let mut out = NDArray::zeros(src.dtype(), out_shape).map_err(OpError::from_runtime)?;
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
                OpError::shape(format!(
                    "internal error: element {s} is outside an input of shape {:?}",
                    src.shape()
                ))
            })?;
        to[i * size..(i + 1) * size].copy_from_slice(bytes);
        next_index(&mut idx, out_shape);
    }
    Ok(out)
}

/// The elements of `src` in a new shape of the same size.
fn reshaped(src: &NDArray, shape: &[Dim]) -> Result<Value, OpError> {
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
) -> Result<NDArray, OpError> {
    let st = strides(src.shape());
    gather(src, out_shape, |idx| {
        Ok(idx
            .iter()
            .enumerate()
            .map(|(d, &i)| (begin[d] + i * step[d]) * st[d])
            .sum())
    })
}

// ----- Compute definitions: shared index arithmetic -----
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

/// Checks that the output type's shape is the one the operator's shape function gives for
/// the inputs (the compute definitions index by both).
fn expect_shape(op: &str, shape: &[i64], want: &[Dim]) -> Result<(), OpError> {
    if known(want).as_deref() == Some(shape) {
        Ok(())
    } else {
        Err(OpError::shape(format!(
            "internal error: {op}'s output shape is {shape:?}, its inputs give {}",
            shape_text(want)
        )))
    }
}

/// The shape a view operator gives data of dimensions `data` (`like`: `reshape_like`'s shape
/// source) — its relation's own function, without building types, for shape functions that
/// run at every new shape; `None` for an operator that is not one of these.
pub(crate) fn view_shape(
    name: &str,
    data: &[Dim],
    like: Option<&[Dim]>,
    attrs: &Attrs,
) -> Option<Result<Vec<Dim>, OpError>> {
    Some(match (name, like) {
        ("reshape", None) => reshape::reshape_shape(data, attrs, false),
        ("contrib_reverse_reshape", None) => reshape::reshape_shape(data, attrs, true),
        ("reshape_like", Some(like)) => reshape::reshape_like_shape(data, like, attrs),
        ("squeeze", None) => transpose::squeeze_shape(data, attrs),
        ("expand_dims", None) => transpose::expand_dims_shape(data, attrs),
        ("transpose", None) => transpose::transpose_shape(data, attrs),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {

    use relay_ir::te::{TeValue, Tensor};
    use relay_ir::{Attrs, DType, OpPattern as P, Type};

    use crate::testing::{attrs, ints};
    use crate::transform::testing::*;

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
    fn view_shapes_are_their_relations_without_types() {
        use relay_ir::{AttrValue, Dim, TypeKind};
        let int = AttrValue::Int;
        // The operator, its attributes, the data's shape and `reshape_like`'s shape source.
        type Case = (
            &'static str,
            Vec<(&'static str, AttrValue)>,
            Vec<i64>,
            Option<Vec<i64>>,
        );
        let cases: Vec<Case> = vec![
            (
                "reshape",
                vec![("newshape", ints(&[0, -1]))],
                vec![2, 3, 4],
                None,
            ),
            (
                "reshape",
                vec![("newshape", ints(&[-3, 0, -4, 2, -1]))],
                vec![2, 3, 4, 6],
                None,
            ),
            (
                "reshape",
                vec![("newshape", ints(&[5, -1]))],
                vec![2, 3],
                None,
            ),
            (
                "contrib_reverse_reshape",
                vec![("newshape", ints(&[-1, 0]))],
                vec![2, 3, 4],
                None,
            ),
            (
                "squeeze",
                vec![("axis", ints(&[0, 2]))],
                vec![1, 3, 1, 4],
                None,
            ),
            ("squeeze", vec![], vec![1, 3, 1, 4], None),
            ("squeeze", vec![("axis", ints(&[1]))], vec![1, 3], None),
            (
                "expand_dims",
                vec![("axis", int(-1)), ("num_newaxis", int(2))],
                vec![3],
                None,
            ),
            (
                "transpose",
                vec![("axes", ints(&[0, 2, 1, 3]))],
                vec![1, 5, 4, 8],
                None,
            ),
            ("transpose", vec![], vec![2, 3, 4], None),
            ("transpose", vec![("axes", ints(&[0, 0]))], vec![2, 3], None),
            (
                "reshape_like",
                vec![
                    ("lhs_begin", int(0)),
                    ("lhs_end", int(1)),
                    ("rhs_end", int(2)),
                ],
                vec![12, 5, 8],
                Some(vec![3, 4, 9]),
            ),
            (
                "reshape_like",
                vec![("lhs_begin", int(2))],
                vec![2, 3],
                Some(vec![4]),
            ),
        ];
        for (op, set, data, like) in cases {
            let a = attrs(op, &set);
            let dims = crate::support::dims(&data);
            let like_dims = like.as_deref().map(crate::support::dims);
            let fast = super::view_shape(op, &dims, like_dims.as_deref(), &a)
                .unwrap_or_else(|| panic!("`{op}` has a view shape"));
            let mut types = vec![f32ty(&data)];
            types.extend(like.as_deref().map(f32ty));
            let relation = crate::lookup(op).and_then(|o| o.relation).unwrap();
            let slow = relation(&types, &a).map(|t| match t.kind() {
                TypeKind::Tensor { shape, .. } => shape.clone(),
                other => panic!("{other:?}"),
            });
            match (fast, slow) {
                (Ok(f), Ok(s)) => assert_eq!(f, s, "{op} {set:?} of {data:?}"),
                (Err(_), Err(_)) => {}
                (f, s) => panic!("{op} {set:?} of {data:?}: {f:?} but the relation gives {s:?}"),
            }
        }
        let none = super::view_shape("take", &[Dim::Known(3)], None, &attrs("take", &[]));
        assert!(none.is_none());
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
