//! Shape and layout manipulation: reshaping, transposing, joining, splitting, slicing, gathering,
//! layout transforms, and the sorting and searching operators (reference §14.4).

use relay_ir::{AttrDefault as D, AttrField, AttrKind as K, OpSchema};

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
    op("reshape", DATA, "relay.attrs.ReshapeAttrs", RESHAPE_ATTRS),
    op(
        "contrib_reverse_reshape",
        DATA,
        "relay.attrs.ReshapeAttrs",
        RESHAPE_ATTRS,
    ),
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
    ),
    op(
        "transpose",
        DATA,
        "relay.attrs.TransposeAttrs",
        &[required_nullable("axes", K::IntArray)],
    ),
    op(
        "expand_dims",
        DATA,
        "relay.attrs.ExpandDimsAttrs",
        &[
            required("axis", K::Int),
            field("num_newaxis", K::Int, D::Int(1)),
        ],
    ),
    op("squeeze", DATA, "relay.attrs.SqueezeAttrs", SQUEEZE_ATTRS),
    // Joining and splitting; `concatenate` and `stack` take one tuple.
    op(
        "concatenate",
        DATA,
        "relay.attrs.ConcatenateAttrs",
        &[field("axis", K::Int, D::Int(0))],
    ),
    op(
        "stack",
        DATA,
        "relay.attrs.StackAttrs",
        &[field("axis", K::Int, D::Int(0))],
    ),
    op(
        "split",
        DATA,
        "relay.attrs.SplitAttrs",
        &[
            required("indices_or_sections", K::IntOrIntArray),
            field("axis", K::Int, D::Int(0)),
        ],
    ),
    // Slicing.
    op(
        "strided_slice",
        DATA,
        "relay.attrs.StridedSliceAttrs",
        STRIDED_SLICE_ATTRS,
    ),
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
    ),
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
    ),
    op(
        "repeat",
        DATA,
        "relay.attrs.RepeatAttrs",
        &[required("repeats", K::Int), nullable("axis", K::Int)],
    ),
    op(
        "reverse",
        DATA,
        "relay.attrs.ReverseAttrs",
        &[nullable("axis", K::Int)],
    ),
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
