//! The importer on models built here from the protobuf messages: each operator family's Relay
//! form and values, shapes resolved at import, and every kind of bad input as an error.

use prost::Message;
use relay_runtime::{DType, NDArray, Value};

use super::*;
use crate::proto::*;

/// A float32 value info of `shape`.
fn info(name: &str, shape: &[i64]) -> ValueInfoProto {
    info_of(name, shape, data_type::FLOAT)
}

/// A graph input or output of ONNX element type `elem_type`.
fn info_of(name: &str, shape: &[i64], elem_type: i32) -> ValueInfoProto {
    let dim = shape
        .iter()
        .map(|&d| Dimension {
            value: Some(DimensionValue::DimValue(d)),
            denotation: String::new(),
        })
        .collect();
    ValueInfoProto {
        name: name.into(),
        r#type: Some(TypeProto {
            tensor_type: Some(TensorTypeProto {
                elem_type,
                shape: Some(TensorShapeProto { dim }),
            }),
            denotation: String::new(),
        }),
        doc_string: String::new(),
    }
}

/// A float32 initializer.
fn floats(name: &str, shape: &[i64], v: &[f32]) -> TensorProto {
    TensorProto {
        name: name.into(),
        dims: shape.to_vec(),
        data_type: data_type::FLOAT,
        float_data: v.to_vec(),
        ..Default::default()
    }
}

/// An int64 initializer.
fn int64s(name: &str, v: &[i64]) -> TensorProto {
    TensorProto {
        name: name.into(),
        dims: vec![v.len() as i64],
        data_type: data_type::INT64,
        int64_data: v.to_vec(),
        ..Default::default()
    }
}

fn node(op: &str, inputs: &[&str], outputs: &[&str], attrs: Vec<AttributeProto>) -> NodeProto {
    NodeProto {
        op_type: op.into(),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        attribute: attrs,
        ..Default::default()
    }
}

fn ints(name: &str, v: &[i64]) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: attribute_type::INTS,
        ints: v.to_vec(),
        ..Default::default()
    }
}

fn int(name: &str, v: i64) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: attribute_type::INT,
        i: v,
        ..Default::default()
    }
}

/// A model of `nodes` at `opset`.
fn model(
    opset: i64,
    nodes: Vec<NodeProto>,
    inputs: Vec<ValueInfoProto>,
    outputs: Vec<ValueInfoProto>,
    init: Vec<TensorProto>,
) -> Vec<u8> {
    ModelProto {
        ir_version: 9,
        opset_import: vec![OperatorSetIdProto {
            domain: String::new(),
            version: opset,
        }],
        graph: Some(GraphProto {
            node: nodes,
            input: inputs,
            output: outputs,
            initializer: init,
            ..Default::default()
        }),
        ..Default::default()
    }
    .encode_to_vec()
}

/// `@main` of `m` run by the interpreter on `inputs` then its parameters.
fn run(m: &Imported, inputs: &[NDArray]) -> Vec<f64> {
    let args = inputs
        .iter()
        .chain(m.params.iter().map(|(_, a)| a))
        .map(|a| Value::Tensor(std::sync::Arc::new(a.clone())))
        .collect();
    match relay_interp::run(&m.module, "main", args, &Default::default()).expect("runs") {
        Value::Tensor(t) => t.to_f64_vec(),
        other => panic!("{other:?}"),
    }
}

fn f32s(shape: &[i64], v: &[f32]) -> NDArray {
    let v: Vec<f64> = v.iter().map(|&x| f64::from(x)).collect();
    NDArray::from_f64_slice(DType::F32, shape, &v).unwrap()
}

#[test]
fn matmul_by_a_constant_is_a_dense_layer_on_the_transposed_weights() {
    let bytes = model(
        17,
        vec![
            node("MatMul", &["x", "w"], &["y"], vec![]),
            node("Relu", &["y"], &["z"], vec![]),
        ],
        vec![info("x", &[2, 3])],
        vec![info("z", &[2, 2])],
        vec![floats("w", &[3, 2], &[1., 2., 3., 4., 5., 6.])],
    );
    let m = import(&bytes, &ImportOptions::default()).unwrap();
    assert!(
        m.text().contains("nn.dense(%x, %weight_t, units=2)"),
        "{}",
        m.text()
    );
    assert!(
        !m.text().contains("%w:"),
        "the untransposed weights are dropped: {}",
        m.text()
    );
    let y = run(&m, &[f32s(&[2, 3], &[1., 0., -1., 2., 1., -3.])]);
    // [1,0,-1]·W = [1-5, 2-6] = [-4,-4] → relu 0; [2,1,-3]·W = [2+3-15, 4+4-18] = [-10,-10].
    assert_eq!(y, [0., 0., 0., 0.]);
    let y = run(&m, &[f32s(&[2, 3], &[1., 1., 1., 0., 0., 1.])]);
    assert_eq!(y, [9., 12., 5., 6.]);
}

#[test]
fn reshape_flatten_transpose_and_squeezes_resolve_their_shapes() {
    let bytes = model(
        13,
        vec![
            node("Reshape", &["x", "s"], &["a"], vec![]),
            node("Transpose", &["a"], &["b"], vec![ints("perm", &[0, 2, 1])]),
            node("Unsqueeze", &["b", "ax"], &["c"], vec![]),
            node("Flatten", &["c"], &["d"], vec![int("axis", 2)]),
            node("Squeeze", &["d"], &["e"], vec![]),
        ],
        vec![info("x", &[2, 6])],
        vec![info("e", &[6, 2])],
        vec![int64s("s", &[0, -1, 2]), int64s("ax", &[1])],
    );
    let m = import(&bytes, &ImportOptions::default()).unwrap();
    assert_eq!(m.outputs[0].shape, [2, 6]);
    let x: Vec<f32> = (0..12).map(|v| v as f32).collect();
    let y = run(&m, &[f32s(&[2, 6], &x)]);
    // a = [2,3,2]; b = a transposed to [2,2,3]; c = [2,1,2,3]; d = [2, 6]; e = d.
    let want: Vec<f64> = [0, 2, 4, 1, 3, 5, 6, 8, 10, 7, 9, 11]
        .iter()
        .map(|&v| f64::from(v))
        .collect();
    assert_eq!(y, want);
}

#[test]
fn convolutions_pools_and_gemm_form_a_small_network() {
    let w: Vec<f32> = (0..2 * 3 * 3)
        .map(|i| if i % 2 == 0 { 1.0 } else { -0.5 })
        .collect();
    let fc: Vec<f32> = (0..3 * 8).map(|i| (i % 5) as f32 - 2.0).collect();
    let bytes = model(
        11,
        vec![
            node(
                "Conv",
                &["x", "w", "b"],
                &["c"],
                vec![ints("pads", &[1, 1, 1, 1])],
            ),
            node("Relu", &["c"], &["r"], vec![]),
            node(
                "MaxPool",
                &["r"],
                &["p"],
                vec![ints("kernel_shape", &[2, 2]), ints("strides", &[2, 2])],
            ),
            node("Flatten", &["p"], &["f"], vec![]),
            node("Gemm", &["f", "fc", "fb"], &["y"], vec![int("transB", 1)]),
            node("Softmax", &["y"], &["s"], vec![int("axis", 1)]),
        ],
        vec![info("x", &[1, 1, 4, 4])],
        vec![info("s", &[1, 3])],
        vec![
            floats("w", &[2, 1, 3, 3], &w),
            floats("b", &[2], &[0.5, -0.5]),
            floats("fc", &[3, 8], &fc),
            floats("fb", &[3], &[0.1, 0.2, 0.3]),
        ],
    );
    let m = import(&bytes, &ImportOptions::default()).unwrap();
    for call in [
        "nn.conv2d(%x, %w, padding=[1, 1, 1, 1]",
        "nn.bias_add(",
        "nn.max_pool2d(",
        "nn.dense(",
        "nn.softmax(",
    ] {
        assert!(m.text().contains(call), "{call} in\n{}", m.text());
    }
    assert_eq!(m.outputs[0].shape, [1, 3]);
    let y = run(
        &m,
        &[f32s(
            &[1, 1, 4, 4],
            &(0..16).map(|v| v as f32 / 8.0).collect::<Vec<_>>(),
        )],
    );
    assert!((y.iter().sum::<f64>() - 1.0).abs() < 1e-6, "{y:?}");
}

#[test]
fn every_unsupported_node_is_reported_together() {
    let bytes = model(
        17,
        vec![
            node("Frobnicate", &["x"], &["a"], vec![]),
            node("Relu", &["a"], &["b"], vec![]),
            node("Conv", &["b", "nope"], &["c"], vec![]),
            NodeProto {
                domain: "com.example".into(),
                ..node("Relu", &["x"], &["d"], vec![])
            },
        ],
        vec![info("x", &[1, 1, 2, 2])],
        vec![info("c", &[1])],
        vec![],
    );
    let err = import(&bytes, &ImportOptions::default()).unwrap_err();
    let ImportError::Nodes(issues) = &err else {
        panic!("{err}");
    };
    let kinds: Vec<&str> = issues.iter().map(|i| i.op_type.as_str()).collect();
    assert_eq!(kinds, ["Frobnicate", "Relu", "Conv", "Relu"], "{err}");
    assert!(
        err.to_string()
            .contains("operator `Frobnicate` is not supported"),
        "{err}"
    );
    assert!(err.to_string().contains("domain `com.example`"), "{err}");
}

