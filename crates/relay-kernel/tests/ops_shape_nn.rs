//! The shape (injective) and `nn` operators of SPEC §4 Tier 1, each compiled alone as a
//! primitive function and run on random inputs against its reference evaluation in the
//! interpreter: every special attribute value, negative axes, size-1, odd and size-0 extents,
//! for every dtype the relation accepts; then a few fused chains mixing them.
//!
//! Every case is labelled by its call and its parameters' shapes: each label must type for at
//! least one dtype, so a variant the relation always rejects (a mistyped case) fails the test.

mod common;

use common::{Case, run_cases, run_cases_within, tensor_type};

/// The dtypes every case is tried with; those the relation rejects are skipped.
const DTYPES: &[&str] = &[
    "float32",
    "float64",
    "int32",
    "int64",
    "int8",
    "uint8",
    "bool",
    "bfloat16",
    "float8_e4m3fn",
];

/// The float dtypes (operators and chains that only take floats).
const FLOATS: &[&str] = &["float32", "float64", "bfloat16", "float8_e5m2"];

/// The dtypes averaging pools are tried with (64-bit integers sum halves, exactly).
const AVG_DTYPES: &[&str] = &[
    "float32", "float64", "int32", "int64", "int8", "uint8", "bool",
];

/// SPEC §4's tolerance for reductions, contractions, convolutions, pools and softmax.
const LOOSE: (f64, f64) = (1e-4, 1e-5);

/// A parameter: its shape and its dtype, `T` standing for the dtype the case is tried with.
type Param<'a> = (&'a [i64], &'a str);

