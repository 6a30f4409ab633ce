//! Every operator with a compute definition, compiled alone as a primitive function, against
//! its reference evaluation in the interpreter: random inputs over shapes with broadcasting,
//! size-0 and size-1 dimensions and extents that leave vector remainders, for every dtype the
//! operator's type relation accepts.

mod common;

use common::{run_cases, run_cases_within, tensor_type};

/// The dtypes every operator is tried with; those its relation rejects are skipped.
const DTYPES: &[&str] = &[
    "float16",
    "float32",
    "float64",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint32",
    "bool",
    "bfloat16",
    "float8_e4m3fn",
    "float8_e4m3fnuz",
    "float8_e5m2",
    "float8_e5m2fnuz",
];

/// Shapes for unary operators.
const UNARY_SHAPES: &[&[i64]] = &[
    &[],
    &[0],
    &[1],
    &[3],
    &[4],
    &[5],
    &[17],
    &[2, 3, 5],
    &[1000],
];

/// Shape pairs for binary operators (numpy broadcasting).
const BINARY_SHAPES: &[(&[i64], &[i64])] = &[
    (&[2, 3], &[2, 3]),
    (&[2, 3], &[3]),
    (&[4, 1], &[1, 5]),
    (&[0, 3], &[3]),
    (&[1], &[7]),
    (&[5], &[]),
    (&[17], &[17]),
    (&[3, 1, 5], &[1, 4, 1]),
];

/// The operators with a compute definition, taking `inputs` tensors and no attributes (the
/// plain unary and binary operators); read from the registry, so a new definition is tested
/// without being listed here.
fn plain_ops(inputs: usize) -> Vec<&'static str> {
    relay_ops::all()
        .filter(|op| op.compute.is_some() && op.inputs.len() == inputs && op.attrs.is_empty())
        .map(|op| op.name)
        .collect()
}

#[test]
fn unary_operators_match_the_reference() {
    let mut cases = Vec::new();
    for op in plain_ops(1) {
        for dtype in DTYPES {
            for shape in UNARY_SHAPES {
                cases.push((
                    op.to_string(),
                    format!("{op}(%p0)"),
                    vec![tensor_type(shape, dtype)],
                ));
            }
        }
    }
    run_cases(cases);
}

#[test]
fn binary_operators_match_the_reference() {
    let mut cases = Vec::new();
    for op in plain_ops(2) {
        for dtype in DTYPES {
            for (a, b) in BINARY_SHAPES {
                cases.push((
                    op.to_string(),
                    format!("{op}(%p0, %p1)"),
                    vec![tensor_type(a, dtype), tensor_type(b, dtype)],
                ));
            }
        }
    }
    run_cases(cases);
}