#[test]
fn bad_files_and_opsets_are_errors() {
    for bytes in [&b"not a model"[..], &[0xff; 7][..], &[]] {
        match import(bytes, &ImportOptions::default()) {
            Err(ImportError::Decode(_) | ImportError::Model(_)) => {}
            other => panic!("{other:?}"),
        }
    }
    let good = model(
        17,
        vec![node("Relu", &["x"], &["y"], vec![])],
        vec![info("x", &[2])],
        vec![info("y", &[2])],
        vec![],
    );
    for cut in [1, good.len() / 2, good.len() - 1] {
        assert!(
            import(&good[..cut], &ImportOptions::default()).is_err(),
            "truncated at {cut}"
        );
    }
    let future = model(99, vec![], vec![], vec![], vec![]);
    assert!(matches!(
        import(&future, &ImportOptions::default()),
        Err(ImportError::Opset(99, ..))
    ));
    let short = ModelProto {
        ir_version: 9,
        opset_import: vec![OperatorSetIdProto {
            domain: String::new(),
            version: 17,
        }],
        graph: Some(GraphProto {
            initializer: vec![TensorProto {
                name: "w".into(),
                dims: vec![4],
                data_type: data_type::FLOAT,
                float_data: vec![1.0],
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    };
    assert!(matches!(
        import(&short.encode_to_vec(), &ImportOptions::default()),
        Err(ImportError::Model(_))
    ));
}

/// `vi` with dimension `i` the `dim_param` `name`.
fn symbolic(mut vi: ValueInfoProto, i: usize, name: &str) -> ValueInfoProto {
    if let Some(t) = vi
        .r#type
        .as_mut()
        .and_then(|t| t.tensor_type.as_mut())
        .and_then(|t| t.shape.as_mut())
    {
        t.dim[i].value = Some(DimensionValue::DimParam(name.into()));
    }
    vi
}

#[test]
fn symbolic_dimensions_stay_dynamic_unless_given() {
    let x = symbolic(info("x", &[0, 3]), 0, "batch");
    let bytes = model(
        17,
        vec![node("Relu", &["x"], &["y"], vec![])],
        vec![x],
        vec![info("y", &[0, 3])],
        vec![],
    );
    // Not given: a `?` dimension, which the VM runs at any size.
    let m = import(&bytes, &ImportOptions::default()).unwrap();
    assert!(
        m.text().contains("%x: Tensor[(?, 3), float32]"),
        "{}",
        m.text()
    );
    assert_eq!(m.inputs[0].shape, [-1, 3]);
    assert_eq!(m.outputs[0].shape, [-1, 3]);
    let options = ImportOptions {
        input_shapes: vec![("x".into(), vec![5, 3])],
        ..Default::default()
    };
    let m = import(&bytes, &options).unwrap();
    assert_eq!(m.inputs[0].shape, [5, 3]);
    // The model's names of its symbolic dimensions stay in `Imported`.
    assert_eq!(m.inputs[0].dim_params, [Some("batch".to_string()), None]);
    assert_eq!(m.outputs[0].dim_params, [None, None]);
}

#[test]
fn an_operator_that_needs_a_dynamic_dimension_asks_for_the_shape() {
    let x = symbolic(info("x", &[1, 3, 4, 4]), 2, "h");
    let pool = node(
        "MaxPool",
        &["x"],
        &["y"],
        vec![ints("kernel_shape", &[2, 2])],
    );
    let bytes = model(17, vec![pool], vec![x], vec![info("y", &[0])], vec![]);
    let err = import(&bytes, &ImportOptions::default()).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("dynamic shape (1, 3, ?, 4)") && text.contains("--input-shape"),
        "{text}"
    );
}

/// A one-node model with float32 inputs `ins` (name, shape) and initializers, run on `args`.
fn one(
    opset: i64,
    n: NodeProto,
    ins: &[(&str, &[i64])],
    init: Vec<TensorProto>,
    args: &[NDArray],
) -> (Imported, Vec<f64>) {
    let out = n.output[0].clone();
    let inputs = ins.iter().map(|(name, shape)| info(name, shape)).collect();
    let bytes = model(opset, vec![n], inputs, vec![info(&out, &[])], init);
    let m = import(&bytes, &ImportOptions::default()).unwrap_or_else(|e| panic!("{e}"));
    let y = run(&m, args);
    (m, y)
}

fn close(got: &[f64], want: &[f64]) {
    assert_eq!(got.len(), want.len(), "{got:?} vs {want:?}");
    for (g, w) in got.iter().zip(want) {
        assert!(
            (g - w).abs() <= 1e-5 * w.abs().max(1.0),
            "{got:?} vs {want:?}"
        );
    }
}

fn float(name: &str, v: f32) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: attribute_type::FLOAT,
        f: v,
        ..Default::default()
    }
}

fn strings(name: &str, v: &[&str]) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: attribute_type::STRINGS,
        strings: v.iter().map(|s| s.as_bytes().to_vec()).collect(),
        ..Default::default()
    }
}

fn string(name: &str, v: &str) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: attribute_type::STRING,
        s: v.as_bytes().to_vec(),
        ..Default::default()
    }
}

#[test]
fn normalizations_compute_their_definitions() {
    // BatchNormalization: (x - mean) / sqrt(var + eps) * scale + bias, per channel.
    let x = f32s(&[1, 2, 1, 2], &[1., 3., 2., 6.]);
    let init = vec![
        floats("s", &[2], &[2., 1.]),
        floats("b", &[2], &[0., 1.]),
        floats("mu", &[2], &[2., 4.]),
        floats("var", &[2], &[4., 1.]),
    ];
    let n = node(
        "BatchNormalization",
        &["x", "s", "b", "mu", "var"],
        &["y"],
        vec![float("epsilon", 0.0)],
    );
    let (m, y) = one(15, n, &[("x", &[1, 2, 1, 2])], init, &[x]);
    assert!(m.text().contains("nn.batch_norm("), "{}", m.text());
    close(&y, &[-1., 1., -1., 3.]);
    // LayerNormalization over the last axis, without a bias (a constant row normalizes to 0).
    let x = f32s(&[2, 2], &[1., 3., 5., 5.]);
    let n = node(
        "LayerNormalization",
        &["x", "g"],
        &["y"],
        vec![float("epsilon", 1e-6)],
    );
    let (_, y) = one(
        17,
        n,
        &[("x", &[2, 2])],
        vec![floats("g", &[2], &[1., 2.])],
        &[x],
    );
    close(&y, &[-1., 2., 0., 0.]);
}

#[test]
fn gather_concat_expand_cast_and_constants() {
    let x = f32s(&[3, 2], &[1., 2., 3., 4., 5., 6.]);
    let n = node("Gather", &["x", "i"], &["y"], vec![int("axis", 0)]);
    let (_, y) = one(
        13,
        n,
        &[("x", &[3, 2])],
        vec![int64s("i", &[2, 0])],
        std::slice::from_ref(&x),
    );
    close(&y, &[5., 6., 1., 2.]);
    let n = node("Concat", &["x", "c"], &["y"], vec![int("axis", 1)]);
    let (_, y) = one(
        13,
        n,
        &[("x", &[3, 2])],
        vec![floats("c", &[3, 1], &[7., 8., 9.])],
        std::slice::from_ref(&x),
    );
    close(&y, &[1., 2., 7., 3., 4., 8., 5., 6., 9.]);
    let n = node("Expand", &["c", "s"], &["y"], vec![]);
    let (_, y) = one(
        13,
        n,
        &[],
        vec![floats("c", &[3, 1], &[7., 8., 9.]), int64s("s", &[2, 1, 2])],
        &[],
    );
    close(&y, &[7., 7., 8., 8., 9., 9., 7., 7., 8., 8., 9., 9.]);
    let n = node(
        "Cast",
        &["x"],
        &["y"],
        vec![int("to", i64::from(data_type::INT32))],
    );
    let (m, y) = one(
        13,
        n,
        &[("x", &[3, 2])],
        vec![],
        &[f32s(&[3, 2], &[1.7, -2.2, 3., 4., 5., 6.])],
    );
    assert_eq!(m.outputs[0].dtype, DType::I32);
    close(&y, &[1., -2., 3., 4., 5., 6.]);
    // Shape of a static value and a Constant: folded at import, a reshape by them.
    let nodes = vec![
        node("Shape", &["x"], &["s"], vec![]),
        node(
            "Constant",
            &["__none"][..0],
            &["k"],
            vec![AttributeProto {
                name: "value".into(),
                r#type: attribute_type::TENSOR,
                t: Some(floats("", &[], &[10.])),
                ..Default::default()
            }],
        ),
        node("Reshape", &["x", "s"], &["r"], vec![]),
        node("Mul", &["r", "k"], &["y"], vec![]),
    ];
    let bytes = model(
        13,
        nodes,
        vec![info("x", &[3, 2])],
        vec![info("y", &[3, 2])],
        vec![],
    );
    let m = import(&bytes, &ImportOptions::default()).unwrap();
    close(&run(&m, &[x]), &[10., 20., 30., 40., 50., 60.]);
}

