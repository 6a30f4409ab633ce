//! Reductions over axes: `sum`, `mean`, `max`, …, the index-valued `argmax`/`argmin`, and
//! `variance` (reference §14.3).

use relay_ir::{AttrDefault as D, AttrField, AttrKind as K, OpSchema};

use crate::{field, nullable, op};

/// `ReduceAttrs`. `axis` is always an array (a single axis prints as `axis=[1]`); `None` reduces
/// over every axis.
const REDUCE_ATTRS: &[AttrField] = &[
    nullable("axis", K::IntArray),
    field("keepdims", K::Bool, D::Bool(false)),
    field("exclude", K::Bool, D::Bool(false)),
];

/// `ArgReduceAttrs`: `select_last_index` comes before `exclude`.
const ARG_REDUCE_ATTRS: &[AttrField] = &[
    nullable("axis", K::IntArray),
    field("keepdims", K::Bool, D::Bool(false)),
    field("select_last_index", K::Bool, D::Bool(false)),
    field("exclude", K::Bool, D::Bool(false)),
];

/// `VarianceAttrs`.
const VARIANCE_ATTRS: &[AttrField] = &[
    nullable("axis", K::IntArray),
    field("keepdims", K::Bool, D::Bool(false)),
    field("exclude", K::Bool, D::Bool(false)),
    field("unbiased", K::Bool, D::Bool(false)),
];

const DATA: &[&str] = &["data"];

pub(crate) static OPS: &[OpSchema] = &[
    op("sum", DATA, "relay.attrs.ReduceAttrs", REDUCE_ATTRS),
    op("mean", DATA, "relay.attrs.ReduceAttrs", REDUCE_ATTRS),
    op("max", DATA, "relay.attrs.ReduceAttrs", REDUCE_ATTRS),
    op("min", DATA, "relay.attrs.ReduceAttrs", REDUCE_ATTRS),
    op("prod", DATA, "relay.attrs.ReduceAttrs", REDUCE_ATTRS),
    op("all", DATA, "relay.attrs.ReduceAttrs", REDUCE_ATTRS),
    op("any", DATA, "relay.attrs.ReduceAttrs", REDUCE_ATTRS),
    op(
        "argmax",
        DATA,
        "relay.attrs.ArgReduceAttrs",
        ARG_REDUCE_ATTRS,
    ),
    op(
        "argmin",
        DATA,
        "relay.attrs.ArgReduceAttrs",
        ARG_REDUCE_ATTRS,
    ),
    // `variance` takes the mean as a second input; `std`, `mean_variance` and `logsumexp` are
    // Python compositions, not operators.
    op(
        "variance",
        &["data", "mean"],
        "relay.attrs.VarianceAttrs",
        VARIANCE_ATTRS,
    ),
];