/// Adds `call` over parameters `params` for every dtype of `dtypes`; `T` as a parameter's
/// dtype stands for that dtype.
fn add(cases: &mut Vec<Case>, dtypes: &[&str], call: &str, params: &[Param]) {
    let label = format!(
        "{call} over {}",
        params
            .iter()
            .map(|(s, d)| format!("{s:?}:{d}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    for dtype in dtypes {
        let types = params
            .iter()
            .map(|&(shape, d)| tensor_type(shape, if d == "T" { dtype } else { d }))
            .collect();
        cases.push((label.clone(), call.to_owned(), types));
    }
}

/// The text of a tuple of `names` (a one-field tuple has a trailing comma).
fn tuple_text(names: &[String]) -> String {
    match names {
        [one] => format!("({one},)"),
        _ => format!("({})", names.join(", ")),
    }
}

/// Adds a one-parameter `call` for every dtype, once per shape of `shapes`.
fn add_unary(cases: &mut Vec<Case>, call: &str, shapes: &[&[i64]]) {
    add_unary_in(cases, DTYPES, call, shapes);
}

/// Adds a one-parameter `call` for every dtype of `dtypes`, once per shape of `shapes`.
fn add_unary_in(cases: &mut Vec<Case>, dtypes: &[&str], call: &str, shapes: &[&[i64]]) {
    for shape in shapes {
        add(cases, dtypes, call, &[(shape, "T")]);
    }
}

#[test]
fn reshapes_match_the_reference() {
    let mut cases = Vec::new();
    let reshape: &[(&[i64], &str)] = &[
        (&[2, 3, 4], "[6, 4]"),
        (&[2, 3, 4], "[0, -1]"),
        (&[2, 3, 4], "[-1]"),
        (&[2, 3, 4], "[4, -1, 2]"),
        (&[2, 3, 4], "[-2]"),
        (&[2, 3, 4], "[0, -2]"),
        (&[2, 3, 4], "[-3, 4]"),
        (&[2, 3, 4], "[0, -3]"),
        (&[2, 3, 4], "[-3, -2]"),
        (&[2, 3, 4], "[-4, 1, 2, -2]"),
        (&[2, 3, 4], "[-4, -1, 2, 0, 0]"),
        (&[2, 3, 4], "[0, -4, 3, -1, 0]"),
        (&[2, 3, 4], "[2, -4, -1, 3, 4]"),
        (&[6, 5], "[-4, 2, 3, 0]"),
        (&[1, 5, 1], "[5]"),
        (&[1, 5, 1], "[-1, 1]"),
        (&[7], "[1, 7, 1]"),
        (&[], "[1, 1]"),
        (&[1, 1], "[]"),
        (&[0, 3], "[0, 3]"),
        (&[0, 3], "[3, 0], allowzero=True"),
        (&[2, 0, 3], "[0, -3]"),
    ];
    for (shape, newshape) in reshape {
        add_unary(
            &mut cases,
            &format!("reshape(%p0, newshape={newshape})"),
            &[shape],
        );
    }
    let like: &[(&[i64], &[i64], &str)] = &[
        (&[2, 3, 4], &[6, 4], ""),
        (&[2, 3, 4], &[4, 3, 2], ""),
        (&[2, 3, 4], &[12, 5], ", lhs_begin=1, rhs_end=1"),
        (&[2, 3, 4], &[1, 12], ", lhs_begin=-2, rhs_begin=1"),
        (&[5], &[1, 5, 1], ""),
        (&[0, 4], &[2, 0], ""),
    ];
    for (a, b, attrs) in like {
        add(
            &mut cases,
            DTYPES,
            &format!("reshape_like(%p0, %p1{attrs})"),
            &[(a, "T"), (b, "T")],
        );
    }
    add(
        &mut cases,
        DTYPES,
        "reshape_like(%p0, %p1)",
        &[(&[3, 4], "T"), (&[2, 6], "int32")],
    );
    let expand: &[(&[i64], &str)] = &[
        (&[2, 3], "axis=0"),
        (&[2, 3], "axis=-1"),
        (&[2, 3], "axis=2"),
        (&[2, 3], "axis=-3"),
        (&[2, 3], "axis=1, num_newaxis=2"),
        (&[2, 3], "axis=-2, num_newaxis=3"),
        (&[2, 3], "axis=1, num_newaxis=0"),
        (&[], "axis=0"),
        (&[], "axis=0, num_newaxis=2"),
        (&[0, 3], "axis=1"),
        (&[5], "axis=-1"),
    ];
    for (shape, attrs) in expand {
        add_unary(&mut cases, &format!("expand_dims(%p0, {attrs})"), &[shape]);
    }
    let squeeze: &[(&[i64], &str)] = &[
        (&[1, 3, 1, 5], ""),
        (&[1, 3, 1, 5], ", axis=None"),
        (&[1, 3, 1, 5], ", axis=[0]"),
        (&[1, 3, 1, 5], ", axis=[-2]"),
        (&[1, 3, 1, 5], ", axis=[0, 2]"),
        (&[1, 3, 1, 5], ", axis=[-4, -2]"),
        (&[1, 3, 1, 5], ", axis=[]"),
        (&[1], ""),
        (&[1, 1], ", axis=[1]"),
        (&[2, 0, 1], ", axis=[2]"),
        (&[2, 0, 1], ""),
        (&[7], ""),
    ];
    for (shape, attrs) in squeeze {
        add_unary(&mut cases, &format!("squeeze(%p0{attrs})"), &[shape]);
    }
    add_unary(
        &mut cases,
        "nn.batch_flatten(%p0)",
        &[
            &[2, 3, 4],
            &[1, 5],
            &[3],
            &[2, 1, 3, 5],
            &[0, 3],
            &[2, 0, 4],
            &[5, 1],
            &[3, 7, 1, 3],
        ],
    );
    run_cases(cases);
}

#[test]
fn transposes_tiles_repeats_and_reverses_match_the_reference() {
    let mut cases = Vec::new();
    let transpose: &[(&[i64], &str)] = &[
        (&[2, 3, 4], "None"),
        (&[2, 3, 4], "[0, 2, 1]"),
        (&[2, 3, 4], "[-1, 0, 1]"),
        (&[2, 3, 4], "[2, 0, 1]"),
        (&[2, 3, 4], "[1, 2, 0]"),
        (&[2, 3, 4], "[0, 1, 2]"),
        (&[1, 5], "[1, 0]"),
        (&[7, 3], "[-1, -2]"),
        (&[3, 0, 2], "[2, 0, 1]"),
        (&[5], "[0]"),
        (&[5], "None"),
        (&[], "None"),
        (&[2, 1, 3, 5], "[3, 1, 0, 2]"),
    ];
    for (shape, axes) in transpose {
        add_unary(
            &mut cases,
            &format!("transpose(%p0, axes={axes})"),
            &[shape],
        );
    }
    // Attention heads merged back (BERT's [12, 128, 64] -> [128, 768], GPT-2's): the merged
    // output axis reads `p[i / d * s + i % d]`, vector loads when `d` is a multiple of 4
    // (12 and 20 with a tail, 6 lane by lane).
    for (heads, seq, d) in [
        (12, 128, 64),
        (12, 64, 64),
        (3, 5, 12),
        (2, 7, 20),
        (4, 9, 6),
    ] {
        add_unary(
            &mut cases,
            &format!(
                "reshape(transpose(reshape(%p0, newshape=[1, {heads}, {seq}, {d}]), \
                 axes=[0, 2, 1, 3]), newshape=[{seq}, {}])",
                heads * d
            ),
            &[&[heads, seq, d]],
        );
    }
    let tile: &[(&[i64], &str)] = &[
        (&[2, 3], "[2, 2]"),
        (&[2, 3], "[2]"),
        (&[2, 3], "[1, 3]"),
        (&[2, 3], "[2, 1, 3]"),
        (&[3], "[1, 2]"),
        (&[3], "[3]"),
        (&[], "[3]"),
        (&[], "[2, 2]"),
        (&[2, 0], "[2, 2]"),
        (&[1, 5], "[3, 1]"),
        (&[1, 1], "[1, 1]"),
        (&[2, 1, 3], "[1, 4, 1]"),
    ];
    for (shape, reps) in tile {
        add_unary(&mut cases, &format!("tile(%p0, reps={reps})"), &[shape]);
    }
    let repeat: &[(&[i64], &str)] = &[
        (&[2, 3], "repeats=2, axis=0"),
        (&[2, 3], "repeats=2, axis=-1"),
        (&[2, 3], "repeats=3, axis=1"),
        (&[2, 3], "repeats=1, axis=0"),
        (&[2, 3, 4], "repeats=2, axis=-2"),
        (&[2, 3], "repeats=2"),
        (&[2, 3], "repeats=2, axis=None"),
        (&[3], "repeats=3, axis=0"),
        (&[2, 0], "repeats=2, axis=0"),
        (&[1, 5], "repeats=5, axis=0"),
    ];
    for (shape, attrs) in repeat {
        add_unary(&mut cases, &format!("repeat(%p0, {attrs})"), &[shape]);
    }
    let reverse: &[(&[i64], &str)] = &[
        (&[2, 3], "axis=0"),
        (&[2, 3], "axis=1"),
        (&[2, 3], "axis=-1"),
        (&[2, 3], "axis=-2"),
        (&[2, 3, 5], "axis=1"),
        (&[2, 3, 5], "axis=None"),
        (&[5], "axis=0"),
        (&[17], "axis=-1"),
        (&[1, 4], "axis=0"),
        (&[3, 0], "axis=1"),
        (&[3, 0], "axis=0"),
    ];
    for (shape, attrs) in reverse {
        add_unary(&mut cases, &format!("reverse(%p0, {attrs})"), &[shape]);
    }
    run_cases(cases);
}

#[test]
fn joins_and_splits_match_the_reference() {
    let mut cases = Vec::new();
    let concat: &[(&[&[i64]], i64)] = &[
        (&[&[2, 3], &[2, 5]], 1),
        (&[&[2, 3], &[2, 5]], -1),
        (&[&[1, 3], &[4, 3]], 0),
        (&[&[1, 3], &[4, 3]], -2),
        (&[&[2, 0], &[2, 3]], 1),
        (&[&[2, 3], &[2, 0], &[2, 1]], 1),
        (&[&[0, 3], &[0, 3]], 0),
        (&[&[3], &[1], &[5]], 0),
        (&[&[2, 1, 3], &[2, 4, 3]], -2),
        (&[&[2, 2, 3], &[2, 2, 1], &[2, 2, 2], &[2, 2, 7]], 2),
        (&[&[4]], 0),
        (
            &[
                &[1],
                &[2],
                &[3],
                &[1],
                &[2],
                &[3],
                &[1],
                &[2],
                &[3],
                &[1],
                &[2],
                &[3],
            ],
            0,
        ),
    ];
    for (shapes, axis) in concat {
        let names: Vec<String> = (0..shapes.len()).map(|i| format!("%p{i}")).collect();
        let params: Vec<Param> = shapes.iter().map(|s| (*s, "T")).collect();
        add(
            &mut cases,
            DTYPES,
            &format!("concatenate({}, axis={axis})", tuple_text(&names)),
            &params,
        );
    }
    add(
        &mut cases,
        DTYPES,
        "concatenate((%p0, %p1))",
        &[(&[2, 3], "T"), (&[1, 3], "T")],
    );
    let stack: &[(&[i64], usize, i64)] = &[
        (&[2, 3], 2, 0),
        (&[2, 3], 2, 1),
        (&[2, 3], 2, 2),
        (&[2, 3], 3, -1),
        (&[2, 3], 2, -3),
        (&[], 3, 0),
        (&[0, 2], 2, 1),
        (&[5], 3, -1),
        (&[5], 1, 0),
        (&[1, 1], 4, 1),
    ];
    for &(shape, n, axis) in stack {
        let names: Vec<String> = (0..n).map(|i| format!("%p{i}")).collect();
        let params: Vec<Param> = (0..n).map(|_| (shape, "T")).collect();
        add(
            &mut cases,
            DTYPES,
            &format!("stack({}, axis={axis})", tuple_text(&names)),
            &params,
        );
    }
    let split: &[(&[i64], &str)] = &[
        (&[6, 3], "indices_or_sections=3"),
        (&[6, 3], "indices_or_sections=3, axis=0"),
        (&[2, 7], "indices_or_sections=[1, 4], axis=1"),
        (&[2, 7], "indices_or_sections=[1, 4], axis=-1"),
        (&[2, 7], "indices_or_sections=[3], axis=1"),
        (&[2, 7], "indices_or_sections=[1, 3, 6], axis=1"),
        (&[4, 5], "indices_or_sections=1"),
        (&[2, 6, 3], "indices_or_sections=2, axis=-2"),
        (&[2, 6, 3], "indices_or_sections=6, axis=1"),
        (&[0, 4], "indices_or_sections=2, axis=1"),
        (&[5], "indices_or_sections=[2]"),
        (&[4, 0], "indices_or_sections=2"),
    ];
    for (shape, attrs) in split {
        add_unary(&mut cases, &format!("split(%p0, {attrs})"), &[shape]);
    }
    // One piece of a split, and pieces joined again: the tuple inside the kernel.
    add_unary(
        &mut cases,
        "split(%p0, indices_or_sections=3, axis=-1).2",
        &[&[2, 6]],
    );
    add_unary(
        &mut cases,
        "%0 = split(%p0, indices_or_sections=[1, 3], axis=1); concatenate((%0.2, %0.0), axis=1)",
        &[&[2, 5]],
    );
    run_cases(cases);
}

#[test]
fn slices_match_the_reference() {
    let mut cases = Vec::new();
    let slices: &[(&[i64], &str)] = &[
        (&[8], "begin=[1], end=[8], strides=[3], axes=None"),
        (&[8], "begin=[8], end=[1], strides=[-2], axes=None"),
        (&[8], "begin=[-1], end=[-11], strides=[-1], axes=None"),
        (&[8], "begin=[-1], end=[-11], strides=[-1], axes=[0]"),
        (&[8], "begin=[0], end=[100], strides=[1], axes=None"),
        (&[8], "begin=[2], end=[5], strides=None, axes=None"),
        (&[5], "begin=[2], end=[2], strides=[1], axes=None"),
        (
            &[3, 4],
            "begin=[1, 0], end=[3, 4], strides=[1, 2], axes=None",
        ),
        (
            &[3, 4],
            "begin=[1, -4], end=[3, 100], strides=[1, 3], axes=None",
        ),
        (&[3, 4], "begin=[1], end=[3], strides=None, axes=[1]"),
        (&[3, 4], "begin=[1], end=[3], strides=[1], axes=[-1]"),
        (
            &[3, 4],
            "begin=[0, 1], end=[2, 2], strides=None, axes=None, slice_mode=\"size\"",
        ),
        (
            &[3, 4],
            "begin=[1, 2], end=[3, -1], strides=[1, 1], slice_mode=\"size\", axes=None",
        ),
        (
            &[3, 4],
            "begin=[2, 3], end=[0, 0], strides=[-1, -1], axes=None",
        ),
        (
            &[4, 5, 6],
            "begin=[0, 2, 3], end=[2, 0, 0], strides=[1, -1, -2], axes=None",
        ),
        (&[4, 5, 6], "begin=[1], end=[3], strides=[1], axes=None"),
        (
            &[4, 5, 6],
            "begin=[5, 1], end=[-100, 6], strides=[-2, 2], axes=[2, 0]",
        ),
        (&[3, 9], "begin=[5], end=[-100], strides=[-2], axes=[1]"),
        (
            &[8, 8],
            "begin=[8, 0], end=[2, 8], strides=[-2, 1], axes=None",
        ),
        (&[0, 3], "begin=[0], end=[1], strides=[1], axes=None"),
        (
            &[3, 0],
            "begin=[1, 0], end=[2, 0], strides=[1, 1], axes=None",
        ),
        (
            &[1, 7],
            "begin=[0, 6], end=[1, 7], strides=[1, 1], axes=None",
        ),
        (&[17], "begin=[1], end=[17], strides=[2], axes=None"),
    ];
    for (shape, attrs) in slices {
        add_unary(
            &mut cases,
            &format!("strided_slice(%p0, {attrs})"),
            &[shape],
        );
    }
    run_cases(cases);
}

#[test]
fn takes_match_the_reference() {
    let mut cases = Vec::new();
    // Random signed indices lie in [-10, 10), unsigned ones in [0, 10): clipped and wrapped.
    let takes: &[(&[i64], &[i64], &str)] = &[
        (&[5, 4], &[3], "axis=0"),
        (&[5, 4], &[2, 3], "axis=1"),
        (&[5, 4], &[2, 3], "axis=-1"),
        (&[5, 4], &[2, 3], "axis=-2"),
        (&[5, 4], &[7], ""),
        (&[5, 4], &[2, 2], "axis=None"),
        (&[5, 4], &[], "axis=0"),
        (&[5, 4], &[], ""),
        (&[7], &[4], "axis=0"),
        (&[2, 5, 3], &[2, 4], "batch_dims=1, axis=1"),
        (&[2, 5, 3], &[2, 4], "batch_dims=-1, axis=-2"),
        (&[2, 3, 5], &[2, 3, 2], "batch_dims=2, axis=2"),
        (&[4, 3], &[0], "axis=0"),
        (&[4, 3], &[2, 0], "axis=1"),
        (&[1, 3], &[5], "axis=0"),
        (&[3, 1, 2], &[1, 3], "axis=1"),
    ];
    for (data, indices, attrs) in takes {
        for mode in ["", "mode=\"clip\"", "mode=\"wrap\""] {
            let attrs: Vec<&str> = [*attrs, mode]
                .into_iter()
                .filter(|a| !a.is_empty())
                .collect();
            let attrs = if attrs.is_empty() {
                String::new()
            } else {
                format!(", {}", attrs.join(", "))
            };
            for index_dtype in ["int32", "int64", "int8", "uint8"] {
                add(
                    &mut cases,
                    DTYPES,
                    &format!("take(%p0, %p1{attrs})"),
                    &[(data, "T"), (indices, index_dtype)],
                );
            }
        }
    }
    // Index dtypes past the common ones: `uint64` indices are resolved before conversion.
    for index_dtype in ["int16", "uint32", "uint64"] {
        for attrs in [", axis=1, mode=\"wrap\"", ", axis=-1"] {
            add(
                &mut cases,
                DTYPES,
                &format!("take(%p0, %p1{attrs})"),
                &[(&[2, 3], "T"), (&[4], index_dtype)],
            );
        }
    }
    // `mode="fast"` with indices in range (an index out of range is an error in the
    // interpreter, a clamped read in the kernel).
    let fast: &[(&[i64], &[i64], &str, &str)] = &[
        (&[12, 3], &[4], "uint8", "axis=0"),
        (&[3, 11], &[2, 5], "uint8", "axis=-1"),
        (&[3, 4], &[5], "uint8", ""),
        (&[3, 4], &[2, 3], "uint8", "axis=None"),
        (&[2, 10, 3], &[2, 4], "uint8", "batch_dims=1, axis=1"),
    ];
    for (data, indices, index_dtype, attrs) in fast {
        let sep = if attrs.is_empty() { "" } else { ", " };
        add(
            &mut cases,
            DTYPES,
            &format!("take(%p0, %p1{sep}{attrs}, mode=\"fast\")"),
            &[(data, "T"), (indices, index_dtype)],
        );
    }
    add(
        &mut cases,
        DTYPES,
        "take(%p0, floor_mod(%p1, 10), axis=1, mode=\"fast\")",
        &[(&[2, 10], "T"), (&[3, 2], "int32")],
    );
    add(
        &mut cases,
        DTYPES,
        "take(%p0, floor_mod(%p1, 10i64), mode=\"fast\")",
        &[(&[5, 2], "T"), (&[7], "int64")],
    );
    run_cases(cases);
}

#[test]
fn contractions_match_the_reference() {
    let mut cases = Vec::new();
    let dense: &[(&[i64], &[i64], &str)] = &[
        (&[2, 3], &[4, 3], ""),
        (&[2, 3], &[4, 3], ", units=4"),
        (&[2, 3], &[4, 3], ", units=None"),
        (&[3], &[1, 3], ""),
        (&[2, 1, 5], &[3, 5], ""),
        (&[1, 1], &[1, 1], ""),
        (&[7, 17], &[9, 17], ""),
        (&[0, 3], &[2, 3], ""),
        (&[2, 0], &[3, 0], ""),
        (&[2, 3], &[0, 3], ""),
    ];
    for (a, b, attrs) in dense {
        let units = if attrs.contains("units") {
            ""
        } else {
            ", units=None"
        };
        add(
            &mut cases,
            DTYPES,
            &format!("nn.dense(%p0, %p1{units}{attrs})"),
            &[(a, "T"), (b, "T")],
        );
    }
    let matmul: &[(&[i64], &[i64], &str)] = &[
        (&[2, 3], &[3, 4], ""),
        (&[2, 3], &[4, 3], ", transpose_b=True"),
        (&[3, 2], &[3, 4], ", transpose_a=True"),
        (&[3, 2], &[4, 3], ", transpose_a=True, transpose_b=True"),
        (
            &[3, 2],
            &[4, 3],
            ", units=4, transpose_a=True, transpose_b=True",
        ),
        (&[3], &[3, 2], ""),
        (&[2, 1, 3], &[3, 1], ""),
        (&[5, 7], &[7, 9], ""),
        (&[2, 0], &[0, 3], ""),
        (&[0, 2], &[2, 3], ""),
    ];
    for (a, b, attrs) in matmul {
        let units = if attrs.contains("units") {
            ""
        } else {
            ", units=None"
        };
        add(
            &mut cases,
            DTYPES,
            &format!("nn.matmul(%p0, %p1{units}{attrs})"),
            &[(a, "T"), (b, "T")],
        );
    }
    let batch: &[(&[i64], &[i64], &str)] = &[
        (&[2, 3, 4], &[2, 4, 5], ""),
        (&[2, 3, 4], &[2, 5, 4], ", transpose_b=True"),
        (&[2, 4, 3], &[2, 4, 5], ", transpose_a=True"),
        (
            &[2, 4, 3],
            &[2, 5, 4],
            ", transpose_a=True, transpose_b=True",
        ),
        (&[1, 3, 4], &[3, 4, 2], ""),
        (&[3, 2, 4], &[1, 4, 5], ""),
        (&[3, 2, 4], &[1, 5, 4], ", transpose_b=True"),
        (&[1, 4, 2], &[3, 4, 5], ", transpose_a=True"),
        (&[1, 1, 1], &[1, 1, 1], ""),
        (&[2, 3, 0], &[2, 0, 4], ""),
        (&[0, 2, 3], &[0, 3, 2], ""),
        (&[2, 5, 7], &[2, 7, 3], ""),
    ];
    for (a, b, attrs) in batch {
        add(
            &mut cases,
            DTYPES,
            &format!("nn.batch_matmul(%p0, %p1{attrs})"),
            &[(a, "T"), (b, "T")],
        );
    }
    // `out_dtype` widening or converting the operands.
    for (from, to) in [
        ("int8", "int32"),
        ("uint8", "int32"),
        ("int32", "int64"),
        ("float32", "float64"),
        ("int32", "float32"),
        ("float32", "int32"),
    ] {
        add(
            &mut cases,
            &[from],
            &format!("nn.dense(%p0, %p1, units=None, out_dtype=\"{to}\")"),
            &[(&[3, 5], "T"), (&[4, 5], "T")],
        );
        add(
            &mut cases,
            &[from],
            &format!("nn.matmul(%p0, %p1, units=None, out_dtype=\"{to}\", transpose_b=True)"),
            &[(&[3, 5], "T"), (&[4, 5], "T")],
        );
        add(
            &mut cases,
            &[from],
            &format!("nn.batch_matmul(%p0, %p1, out_dtype=\"{to}\", transpose_b=True)"),
            &[(&[2, 3, 5], "T"), (&[2, 4, 5], "T")],
        );
    }
    run_cases_within(cases, LOOSE);
}

#[test]
fn convolutions_match_the_reference() {
    let mut cases = Vec::new();
    let conv: &[(&[i64], &[i64], &str)] = &[
        (&[1, 3, 5, 5], &[4, 3, 3, 3], ""),
        (
            &[1, 3, 5, 5],
            &[4, 3, 3, 3],
            ", channels=4, kernel_size=[3, 3]",
        ),
        (
            &[1, 2, 7, 6],
            &[3, 2, 3, 3],
            ", strides=[2, 2], padding=[1, 1]",
        ),
        (&[1, 2, 5, 5], &[2, 2, 3, 3], ", padding=[1]"),
        (&[2, 3, 6, 5], &[2, 3, 3, 2], ", padding=[1, 2, 0, 1]"),
        (
            &[1, 2, 7, 7],
            &[3, 2, 3, 3],
            ", padding=[2, 2], dilation=[2, 2]",
        ),
        (&[1, 4, 5, 5], &[6, 2, 3, 3], ", groups=2"),
        (&[1, 6, 5, 4], &[6, 2, 1, 3], ", padding=[0, 1], groups=3"),
        (&[1, 4, 6, 6], &[4, 1, 3, 3], ", padding=[1, 1], groups=4"),
        (
            &[2, 3, 5, 5],
            &[6, 1, 3, 3],
            ", strides=[2, 2], padding=[1, 1], groups=3",
        ),
        (&[2, 5, 4, 3], &[3, 5, 1, 1], ""),
        (&[1, 5, 5, 7], &[3, 5, 1, 1], ", strides=[2, 2]"),
        (
            &[1, 3, 9, 7],
            &[5, 3, 5, 3],
            ", strides=[2, 3], padding=[2, 1, 0, 1], dilation=[1, 2]",
        ),
        (&[1, 1, 1, 1], &[1, 1, 1, 1], ""),
        (&[1, 1, 1, 1], &[2, 1, 3, 3], ", padding=[1, 1]"),
        (&[1, 1, 2, 2], &[1, 1, 3, 3], ", padding=[1, 1]"),
        (&[1, 2, 7, 7], &[2, 2, 1, 1], ", strides=[3, 3]"),
        (
            &[1, 2, 4, 4],
            &[2, 2, 2, 2],
            ", strides=[3, 3], padding=[2, 2], dilation=[3, 3]",
        ),
        (&[3, 2, 4, 4], &[1, 2, 4, 4], ""),
        (&[0, 2, 5, 5], &[3, 2, 3, 3], ""),
        (&[1, 2, 5, 5], &[0, 2, 3, 3], ""),
        (&[1, 0, 5, 5], &[3, 0, 3, 3], ""),
    ];
    for (data, weight, attrs) in conv {
        add(
            &mut cases,
            DTYPES,
            &format!("nn.conv2d(%p0, %p1{attrs})"),
            &[(data, "T"), (weight, "T")],
        );
    }
    for (from, to) in [
        ("int8", "int32"),
        ("uint8", "int32"),
        ("float32", "float64"),
    ] {
        add(
            &mut cases,
            &[from],
            &format!("nn.conv2d(%p0, %p1, padding=[1, 1], out_dtype=\"{to}\")"),
            &[(&[1, 3, 5, 4], "T"), (&[2, 3, 3, 3], "T")],
        );
    }
    run_cases_within(cases, LOOSE);
}

#[test]
fn pools_match_the_reference() {
    let mut cases = Vec::new();
    let pools: &[(&[i64], &str)] = &[
        (&[1, 2, 6, 6], "pool_size=[2, 2], strides=[2, 2]"),
        (
            &[1, 2, 6, 6],
            "pool_size=[3, 3], strides=[2, 2], padding=[1, 1, 1, 1]",
        ),
        (&[1, 2, 6, 6], "pool_size=[3, 3], padding=[1]"),
        (&[1, 2, 5, 5], "pool_size=[3, 3], padding=[1, 2]"),
        (
            &[1, 1, 5, 5],
            "pool_size=[2, 2], strides=[2, 2], ceil_mode=True",
        ),
        (
            &[1, 2, 7, 8],
            "pool_size=[3, 3], strides=[3, 3], padding=[1, 1], ceil_mode=True",
        ),
        (&[1, 2, 7, 7], "pool_size=[2, 2], dilation=[2, 2]"),
        (
            &[1, 2, 7, 7],
            "pool_size=[3, 2], strides=[2, 1], dilation=[2, 3], padding=[1, 1]",
        ),
        (
            &[2, 3, 4, 5],
            "pool_size=[2, 3], strides=[1, 2], padding=[0, 1, 1, 0]",
        ),
        (&[2, 3, 4, 5], "pool_size=[1, 1]"),
        (&[1, 1, 1, 1], "pool_size=[1, 1]"),
        (&[1, 1, 1, 1], "pool_size=[3, 3], padding=[1, 1]"),
        (&[1, 2, 2, 3], "pool_size=[4, 4], padding=[2, 2]"),
        (&[1, 2, 7, 7], "pool_size=[1, 1], strides=[3, 3]"),
        (
            &[1, 2, 6, 6],
            "pool_size=[3, 3], strides=[2, 2], padding=[0, 0, 1, 1], ceil_mode=True",
        ),
        (&[0, 2, 4, 4], "pool_size=[2, 2]"),
        (
            &[1, 3, 9, 7],
            "pool_size=[3, 3], strides=[2, 2], ceil_mode=True",
        ),
    ];
    for (shape, attrs) in pools {
        add_unary(
            &mut cases,
            &format!("nn.max_pool2d(%p0, {attrs})"),
            &[shape],
        );
        for extra in ["", ", count_include_pad=True"] {
            add_unary_in(
                &mut cases,
                AVG_DTYPES,
                &format!("nn.avg_pool2d(%p0, {attrs}{extra})"),
                &[shape],
            );
        }
    }
    let planes: &[&[i64]] = &[
        &[1, 3, 5, 5],
        &[2, 1, 1, 1],
        &[2, 3, 4, 7],
        &[0, 2, 3, 3],
        &[1, 2, 0, 3],
    ];
    add_unary_in(&mut cases, AVG_DTYPES, "nn.global_avg_pool2d(%p0)", planes);
    add_unary(&mut cases, "nn.global_max_pool2d(%p0)", planes);
    let adaptive: &[(&[i64], &str)] = &[
        (&[1, 2, 5, 7], ", output_size=[2, 3]"),
        (&[1, 3, 6, 6], ", output_size=[1, 1]"),
        (&[1, 3, 6, 6], ", output_size=[3, 1]"),
        (&[2, 2, 4, 4], ", output_size=[4, 4]"),
        (&[1, 1, 5, 3], ", output_size=[2, 4]"),
        (&[1, 2, 7, 5], ", output_size=[3, 2]"),
        (&[1, 2, 3, 4], ""),
        (&[0, 2, 4, 4], ", output_size=[2, 2]"),
    ];
    for (shape, attrs) in adaptive {
        add_unary_in(
            &mut cases,
            AVG_DTYPES,
            &format!("nn.adaptive_avg_pool2d(%p0{attrs})"),
            &[shape],
        );
        add_unary(
            &mut cases,
            &format!("nn.adaptive_max_pool2d(%p0{attrs})"),
            &[shape],
        );
    }
    run_cases_within(cases, LOOSE);
}

/// Softmax at the sizes of real networks, computed in `float32` for `float32` and `float16`
/// data (and BERT's layer norm in `float16`): BERT's
/// attention (`[1, 12, 128, 128]`), GPT-2's with a causal-like mask of `-inf` added first,
/// vocabulary-long rows, softmax along a middle axis, rows with `-inf` entries (a row of
/// `-inf` only gives NaN, as the reference) and rows of equal values.
#[test]
fn softmax_at_network_sizes_matches_the_reference() {
    let (mut cases, mut halves) = (Vec::new(), Vec::new());
    for op in ["nn.softmax", "nn.log_softmax"] {
        network_softmax(&mut cases, FLOATS, op);
        network_softmax(&mut halves, &["float16"], op);
    }
    // BERT's layer norm in float16.
    add(
        &mut halves,
        &["float16"],
        "nn.layer_norm(%p0, %p1, %p2, epsilon=1e-05f)",
        &[(&[128, 768], "T"), (&[768], "T"), (&[768], "T")],
    );
    run_cases_within(cases, LOOSE);
    // float16 data is computed in float32 and rounded once (the reference: in float64): a
    // float16 ulp apart at most.
    run_cases_within(halves, (2e-3, 1e-5));
}

/// The cases of [`softmax_at_network_sizes_matches_the_reference`] for `op` and `dtypes`.
fn network_softmax(cases: &mut Vec<Case>, dtypes: &[&str], op: &str) {
    let shaped: &[(&[i64], &str)] = &[
        (&[1, 12, 128, 128], ""),
        (&[3, 50257], ", axis=-1"),
        (&[2, 64, 7, 9], ", axis=1"),
        (&[16, 33, 5], ", axis=1"),
        (&[4, 1000], ", axis=0"),
    ];
    for (shape, attrs) in shaped {
        add(cases, dtypes, &format!("{op}(%p0{attrs})"), &[(shape, "T")]);
    }
    // GPT-2's masked attention: `-inf` wherever the mask is not positive.
    add(
        cases,
        dtypes,
        &format!("{op}(add(%p0, log(nn.relu(%p1))))"),
        &[(&[1, 12, 64, 64], "T"), (&[64, 64], "T")],
    );
    // Rows of equal values, and rows of `-inf` only.
    add(
        cases,
        &["float32"],
        &format!("{op}(multiply(%p0, 0f))"),
        &[(&[8, 77], "float32")],
    );
    add(
        cases,
        &["float32"],
        &format!("{op}(log(multiply(nn.relu(%p0), 0f)))"),
        &[(&[6, 40], "float32")],
    );
}

#[test]
fn softmax_and_normalizations_match_the_reference() {
    let mut cases = Vec::new();
    let softmax: &[(&[i64], &str)] = &[
        (&[5], ""),
        (&[1], ""),
        (&[17], ", axis=0"),
        (&[2, 3], ", axis=0"),
        (&[2, 3], ", axis=-1"),
        (&[2, 3, 4], ", axis=1"),
        (&[2, 3, 4], ", axis=-2"),
        (&[2, 3, 4], ""),
        (&[1, 7], ""),
        (&[7, 1], ", axis=1"),
        (&[0, 3], ", axis=1"),
        (&[3, 0], ", axis=-1"),
    ];
    for (shape, attrs) in softmax {
        for op in ["nn.softmax", "nn.log_softmax"] {
            add(
                &mut cases,
                DTYPES,
                &format!("{op}(%p0{attrs})"),
                &[(shape, "T")],
            );
        }
    }
    // The variance is made non-negative so the result is a number.
    let batch_norm: &[(&[i64], i64, &str)] = &[
        (&[2, 3, 4], 3, ""),
        (&[2, 4, 3, 3], 4, ", epsilon=0.001f"),
        (&[2, 3], 3, ", axis=-1"),
        (&[2, 3], 2, ", axis=0"),
        (&[2, 3, 4], 4, ", axis=-1, center=False"),
        (&[2, 3, 4], 3, ", scale=False"),
        (&[2, 3, 4], 2, ", axis=-3, center=False, scale=False"),
        (&[1, 1, 1], 1, ""),
        (&[0, 3, 2], 3, ""),
        (&[3], 3, ", axis=0"),
    ];
    for &(shape, c, attrs) in batch_norm {
        let v: &[i64] = &[c];
        add(
            &mut cases,
            DTYPES,
            &format!("nn.batch_norm(%p0, %p1, %p2, %p3, abs(%p4){attrs})"),
            &[(shape, "T"), (v, "T"), (v, "T"), (v, "T"), (v, "T")],
        );
    }
    add(
        &mut cases,
        DTYPES,
        "nn.batch_norm(%p0, %p1, %p2, %p3, abs(%p4)).0",
        &[
            (&[2, 3, 5], "T"),
            (&[3], "T"),
            (&[3], "T"),
            (&[3], "T"),
            (&[3], "T"),
        ],
    );
    let layer_norm: &[(&[i64], i64, &str)] = &[
        (&[2, 5], 5, ""),
        (&[3, 4, 5], 5, ", axis=-1, epsilon=1e-05f"),
        (&[3, 4, 5], 4, ", axis=1, epsilon=0.0001f, scale=False"),
        (&[3, 4, 5], 4, ", axis=-2, center=False"),
        (&[3, 4, 5], 3, ", axis=0, center=False, scale=False"),
        (&[1, 7], 7, ""),
        (&[4, 1], 1, ""),
        (&[17], 17, ""),
        (&[0, 3], 3, ""),
    ];
    for &(shape, c, attrs) in layer_norm {
        let v: &[i64] = &[c];
        add(
            &mut cases,
            DTYPES,
            &format!("nn.layer_norm(%p0, %p1, %p2{attrs})"),
            &[(shape, "T"), (v, "T"), (v, "T")],
        );
    }
    for (call, shape) in [
        ("nn.dropout(%p0)", &[2, 3][..]),
        ("nn.dropout(%p0, rate=0.3f)", &[5]),
        ("nn.dropout(%p0)", &[]),
        ("nn.dropout(%p0)", &[0, 3]),
        ("nn.dropout(%p0, rate=0.1f).0", &[2, 1, 3]),
        ("nn.dropout(%p0).1", &[4]),
    ] {
        add(&mut cases, DTYPES, call, &[(shape, "T")]);
    }
    run_cases_within(cases, LOOSE);
}

#[test]
fn pads_match_the_reference() {
    let mut cases = Vec::new();
    let pads: &[(&[i64], &str)] = &[
        (&[2, 3], "pad_width=[[1, 2], [0, 1]]"),
        (&[2, 3], "pad_width=[[0, 0], [0, 0]]"),
        (&[1, 2, 3, 3], "pad_width=[[0, 0], [0, 0], [1, 1], [2, 1]]"),
        (&[5], "pad_width=[[3, 0]]"),
        (&[0, 3], "pad_width=[[1, 1], [0, 2]]"),
        (&[3, 0], "pad_width=[[0, 0], [0, 0]]"),
        (&[1, 1], "pad_width=[[2, 2], [2, 2]]"),
        (&[2, 3], "pad_width=[[1, 0], [2, 1]], pad_mode=\"constant\""),
        (&[2, 3], "pad_width=[[1, 0], [2, 1]], pad_mode=\"edge\""),
        (&[3, 4], "pad_width=[[2, 1], [1, 3]], pad_mode=\"reflect\""),
        (&[5], "pad_width=[[4, 4]], pad_mode=\"reflect\""),
        (&[1, 4], "pad_width=[[0, 0], [3, 2]], pad_mode=\"edge\""),
        (&[], "pad_width=[]"),
    ];
    for (shape, attrs) in pads {
        add(
            &mut cases,
            DTYPES,
            &format!("nn.pad(%p0, %p1, {attrs})"),
            &[(shape, "T"), (&[], "T")],
        );
    }
    // A pad value of another dtype than the data's.
    add(
        &mut cases,
        DTYPES,
        "nn.pad(%p0, %p1, pad_width=[[1, 1], [1, 0]])",
        &[(&[2, 3], "T"), (&[], "float32")],
    );
    run_cases(cases);
}

#[test]
fn fused_shape_and_nn_chains_match_the_reference() {
    let mut cases = Vec::new();
    for (x, w, b) in [
        (&[4, 6][..], &[5, 6][..], &[5][..]),
        (&[1, 17], &[9, 17], &[9]),
        (&[3, 1], &[1, 1], &[1]),
    ] {
        add(
            &mut cases,
            FLOATS,
            "nn.relu(nn.bias_add(nn.dense(%p0, %p1, units=None), %p2, axis=-1))",
            &[(x, "T"), (w, "T"), (b, "T")],
        );
        add(
            &mut cases,
            FLOATS,
            "nn.relu(add(nn.dense(%p0, %p1, units=None), %p2))",
            &[(x, "T"), (w, "T"), (b, "T")],
        );
        add(
            &mut cases,
            FLOATS,
            "nn.softmax(nn.dense(%p0, %p1, units=None))",
            &[(x, "T"), (w, "T")],
        );
        add(
            &mut cases,
            FLOATS,
            "nn.log_softmax(nn.bias_add(nn.dense(%p0, %p1, units=None), %p2, axis=1), axis=0)",
            &[(x, "T"), (w, "T"), (b, "T")],
        );
    }
    for (x, w, attrs) in [
        (&[1, 3, 5, 5][..], &[4, 3, 3, 3][..], ", padding=[1, 1]"),
        (
            &[2, 4, 6, 5],
            &[4, 1, 3, 3],
            ", strides=[2, 2], padding=[1, 1], groups=4",
        ),
        (&[1, 5, 4, 3], &[6, 5, 1, 1], ""),
    ] {
        let b: &[i64] = &[w[0]];
        add(
            &mut cases,
            FLOATS,
            &format!("nn.relu(nn.bias_add(nn.conv2d(%p0, %p1{attrs}), %p2))"),
            &[(x, "T"), (w, "T"), (b, "T")],
        );
        add(
            &mut cases,
            FLOATS,
            &format!(
                "nn.max_pool2d(nn.relu(nn.bias_add(nn.conv2d(%p0, %p1{attrs}), %p2)), \
                 pool_size=[2, 2], ceil_mode=True)"
            ),
            &[(x, "T"), (w, "T"), (b, "T")],
        );
    }
    for dtype in ["float32", "float64", "int32", "int8"] {
        add(
            &mut cases,
            &[dtype],
            "add(transpose(reshape(%p0, newshape=[2, 3, 4]), axes=[0, 2, 1]), %p1)",
            &[(&[6, 4], "T"), (&[2, 4, 3], "T")],
        );
        add(
            &mut cases,
            &[dtype],
            "add(transpose(reshape(%p0, newshape=[0, 3, -1]), axes=[2, 0, 1]), %p1)",
            &[(&[4, 6], "T"), (&[3], "T")],
        );
        add(
            &mut cases,
            &[dtype],
            "multiply(reverse(strided_slice(%p0, begin=[1, 0], end=[4, 5], strides=[2, 2], \
             axes=None), axis=1), expand_dims(%p1, axis=0))",
            &[(&[5, 5], "T"), (&[3], "T")],
        );
        add(
            &mut cases,
            &[dtype],
            "nn.batch_flatten(concatenate((tile(%p0, reps=[1, 2]), repeat(%p1, repeats=2, \
             axis=1)), axis=0))",
            &[(&[2, 3], "T"), (&[1, 3], "T")],
        );
    }
    add(
        &mut cases,
        FLOATS,
        "nn.softmax(reshape(nn.batch_matmul(%p0, %p1, transpose_b=True), newshape=[-1, 0]), \
         axis=-1)",
        &[(&[2, 3, 4], "T"), (&[2, 5, 4], "T")],
    );
    add(
        &mut cases,
        &["float32"],
        "nn.dense(nn.batch_flatten(nn.pad(%p0, 0f, pad_width=[[0, 0], [0, 0], [1, 1], [1, 1]])), \
         %p1, units=None)",
        &[(&[2, 2, 2, 2], "float32"), (&[3, 32], "float32")],
    );
    // Contraction operands that are themselves computed: affine (transpose), non-affine
    // (reshape, batch_flatten, pad), data-dependent (take) or reductions (softmax); and
    // reductions of a contraction.
    for dtype in ["float32", "float64", "int32"] {
        let t = &[dtype];
        add(
            &mut cases,
            t,
            "nn.dense(transpose(%p0, axes=[1, 0]), %p1, units=None)",
            &[(&[5, 3], "T"), (&[4, 5], "T")],
        );
        add(
            &mut cases,
            t,
            "nn.dense(%p0, reshape(%p1, newshape=[4, -1]), units=None)",
            &[(&[3, 6], "T"), (&[2, 2, 6], "T")],
        );
        add(
            &mut cases,
            t,
            "nn.dense(nn.batch_flatten(%p0), %p1, units=None)",
            &[(&[2, 3, 5], "T"), (&[7, 15], "T")],
        );
        add(
            &mut cases,
            t,
            "nn.dense(take(%p0, %p1, axis=0), %p2, units=None)",
            &[(&[6, 5], "T"), (&[4], "int32"), (&[3, 5], "T")],
        );
        add(
            &mut cases,
            t,
            "nn.matmul(%p0, strided_slice(%p1, begin=[4, 0], end=[0, 3], strides=[-2, 1], \
             axes=None), units=None, transpose_a=True)",
            &[(&[2, 3], "T"), (&[5, 3], "T")],
        );
        add(
            &mut cases,
            t,
            "nn.batch_matmul(reshape(%p0, newshape=[2, 3, -1]), stack((%p1, %p1), axis=0))",
            &[(&[6, 4], "T"), (&[4, 5], "T")],
        );
        add(
            &mut cases,
            t,
            "nn.conv2d(nn.pad(%p0, %p2, pad_width=[[0, 0], [0, 0], [1, 2], [2, 1]]), %p1)",
            &[(&[1, 2, 4, 5], "T"), (&[3, 2, 3, 3], "T"), (&[], "T")],
        );
        add(
            &mut cases,
            t,
            "nn.conv2d(concatenate((%p0, %p0), axis=1), %p1, padding=[1, 1], groups=2)",
            &[(&[1, 2, 4, 4], "T"), (&[4, 2, 3, 3], "T")],
        );
        add(
            &mut cases,
            t,
            "sum(nn.dense(%p0, %p1, units=None), axis=[1])",
            &[(&[3, 5], "T"), (&[4, 5], "T")],
        );
        add(
            &mut cases,
            t,
            "nn.global_avg_pool2d(nn.relu(nn.conv2d(%p0, %p1, padding=[1, 1])))",
            &[(&[1, 2, 5, 5], "T"), (&[3, 2, 3, 3], "T")],
        );
        add(
            &mut cases,
            t,
            "nn.dense(nn.dense(%p0, %p1, units=None), %p2, units=None)",
            &[(&[3, 5], "T"), (&[4, 5], "T"), (&[2, 4], "T")],
        );
    }
    // Tuple results: pieces reordered, one tensor twice, an input passed through.
    for dtype in ["float32", "int8", "bool"] {
        let t = &[dtype];
        add(
            &mut cases,
            t,
            "%0 = split(%p0, indices_or_sections=[1, 3], axis=-1); (%0.2, %0.0, %0.1)",
            &[(&[2, 5], "T")],
        );
        add(
            &mut cases,
            t,
            "%0 = reverse(%p0, axis=0); (%0, %0, %p0)",
            &[(&[3, 2], "T")],
        );
        add(
            &mut cases,
            t,
            "(transpose(%p0, axes=[1, 0]), nn.batch_flatten(expand_dims(%p0, axis=1)))",
            &[(&[3, 4], "T")],
        );
    }
    add(
        &mut cases,
        FLOATS,
        "nn.batch_norm(%p0, %p1, %p2, %p3, abs(%p4)).1",
        &[
            (&[2, 3, 5], "T"),
            (&[3], "T"),
            (&[3], "T"),
            (&[3], "T"),
            (&[3], "T"),
        ],
    );
    // Many pieces: a deep chain of selects read inside a contraction.
    let names: Vec<String> = (0..12).map(|i| format!("%p{i}")).collect();
    let mut params: Vec<Param> = (0..12).map(|_| (&[3, 2][..], "T")).collect();
    params.push((&[5, 24], "T"));
    add(
        &mut cases,
        &["float32", "int32"],
        &format!(
            "nn.dense(concatenate({}, axis=1), %p12, units=None)",
            tuple_text(&names)
        ),
        &params,
    );
    add(
        &mut cases,
        FLOATS,
        "nn.dense(nn.softmax(%p0), %p1, units=None)",
        &[(&[3, 5], "T"), (&[4, 5], "T")],
    );
    add(
        &mut cases,
        FLOATS,
        "nn.layer_norm(nn.dense(%p0, %p1, units=None), %p2, %p2)",
        &[(&[3, 5], "T"), (&[4, 5], "T"), (&[4], "T")],
    );
    run_cases_within(cases, LOOSE);
}

#[test]
fn larger_and_odd_extents_match_the_reference() {
    let mut cases = Vec::new();
    let dtypes: &[&str] = &["float32", "float64", "int32", "int8"];
    // Contractions large enough for blocked matrix products, with odd extents everywhere.
    add(
        &mut cases,
        dtypes,
        "nn.dense(%p0, %p1, units=None)",
        &[(&[33, 65], "T"), (&[31, 65], "T")],
    );
    add(
        &mut cases,
        dtypes,
        "nn.matmul(%p0, %p1, units=None, transpose_a=True)",
        &[(&[40, 17], "T"), (&[40, 33], "T")],
    );
    add(
        &mut cases,
        dtypes,
        "nn.batch_matmul(%p0, %p1, transpose_b=True)",
        &[(&[3, 17, 20], "T"), (&[1, 19, 20], "T")],
    );
    add(
        &mut cases,
        dtypes,
        "nn.conv2d(%p0, %p1, padding=[1, 1])",
        &[(&[1, 16, 11, 11], "T"), (&[24, 16, 3, 3], "T")],
    );
    add(
        &mut cases,
        dtypes,
        "nn.conv2d(%p0, %p1, strides=[2, 2], padding=[1, 1], groups=16)",
        &[(&[2, 16, 9, 9], "T"), (&[16, 1, 3, 3], "T")],
    );
    add(
        &mut cases,
        dtypes,
        "nn.conv2d(%p0, %p1, padding=[3, 3], dilation=[3, 3], groups=2)",
        &[(&[1, 6, 13, 10], "T"), (&[10, 3, 3, 3], "T")],
    );
    // Pools, softmax and normalizations over rows longer than a vector.
    add_unary_in(
        &mut cases,
        dtypes,
        "nn.max_pool2d(%p0, pool_size=[3, 3], strides=[2, 2], padding=[1, 1])",
        &[&[1, 3, 17, 17]],
    );
    add_unary_in(
        &mut cases,
        dtypes,
        "nn.avg_pool2d(%p0, pool_size=[3, 3], strides=[2, 2], padding=[1, 1], ceil_mode=True)",
        &[&[1, 3, 17, 17]],
    );
    add_unary_in(
        &mut cases,
        dtypes,
        "nn.adaptive_avg_pool2d(%p0, output_size=[5, 3])",
        &[&[1, 3, 17, 13]],
    );
    add_unary_in(
        &mut cases,
        dtypes,
        "nn.global_avg_pool2d(%p0)",
        &[&[2, 5, 17, 19]],
    );
    add_unary_in(
        &mut cases,
        dtypes,
        "nn.adaptive_max_pool2d(%p0, output_size=[4, 6])",
        &[&[1, 3, 17, 19]],
    );
    add_unary_in(&mut cases, FLOATS, "nn.softmax(%p0)", &[&[3, 67]]);
    add_unary_in(
        &mut cases,
        FLOATS,
        "nn.log_softmax(%p0, axis=0)",
        &[&[67, 3]],
    );
    add(
        &mut cases,
        FLOATS,
        "nn.layer_norm(%p0, %p1, %p2)",
        &[(&[5, 33], "T"), (&[33], "T"), (&[33], "T")],
    );
    // NaN (the log of a negative number) in pools and softmax.
    for call in [
        "nn.max_pool2d(log(%p0), pool_size=[2, 2], padding=[1, 1])",
        "nn.global_max_pool2d(log(%p0))",
        "nn.adaptive_max_pool2d(log(%p0), output_size=[2, 3])",
        "nn.avg_pool2d(log(%p0), pool_size=[2, 2])",
        "nn.softmax(log(%p0), axis=1)",
    ] {
        add_unary_in(&mut cases, FLOATS, call, &[&[1, 4, 5, 5]]);
    }
    // Shape operators over extents that leave vector remainders.
    for (call, shape) in [
        ("transpose(%p0, axes=[2, 0, 1])", &[5, 17, 3][..]),
        ("transpose(%p0, axes=[1, 0])", &[33, 65]),
        ("reshape(%p0, newshape=[-1, 0])", &[5, 17, 3]),
        ("tile(%p0, reps=[2, 3])", &[3, 17]),
        ("repeat(%p0, repeats=3, axis=1)", &[3, 17]),
        ("reverse(%p0, axis=-1)", &[3, 67]),
        (
            "strided_slice(%p0, begin=[1, 65], end=[3, 0], strides=[1, -3], axes=None)",
            &[3, 67],
        ),
        ("nn.batch_flatten(%p0)", &[3, 5, 13]),
        ("split(%p0, indices_or_sections=[7, 40], axis=1)", &[3, 67]),
        ("expand_dims(%p0, axis=1)", &[3, 67]),
        ("squeeze(%p0)", &[3, 1, 67]),
        (
            "transpose(%p0, axes=[5, 3, 0, 4, 1, 2])",
            &[2, 1, 3, 1, 2, 3],
        ),
        (
            "transpose(%p0, axes=[-2, -1, 0, 2, 1, 3])",
            &[2, 3, 1, 2, 3, 2],
        ),
        (
            "strided_slice(%p0, begin=[-2147483648, 1], end=[2147483647, 9223372036854775807], \
             strides=[1, 2], axes=None)",
            &[3, 17],
        ),
        (
            "strided_slice(%p0, begin=[2147483647], end=[-2147483648], strides=[-3], axes=[1])",
            &[3, 17],
        ),
    ] {
        add_unary_in(&mut cases, DTYPES, call, &[shape]);
    }
    add(
        &mut cases,
        DTYPES,
        "concatenate((%p0, %p1, %p0), axis=1)",
        &[(&[3, 33], "T"), (&[3, 31], "T")],
    );
    add(
        &mut cases,
        DTYPES,
        "stack((%p0, %p1), axis=1)",
        &[(&[3, 33], "T"), (&[3, 33], "T")],
    );
    add(
        &mut cases,
        DTYPES,
        "take(%p0, %p1, axis=1, mode=\"wrap\")",
        &[(&[3, 67], "T"), (&[41], "int32")],
    );
    add(
        &mut cases,
        DTYPES,
        "nn.pad(%p0, %p1, pad_width=[[1, 2], [5, 3]])",
        &[(&[3, 17], "T"), (&[], "T")],
    );
    add(
        &mut cases,
        DTYPES,
        "nn.pad(%p0, %p1, pad_width=[[1, 2], [16, 3]], pad_mode=\"reflect\")",
        &[(&[3, 17], "T"), (&[], "T")],
    );
    run_cases_within(cases, LOOSE);
}

#[test]
fn kernels_large_enough_to_run_in_parallel_match_the_reference() {
    // Past 2^16 elements (output elements times reduction extents) a kernel's outermost loop
    // runs on several threads, and past 2^18 multiply-adds a matrix product is split too.
    let mut cases = Vec::new();
    let dtypes: &[&str] = &["float32", "int8"];
    for (call, shape) in [
        ("transpose(%p0, axes=[2, 0, 1])", &[3, 130, 171][..]),
        ("reshape(%p0, newshape=[-1, 0])", &[3, 130, 171]),
        ("tile(%p0, reps=[2, 3])", &[130, 87]),
        ("reverse(%p0, axis=0)", &[257, 259]),
        (
            "strided_slice(%p0, begin=[256, 1], end=[0, 259], strides=[-1, 2], axes=None)",
            &[257, 259],
        ),
        ("split(%p0, indices_or_sections=[100], axis=1)", &[257, 259]),
        (
            "nn.max_pool2d(%p0, pool_size=[3, 3], strides=[2, 2], padding=[1, 1])",
            &[1, 4, 131, 129],
        ),
        (
            "nn.avg_pool2d(%p0, pool_size=[3, 3], padding=[1, 1], count_include_pad=True)",
            &[1, 4, 67, 65],
        ),
        ("nn.global_max_pool2d(%p0)", &[1, 3, 150, 151]),
        (
            "nn.adaptive_max_pool2d(%p0, output_size=[7, 5])",
            &[1, 3, 150, 151],
        ),
    ] {
        add_unary_in(&mut cases, dtypes, call, &[shape]);
    }
    add_unary_in(&mut cases, &["float32"], "nn.softmax(%p0)", &[&[300, 221]]);
    add(
        &mut cases,
        dtypes,
        "concatenate((%p0, %p1), axis=1)",
        &[(&[257, 131], "T"), (&[257, 127], "T")],
    );
    add(
        &mut cases,
        dtypes,
        "take(%p0, %p1, axis=0)",
        &[(&[20, 259], "T"), (&[301], "int32")],
    );
    add(
        &mut cases,
        dtypes,
        "nn.pad(%p0, %p1, pad_width=[[3, 2], [1, 5]])",
        &[(&[257, 259], "T"), (&[], "T")],
    );
    add(
        &mut cases,
        dtypes,
        "nn.dense(%p0, %p1, units=None)",
        &[(&[67, 97], "T"), (&[81, 97], "T")],
    );
    add(
        &mut cases,
        dtypes,
        "nn.batch_matmul(%p0, %p1)",
        &[(&[3, 45, 61], "T"), (&[3, 61, 50], "T")],
    );
    add(
        &mut cases,
        dtypes,
        "nn.conv2d(%p0, %p1, padding=[1, 1])",
        &[(&[1, 16, 19, 17], "T"), (&[32, 16, 3, 3], "T")],
    );
    add(
        &mut cases,
        &["float32"],
        "nn.relu(nn.bias_add(nn.conv2d(%p0, %p1, strides=[2, 2], padding=[1, 1], groups=8), %p2))",
        &[(&[2, 8, 65, 63], "T"), (&[16, 1, 3, 3], "T"), (&[16], "T")],
    );
    run_cases_within(cases, LOOSE);
}