#[test]
fn clip_bounds_come_from_attributes_or_inputs_by_opset() {
    let x = f32s(&[4], &[-2., 0.5, 3., 9.]);
    let n = node(
        "Clip",
        &["x"],
        &["y"],
        vec![float("min", 0.), float("max", 6.)],
    );
    let (_, y) = one(9, n, &[("x", &[4])], vec![], std::slice::from_ref(&x));
    close(&y, &[0., 0.5, 3., 6.]);
    let n = node("Clip", &["x", "", "hi"], &["y"], vec![]);
    let (_, y) = one(13, n, &[("x", &[4])], vec![floats("hi", &[], &[1.])], &[x]);
    close(&y, &[-2., 0.5, 1., 1.]);
}

#[test]
fn reductions_softmax_and_powers() {
    let x = f32s(&[2, 3], &[1., 2., 3., 4., 5., 6.]);
    let n = node(
        "ReduceMean",
        &["x"],
        &["y"],
        vec![ints("axes", &[1]), int("keepdims", 1)],
    );
    let (m, y) = one(13, n, &[("x", &[2, 3])], vec![], std::slice::from_ref(&x));
    assert_eq!(m.outputs[0].shape, [2, 1]);
    close(&y, &[2., 5.]);
    let n = node("ReduceSum", &["x", "a"], &["y"], vec![int("keepdims", 0)]);
    let (_, y) = one(
        13,
        n,
        &[("x", &[2, 3])],
        vec![int64s("a", &[0])],
        std::slice::from_ref(&x),
    );
    close(&y, &[5., 7., 9.]);
    let n = node("Softmax", &["x"], &["y"], vec![int("axis", 1)]);
    let (_, y) = one(11, n, &[("x", &[2, 3])], vec![], std::slice::from_ref(&x));
    let e: Vec<f64> = [0f64, 1., 2.].iter().map(|v| v.exp()).collect();
    let s: f64 = e.iter().sum();
    close(&y[..3], &e.iter().map(|v| v / s).collect::<Vec<_>>());
    let n = node("Pow", &["x", "p"], &["y"], vec![]);
    let (_, y) = one(
        13,
        n,
        &[("x", &[2, 3])],
        vec![floats("p", &[], &[2.])],
        &[x],
    );
    close(&y, &[1., 4., 9., 16., 25., 36.]);
}

#[test]
fn batched_matmul_of_symbolic_matrices_between_static_batch_axes() {
    // An attention's scores, `[2, n, 3]` by `[2, 3, n]`, the sequence `n` symbolic and the
    // heads static: imported without `--input-shape`, run at two lengths.
    let q = symbolic(info("q", &[2, 0, 3]), 1, "n");
    let k = symbolic(info("k", &[2, 3, 0]), 2, "n");
    let y = symbolic(symbolic(info("y", &[2, 0, 0]), 1, "n"), 2, "n");
    let bytes = model(
        17,
        vec![node("MatMul", &["q", "k"], &["y"], vec![])],
        vec![q, k],
        vec![y],
        vec![],
    );
    let m = import(&bytes, &ImportOptions::default()).unwrap();
    assert!(m.text().contains("nn.batch_matmul("), "{}", m.text());
    for n in [1usize, 4] {
        let qv: Vec<f32> = (0..2 * n * 3).map(|i| i as f32 * 0.5 - 1.0).collect();
        let kv: Vec<f32> = (0..2 * 3 * n).map(|i| 2.0 - i as f32 * 0.25).collect();
        let mut want = Vec::new();
        for b in 0..2 {
            for i in 0..n {
                for j in 0..n {
                    let dot = (0..3)
                        .map(|c| qv[(b * n + i) * 3 + c] * kv[(b * 3 + c) * n + j])
                        .sum::<f32>();
                    want.push(f64::from(dot));
                }
            }
        }
        let shape = |a: usize, b: usize| [2, a as i64, b as i64];
        let got = run(&m, &[f32s(&shape(n, 3), &qv), f32s(&shape(3, n), &kv)]);
        close(&got, &want);
    }
}

#[test]
fn batched_matmul_and_gemm_options() {
    // [2, 1, 2] x [2, 2, 1]: per batch a dot product.
    let a = f32s(&[2, 1, 2], &[1., 2., 3., 4.]);
    let n = node("MatMul", &["a", "b"], &["y"], vec![]);
    let (m, y) = one(
        13,
        n,
        &[("a", &[2, 1, 2]), ("b", &[2, 2, 1])],
        vec![],
        &[a, f32s(&[2, 2, 1], &[1., 1., 2., 0.5])],
    );
    assert!(m.text().contains("nn.batch_matmul("), "{}", m.text());
    close(&y, &[3., 8.]);
    // Gemm: 2 · Aᵀ · B + 0.5 · C, A given transposed.
    let at = f32s(&[2, 1], &[1., 2.]);
    let n = node(
        "Gemm",
        &["at", "b", "c"],
        &["y"],
        vec![int("transA", 1), float("alpha", 2.), float("beta", 0.5)],
    );
    let init = vec![
        floats("b", &[2, 2], &[1., 0., 0., 1.]),
        floats("c", &[2], &[2., 4.]),
    ];
    let (_, y) = one(13, n, &[("at", &[2, 1])], init, &[at]);
    close(&y, &[3., 6.]);
}

#[test]
fn pools_pad_by_auto_pad_and_round_up_by_ceil_mode() {
    let x = f32s(&[1, 1, 3, 3], &[1., 2., 3., 4., 5., 6., 7., 8., 9.]);
    let n = node(
        "AveragePool",
        &["x"],
        &["y"],
        vec![
            ints("kernel_shape", &[2, 2]),
            ints("strides", &[2, 2]),
            string("auto_pad", "SAME_UPPER"),
        ],
    );
    let (m, y) = one(
        13,
        n,
        &[("x", &[1, 1, 3, 3])],
        vec![],
        std::slice::from_ref(&x),
    );
    assert_eq!(m.outputs[0].shape, [1, 1, 2, 2]);
    // Padding excluded from the count: the edge windows average what they cover.
    close(&y, &[3., 4.5, 7.5, 9.]);
    let n = node(
        "MaxPool",
        &["x"],
        &["y"],
        vec![
            ints("kernel_shape", &[2, 2]),
            ints("strides", &[2, 2]),
            int("ceil_mode", 1),
        ],
    );
    let (m, y) = one(13, n, &[("x", &[1, 1, 3, 3])], vec![], &[x]);
    assert_eq!(m.outputs[0].shape, [1, 1, 2, 2]);
    close(&y, &[5., 6., 8., 9.]);
}