#[test]
fn operators_with_attributes_match_the_reference() {
    let mut cases = Vec::new();
    for dtype in DTYPES {
        for shape in UNARY_SHAPES {
            let t = tensor_type(shape, dtype);
            for call in [
                "clip(%p0, a_min=-0.5f, a_max=0.5f)".to_owned(),
                "nn.leaky_relu(%p0, alpha=0.1f)".to_owned(),
                "cast(%p0, dtype=\"float32\")".to_owned(),
                "cast(%p0, dtype=\"int8\")".to_owned(),
                "cast(%p0, dtype=\"uint8\")".to_owned(),
                "cast(%p0, dtype=\"bool\")".to_owned(),
                "cast(%p0, dtype=\"float64\")".to_owned(),
                "cast(%p0, dtype=\"int64\")".to_owned(),
            ] {
                let op = call.split('(').next().unwrap_or("?").to_owned();
                cases.push((op, call, vec![t.clone()]));
            }
            cases.push((
                "where".into(),
                "where(%p0, %p1, %p2)".into(),
                vec![tensor_type(shape, "bool"), t.clone(), t.clone()],
            ));
            cases.push((
                "full_like".into(),
                "full_like(%p0, %p1)".into(),
                vec![t.clone(), tensor_type(&[], dtype)],
            ));
            cases.push((
                "cast_like".into(),
                "cast_like(%p0, %p1)".into(),
                vec![t.clone(), tensor_type(&[2], "int32")],
            ));
            cases.push((
                "broadcast_to".into(),
                format!(
                    "broadcast_to(%p0, shape=[3, {}])",
                    shape
                        .iter()
                        .map(i64::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                vec![t.clone()],
            ));
        }
        for (a, b) in [(&[2i64, 3][..], &[3i64][..]), (&[1, 4, 5], &[4])] {
            cases.push((
                "nn.bias_add".into(),
                "nn.bias_add(%p0, %p1, axis=-1)".into(),
                vec![tensor_type(a, dtype), tensor_type(b, dtype)],
            ));
        }
        cases.push((
            "nn.bias_add".into(),
            "nn.bias_add(%p0, %p1)".into(),
            vec![tensor_type(&[2, 4, 3], dtype), tensor_type(&[4], dtype)],
        ));
        cases.push((
            "nn.prelu".into(),
            "nn.prelu(%p0, %p1)".into(),
            vec![tensor_type(&[2, 4, 3], dtype), tensor_type(&[4], dtype)],
        ));
        cases.push((
            "broadcast_to_like".into(),
            "broadcast_to_like(%p0, %p1)".into(),
            vec![tensor_type(&[3, 1], dtype), tensor_type(&[3, 5], dtype)],
        ));
    }
    run_cases(cases);
}

#[test]
fn fused_elementwise_chains_match_the_reference() {
    let mut cases = Vec::new();
    for dtype in ["float32", "float64"] {
        for (a, b) in BINARY_SHAPES {
            cases.push((
                "chain".into(),
                "nn.relu(add(multiply(%p0, %p1), tanh(%p1)))".into(),
                vec![tensor_type(a, dtype), tensor_type(b, dtype)],
            ));
            cases.push((
                "chain".into(),
                "%0 = exp(%p0); %1 = subtract(%0, %p1); divide(%1, add(%0, 1f))"
                    .replace("1f", if dtype == "float32" { "1f" } else { "1f64" }),
                vec![tensor_type(a, dtype), tensor_type(b, dtype)],
            ));
        }
    }
    run_cases(cases);
}

/// Shapes for reductions: ranks 0 to 3 with size-1 and size-0 axes.
const REDUCE_SHAPES: &[&[i64]] = &[
    &[],
    &[0],
    &[1],
    &[7],
    &[2, 3],
    &[3, 0],
    &[1, 5],
    &[2, 3, 4],
    &[2, 1, 0],
];

/// Every `axis` attribute text for a tensor of `rank` dimensions: none, and every non-empty
/// subset of the axes, given positively or negatively.
fn axis_texts(rank: usize) -> Vec<String> {
    let mut out = vec![String::new()];
    for subset in 1u32..(1 << rank) {
        let axes: Vec<i64> = (0..rank as i64)
            .filter(|d| subset & (1 << d) != 0)
            .collect();
        let pos: Vec<String> = axes.iter().map(i64::to_string).collect();
        let neg: Vec<String> = axes
            .iter()
            .rev()
            .map(|d| (d - rank as i64).to_string())
            .collect();
        // Alternately positive and negative (reversed), to keep the case count down.
        let axes = if subset % 2 == 1 { pos } else { neg };
        out.push(format!(", axis=[{}]", axes.join(", ")));
    }
    out
}

#[test]
fn reductions_match_the_reference() {
    let mut cases = Vec::new();
    for shape in REDUCE_SHAPES {
        for axis in axis_texts(shape.len()) {
            for keepdims in ["", ", keepdims=True"] {
                for exclude in ["", ", exclude=True"] {
                    let attrs = format!("{axis}{keepdims}{exclude}");
                    for dtype in DTYPES {
                        let t = tensor_type(shape, dtype);
                        for op in ["sum", "mean", "max", "min", "prod", "all", "any"] {
                            cases.push((op.into(), format!("{op}(%p0{attrs})"), vec![t.clone()]));
                        }
                        for op in ["argmax", "argmin"] {
                            for last in ["", ", select_last_index=True"] {
                                cases.push((
                                    op.into(),
                                    format!("{op}(%p0{attrs}{last})"),
                                    vec![t.clone()],
                                ));
                            }
                        }
                    }
                    for dtype in [
                        "float32", "float64", "int8", "int32", "int64", "uint8", "bool",
                    ] {
                        let t = tensor_type(shape, dtype);
                        let ones: Vec<i64> = shape.iter().map(|_| 1).collect();
                        for mean in [t.clone(), tensor_type(&ones, dtype)] {
                            for unbiased in ["", ", unbiased=True"] {
                                cases.push((
                                    "variance".into(),
                                    format!("variance(%p0, %p1{attrs}{unbiased})"),
                                    vec![t.clone(), mean.clone()],
                                ));
                            }
                        }
                    }
                }
            }
        }
    }
    // A reduction with an elementwise epilogue and prologue in one kernel.
    for (shape, axis) in [(&[2, 3, 4][..], "1"), (&[5, 7], "-1"), (&[3], "0")] {
        cases.push((
            "epilogue".into(),
            format!("%0 = exp(%p0); %1 = sum(%0, axis=[{axis}]); sqrt(%1)"),
            vec![tensor_type(shape, "float32")],
        ));
    }
    run_cases_within(cases, (1e-4, 1e-5));
}