#[test]
fn external_data_is_read_from_a_side_file() {
    let dir = std::env::temp_dir().join(format!("relay-onnx-external-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let weights: Vec<u8> = [7f32, 1., 2., 3.]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    std::fs::write(dir.join("w.bin"), &weights).unwrap();
    let entry = |k: &str, v: &str| StringStringEntryProto {
        key: k.into(),
        value: v.into(),
    };
    let w = TensorProto {
        name: "w".into(),
        dims: vec![3],
        data_type: data_type::FLOAT,
        data_location: EXTERNAL,
        external_data: vec![
            entry("location", "w.bin"),
            entry("offset", "4"),
            entry("length", "12"),
        ],
        ..Default::default()
    };
    let bytes = model(
        13,
        vec![node("Add", &["x", "w"], &["y"], vec![])],
        vec![info("x", &[3])],
        vec![info("y", &[3])],
        vec![w.clone()],
    );
    let options = ImportOptions {
        base_dir: Some(dir.clone()),
        ..Default::default()
    };
    let m = import(&bytes, &options).unwrap();
    close(&run(&m, &[f32s(&[3], &[1., 1., 1.])]), &[2., 3., 4.]);
    // A location outside the model's directory, or past the file's end, is an error.
    for (location, offset) in [("../w.bin", "0"), ("w.bin", "8")] {
        let mut bad = w.clone();
        bad.external_data = vec![
            entry("location", location),
            entry("offset", offset),
            entry("length", "12"),
        ];
        let bytes = model(
            13,
            vec![node("Add", &["x", "w"], &["y"], vec![])],
            vec![info("x", &[3])],
            vec![info("y", &[3])],
            vec![bad],
        );
        assert!(
            matches!(import(&bytes, &options), Err(ImportError::Model(_))),
            "{location} {offset}"
        );
    }
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn comparisons_select_and_logic() {
    let (x, y) = (
        f32s(&[4], &[1., 5., 3., -2.]),
        f32s(&[4], &[2., 4., 3., -1.]),
    );
    let nodes = vec![
        node("Less", &["x", "y"], &["c"], vec![]),
        node("Where", &["c", "x", "y"], &["m"], vec![]),
        node("Equal", &["x", "y"], &["e"], vec![]),
        node("Not", &["e"], &["ne"], vec![]),
        node("And", &["ne", "c"], &["both"], vec![]),
        node("Where", &["both", "m", "y"], &["z"], vec![]),
    ];
    let bytes = model(
        13,
        nodes,
        vec![info("x", &[4]), info("y", &[4])],
        vec![info("z", &[4])],
        vec![],
    );
    let m = import(&bytes, &ImportOptions::default()).unwrap();
    // min(x, y) where x < y (and not equal), else y.
    close(&run(&m, &[x, y]), &[1., 4., 3., -2.]);
}

#[test]
fn activations_compute_their_onnx_definitions() {
    let xs = [-2.0f32, -0.5, 0.0, 0.7, 3.0];
    let x = f32s(&[5], &xs);
    let erf = |v: f64| {
        // Abramowitz–Stegun 7.1.26 is not exact enough; integrate instead (Simpson, fine).
        let n = 2000;
        let h = v / n as f64;
        let f = |t: f64| (-t * t).exp();
        let s: f64 = (0..=n)
            .map(|i| {
                let w = if i == 0 || i == n {
                    1.0
                } else if i % 2 == 1 {
                    4.0
                } else {
                    2.0
                };
                w * f(i as f64 * h)
            })
            .sum();
        s * h / 3.0 * 2.0 / std::f64::consts::PI.sqrt()
    };
    type Def = (
        &'static str,
        Vec<AttributeProto>,
        fn(f64, &dyn Fn(f64) -> f64) -> f64,
    );
    let cases: Vec<Def> = vec![
        ("LeakyRelu", vec![float("alpha", 0.1)], |v, _| {
            if v < 0. { 0.1 * v } else { v }
        }),
        ("Elu", vec![float("alpha", 2.0)], |v, _| {
            if v < 0. { 2.0 * (v.exp() - 1.) } else { v }
        }),
        ("HardSigmoid", vec![], |v, _| (0.2 * v + 0.5).clamp(0., 1.)),
        ("HardSwish", vec![], |v, _| v * (v / 6. + 0.5).clamp(0., 1.)),
        ("Softsign", vec![], |v, _| v / (1. + v.abs())),
        ("Gelu", vec![], |v, erf| {
            0.5 * v * (1. + erf(v / 2f64.sqrt()))
        }),
        ("Selu", vec![], |v, _| {
            1.050_701
                * if v <= 0. {
                    1.673_263_2 * (v.exp() - 1.)
                } else {
                    v
                }
        }),
    ];
    for (op, attrs, def) in cases {
        let (m, y) = one(
            20,
            node(op, &["x"], &["y"], attrs),
            &[("x", &[5])],
            vec![],
            std::slice::from_ref(&x),
        );
        let want: Vec<f64> = xs.iter().map(|&v| def(f64::from(v), &erf)).collect();
        for (g, w) in y.iter().zip(&want) {
            assert!(
                (g - w).abs() <= 1e-5 * w.abs().max(1.0),
                "{op}: {y:?} vs {want:?}\n{}",
                m.text()
            );
        }
    }
    let (_, y) = one(
        13,
        node("PRelu", &["x", "s"], &["y"], vec![]),
        &[("x", &[5])],
        vec![floats("s", &[1], &[0.25])],
        &[x],
    );
    close(&y, &[-0.5, -0.125, 0., 0.7, 3.]);
}

#[test]
fn slices_splits_pads_and_tiles() {
    let x = f32s(&[2, 4], &[0., 1., 2., 3., 4., 5., 6., 7.]);
    // Columns 1.. by 2, ends past the end clamped; rows from -1.
    let init = vec![
        int64s("st", &[-1, 1]),
        int64s("en", &[100, 100]),
        int64s("ax", &[0, 1]),
        int64s("sp", &[1, 2]),
    ];
    let n = node("Slice", &["x", "st", "en", "ax", "sp"], &["y"], vec![]);
    let (m, y) = one(13, n, &[("x", &[2, 4])], init, std::slice::from_ref(&x));
    assert_eq!(m.outputs[0].shape, [1, 2]);
    close(&y, &[5., 7.]);
    let nodes = vec![
        node("Split", &["x", "sz"], &["a", "b"], vec![int("axis", 1)]),
        node("Tile", &["a", "r"], &["t"], vec![]),
        node("Sub", &["b", "t"], &["y"], vec![]),
    ];
    let bytes = model(
        13,
        nodes,
        vec![info("x", &[2, 4])],
        vec![info("y", &[2, 3])],
        vec![int64s("sz", &[1, 3]), int64s("r", &[1, 3])],
    );
    let m = import(&bytes, &ImportOptions::default()).unwrap();
    close(
        &run(&m, std::slice::from_ref(&x)),
        &[1., 2., 3., 1., 2., 3.],
    );
    let n = node("Pad", &["x", "p", "v"], &["y"], vec![]);
    let init = vec![int64s("p", &[0, 1, 1, 0]), floats("v", &[], &[9.])];
    let (m, y) = one(13, n, &[("x", &[2, 4])], init, std::slice::from_ref(&x));
    assert_eq!(m.outputs[0].shape, [3, 5]);
    close(
        &y,
        &[9., 0., 1., 2., 3., 9., 4., 5., 6., 7., 9., 9., 9., 9., 9.],
    );
}

#[test]
fn constants_known_at_import_and_index_reductions() {
    let x = f32s(&[2, 3], &[3., 1., 2., -1., 5., 5.]);
    let nodes = vec![
        node("Size", &["x"], &["n"], vec![]),
        node(
            "Cast",
            &["n"],
            &["nf"],
            vec![int("to", i64::from(data_type::FLOAT))],
        ),
        node("Range", &["zero", "nf", "one"], &["r"], vec![]),
        node("ReduceSum", &["r"], &["s"], vec![int("keepdims", 0)]),
        node("Add", &["x", "s"], &["y"], vec![]),
    ];
    let init = vec![floats("zero", &[], &[0.]), floats("one", &[], &[1.])];
    let bytes = model(
        13,
        nodes,
        vec![info("x", &[2, 3])],
        vec![info("y", &[2, 3])],
        init,
    );
    // Size is 6; its Cast is folded at import (all its inputs are constants), so Range has
    // constant operands too: 0 + 1 + ... + 5 = 15 is added to every element.
    let m = import(&bytes, &ImportOptions::default()).unwrap();
    assert!(!m.text().contains("cast("), "folded:\n{}", m.text());
    close(
        &run(&m, std::slice::from_ref(&x)),
        &[18., 16., 17., 14., 20., 20.],
    );
    let n = node(
        "ArgMax",
        &["x"],
        &["y"],
        vec![int("axis", 1), int("keepdims", 0)],
    );
    let (m, y) = one(13, n, &[("x", &[2, 3])], vec![], std::slice::from_ref(&x));
    assert_eq!(
        (m.outputs[0].dtype, m.outputs[0].shape.as_slice()),
        (DType::I64, &[2][..])
    );
    close(&y, &[0., 1.]);
    let n = node(
        "ReduceLogSumExp",
        &["x"],
        &["y"],
        vec![ints("axes", &[1]), int("keepdims", 0)],
    );
    let (_, y) = one(13, n, &[("x", &[2, 3])], vec![], std::slice::from_ref(&x));
    let lse = |v: &[f64]| v.iter().map(|x| x.exp()).sum::<f64>().ln();
    close(&y, &[lse(&[3., 1., 2.]), lse(&[-1., 5., 5.])]);
    let n = node(
        "ConstantOfShape",
        &["s"],
        &["c"],
        vec![AttributeProto {
            name: "value".into(),
            r#type: attribute_type::TENSOR,
            t: Some(floats("", &[1], &[2.5])),
            ..Default::default()
        }],
    );
    let nodes = vec![
        n,
        node("Mul", &["x", "c"], &["y"], vec![]),
        node("LogSoftmax", &["y"], &["z"], vec![int("axis", -1)]),
    ];
    let bytes = model(
        13,
        nodes,
        vec![info("x", &[2, 3])],
        vec![info("z", &[2, 3])],
        vec![int64s("s", &[2, 3])],
    );
    let m = import(&bytes, &ImportOptions::default()).unwrap();
    let y = run(&m, &[x]);
    let row = [7.5f64, 2.5, 5.0];
    let want: Vec<f64> = row.iter().map(|v| v - lse(&row)).collect();
    close(&y[..3], &want);
}

#[test]
fn one_dimensional_windows_multi_axis_norms_and_cast_like() {
    // Conv over [1, 1, 5] with kernel [3], padding 1: a moving sum.
    let x = f32s(&[1, 1, 5], &[1., 2., 3., 4., 5.]);
    let n = node("Conv", &["x", "w"], &["y"], vec![ints("pads", &[1, 1])]);
    let (m, y) = one(
        13,
        n,
        &[("x", &[1, 1, 5])],
        vec![floats("w", &[1, 1, 3], &[1., 1., 1.])],
        std::slice::from_ref(&x),
    );
    assert_eq!(m.outputs[0].shape, [1, 1, 5]);
    close(&y, &[3., 6., 9., 12., 9.]);
    let n = node(
        "MaxPool",
        &["x"],
        &["y"],
        vec![ints("kernel_shape", &[2]), ints("strides", &[2])],
    );
    let (m, y) = one(
        13,
        n,
        &[("x", &[1, 1, 5])],
        vec![],
        std::slice::from_ref(&x),
    );
    assert_eq!(m.outputs[0].shape, [1, 1, 2]);
    close(&y, &[2., 4.]);
    // LayerNormalization over the last two axes of [1, 2, 2]: the four values together.
    let x = f32s(&[1, 2, 2], &[1., 2., 3., 4.]);
    let n = node(
        "LayerNormalization",
        &["x", "g"],
        &["y"],
        vec![int("axis", 1), float("epsilon", 0.0)],
    );
    let (_, y) = one(
        17,
        n,
        &[("x", &[1, 2, 2])],
        vec![floats("g", &[2, 2], &[1., 1., 1., 1.])],
        &[x],
    );
    let sd = 1.25f64.sqrt();
    close(&y, &[-1.5 / sd, -0.5 / sd, 0.5 / sd, 1.5 / sd]);
    // CastLike takes the second input's type.
    let n = node("CastLike", &["x", "like"], &["y"], vec![]);
    let like = TensorProto {
        name: "like".into(),
        dims: vec![1],
        data_type: data_type::INT32,
        int32_data: vec![0],
        ..Default::default()
    };
    let (m, y) = one(
        15,
        n,
        &[("x", &[2])],
        vec![like],
        &[f32s(&[2], &[2.7, -1.2])],
    );
    assert_eq!(m.outputs[0].dtype, DType::I32);
    close(&y, &[2., -1.]);
}

/// One LSTM step of ONNX's definition (gates i, o, f, c), in f64.
fn lstm_step(
    x: &[f64],
    h: &[f64],
    c: &[f64],
    w: &[f64],
    r: &[f64],
    b: &[f64],
    hidden: usize,
) -> (Vec<f64>, Vec<f64>) {
    let (input, sig) = (x.len(), |v: f64| 1.0 / (1.0 + (-v).exp()));
    let gate = |k: usize, j: usize| {
        let row = k * hidden + j;
        let wx: f64 = (0..input).map(|i| w[row * input + i] * x[i]).sum();
        let rh: f64 = (0..hidden).map(|i| r[row * hidden + i] * h[i]).sum();
        wx + rh + b[row] + b[4 * hidden + row]
    };
    let mut hn = vec![0.0; hidden];
    let mut cn = vec![0.0; hidden];
    for j in 0..hidden {
        let (i, o, f, g) = (
            sig(gate(0, j)),
            sig(gate(1, j)),
            sig(gate(2, j)),
            gate(3, j).tanh(),
        );
        cn[j] = f * c[j] + i * g;
        hn[j] = o * cn[j].tanh();
    }
    (hn, cn)
}

#[test]
fn lstm_runs_fused_or_unrolled_in_both_directions() {
    let (seq, input, hidden) = (3usize, 2usize, 2usize);
    let val = |n: usize, s: usize| -> Vec<f32> {
        (0..n)
            .map(|i| ((i * 7 + s) % 11) as f32 / 10.0 - 0.5)
            .collect()
    };
    let (xs, w, r, b) = (
        val(seq * input, 1),
        val(4 * hidden * input, 2),
        val(4 * hidden * hidden, 3),
        val(8 * hidden, 4),
    );
    let f64s = |v: &[f32]| v.iter().map(|&x| f64::from(x)).collect::<Vec<_>>();
    for direction in ["forward", "reverse"] {
        let n = node(
            "LSTM",
            &["x", "w", "r", "b"],
            &["y", "yh", "yc"],
            vec![
                string("direction", direction),
                int("hidden_size", hidden as i64),
            ],
        );
        let init = vec![
            floats("w", &[1, 8, 2], &w),
            floats("r", &[1, 8, 2], &r),
            floats("b", &[1, 16], &b),
        ];
        let (m, y) = one(
            14,
            n,
            &[("x", &[3, 1, 2])],
            init.clone(),
            &[f32s(&[3, 1, 2], &xs)],
        );
        assert_eq!(m.outputs[0].shape, [3, 1, 1, 2]);
        assert!(m.text().contains("nn.lstm_recurrence"), "{}", m.text());
        // With `sequence_lens` an input (here whole), the cell is unrolled: the same states.
        let n = node(
            "LSTM",
            &["x", "w", "r", "b", "lens"],
            &["y", "yh", "yc"],
            vec![
                string("direction", direction),
                int("hidden_size", hidden as i64),
            ],
        );
        let lens = NDArray::from_i128_slice(DType::I32, &[1], &[3]).unwrap();
        let inputs = vec![
            info("x", &[3, 1, 2]),
            info_of("lens", &[1], data_type::INT32),
        ];
        let bytes = model(14, vec![n], inputs, vec![info("y", &[])], init);
        let unrolled = import(&bytes, &ImportOptions::default()).unwrap_or_else(|e| panic!("{e}"));
        let y2 = run(&unrolled, &[f32s(&[3, 1, 2], &xs), lens]);
        assert!(!unrolled.text().contains("nn.lstm_recurrence"));
        close(&y2, &y);
        let (mut h, mut c) = (vec![0.0; hidden], vec![0.0; hidden]);
        let mut want = vec![0.0; seq * hidden];
        for step in 0..seq {
            let t = if direction == "reverse" {
                seq - 1 - step
            } else {
                step
            };
            (h, c) = lstm_step(
                &f64s(&xs[t * input..(t + 1) * input]),
                &h,
                &c,
                &f64s(&w),
                &f64s(&r),
                &f64s(&b),
                hidden,
            );
            want[t * hidden..(t + 1) * hidden].copy_from_slice(&h);
        }
        close(&y, &want);
    }
}

/// Inputs that once reached a panic or an unbounded allocation are errors (or, for a valid
/// negative `perm`, work).
#[test]
fn hostile_attributes_and_shapes_are_errors_not_panics() {
    let x = f32s(&[2, 3], &[1., 2., 3., 4., 5., 6.]);
    let n = node("Transpose", &["x"], &["y"], vec![ints("perm", &[-1, 0])]);
    let (m, y) = one(13, n, &[("x", &[2, 3])], vec![], std::slice::from_ref(&x));
    assert_eq!(m.outputs[0].shape, [3, 2]);
    close(&y, &[1., 4., 2., 5., 3., 6.]);
    let fails =
        |opset: i64, nodes: Vec<NodeProto>, inputs: Vec<ValueInfoProto>, init: Vec<TensorProto>| {
            let bytes = model(opset, nodes, inputs, vec![info("y", &[])], init);
            assert!(import(&bytes, &ImportOptions::default()).is_err());
        };
    let scalar = || vec![info("x", &[])];
    fails(
        13,
        vec![node("Softmax", &["x"], &["y"], vec![])],
        scalar(),
        vec![],
    );
    fails(
        13,
        vec![node("Gather", &["x", "i"], &["y"], vec![])],
        scalar(),
        vec![int64s("i", &[0])],
    );
    fails(
        13,
        vec![node("ArgMax", &["x"], &["y"], vec![])],
        scalar(),
        vec![],
    );
    fails(
        17,
        vec![node("LayerNormalization", &["x", "g"], &["y"], vec![])],
        scalar(),
        vec![floats("g", &[], &[1.])],
    );
    fails(
        13,
        vec![node("Split", &["x"], &[], vec![])],
        vec![info("x", &[4])],
        vec![],
    );
    let big = |name: &str, v: f32| floats(name, &[], &[v]);
    fails(
        13,
        vec![node("Range", &["a", "b", "c"], &["y"], vec![])],
        vec![],
        vec![big("a", 0.), big("b", 1e30), big("c", 1.)],
    );
    fails(
        13,
        vec![node("ConstantOfShape", &["s"], &["y"], vec![])],
        vec![],
        vec![int64s("s", &[1 << 40, 1 << 40])],
    );
    let huge = TensorProto {
        name: "w".into(),
        dims: vec![1 << 40, 1 << 30],
        data_type: data_type::FLOAT,
        ..Default::default()
    };
    fails(
        13,
        vec![node("Add", &["x", "w"], &["y"], vec![])],
        vec![info("x", &[1])],
        vec![huge],
    );
    let strides = ints("strides", &[i64::MAX, 1]);
    fails(
        13,
        vec![node("Conv", &["x", "w"], &["y"], vec![strides])],
        vec![info("x", &[1, 1, 4, 4])],
        vec![floats("w", &[1, 1, 1, 1], &[1.])],
    );
    fails(
        13,
        vec![node("Relu", &["x"], &["y"], vec![])],
        vec![info("x", &[1 << 40, 1 << 40])],
        vec![],
    );
}

/// A graph attribute.
fn graph(name: &str, g: GraphProto) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: attribute_type::GRAPH,
        g: Some(g),
        ..Default::default()
    }
}

/// A body graph of `nodes` with inputs and outputs.
fn body(nodes: Vec<NodeProto>, inputs: Vec<ValueInfoProto>, outputs: &[&str]) -> GraphProto {
    GraphProto {
        node: nodes,
        input: inputs,
        output: outputs.iter().map(|o| info(o, &[])).collect(),
        ..Default::default()
    }
}

#[test]
fn control_flow_that_cannot_be_typed_is_an_error_naming_the_node() {
    let expect_error = |bytes: Vec<u8>, want: &str| {
        let e = import(&bytes, &ImportOptions::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains(want), "{e}");
        let report = format!(
            "{:?}",
            miette::Report::new(import(&bytes, &ImportOptions::default()).unwrap_err(),)
        );
        assert!(report.contains("Loop") || report.contains("If"), "{report}");
    };
    // Branches of different shapes.
    let then_g = body(vec![node("Relu", &["x"], &["a"], vec![])], vec![], &["a"]);
    let else_g = body(
        vec![node("Concat", &["x", "x"], &["b"], vec![int("axis", 0)])],
        vec![],
        &["b"],
    );
    let m = model(
        17,
        vec![node(
            "If",
            &["c", ""][..1],
            &["y"],
            vec![graph("then_branch", then_g), graph("else_branch", else_g)],
        )],
        vec![
            info("x", &[2]),
            ValueInfoProto {
                r#type: Some(TypeProto {
                    tensor_type: Some(TensorTypeProto {
                        elem_type: data_type::BOOL,
                        shape: Some(TensorShapeProto { dim: Vec::new() }),
                    }),
                    denotation: String::new(),
                }),
                ..info("c", &[])
            },
        ],
        vec![info("y", &[2])],
        vec![],
    );
    expect_error(m, "in one branch");
    // A carried value whose shape changes.
    let b = body(
        vec![
            node("Concat", &["v", "v"], &["w"], vec![int("axis", 0)]),
            node("Identity", &["cond"], &["c2"], vec![]),
        ],
        vec![info("i", &[]), info("cond", &[]), info("v", &[2])],
        &["c2", "w"],
    );
    let m = model(
        17,
        vec![node(
            "Loop",
            &["M", "", "x"],
            &["y"],
            vec![graph("body", b)],
        )],
        vec![info("x", &[2])],
        vec![info("y", &[2])],
        vec![int64s("M", &[3])],
    );
    expect_error(m, "loop-carried value 0");
    // A body that does not compute its output.
    let b = body(
        vec![],
        vec![info("i", &[]), info("cond", &[]), info("v", &[2])],
        &["c2", "nothing"],
    );
    let m = model(
        17,
        vec![node(
            "Loop",
            &["M", "", "x"],
            &["y"],
            vec![graph("body", b)],
        )],
        vec![info("x", &[2])],
        vec![info("y", &[2])],
        vec![int64s("M", &[3])],
    );
    expect_error(m, "never computed");
}

/// Dimensions that would make the importer allocate without bound (found by
/// tests/mutations.rs): an unrolled recurrence of 2⁴⁰ steps, a resize to 2⁴⁰ positions, a
/// one-hot depth of 2³⁰. Each is an error naming the bound.
#[test]
fn shapes_that_would_allocate_without_bound_are_errors() {
    let huge = 1i64 << 40;
    let lstm = |attrs: Vec<AttributeProto>| {
        model(
            14,
            vec![node("LSTM", &["X", "W", "R"], &["Y"], attrs)],
            vec![info("X", &[huge, 1, 1])],
            vec![info("Y", &[])],
            vec![
                floats("W", &[1, 4, 1], &[0.0; 4]),
                floats("R", &[1, 4, 1], &[0.0; 4]),
            ],
        )
    };
    // Unrolled (an activation the recurrence operator does not compute): bounded.
    let unrolled = lstm(vec![
        int("hidden_size", 1),
        strings("activations", &["Sigmoid", "Tanh", "Relu"]),
    ]);
    let e = import(&unrolled, &ImportOptions::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("at most 10000"), "{e}");
    // As one recurrence operator the module does not grow with the length.
    let fused = import(
        &lstm(vec![int("hidden_size", 1)]),
        &ImportOptions::default(),
    )
    .unwrap();
    assert!(fused.text().contains("nn.lstm_recurrence"));
    let resize = model(
        13,
        vec![node("Resize", &["x", "", "", "sizes"], &["y"], vec![])],
        vec![info("x", &[1, 2])],
        vec![info("y", &[])],
        vec![int64s("sizes", &[1, huge])],
    );
    let e = import(&resize, &ImportOptions::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("resized to"), "{e}");
    let one_hot = model(
        11,
        vec![node("OneHot", &["i", "depth", "values"], &["y"], vec![])],
        vec![info("i", &[2])],
        vec![info("y", &[])],
        vec![
            int64s("depth", &[1 << 30]),
            floats("values", &[2], &[0.0, 1.0]),
        ],
    );
    let e = import(&one_hot, &ImportOptions::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("depth"), "{e}");
}

/// Attribute values whose arithmetic overflowed (found by tests/mutations.rs): a
/// `DepthToSpace` block size of 2⁴⁰ and a `ConvTranspose` `output_shape` of `i64::MIN`.
#[test]
fn overflowing_attributes_are_errors() {
    let d2s = model(
        13,
        vec![node(
            "DepthToSpace",
            &["x"],
            &["y"],
            vec![int("blocksize", 1 << 40)],
        )],
        vec![info("x", &[1, 4, 2, 2])],
        vec![info("y", &[])],
        vec![],
    );
    let e = import(&d2s, &ImportOptions::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("blocksize"), "{e}");
    let ct = model(
        13,
        vec![node(
            "ConvTranspose",
            &["x", "w"],
            &["y"],
            vec![ints("output_shape", &[i64::MIN, 3])],
        )],
        vec![info("x", &[1, 1, 3, 3])],
        vec![info("y", &[])],
        vec![floats("w", &[1, 1, 2, 2], &[1.0; 4])],
    );
    let e = import(&ct, &ImportOptions::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("output_shape"), "{e}");
}

/// A given input shape must agree with the model's static dimensions.
#[test]
fn a_given_shape_that_contradicts_the_model_is_an_error() {
    let m = model(
        13,
        vec![node("Relu", &["x"], &["y"], vec![])],
        vec![info("x", &[2, 3])],
        vec![info("y", &[2, 3])],
        vec![],
    );
    let options = ImportOptions {
        input_shapes: vec![("x".into(), vec![2, 4])],
        ..ImportOptions::default()
    };
    let e = import(&m, &options).unwrap_err().to_string();
    assert!(e.contains("[2, 4] given, the model declares [2, 3]"), "{e}");
    let options = ImportOptions {
        input_shapes: vec![("x".into(), vec![2, 3])],
        ..ImportOptions::default()
    };
    assert!(import(&m, &options).is_ok());
}

/// A `ConvTranspose` whose output channels (weights' second axis times the groups) overflow.
#[test]
fn conv_transpose_with_too_many_output_channels_is_an_error() {
    let big = 1i64 << 40;
    let m = model(
        13,
        vec![node(
            "ConvTranspose",
            &["x", "w"],
            &["y"],
            vec![int("group", 2)],
        )],
        vec![info("x", &[1, 2, 3, 3]), info("w", &[2, big, 1, 1])],
        vec![info("y", &[])],
        vec![],
    );
    let e = import(&m, &ImportOptions::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("output channels"), "{e}");
}

/// Shapes whose element counts overflow: a `Tile` by 2⁶² and a `MatMul` broadcasting two
/// batch axes of 2⁴⁰ against each other. Errors, not overflows.
#[test]
fn overflowing_element_counts_are_errors() {
    let tile = model(
        13,
        vec![node("Tile", &["x", "r"], &["y"], vec![])],
        vec![info("x", &[2, 3])],
        vec![info("y", &[])],
        vec![int64s("r", &[1 << 62, 4])],
    );
    let e = import(&tile, &ImportOptions::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("repeats"), "{e}");
    let big = 1i64 << 40;
    let matmul = model(
        13,
        vec![node("MatMul", &["a", "b"], &["y"], vec![])],
        vec![info("a", &[big, 1, 1, 1]), info("b", &[1, big, 1, 1])],
        vec![info("y", &[])],
        vec![],
    );
    let e = import(&matmul, &ImportOptions::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("broadcast batch axes"), "{e}");
}

/// A `MaxPool` with indices over more planes than a table of their offsets may hold (found
/// by tests/mutations.rs, which allocated 16 TiB for it): an error, not an abort.
#[test]
fn max_pool_indices_of_huge_inputs_are_errors() {
    let m = model(
        13,
        vec![node(
            "MaxPool",
            &["x"],
            &["y", "i"],
            vec![ints("kernel_shape", &[1, 1])],
        )],
        vec![info("x", &[1 << 20, 1 << 21, 1, 1])],
        vec![info("y", &[]), info("i", &[])],
        vec![],
    );
    let e = import(&m, &ImportOptions::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("a constant of shape"), "{e}");
}

/// A `Pad` by `i64::MIN` (found by tests/mutations.rs): an error, not an overflow.
#[test]
fn pads_of_extreme_values_are_errors() {
    let m = model(
        13,
        vec![node("Pad", &["x", "p"], &["y"], vec![])],
        vec![info("x", &[2, 3])],
        vec![info("y", &[])],
        vec![int64s("p", &[i64::MIN, 0, 0, 0])],
    );
    let e = import(&m, &ImportOptions::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("pads"), "{e}");
}

/// A `TopK` over an axis of 2⁴⁰ (its positions would be a constant of that many elements):
/// an error.
#[test]
fn top_k_over_a_huge_axis_is_an_error() {
    let m = model(
        13,
        vec![node("TopK", &["x", "k"], &["v", "i"], vec![])],
        vec![info("x", &[1, 1 << 40])],
        vec![info("v", &[]), info("i", &[])],
        vec![int64s("k", &[2])],
    );
    let e = import(&m, &ImportOptions::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("axes up to 2^24"), "{e}");
}

/// `Cast` to each 8-bit float, saturating (opset 19's default) and not: the codes ONNX's own
/// node tests expect (`test_cast_FLOAT_to_FLOAT8*`, `test_cast_no_saturate_*`), NaN,
/// infinities and values beyond the largest finite one included; and back to float32.
#[test]
fn casts_to_eight_bit_floats_saturate_or_not() {
    let x = [
        0.478_925_47,
        0.480_336_67,
        0.499_684_87,
        0.819_105_45,
        0.470_312_48,
        0.722_903_8,
        1e6,
        1e-7,
        f32::NAN,
        f32::INFINITY,
        f32::INFINITY,
        f32::NEG_INFINITY,
        -1e-7,
        1e-7,
        -1e6,
    ];
    #[rustfmt::skip]
    let cases: [(i32, i64, [u8; 15]); 8] = [
        (data_type::FLOAT8E4M3FN, 1, [47, 47, 48, 53, 47, 52, 126, 0, 127, 126, 126, 254, 128, 0, 254]),
        (data_type::FLOAT8E4M3FNUZ, 1, [55, 55, 56, 61, 55, 60, 127, 0, 128, 127, 127, 255, 0, 0, 255]),
        (data_type::FLOAT8E5M2, 1, [56, 56, 56, 59, 56, 58, 123, 0, 127, 123, 123, 251, 128, 0, 251]),
        (data_type::FLOAT8E5M2FNUZ, 1, [60, 60, 60, 63, 60, 62, 127, 0, 128, 127, 127, 255, 0, 0, 255]),
        (data_type::FLOAT8E4M3FN, 0, [47, 47, 48, 53, 47, 52, 127, 0, 127, 127, 127, 255, 128, 0, 255]),
        (data_type::FLOAT8E4M3FNUZ, 0, [55, 55, 56, 61, 55, 60, 128, 0, 128, 128, 128, 128, 0, 0, 128]),
        (data_type::FLOAT8E5M2, 0, [56, 56, 56, 59, 56, 58, 124, 0, 127, 124, 124, 252, 128, 0, 252]),
        (data_type::FLOAT8E5M2FNUZ, 0, [60, 60, 60, 63, 60, 62, 128, 0, 128, 128, 128, 128, 0, 0, 128]),
    ];
    for (to, saturate, want) in cases {
        let nodes = vec![
            node(
                "Cast",
                &["x"],
                &["y"],
                vec![int("to", to.into()), int("saturate", saturate)],
            ),
            node(
                "Cast",
                &["y"],
                &["z"],
                vec![int("to", data_type::FLOAT.into())],
            ),
        ];
        let outputs = vec![info("y", &[15]), info("z", &[15])];
        let bytes = model(19, nodes, vec![info("x", &[15])], outputs, vec![]);
        let m = import(&bytes, &ImportOptions::default()).unwrap_or_else(|e| panic!("{e}"));
        let dtype = tensor::dtype(to).unwrap();
        assert_eq!(m.outputs[0].dtype, dtype);
        let args = vec![Value::Tensor(std::sync::Arc::new(f32s(&[15], &x)))];
        let out = relay_interp::run(&m.module, "main", args, &Default::default()).expect("runs");
        let Value::Tuple(fields) = out else {
            panic!("{out:?}")
        };
        let (Value::Tensor(y), Value::Tensor(z)) = (&fields[0], &fields[1]) else {
            panic!("{fields:?}")
        };
        assert_eq!(y.as_bytes(), want, "to {dtype}, saturate {saturate}");
        let format = dtype.minifloat().unwrap();
        for (&bits, back) in want.iter().zip(z.to_f64_vec()) {
            let value = format.to_f64(bits.into());
            assert!(value == back || value.is_nan() && back.is_nan(), "{dtype}");
        }
    }
}

/// `ReduceMax`/`ReduceMin` over an empty axis give their identity (-inf, +inf); a graph input
/// given as a constant of another element type than the graph declares is an error, one of
/// bfloat16 or float8 type takes float values.
#[test]
fn reductions_over_nothing_and_inputs_given_as_constants() {
    for (op, want) in [
        ("ReduceMin", f64::INFINITY),
        ("ReduceMax", f64::NEG_INFINITY),
    ] {
        let n = node(
            op,
            &["x"],
            &["y"],
            vec![ints("axes", &[1]), int("keepdims", 0)],
        );
        let x = NDArray::zeros(DType::F32, &[2, 0]).unwrap();
        let (m, y) = one(13, n, &[("x", &[2, 0])], vec![], &[x]);
        assert_eq!(m.outputs[0].shape, [2]);
        assert_eq!(y, [want, want], "{op}");
    }
    let n = node("Neg", &["x"], &["y"], vec![]);
    let bytes = model(
        13,
        vec![n],
        vec![info("x", &[2])],
        vec![info("y", &[2])],
        vec![],
    );
    let given = |array: NDArray| ImportOptions {
        constants: vec![("x".into(), array)],
        ..Default::default()
    };
    let ints = NDArray::from_i128_slice(DType::I32, &[2], &[1, 2]).unwrap();
    let err = import(&bytes, &given(ints)).unwrap_err().to_string();
    assert!(
        err.contains("declared with float32") && err.contains("int32"),
        "{err}"
    );
    let mut bf16 = info("x", &[2]);
    if let Some(t) = bf16.r#type.as_mut().and_then(|t| t.tensor_type.as_mut()) {
        t.elem_type = data_type::BFLOAT16;
    }
    let n = node(
        "Cast",
        &["x"],
        &["y"],
        vec![int("to", data_type::FLOAT.into())],
    );
    let bytes = model(13, vec![n], vec![bf16], vec![info("y", &[2])], vec![]);
    let m = import(&bytes, &given(f32s(&[2], &[1.5, -0.1]))).unwrap_or_else(|e| panic!("{e}"));
    let y = run(&m, &[]);
    assert_eq!(y, [1.5, f64::from(f32::from_bits(0xbdcd_0000))]);
}

/// A 3-D convolution is one 2-D convolution per depth tap: a declared kernel deeper than any
/// real one is an error, not a loop over a trillion taps.
#[test]
fn a_three_d_kernel_of_absurd_depth_is_an_error() {
    let huge = 1i64 << 40;
    for op in ["Conv", "ConvTranspose"] {
        let n = node(op, &["x", "w"], &["y"], vec![]);
        let inputs = vec![info("x", &[1, 1, 2, 2, 2]), info("w", &[1, 1, huge, 1, 1])];
        let bytes = model(17, vec![n], inputs, vec![info("y", &[])], vec![]);
        let err = import(&bytes, &ImportOptions::default())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("depth taps") || err.contains("out of range"),
            "{op}: {err}"
        );
    }
}

/// `MaxPool`'s indices take one slice per window tap: a window of more taps than any real one
/// is an error; integer inputs have no indices here.
#[test]
fn max_pool_indices_of_huge_windows_or_integers_are_errors() {
    let pool = |kernel: i64| {
        node(
            "MaxPool",
            &["x"],
            &["y", "i"],
            vec![ints("kernel_shape", &[kernel, kernel])],
        )
    };
    let outputs = || vec![info("y", &[]), info("i", &[])];
    let bytes = model(
        12,
        vec![pool(100)],
        vec![info("x", &[1, 1, 200, 200])],
        outputs(),
        vec![],
    );
    let err = import(&bytes, &ImportOptions::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("taps"), "{err}");
    let mut ints8 = info("x", &[1, 1, 4, 4]);
    if let Some(t) = ints8.r#type.as_mut().and_then(|t| t.tensor_type.as_mut()) {
        t.elem_type = data_type::INT8;
    }
    let bytes = model(12, vec![pool(2)], vec![ints8], outputs(), vec![]);
    let err = import(&bytes, &ImportOptions::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("indices of int8"), "{err}");
}

/// An `Einsum` diagonal takes an index vector as long as the diagonal: an absurd one is an
/// error, and so are a repeated label over axes of different sizes and an ellipsis standing
/// for more dimensions than an operand has.
#[test]
fn einsum_diagonals_and_ellipses_that_cannot_be_are_errors() {
    let einsum = |eq: &str, shape: &[i64]| {
        let n = node("Einsum", &["x"], &["y"], vec![string("equation", eq)]);
        let bytes = model(
            13,
            vec![n],
            vec![info("x", shape)],
            vec![info("y", &[])],
            vec![],
        );
        import(&bytes, &ImportOptions::default())
            .map(|_| ())
            .unwrap_err()
            .to_string()
    };
    assert!(einsum("ii->i", &[1 << 20, 1 << 20]).contains("a diagonal of"));
    assert!(einsum("ii->i", &[3, 4]).contains("axes of 3 and 4"));
    assert!(einsum("ij...k->k", &[3, 4]).contains("subscripts"));
}

/// A list grown in a loop, as the TorchScript exporter writes it: `SequenceEmpty`, a `Loop`
/// appending each iteration's value with `SequenceInsert`, then `ConcatFromSequence` stacking
/// (new_axis=1) or concatenating (new_axis=0) the elements, along axis 0 or 1.
#[test]
fn sequences_appended_in_a_loop_stack_or_concatenate() {
    // Iteration i appends x * (i + 1) (x: [2, 3]); three iterations.
    let body_graph = || {
        body(
            vec![
                node("Cast", &["i"], &["f"], vec![int("to", 1)]),
                node("Add", &["f", "one"], &["k"], vec![]),
                node("Mul", &["x", "k"], &["t"], vec![]),
                node("SequenceInsert", &["s", "t"], &["s2"], vec![]),
                node("Identity", &["cond"], &["c2"], vec![]),
            ],
            vec![info("i", &[]), info("cond", &[]), info("s", &[])],
            &["c2", "s2"],
        )
    };
    let x: Vec<f32> = (0..6).map(|v| v as f32).collect();
    let run_with = |concat: Vec<AttributeProto>| {
        let nodes = vec![
            node("SequenceEmpty", &[], &["s0"], vec![int("dtype", 1)]),
            node(
                "Loop",
                &["M", "", "s0"],
                &["s"],
                vec![graph("body", body_graph())],
            ),
            node("ConcatFromSequence", &["s"], &["y"], concat),
        ];
        let init = vec![int64s("M", &[3]), floats("one", &[], &[1.0])];
        let bytes = model(
            17,
            nodes,
            vec![info("x", &[2, 3])],
            vec![info("y", &[])],
            init,
        );
        let m = import(&bytes, &ImportOptions::default()).unwrap_or_else(|e| panic!("{e}"));
        (m.outputs[0].shape.clone(), run(&m, &[f32s(&[2, 3], &x)]))
    };
    let scaled = |k: f64, r: usize, c: usize| f64::from(x[r * 3 + c]) * k;
    // Stacked along a new axis 0: [3, 2, 3], element k scaled by k + 1.
    let (shape, y) = run_with(vec![int("new_axis", 1), int("axis", 0)]);
    assert_eq!(shape, [3, 2, 3]);
    let want: Vec<f64> = (0..18)
        .map(|i| scaled((i / 6 + 1) as f64, i % 6 / 3, i % 3))
        .collect();
    close(&y, &want);
    // Concatenated along axis 1: [2, 9], row r the three elements' rows r side by side.
    let (shape, y) = run_with(vec![int("new_axis", 0), int("axis", 1)]);
    assert_eq!(shape, [2, 9]);
    let want: Vec<f64> = (0..18)
        .map(|i| scaled((i % 9 / 3 + 1) as f64, i / 9, i % 3))
        .collect();
    close(&y, &want);
    // Concatenated along axis 0: [6, 3], the elements one after the other.
    let (shape, y) = run_with(vec![int("new_axis", 0), int("axis", 0)]);
    assert_eq!(shape, [6, 3]);
    let want: Vec<f64> = (0..18)
        .map(|i| scaled((i / 6 + 1) as f64, i % 6 / 3, i % 3))
        .collect();
    close(&y, &want);
}

#[test]
fn sequence_uses_beyond_appending_are_errors_naming_the_node() {
    let fails = |nodes: Vec<NodeProto>, want: &str| {
        let bytes = model(
            17,
            nodes,
            vec![info("x", &[2])],
            vec![info("y", &[])],
            vec![int64s("p", &[0])],
        );
        let e = import(&bytes, &ImportOptions::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains(want), "{e}");
    };
    let empty = || node("SequenceEmpty", &[], &["s"], vec![]);
    fails(
        vec![
            empty(),
            node("SequenceInsert", &["s", "x", "p"], &["y"], vec![]),
        ],
        "at a position",
    );
    fails(
        vec![empty(), node("ConcatFromSequence", &["s"], &["y"], vec![])],
        "empty",
    );
    fails(
        vec![node("ConcatFromSequence", &["x"], &["y"], vec![])],
        "not a sequence",
    );
}

/// A node whose Relay operator rejects its inputs reports the operator's error by kind: a
/// `Concat` of shapes that differ off the axis is `concatenate`'s shape error.
#[test]
fn operator_errors_are_typed() {
    let m = model(
        13,
        vec![node("Concat", &["x", "y"], &["z"], vec![int("axis", 0)])],
        vec![info("x", &[2, 3]), info("y", &[2, 4])],
        vec![info("z", &[])],
        vec![],
    );
    let Err(ImportError::Nodes(issues)) = import(&m, &ImportOptions::default()) else {
        panic!("a Concat of (2, 3) and (2, 4) on axis 0 imports");
    };
    let [issue] = issues.as_slice() else {
        panic!("{issues:?}")
    };
    let ConvertError::Operator { op, error } = &issue.error else {
        panic!("{issue}")
    };
    assert_eq!(op, "concatenate");
    assert_eq!(error.kind(), relay_ir::OpErrorKind::Shape);
    assert!(issue.to_string().contains("`concatenate`: "), "{issue}");
}

/// A scalar int64 initializer.
fn int64_scalar(name: &str, v: i64) -> TensorProto {
    TensorProto {
        dims: vec![],
        ..int64s(name, &[v])
    }
}

/// Shape inputs computed from a symbolic batch (`Shape` → `Gather`), or from data: `Range`,
/// `ConstantOfShape`, `Expand`, `Tile`, `Reshape`, `Slice` and `NonZero` import as the
/// value-shaped operators and run at any batch.
#[test]
fn shapes_computed_at_run_time_import_as_value_shaped_operators() {
    let x = symbolic(info("x", &[0, 3]), 0, "batch");
    let d = info_of("d", &[2], data_type::INT64);
    let nodes = vec![
        node("Shape", &["x"], &["s"], vec![]),
        node("Gather", &["s", "zero"], &["b"], vec![int("axis", 0)]),
        node("Unsqueeze", &["b", "axis0"], &["bv"], vec![]),
        node("Range", &["zero", "b", "one"], &["r"], vec![]),
        node("Concat", &["bv", "two"], &["cs"], vec![int("axis", 0)]),
        node("ConstantOfShape", &["cs"], &["c"], vec![]),
        node("Unsqueeze", &["r", "axis1"], &["ru"], vec![]),
        node("Concat", &["bv", "three"], &["es"], vec![int("axis", 0)]),
        node("Expand", &["ru", "es"], &["e"], vec![]),
        node("Concat", &["onev", "bv"], &["reps"], vec![int("axis", 0)]),
        node("Tile", &["x", "reps"], &["t"], vec![]),
        node("Reshape", &["x", "d"], &["y"], vec![]),
        node("Sub", &["bv", "onev"], &["end"], vec![]),
        node("Slice", &["x", "zerov", "end", "axis0"], &["sl"], vec![]),
        node("Greater", &["x", "half"], &["g"], vec![]),
        node("NonZero", &["g"], &["nz"], vec![]),
    ];
    let outputs = ["r", "c", "e", "t", "y", "sl", "nz"]
        .iter()
        .map(|n| info(n, &[]))
        .collect();
    let init = vec![
        int64_scalar("zero", 0),
        int64_scalar("one", 1),
        int64s("axis0", &[0]),
        int64s("axis1", &[1]),
        int64s("two", &[2]),
        int64s("three", &[3]),
        int64s("onev", &[1]),
        int64s("zerov", &[0]),
        floats("half", &[], &[0.5]),
    ];
    let bytes = model(17, nodes, vec![x, d], outputs, init);
    let m = import(&bytes, &ImportOptions::default()).unwrap_or_else(|e| panic!("{e}"));
    let text = m.text();
    for op in [
        "arange(",
        "dyn.full(",
        "dyn.broadcast_to(",
        "dyn.tile(",
        "dyn.reshape(",
        "dyn.strided_slice(",
        "argwhere(",
    ] {
        assert!(text.contains(op), "no `{op}` in\n{text}");
    }
    for batch in [1i64, 4] {
        let xs: Vec<f32> = (0..batch * 3).map(|i| i as f32 / 4.0).collect();
        let args: Vec<Value> = [
            f32s(&[batch, 3], &xs),
            NDArray::from_i128_slice(DType::I64, &[2], &[3, -1]).unwrap(),
        ]
        .into_iter()
        .chain(m.params.iter().map(|(_, a)| a.clone()))
        .map(Value::tensor)
        .collect();
        let got = relay_interp::run(&m.module, "main", args, &Default::default()).expect("runs");
        let Value::Tuple(fields) = got else {
            panic!("{got:?}")
        };
        let field = |i: usize| match &fields[i] {
            Value::Tensor(t) => (t.shape().to_vec(), t.to_f64_vec()),
            other => panic!("{other:?}"),
        };
        let b = batch as usize;
        assert_eq!(field(0), (vec![batch], (0..b).map(|i| i as f64).collect()));
        assert_eq!(field(1), (vec![batch, 2], vec![0.0; 2 * b]));
        let expanded: Vec<f64> = (0..b).flat_map(|i| [i as f64; 3]).collect();
        assert_eq!(field(2), (vec![batch, 3], expanded));
        assert_eq!(field(3).0, vec![batch, 3 * batch]);
        assert_eq!(field(4).0, vec![3, batch]);
        assert_eq!(field(5).0, vec![batch - 1, 3]);
        let positive = xs.iter().filter(|&&v| v > 0.5).count() as i64;
        assert_eq!(field(6).0, vec![2, positive]);
    }
}
