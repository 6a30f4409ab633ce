use std::sync::Arc;

use relay_ir::{DType, NDArray};

use super::*;
use crate::compose::tests::primitive;

/// A GRU recurrence of 3 steps, batch 2, hidden 4 as a primitive function.
const GRU: &str = r#"#[version = "0.0.5"]
def @main(%x: Tensor[(3, 2, 12), float32], %r: Tensor[(4, 12), float32], %h: Tensor[(2, 4), float32], %b: Tensor[(4), float32]) {
  %0 = fn (%p0: Tensor[(3, 2, 12), float32], %p1: Tensor[(4, 12), float32], %p2: Tensor[(2, 4), float32], %p3: Tensor[(4), float32], Primitive=1) {
nn.gru_recurrence(%p0, %p1, %p2, %p3, reverse=True, linear_before_reset=True)
  };
  %0(%x, %r, %h, %b)
}"#;

fn zeros(shape: &[i64]) -> NDArray {
    NDArray::zeros(DType::F32, shape).unwrap()
}

#[test]
fn a_recurrence_primitive_runs_on_the_library_and_checks_its_arguments() {
    let f = primitive(GRU);
    let k = crate::compile_primitive(&f, "fused_nn_gru_recurrence").unwrap();
    assert!(k.entry().is_none());
    let (x, r, h, b) = (
        zeros(&[3, 2, 12]),
        zeros(&[4, 12]),
        zeros(&[2, 4]),
        zeros(&[4]),
    );
    let (mut y, mut hn) = (zeros(&[3, 2, 4]), zeros(&[2, 4]));
    // Zero inputs: z = r = 1/2, the candidate 0, so every state halves from h0 = 1.
    let mut h = h;
    h.as_bytes_mut()
        .chunks_exact_mut(4)
        .for_each(|c| c.copy_from_slice(&1f32.to_le_bytes()));
    k.call(&[&x, &r, &h, &b], &mut [&mut y, &mut hn]).unwrap();
    let last = f32::from_le_bytes(hn.as_bytes()[..4].try_into().unwrap());
    assert_eq!(last, 0.125);
    // reverse: step 0 is the last computed.
    let first = f32::from_le_bytes(y.as_bytes()[..4].try_into().unwrap());
    assert_eq!(first, 0.125);
    // An argument of another shape is an error naming it, nothing is written.
    let bad = zeros(&[2, 12]);
    let e = k
        .call(&[&x, &bad, &h, &b], &mut [&mut y, &mut hn])
        .unwrap_err();
    assert!(e.to_string().contains("p1"), "{e}");
    assert!(crate::verify_primitive(&f, "k").is_ok());
    let listing = crate::print_kernels(&[("k".into(), f)], crate::KernelText::LoopNest).unwrap();
    assert!(listing.contains(crate::listing::HOST_NOTE), "{listing}");
}

/// A module whose one primitive has body `body` over parameters `params`.
pub(crate) fn softmax_primitive(params: &str, body: &str) -> relay_ir::Function {
    primitive(&format!(
        "#[version = \"0.0.5\"]\ndef @main() {{\n  fn ({params}, Primitive=1) {{ {body} }}\n}}"
    ))
}

fn floats(shape: &[i64], f: impl Fn(usize) -> f32) -> NDArray {
    let n = shape.iter().product::<i64>() as usize;
    let v: Vec<f64> = (0..n).map(|i| f64::from(f(i))).collect();
    NDArray::from_f64_slice(DType::F32, shape, &v).unwrap()
}

#[test]
fn softmax_primitives_the_library_computes_and_those_it_leaves_to_loops() {
    let x = "%p0: Tensor[(2, 3, 5), float32]";
    let host = |params: &str, body: &str| match host_op(&softmax_primitive(params, body)) {
        Some(Ok(op)) => Some(op),
        Some(Err(e)) => panic!("{body}: {e}"),
        None => None,
    };
    let softmax = |log, scale| SoftmaxOp { log, scale };
    let host = |params: &str, body: &str| match host(params, body) {
        Some(HostOp::Softmax(s)) => Some(s),
        Some(other) => panic!("{body}: {other:?}"),
        None => None,
    };
    assert_eq!(
        host(x, "nn.softmax(%p0, axis=-1)"),
        Some(softmax(false, Scale::None))
    );
    let scaled = Scale::Constant {
        value: 4.0,
        divide: true,
    };
    let body = "%0 = divide(%p0, 4f); nn.log_softmax(%0, axis=2)";
    assert_eq!(host(x, body), Some(softmax(true, scaled)));
    let op = host(
        &format!("{x}, %p1: float32"),
        "nn.softmax(reshape(multiply(%p1, %p0), newshape=[6, 5]), axis=1)",
    );
    assert_eq!(op, Some(softmax(false, Scale::Parameter { divide: false })));
    // With `?` dimensions: generic when no reshape is in the way.
    let dynamic = "%p0: Tensor[(?, 3, ?), float32]";
    assert!(host(dynamic, "nn.softmax(multiply(%p0, 0.5f), axis=-1)").is_some());
    let reshaped = "nn.softmax(reshape(%p0, newshape=[-1, 3]), axis=-1)";
    assert!(host("%p0: Tensor[(?, 3), float32]", reshaped).is_none());
    for (params, body) in [
        (x, "nn.softmax(%p0, axis=1)"),
        (x, "nn.softmax(exp(%p0), axis=-1)"),
        (x, "nn.softmax(multiply(multiply(%p0, 2f), 2f), axis=-1)"),
        (x, "nn.softmax(add(%p0, 2f), axis=-1)"),
        ("%p0: Tensor[(2, 5), float64]", "nn.softmax(%p0, axis=-1)"),
        (
            &format!("{x}, %p1: Tensor[(5), float32]"),
            "nn.softmax(multiply(%p0, %p1), axis=-1)",
        ),
        (
            &format!("{x}, %p1: float32"),
            "nn.softmax(divide(%p1, %p0), axis=-1)",
        ),
    ] {
        assert!(host(params, body).is_none(), "{body}");
    }
}

#[test]
fn a_scaled_softmax_runs_on_the_library_with_its_factor_as_an_argument() {
    let f = softmax_primitive(
        "%p0: Tensor[(3, 4), float32], %p1: float32",
        "nn.softmax(divide(%p0, %p1), axis=-1)",
    );
    let k = crate::compile_primitive(&f, "fused_divide_nn_softmax").unwrap();
    assert!(k.entry().is_none());
    let x = floats(&[3, 4], |i| i as f32);
    let scale = floats(&[], |_| 2.0);
    let mut y = zeros(&[3, 4]);
    k.call(&[&x, &scale], &mut [&mut y]).unwrap();
    let y = y.to_f64_vec();
    for row in 0..3 {
        let e: Vec<f64> = (0..4).map(|j| (f64::from(j as u8) / 2.0).exp()).collect();
        let sum: f64 = e.iter().sum();
        for j in 0..4 {
            let got = y[row * 4 + j];
            assert!((got - e[j] / sum).abs() < 1e-6, "{row} {j}: {got}");
        }
    }
    let mut wrong = zeros(&[4, 3]);
    assert!(k.call(&[&x, &scale], &mut [&mut wrong]).is_err());
}

/// `a · b` of `[batch, m, k]` and `[batch, k, n]` row-major operands (batch 1 broadcast).
fn matmul_reference(
    a: &[f64],
    b: &[f64],
    (ba, bb): (usize, usize),
    m: usize,
    k: usize,
    n: usize,
) -> Vec<f64> {
    let batch = ba.max(bb);
    let mut c = vec![0.0; batch * m * n];
    for t in 0..batch {
        let (a0, b0) = ((t % ba) * m * k, (t % bb) * k * n);
        for i in 0..m {
            for j in 0..n {
                c[(t * m + i) * n + j] =
                    (0..k).map(|l| a[a0 + i * k + l] * b[b0 + l * n + j]).sum();
            }
        }
    }
    c
}

fn close(got: &NDArray, want: &[f64]) {
    let got = got.to_f64_vec();
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-4 * w.abs().max(1.0),
            "element {i}: {g} want {w}"
        );
    }
}

/// Runs generic kernel `k` on `inputs`, its outputs shaped by its shape function.
fn run_generic(k: &PackedFunc, inputs: &[&NDArray]) -> Result<Vec<NDArray>, KernelError> {
    let shapes: Vec<&[i64]> = inputs.iter().map(|t| t.shape()).collect();
    let mut outs: Vec<NDArray> = k
        .output_shapes(&shapes, &[])?
        .iter()
        .map(|s| zeros(s))
        .collect();
    let mut refs: Vec<&mut NDArray> = outs.iter_mut().collect();
    k.call(inputs, &mut refs)?;
    Ok(outs)
}

#[test]
fn products_with_dynamic_dimensions_compile_once_and_run_at_every_shape() {
    let dense = softmax_primitive(
        "%p0: Tensor[(?, ?), float32], %p1: Tensor[(?, ?), float32]",
        "nn.dense(%p0, %p1, units=None)",
    );
    let k = crate::compile_primitive(&dense, "fused_nn_dense").unwrap();
    assert!(k.is_generic() && k.entry().is_none());
    for (m, kk, n) in [
        (1, 64, 64),
        (7, 64, 300),
        (0, 5, 3),
        (3, 0, 2),
        (300, 17, 1),
        (33, 129, 65),
    ] {
        let x = floats(&[m, kk], |i| (i % 13) as f32 * 0.1 - 0.6);
        let w = floats(&[n, kk], |i| (i % 7) as f32 * 0.2 - 0.5);
        let (xv, wv) = (x.to_f64_vec(), w.to_f64_vec());
        // w is [n, k]: its transpose is the right operand.
        let wt: Vec<f64> = (0..(kk * n) as usize)
            .map(|i| wv[(i % n as usize) * kk as usize + i / n as usize])
            .collect();
        let out = run_generic(&k, &[&x, &w]).unwrap();
        assert_eq!(out[0].shape(), &[m, n]);
        close(
            &out[0],
            &matmul_reference(&xv, &wt, (1, 1), m as usize, kk as usize, n as usize),
        );
    }
    // Operands that do not fit are an error naming the kernel, before anything runs.
    let (x, w) = (floats(&[2, 3], |_| 1.0), floats(&[4, 5], |_| 1.0));
    let e = run_generic(&k, &[&x, &w]).unwrap_err();
    assert!(e.to_string().contains("fused_nn_dense"), "{e}");
    let batch = softmax_primitive(
        "%p0: Tensor[(?, ?, 8), float32], %p1: Tensor[(?, ?, 8), float32]",
        "nn.batch_matmul(%p0, %p1, transpose_b=True)",
    );
    let k = crate::compile_primitive(&batch, "fused_nn_batch_matmul").unwrap();
    for (ba, bb, m, n) in [(4, 4, 5, 6), (1, 3, 2, 9), (2, 1, 17, 1)] {
        let a = floats(&[ba, m, 8], |i| (i % 11) as f32 * 0.1);
        let b = floats(&[bb, n, 8], |i| (i % 5) as f32 * 0.3 - 0.4);
        let bv = b.to_f64_vec();
        let (nu, bu) = (n as usize, bb as usize);
        let bt: Vec<f64> = (0..bu * 8 * nu)
            .map(|i| {
                let (t, r) = (i / (8 * nu), i % (8 * nu));
                bv[t * 8 * nu + (r % nu) * 8 + r / nu]
            })
            .collect();
        let out = run_generic(&k, &[&a, &b]).unwrap();
        let want = matmul_reference(&a.to_f64_vec(), &bt, (ba as usize, bu), m as usize, 8, nu);
        close(&out[0], &want);
    }
    let (a, b) = (floats(&[2, 3, 8], |_| 1.0), floats(&[3, 3, 8], |_| 1.0));
    assert!(run_generic(&k, &[&a, &b]).is_err());
    // A product scaled by a constant is one too; another epilogue is not.
    let params = "%p0: Tensor[(?, 4, 8), float32], %p1: Tensor[(?, 4, 8), float32]";
    let scaled = "%0 = nn.batch_matmul(%p0, %p1, transpose_b=True); divide(%0, 2f)";
    let op = host_op(&softmax_primitive(params, scaled)).and_then(Result::ok);
    assert!(matches!(
        op,
        Some(HostOp::Matmul(MatmulOp {
            scale: Some((2.0, true)),
            ..
        }))
    ));
    let added = "%0 = nn.batch_matmul(%p0, %p1, transpose_b=True); add(%0, 2f)";
    assert!(host_op(&softmax_primitive(params, added)).is_none());
    let k = crate::compile_primitive(&softmax_primitive(params, scaled), "scaled").unwrap();
    let (a, b) = (
        floats(&[2, 4, 8], |i| i as f32 * 0.01),
        floats(&[2, 4, 8], |_| 1.0),
    );
    let out = run_generic(&k, &[&a, &b]).unwrap();
    let av = a.to_f64_vec();
    let want: Vec<f64> = (0..32)
        .map(|i| (0..8).map(|l| av[(i / 4) * 8 + l]).sum::<f64>() / 2.0)
        .collect();
    close(&out[0], &want);
    // A static product stays a loop nest with its GEMM stage.
    let fixed = softmax_primitive(
        "%p0: Tensor[(2, 3), float32], %p1: Tensor[(4, 3), float32]",
        "nn.dense(%p0, %p1, units=None)",
    );
    assert!(host_op(&fixed).is_none());
}

#[test]
fn matmuls_by_a_matrix_run_at_every_shape() {
    // `torch.onnx.export(dynamo=True)`'s linear layers: `nn.matmul` of `[?, ?, K]` by
    // `[K, N]`, and by `[N, K]` transposed.
    generic_cases(
        "%p0: Tensor[(?, ?, 32), float32], %p1: Tensor[(32, 48), float32]",
        "nn.matmul(%p0, %p1, units=None)",
        &[
            &[&[1, 1, 32], &[32, 48]],
            &[&[2, 37, 32], &[32, 48]],
            &[&[1, 0, 32], &[32, 48]],
        ],
    );
    generic_cases(
        "%p0: Tensor[(?, 16), float32], %p1: Tensor[(8, 16), float32]",
        "nn.matmul(%p0, %p1, units=None, transpose_b=True)",
        &[&[&[5, 16], &[8, 16]]],
    );
}

#[test]
fn a_dynamic_softmax_serves_every_row_length() {
    let f = softmax_primitive(
        "%p0: Tensor[(?, ?), float32]",
        "nn.softmax(divide(%p0, 2f), axis=-1)",
    );
    let k = crate::compile_primitive(&f, "fused_divide_nn_softmax").unwrap();
    assert!(k.is_generic());
    for (rows, cols) in [(1, 1), (3, 7), (0, 4), (5, 0), (2, 400)] {
        let x = floats(&[rows, cols], |i| (i % 9) as f32 - 4.0);
        let out = run_generic(&k, &[&x]).unwrap();
        let xv = x.to_f64_vec();
        let mut want = Vec::new();
        for r in xv.chunks(cols.max(1) as usize).take(rows as usize) {
            let max = r.iter().map(|v| v / 2.0).fold(f64::NEG_INFINITY, f64::max);
            let sum: f64 = r.iter().map(|v| (v / 2.0 - max).exp()).sum();
            want.extend(r.iter().map(|v| (v / 2.0 - max).exp() / sum));
        }
        close(&out[0], &want);
    }
    assert!(run_generic(&k, &[&floats(&[2, 2, 2], |_| 0.0)]).is_err());
}

#[test]
fn a_dynamic_reshape_is_a_view_shaped_by_its_relations() {
    let f = softmax_primitive(
        "%p0: Tensor[(?, ?, ?), int32], %p1: Tensor[(?, ?, 2), float32]",
        "%0 = reshape(%p0, newshape=[-3, 0]); reshape_like(%0, %p1, lhs_end=1, rhs_end=2)",
    );
    let k = crate::compile_primitive(&f, "fused_reshape_reshape_like").unwrap();
    assert_eq!(k.view_source(), Some(0));
    assert!(k.is_generic());
    let shapes = k.output_shapes(&[&[2, 3, 4], &[3, 2, 2]], &[]).unwrap();
    assert_eq!(shapes, vec![vec![3, 2, 4]]);
    // The element count must hold, whatever the shape source says.
    assert!(k.output_shapes(&[&[2, 3, 4], &[5, 2, 2]], &[]).is_err());
    // Called directly, it copies.
    let x =
        NDArray::from_i128_slice(DType::I32, &[2, 3, 4], &(0..24).collect::<Vec<i128>>()).unwrap();
    let like = zeros(&[3, 2, 2]);
    let mut y = NDArray::zeros(DType::I32, &[3, 2, 4]).unwrap();
    k.call(&[&x, &like], &mut [&mut y]).unwrap();
    assert_eq!(y.as_bytes(), x.as_bytes());
    // A static reshape stays a loop nest (manifest_alloc makes it a view before it is called).
    let fixed = softmax_primitive("%p0: Tensor[(2, 3), float32]", "reshape(%p0, newshape=[6])");
    assert!(host_op(&fixed).is_none());
}

/// Runs generic kernel `k` of primitive `f` on random arguments of shapes `shapes` (the
/// parameters' dtypes; tuples flattened) and compares with the interpreter's run of `f`.
pub(crate) fn check_generic(f: &relay_ir::Function, k: &PackedFunc, shapes: &[&[i64]], seed: u64) {
    check_within(f, k, shapes, seed, (1e-5, 1e-6));
}

/// [`check_generic`] within relative and absolute tolerances `(rtol, atol)`.
fn check_within(
    f: &relay_ir::Function,
    k: &PackedFunc,
    shapes: &[&[i64]],
    seed: u64,
    (rtol, atol): (f64, f64),
) {
    use relay_interp::{SplitMix64, compare_tensors, random_tensor};
    let mut rng = SplitMix64::new(seed);
    let mut dtypes = Vec::new();
    let types = f.params.iter().map(|p| p.checked_type().unwrap());
    for ty in types.chain(f.body.checked_type()) {
        match ty.kind() {
            TypeKind::Tuple(fields) => dtypes.extend(fields.iter().map(tensor_dtype)),
            _ => dtypes.push(tensor_dtype(ty)),
        }
    }
    let inputs: Vec<NDArray> = shapes
        .iter()
        .zip(&dtypes)
        .map(|(s, &d)| random_tensor(Some(&relay_ir::Type::tensor(s, d)), &mut rng).unwrap())
        .collect();
    let mut leaves = inputs.iter();
    let values: Vec<relay_ir::Value> = f
        .params
        .iter()
        .map(|p| match p.checked_type().unwrap().kind() {
            TypeKind::Tuple(fields) => relay_ir::Value::tuple(
                fields
                    .iter()
                    .map(|_| relay_ir::Value::tensor(leaves.next().unwrap().clone()))
                    .collect(),
            ),
            _ => relay_ir::Value::tensor(leaves.next().unwrap().clone()),
        })
        .collect();
    let want = crate::compose::tests::interpret(f, values);
    let out_shapes = k.output_shapes(shapes, &[]).unwrap();
    let mut outs: Vec<NDArray> = out_shapes
        .iter()
        .zip(&dtypes[shapes.len()..])
        .map(|(s, &d)| NDArray::zeros(d, s).unwrap())
        .collect();
    let refs: Vec<&NDArray> = inputs.iter().collect();
    let mut out_refs: Vec<&mut NDArray> = outs.iter_mut().collect();
    k.call(&refs, &mut out_refs)
        .unwrap_or_else(|e| panic!("at {shapes:?}: {e}"));
    for (got, want) in outs.iter().zip(&want) {
        if let Some(why) = compare_tensors(got, want, rtol, atol) {
            panic!("at {shapes:?}: {why}");
        }
    }
}

fn tensor_dtype(ty: &relay_ir::Type) -> DType {
    match ty.kind() {
        TypeKind::Tensor { dtype, .. } => *dtype,
        _ => panic!("not a tensor: {ty}"),
    }
}

/// Compiles `body` over `params` and checks it is a generic host kernel that agrees with the
/// interpreter at each of `cases` (argument shapes).
/// Compiles `body` over `params` into its generic kernel, checks what a listing says of it
/// (`note`), and runs it against the interpreter at each of `cases` (argument shapes), every
/// one served.
pub(crate) fn noted_cases(params: &str, body: &str, note: &str, cases: &[&[&[i64]]]) {
    let f = softmax_primitive(params, body);
    let k = crate::compile_generic(&f, "k")
        .unwrap_or_else(|| panic!("{body}: not generic"))
        .unwrap_or_else(|e| panic!("{body}: {e}"));
    assert_eq!(k.generic_note(), Some(note), "{body}");
    for (i, shapes) in cases.iter().enumerate() {
        assert!(k.serves(shapes), "{body} at {shapes:?}");
        check_generic(&f, &k, shapes, i as u64);
    }
}

/// Cases of owned shapes as [`noted_cases`] takes them.
pub(crate) fn borrowed(cases: &[Vec<Vec<i64>>]) -> Vec<&[&[i64]]> {
    let leaked: Vec<Vec<&[i64]>> = cases
        .iter()
        .map(|c| c.iter().map(|s| s.as_slice()).collect())
        .collect();
    leaked.into_iter().map(|c| &*Vec::leak(c)).collect()
}

fn generic_cases(params: &str, body: &str, cases: &[&[&[i64]]]) {
    let f = softmax_primitive(params, body);
    let k = crate::compile_primitive(&f, "k").unwrap_or_else(|e| panic!("{body}: {e}"));
    assert!(k.is_generic() && k.entry().is_none(), "{body}");
    for (i, shapes) in cases.iter().enumerate() {
        check_generic(&f, &k, shapes, i as u64);
    }
}

#[test]
fn layout_chains_are_strided_copies_at_every_shape() {
    generic_cases(
        "%p0: Tensor[(?, 64), float32]",
        "transpose(%p0, axes=[1, 0])",
        &[&[&[1, 64]], &[&[0, 64]], &[&[301, 64]], &[&[7, 64]]],
    );
    // The attention heads: reshape, transpose, and back.
    generic_cases(
        "%p0: Tensor[(?, ?, 32), float32]",
        "%0 = reshape(%p0, newshape=[0, 0, 4, 8]); transpose(%0, axes=[0, 2, 1, 3])",
        &[
            &[&[1, 1, 32]],
            &[&[2, 7, 32]],
            &[&[3, 0, 32]],
            &[&[1, 129, 32]],
        ],
    );
    generic_cases(
        "%p0: Tensor[(?, 4, ?, 8), float32], %p1: Tensor[(?, ?, 32), float32]",
        "%0 = reshape(%p0, newshape=[-3, 0, 0]); %1 = reshape_like(%0, %p0, lhs_end=1, rhs_end=2); \
         %2 = transpose(%1, axes=[0, 2, 1, 3]); reshape_like(%2, %p1)",
        &[&[&[2, 4, 5, 8], &[2, 5, 32]], &[&[1, 4, 1, 8], &[1, 1, 32]]],
    );
    // Reversed and stepped slices of bytes; a slice of a transpose.
    generic_cases(
        "%p0: Tensor[(?, ?), int8]",
        "strided_slice(%p0, begin=[-1, 1], end=[-9223372036854775807, 9223372036854775807], \
         strides=[-2, 3], axes=None)",
        &[&[&[5, 10]], &[&[1, 1]], &[&[4, 0]], &[&[9, 17]]],
    );
    generic_cases(
        "%p0: Tensor[(?, 3, ?), float64]",
        "%0 = transpose(%p0, axes=[2, 1, 0]); strided_slice(%0, begin=[1], end=[-1], strides=None, axes=[0])",
        &[&[&[4, 3, 6]], &[&[2, 3, 2]], &[&[3, 3, 3]]],
    );
    // A take by a run-time index (ONNX's Gather of a scalar), and one by a constant around
    // inserted and dropped unit dimensions.
    generic_cases(
        "%p0: Tensor[(?, ?, 3), float32], %p1: int64",
        "take(%p0, %p1, axis=1, mode=\"wrap\")",
        &[&[&[2, 5, 3], &[]], &[&[1, 1, 3], &[]], &[&[0, 4, 3], &[]]],
    );
    generic_cases(
        "%p0: Tensor[(?, 5, ?), float16]",
        "%0 = transpose(%p0, axes=[2, 1, 0]); %1 = expand_dims(%0, axis=1); \
         %2 = take(%1, -2, axis=2, mode=\"clip\"); squeeze(%2, axis=[1])",
        &[&[&[3, 5, 2]], &[&[1, 5, 1]], &[&[6, 5, 0]]],
    );
}

#[test]
fn gathers_run_at_every_shape() {
    // GPT-2's gather of the attention mask's rows by positions, and embeddings, in every mode
    // (indices past the table for those that take them), along other axes and flattened.
    generic_cases(
        "%p0: Tensor[(?, 1), bool], %p1: Tensor[(?, 1, 1, ?), int64]",
        "take(%p0, %p1, axis=0, mode=\"wrap\")",
        &[
            &[&[1, 1], &[1, 1, 1, 1]],
            &[&[2, 1], &[3, 1, 1, 17]],
            &[&[5, 1], &[1, 1, 1, 0]],
        ],
    );
    for mode in ["clip", "wrap"] {
        generic_cases(
            "%p0: Tensor[(?, 8), float32], %p1: Tensor[(?, ?), int32]",
            &format!("take(%p0, %p1, axis=0, mode=\"{mode}\")"),
            &[&[&[3, 8], &[2, 9]], &[&[40, 8], &[1, 1]]],
        );
    }
    generic_cases(
        "%p0: Tensor[(?, ?, 3), float16], %p1: Tensor[(?), int64]",
        "take(%p0, %p1, axis=1, mode=\"wrap\")",
        &[&[&[2, 5, 3], &[7]], &[&[0, 5, 3], &[2]]],
    );
    generic_cases(
        "%p0: Tensor[(?, ?), int8], %p1: Tensor[(?), int64]",
        "take(%p0, %p1, mode=\"wrap\")",
        &[&[&[4, 6], &[30]]],
    );
    // In "fast" mode an index outside the axis is an error of the call, as is any index into
    // an empty axis.
    let f = softmax_primitive(
        "%p0: Tensor[(?, 4), float32], %p1: Tensor[(?), int64]",
        "take(%p0, %p1, axis=0, mode=\"fast\")",
    );
    let k = crate::compile_generic(&f, "k").unwrap().unwrap();
    let data = NDArray::zeros(DType::F32, &[3, 4]).unwrap();
    let at = |i: i64| NDArray::from_f64_slice(DType::I64, &[1], &[i as f64]).unwrap();
    let mut out = NDArray::zeros(DType::F32, &[1, 4]).unwrap();
    assert!(k.call(&[&data, &at(2)], &mut [&mut out]).is_ok());
    let e = k.call(&[&data, &at(3)], &mut [&mut out]).unwrap_err();
    assert!(e.to_string().contains("outside"), "{e}");
    let empty = NDArray::zeros(DType::F32, &[0, 4]).unwrap();
    assert!(k.call(&[&empty, &at(0)], &mut [&mut out]).is_err());
}

#[test]
fn splits_run_at_every_shape() {
    // GPT-2's split of the fused query, key and value projection, whose last part's extent
    // is not known; sections; a split of the rows; any dtype.
    generic_cases(
        "%p0: Tensor[(?, ?, ?), float32]",
        "split(%p0, indices_or_sections=[8, 16], axis=2)",
        &[
            &[&[1, 3, 24]],
            &[&[2, 7, 30]],
            &[&[1, 0, 24]],
            &[&[1, 1, 17]],
        ],
    );
    generic_cases(
        "%p0: Tensor[(?, 6), int64]",
        "split(%p0, indices_or_sections=3, axis=-1)",
        &[&[&[1, 6]], &[&[0, 6]], &[&[33, 6]]],
    );
    generic_cases(
        "%p0: Tensor[(?, 5), float16]",
        "split(%p0, indices_or_sections=[1, 3])",
        &[&[&[4, 5]], &[&[9, 5]]],
    );
    // Sections that do not divide the data are an error of the call.
    let f = softmax_primitive(
        "%p0: Tensor[(?, ?), float32]",
        "split(%p0, indices_or_sections=4, axis=1)",
    );
    let k = crate::compile_generic(&f, "k").unwrap().unwrap();
    let e = k.output_shapes(&[&[2, 6]], &[]).unwrap_err();
    assert!(e.to_string().contains("does not divide"), "{e}");
}

#[test]
fn concatenations_and_reductions_run_at_every_shape() {
    generic_cases(
        "%p0: (Tensor[(?, 64), float32], Tensor[(1, 64), float32])",
        "concatenate(%p0)",
        &[
            &[&[0, 64], &[1, 64]],
            &[&[1, 64], &[1, 64]],
            &[&[300, 64], &[1, 64]],
        ],
    );
    generic_cases(
        "%p0: Tensor[(?, ?), bool], %p1: Tensor[(?, 3), bool], %p2: Tensor[(?, ?), bool]",
        "concatenate((%p2, %p0, %p1, %p0), axis=-1)",
        &[&[&[2, 5], &[2, 3], &[2, 0]], &[&[0, 1], &[0, 3], &[0, 4]]],
    );
    generic_cases(
        "%p0: Tensor[(?, 64), float32]",
        "mean(%p0, axis=[0], keepdims=True)",
        &[&[&[1, 64]], &[&[300, 64]], &[&[0, 64]]],
    );
    generic_cases(
        "%p0: Tensor[(?, ?, 32), float64]",
        "sum(%p0, axis=[-1])",
        &[&[&[2, 3, 32]], &[&[1, 1, 32]]],
    );
    generic_cases(
        "%p0: Tensor[(?, ?, ?), float32]",
        "max(%p0, axis=[0], exclude=True, keepdims=True)",
        &[&[&[2, 3, 5]], &[&[4, 1, 9]], &[&[0, 3, 2]]],
    );
    generic_cases(
        "%p0: Tensor[(?, 7), float32]",
        "min(%p0)",
        &[&[&[3, 7]], &[&[1, 7]]],
    );
    // Folded axes that are not adjacent, and integer sums, stay loop nests.
    for (params, body) in [
        ("%p0: Tensor[(?, 3, 4), float32]", "sum(%p0, axis=[0, 2])"),
        ("%p0: Tensor[(?, 3), int32]", "sum(%p0, axis=[0])"),
    ] {
        assert!(
            host_op(&softmax_primitive(params, body)).is_none(),
            "{body}"
        );
    }
}

#[test]
fn generic_copies_reject_bad_arguments_with_errors() {
    let f = softmax_primitive(
        "%p0: Tensor[(?, ?, 3), float32], %p1: int64",
        "take(%p0, %p1, axis=1, mode=\"fast\")",
    );
    let k = crate::compile_primitive(&f, "k").unwrap();
    let x = floats(&[2, 4, 3], |i| i as f32);
    let at = |i: i128| NDArray::from_i128_slice(DType::I64, &[], &[i]).unwrap();
    let mut y = zeros(&[2, 3]);
    k.call(&[&x, &at(3)], &mut [&mut y]).unwrap();
    let e = k.call(&[&x, &at(4)], &mut [&mut y]).unwrap_err();
    assert!(e.to_string().contains("out of bounds"), "{e}");
    // An output of the wrong shape, an argument of the wrong rank.
    let mut wrong = zeros(&[2, 4]);
    assert!(k.call(&[&x, &at(0)], &mut [&mut wrong]).is_err());
    let flat = floats(&[24], |i| i as f32);
    assert!(k.call(&[&flat, &at(0)], &mut [&mut y]).is_err());
}

/// PyTorch's exported `scaled_dot_product_attention` softmax: scaled scores plus a boolean
/// mask's bias (broadcast over heads and queries, or a float bias), the NaN of a row masked
/// whole replaced; the operands constants or parameters. One generic kernel, against the
/// interpreter at shapes it was not first called with.
#[test]
fn masked_attention_softmaxes_are_one_library_call_at_every_shape() {
    let masked = "%0 = where(%p1, 0f, -inff); %1 = add(multiply(%p0, 0.125f), %0); \
                  %2 = nn.softmax(%1, axis=-1); %3 = isnan(%2); where(%3, 0f, %2)";
    let params = "%p0: Tensor[(?, 4, ?, ?), float32], %p1: Tensor[(?, 1, ?, ?), bool]";
    generic_cases(
        params,
        masked,
        &[
            &[&[1, 4, 3, 5], &[1, 1, 3, 5]],
            &[&[2, 4, 7, 33], &[2, 1, 7, 33]],
            &[&[1, 4, 1, 16], &[1, 1, 1, 16]],
            &[&[2, 4, 0, 9], &[2, 1, 0, 9]],
        ],
    );
    // The padding mask of an encoder: one row of keys per batch element, broadcast over heads
    // and queries; its values parameters.
    let params = "%p0: Tensor[(?, 2, ?, ?), float32], %p1: Tensor[(?, 1, 1, ?), bool], \
                  %p2: Tensor[(1), float32], %p3: Tensor[(1), float32], %p4: Tensor[(1), float32]";
    let body = "%0 = where(%p1, %p2, %p3); %1 = add(%p0, %0); %2 = nn.softmax(%1, axis=3); \
                %3 = isnan(%2); where(%3, %p4, %2)";
    generic_cases(
        params,
        body,
        &[
            &[&[1, 2, 4, 4], &[1, 1, 1, 4], &[1], &[1], &[1]],
            &[&[3, 2, 9, 9], &[3, 1, 1, 9], &[1], &[1], &[1]],
        ],
    );
    // A float bias, no guard.
    generic_cases(
        "%p0: Tensor[(?, 8), float32], %p1: Tensor[(8), float32]",
        "nn.softmax(add(%p1, %p0), axis=-1)",
        &[&[&[1, 8], &[8]], &[&[5, 8], &[8]]],
    );
    // A mask of the wrong length for the rows is an error, not a read out of bounds.
    let f = softmax_primitive(
        "%p0: Tensor[(?, 8), float32], %p1: Tensor[(?), float32]",
        "nn.softmax(add(%p0, %p1), axis=-1)",
    );
    let k = crate::compile_primitive(&f, "k").unwrap();
    assert!(k.output_shapes(&[&[2, 8], &[5]], &[]).is_err());
    // Another operator in the way is not this kernel.
    let other = softmax_primitive(
        "%p0: Tensor[(?, 8), float32], %p1: Tensor[(8), float32]",
        "nn.softmax(add(exp(%p0), %p1), axis=-1)",
    );
    assert!(!matches!(
        host_op(&other),
        Some(Ok(HostOp::MaskedSoftmax(_)))
    ));
}

/// The shape memo answers a shape seen lately and recomputes the others: a transpose's output
/// shapes stay right over more distinct shapes than the memo keeps, cycled twice.
#[test]
fn the_shape_memo_answers_only_the_shapes_it_saw() {
    let f = softmax_primitive(
        "%p0: Tensor[(?, ?), float32]",
        "transpose(%p0, axes=[1, 0])",
    );
    let k = crate::compile_primitive(&f, "k").unwrap();
    // 42 shapes, more than the memo keeps, and each seen again right after.
    for _ in 0..2 {
        for (r, c) in (0..7).flat_map(|r| (0..6).map(move |c| (r, c))) {
            for _ in 0..2 {
                assert_eq!(k.output_shapes(&[&[r, c]], &[]).unwrap(), vec![vec![c, r]]);
            }
        }
    }
    // A rank the memo holds a prefix of is not a hit.
    assert!(k.output_shapes(&[&[2]], &[]).is_err());
}

/// An attention as `fuse_ops` groups one (products, scaling, softmax, views, the importer's
/// `reshape_like` back to four dimensions whose shape source is the softmax) is one library
/// call computed in blocks of rows, against the interpreter at shapes it was not first called
/// with: rows that are not a multiple of a block or of a vector, one row, no rows, one key.
#[test]
fn attentions_are_one_library_call_at_every_shape() {
    let params = "%p0: Tensor[(?, ?, 8), float32], %p1: Tensor[(?, 8, ?), float32], \
                  %p2: Tensor[(?, 4, ?, 8), float32], %p3: Tensor[(?, ?, 8), float32]";
    let body = body_of_importer();
    let case = |b: i64, n: i64| {
        vec![
            vec![4 * b, n, 8],
            vec![4 * b, 8, n],
            vec![b, 4, n, 8],
            vec![4 * b, n, 8],
        ]
    };
    let cases: Vec<_> = [(1, 16), (2, 37), (1, 1), (1, 0), (1, 300)]
        .map(|(b, n)| case(b, n))
        .to_vec();
    attention_cases(params, body, &borrowed(&cases));
    // TVM's form: three dimensions, the keys transposed, a multiply, a wider value; batch 1
    // broadcast; static shapes are the same kernel.
    let body = "%0 = nn.batch_matmul(%p0, %p1, transpose_b=True); %1 = multiply(%0, 0.25f); \
                %2 = nn.softmax(%1, axis=-1); nn.batch_matmul(%2, %p2, transpose_b=False)";
    attention_cases(
        "%p0: Tensor[(?, ?, 16), float32], %p1: Tensor[(?, ?, 16), float32], \
         %p2: Tensor[(?, ?, 24), float32]",
        body,
        &[
            &[&[3, 5, 16], &[3, 7, 16], &[3, 7, 24]],
            &[&[3, 5, 16], &[1, 7, 16], &[1, 7, 24]],
            &[&[2, 130, 16], &[2, 129, 16], &[2, 129, 24]],
        ],
    );
    attention_cases(
        "%p0: Tensor[(2, 5, 16), float32], %p1: Tensor[(2, 7, 16), float32], \
         %p2: Tensor[(2, 7, 24), float32]",
        body,
        &[&[&[2, 5, 16], &[2, 7, 16], &[2, 7, 24]]],
    );
    // Dense layers as the products (a loop's attention over a growing `[?, 64]`, the values
    // transposed by their own kernel), nested rather than bound.
    attention_cases(
        "%p0: Tensor[(?, 64), float32], %p1: Tensor[(?, 64), float32], \
         %p2: Tensor[(64, ?), float32]",
        "nn.dense(nn.softmax(nn.dense(%p0, %p1, units=None)), %p2, units=None)",
        &[
            &[&[1, 64], &[1, 64], &[64, 1]],
            &[&[37, 64], &[37, 64], &[64, 37]],
            &[&[300, 64], &[300, 64], &[64, 300]],
        ],
    );
    // The same loop after `simplify_expr`: the values read as they are by an `nn.matmul`, and
    // an `nn.matmul` of the keys transposed as the first product.
    for body in [
        "nn.matmul(nn.softmax(nn.dense(%p0, %p1, units=None)), %p2, units=None)",
        "nn.matmul(nn.softmax(nn.matmul(%p0, %p1, units=None, transpose_b=True)), %p2, units=None)",
    ] {
        attention_cases(
            "%p0: Tensor[(?, 64), float32], %p1: Tensor[(?, 64), float32], \
             %p2: Tensor[(?, 64), float32]",
            body,
            &[
                &[&[1, 64], &[1, 64], &[1, 64]],
                &[&[37, 64], &[37, 64], &[37, 64]],
                &[&[300, 64], &[300, 64], &[300, 64]],
            ],
        );
    }
    // Views that regroup the softmax's rows (a reshape to another row length) are computed
    // one operator after another, still right.
    let regrouped = "%0 = nn.batch_matmul(%p0, %p1, transpose_b=True); \
                     %1 = reshape(%0, newshape=[2, 6, 4]); %2 = nn.softmax(%1, axis=-1); \
                     %3 = reshape(%2, newshape=[2, 4, 6]); nn.batch_matmul(%3, %p2, transpose_b=False)";
    attention_cases(
        "%p0: Tensor[(2, 4, 3), float32], %p1: Tensor[(2, 6, 3), float32], \
         %p2: Tensor[(2, 6, 5), float32]",
        regrouped,
        &[&[&[2, 4, 3], &[2, 6, 3], &[2, 6, 5]]],
    );
    // Views that give the softmax rows of no elements while the scores have rows of six (no
    // queries at all): nothing to compute, not a division by the empty row length.
    attention_cases(
        "%p0: Tensor[(2, ?, 3), float32], %p1: Tensor[(2, 6, 3), float32], \
         %p2: Tensor[(2, 6, ?), float32], %p3: Tensor[(2, ?, 6), float32], \
         %p4: Tensor[(2, 6, 5), float32]",
        "%0 = nn.batch_matmul(%p0, %p1, transpose_b=True); %1 = reshape_like(%0, %p2); \
         %2 = nn.softmax(%1, axis=-1); %3 = reshape_like(%2, %p3); \
         nn.batch_matmul(%3, %p4, transpose_b=False)",
        &[&[&[2, 0, 3], &[2, 6, 3], &[2, 6, 0], &[2, 0, 6], &[2, 6, 5]]],
    );
    // A softmax over another axis, or another operator in the chain, is not an attention.
    for other in [
        "%0 = nn.batch_matmul(%p0, %p1); %1 = nn.softmax(%0, axis=1); nn.batch_matmul(%1, %p2)",
        "%0 = nn.batch_matmul(%p0, %p1); %1 = nn.softmax(exp(%0), axis=-1); nn.batch_matmul(%1, %p2)",
    ] {
        let f = softmax_primitive(
            "%p0: Tensor[(?, 4, 4), float32], %p1: Tensor[(?, 4, 4), float32], \
             %p2: Tensor[(?, 4, 4), float32]",
            other,
        );
        assert!(
            !matches!(host_op(&f), Some(Ok(HostOp::Attention(_)))),
            "{other}"
        );
    }
    // Operands that do not fit each other are an error, not a read out of bounds.
    let f = softmax_primitive(params, body_of_importer());
    let k = crate::compile_primitive(&f, "k").unwrap();
    assert!(
        k.output_shapes(&[&[4, 16, 8], &[4, 8, 9], &[1, 4, 16, 8], &[4, 16, 8]], &[])
            .is_err()
    );
}

/// Checks that `body` over `params` is an attention and runs its kernel against the
/// interpreter at each of `cases`.
fn attention_cases(params: &str, body: &str, cases: &[&[&[i64]]]) {
    let f = softmax_primitive(params, body);
    assert!(
        matches!(host_op(&f), Some(Ok(HostOp::Attention(_)))),
        "{body}"
    );
    let k = crate::compile_primitive(&f, "k").unwrap_or_else(|e| panic!("{body}: {e}"));
    assert!(k.entry().is_none(), "{body}");
    for (i, shapes) in cases.iter().enumerate() {
        check_generic(&f, &k, shapes, i as u64);
    }
}

/// The attention of the ONNX importer's four-dimensional `MatMul`s (and `fuse_ops`).
fn body_of_importer() -> &'static str {
    "%0 = nn.batch_matmul(%p0, %p1); %1 = reshape_like(%0, %p2, lhs_end=1, rhs_end=2); \
     %2 = divide(%1, 2.828427f); %3 = nn.softmax(%2, axis=3); \
     %4 = reshape(%3, newshape=[-3, 0, 0]); %5 = nn.batch_matmul(%4, %p3); \
     reshape_like(%5, %3, lhs_end=1, rhs_end=2)"
}

/// Whether `body` over `params` is a pointwise host operator.
fn is_pointwise(params: &str, body: &str) -> bool {
    matches!(
        host_op(&softmax_primitive(params, body)),
        Some(Ok(HostOp::Pointwise(_)))
    )
}

/// The GELUs of BERT (`erf`, after the dense layer's bias, its constants as parameters or
/// inline, through a reshape) and GPT-2 (`tanh`, a cube), SiLU and an `exp`: one library call,
/// static or at every shape, against the interpreter — 0 and 1 sized axes, lengths that are
/// not a multiple of the block or the vector.
#[test]
fn pointwise_functions_are_one_library_call_at_every_shape() {
    let bert = "%0 = add(%p0, %p1); %1 = multiply(%0, %p2); %2 = erf(%1); \
                %3 = add(%2, %p3); %4 = multiply(%0, %3); multiply(%4, %p4)";
    let params = "%p0: Tensor[(?, ?, 16), float32], %p1: Tensor[(16), float32], \
                  %p2: float32, %p3: float32, %p4: float32";
    assert!(is_pointwise(params, bert));
    generic_cases(
        params,
        bert,
        &[
            &[&[1, 3, 16], &[16], &[], &[], &[]],
            &[&[2, 77, 16], &[16], &[], &[], &[]],
            &[&[1, 0, 16], &[16], &[], &[], &[]],
            &[&[1, 1, 16], &[16], &[], &[], &[]],
        ],
    );
    let bound = "%0 = reshape(%p0, newshape=[1, -1, 24]); %1 = add(%0, %p1); \
                 %2 = multiply(%1, 0.707107f); %3 = erf(%2); %4 = add(%3, 1f); \
                 %5 = multiply(%1, %4); multiply(%5, 0.5f)";
    let params = "%p0: Tensor[(?, 24), float32], %p1: Tensor[(1, 24), float32]";
    assert!(is_pointwise(params, bound));
    generic_cases(
        params,
        bound,
        &[
            &[&[5, 24], &[1, 24]],
            &[&[300, 24], &[1, 24]],
            &[&[0, 24], &[1, 24]],
        ],
    );
    let gpt2 = "%0 = multiply(%p0, %p1); %1 = power(%p0, 3f); %2 = multiply(%1, %p2); \
                %3 = add(%p0, %2); %4 = multiply(%3, %p3); %5 = tanh(%4); \
                %6 = add(%5, %p4); multiply(%0, %6)";
    let params = "%p0: Tensor[(?, ?, ?), float32], %p1: float32, %p2: float32, %p3: float32, \
                  %p4: float32";
    assert!(is_pointwise(params, gpt2));
    generic_cases(
        params,
        gpt2,
        &[
            &[&[1, 7, 33], &[], &[], &[], &[]],
            &[&[2, 3, 1031], &[], &[], &[], &[]],
        ],
    );
    // Static: compiled once like any kernel, no loop nest; the result reshaped too.
    for (params, body) in [
        (
            "%p0: Tensor[(6, 40), float32], %p1: Tensor[(40), float32]",
            "%0 = reshape(%p0, newshape=[1, 6, 40]); %1 = add(%0, %p1); \
             %2 = multiply(%1, 0.70710677f); %3 = erf(%2); %4 = add(%3, 1f); \
             %5 = multiply(%1, %4); %6 = multiply(%5, 0.5f); reshape(%6, newshape=[6, 40])",
        ),
        (
            "%p0: Tensor[(4, 7), float32]",
            "multiply(%p0, sigmoid(%p0))",
        ),
        (
            "%p0: Tensor[(3, 5, 8), float32], %p1: Tensor[(5, 8), float32]",
            "exp(negative(subtract(%p0, %p1)))",
        ),
    ] {
        assert!(is_pointwise(params, body), "{body}");
        let f = softmax_primitive(params, body);
        let k = crate::compile_primitive(&f, "k").unwrap();
        assert!(k.entry().is_none(), "{body}");
        let shapes: Vec<&[i64]> = f
            .params
            .iter()
            .map(|p| match p.checked_type().unwrap().kind() {
                TypeKind::Tensor { shape, .. } => {
                    let dims: Vec<i64> = shape
                        .iter()
                        .map(|d| match d {
                            relay_ir::Dim::Known(n) => *n,
                            relay_ir::Dim::Any => unreachable!(),
                        })
                        .collect();
                    &*Vec::leak(dims)
                }
                _ => unreachable!(),
            })
            .collect();
        check_generic(&f, &k, &shapes, 7);
    }
}

/// What is not a function of one variable stays with the loop nests, and a bias that does
/// not fit the variable at run time is an error, not a read out of bounds.
#[test]
fn pointwise_needs_one_variable_and_fitting_biases() {
    let two = "%p0: Tensor[(?, 8), float32], %p1: Tensor[(?, 8), float32]";
    assert!(!is_pointwise(two, "multiply(%p0, sigmoid(%p1))"));
    assert!(!is_pointwise(
        "%p0: Tensor[(?, 8), float32]",
        "add(%p0, 1f)"
    ));
    let across = "%p0: Tensor[(4, 8), float32], %p1: Tensor[(4, 1), float32]";
    assert!(!is_pointwise(across, "tanh(add(%p0, %p1))"));
    assert!(!is_pointwise(
        "%p0: Tensor[(?, 8), float32]",
        "%0 = tanh(%p0); %1 = exp(%p0); %0"
    ));
    let f = softmax_primitive(
        "%p0: Tensor[(?, 8), float32], %p1: Tensor[(8), float32]",
        "tanh(add(%p0, %p1))",
    );
    let k = crate::compile_primitive(&f, "k").unwrap();
    assert!(k.output_shapes(&[&[2, 8], &[8]], &[]).is_ok());
    assert!(k.output_shapes(&[&[2, 5], &[8]], &[]).is_err());
    assert!(k.output_shapes(&[&[2, 8], &[5]], &[]).is_err());
    let x = zeros(&[2, 8]);
    let mut y = zeros(&[2, 8]);
    assert!(k.call(&[&x, &zeros(&[5])], &mut [&mut y]).is_err());
}

/// `strided_set` of a `?`-shaped tensor of `dtype`, its indices kernel arguments.
fn strided_set_primitive(dtype: &str) -> relay_ir::Function {
    softmax_primitive(
        &format!(
            "%p0: Tensor[(?, 4, ?), {dtype}], %p1: Tensor[(?, ?, ?), {dtype}], \
             %p2: Tensor[(?), int64], %p3: Tensor[(?), int64], %p4: Tensor[(?), int32]"
        ),
        "strided_set(%p0, %p1, %p2, %p3, %p4)",
    )
}

fn index_vector(dtype: DType, v: &[i128]) -> NDArray {
    NDArray::from_i128_slice(dtype, &[v.len() as i64], v).unwrap()
}

#[test]
fn strided_sets_agree_with_the_interpreter_at_every_shape_and_dtype() {
    /// Data shape, begin, end, strides.
    type Case<'a> = (&'a [i64], &'a [i128], &'a [i128], &'a [i128]);
    let cases: &[Case] = &[
        (&[3, 4, 5], &[1, 0, 2], &[2, 4, 5], &[1, 1, 1]),
        (&[3, 4, 5], &[0, 1], &[3, 4], &[2, 2]),
        (&[2, 4, 7], &[-1, 3, 6], &[-3, -5, 0], &[-1, -1, -3]),
        (&[1, 4, 1], &[], &[], &[]),
        (&[5, 4, 2], &[4], &[4], &[1]),
        (&[0, 4, 3], &[0], &[0], &[1]),
    ];
    for dtype in ["float32", "float16", "int8", "int64", "bool"] {
        let f = strided_set_primitive(dtype);
        let k = crate::compile_generic(&f, "k").unwrap().unwrap();
        assert_eq!(k.updates_input(), Some(0));
        for (i, &(shape, begin, end, strides)) in cases.iter().enumerate() {
            let data_ty =
                relay_ir::Type::tensor(shape, tensor_dtype(f.params[0].checked_type().unwrap()));
            let mut rng = relay_interp::SplitMix64::new(i as u64);
            let data = relay_interp::random_tensor(Some(&data_ty), &mut rng).unwrap();
            let (b, e, s) = (
                index_vector(DType::I64, begin),
                index_vector(DType::I64, end),
                index_vector(DType::I32, strides),
            );
            let region = relay_ops::strided_set_region(
                shape,
                &begin.iter().map(|&x| x as i64).collect::<Vec<_>>(),
                &end.iter().map(|&x| x as i64).collect::<Vec<_>>(),
                &strides.iter().map(|&x| x as i64).collect::<Vec<_>>(),
            )
            .unwrap();
            let v_ty = relay_ir::Type::tensor(&region.shape, data.dtype());
            let v = relay_interp::random_tensor(Some(&v_ty), &mut rng).unwrap();
            let args = [&data, &v, &b, &e, &s];
            let values: Vec<relay_ir::Value> = args
                .iter()
                .map(|t| relay_ir::Value::tensor((*t).clone()))
                .collect();
            let want = crate::compose::tests::interpret(&f, values);
            let mut out = NDArray::zeros(data.dtype(), shape).unwrap();
            k.call(&args, &mut [&mut out])
                .unwrap_or_else(|e| panic!("{dtype} case {i}: {e}"));
            assert_eq!(out.as_bytes(), want[0].as_bytes(), "{dtype} case {i}");
        }
    }
}

#[test]
fn a_strided_set_writes_over_its_data_when_given_it_as_the_output() {
    let f = strided_set_primitive("float32");
    let k = crate::compile_generic(&f, "k").unwrap().unwrap();
    let storage = Arc::new(relay_runtime::Storage::new(2 * 4 * 3 * 4, 64).unwrap());
    // SAFETY: the one view of the storage.
    let data = unsafe { NDArray::view(storage, 0, DType::F32, &[2, 4, 3]) }.unwrap();
    let row = floats(&[1, 1, 3], |i| 10.0 + i as f32);
    let (b, e, s) = (
        index_vector(DType::I64, &[1, 2]),
        index_vector(DType::I64, &[2, 3]),
        index_vector(DType::I32, &[1]),
    );
    // SAFETY: the output is the data exactly, which strided_set allows; no slice is alive.
    unsafe { k.call_views(&[&data, &row, &b, &e, &s, &data]) }.unwrap();
    let got: Vec<f32> = data
        .as_bytes()
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    let mut want = vec![0f32; 24];
    want[12 + 2 * 3..12 + 3 * 3].copy_from_slice(&[10.0, 11.0, 12.0]);
    assert_eq!(got, want);
    // A value of another shape than the region is an error, not a write.
    let wide = floats(&[1, 1, 2], |_| 1.0);
    // SAFETY: as above.
    let err = unsafe { k.call_views(&[&data, &wide, &b, &e, &s, &data]) }.unwrap_err();
    assert!(
        err.to_string().contains("into a region of shape [1, 1, 3]"),
        "{err}"
    );
}

/// Whether `body` over `params` is a blocked convolution of the kernel library.
fn is_blocked_conv(params: &str, body: &str) -> bool {
    matches!(
        host_op(&softmax_primitive(params, body)),
        Some(Ok(HostOp::ConvNchwc(_)))
    )
}

/// Blocked convolutions as `alter_op_layout` writes them and `fuse_ops` groups them — a padded
/// 3 × 3 with a bias, a residual and `relu`; the NCHW stem, strided, scaled by a constant and
/// clipped; blocks of 16 with a batch norm's scale and shift; a strided depthwise one with a
/// bias and `clip`; a grouped and dilated one — are one library call that agrees with the
/// interpreter.
#[test]
fn blocked_convolutions_with_their_epilogues_are_one_library_call() {
    let cases: &[(&str, &str, &[&[i64]])] = &[
        (
            "%p0: Tensor[(1, 2, 9, 7, 8), float32], %p1: Tensor[(3, 2, 3, 3, 8, 8), float32], \
             %p2: Tensor[(1, 3, 1, 1, 8), float32], %p3: Tensor[(1, 3, 9, 7, 8), float32]",
            "%0 = nn.contrib_conv2d_NCHWc(%p0, %p1, padding=[1, 1, 1, 1], channels=24, \
             kernel_size=[3, 3], data_layout=\"NCHW8c\", kernel_layout=\"OIHW8i8o\", \
             out_layout=\"NCHW8c\"); %1 = add(%0, %p2); %2 = add(%p3, %1); nn.relu(%2)",
            &[
                &[1, 2, 9, 7, 8],
                &[3, 2, 3, 3, 8, 8],
                &[1, 3, 1, 1, 8],
                &[1, 3, 9, 7, 8],
            ],
        ),
        (
            "%p0: Tensor[(1, 3, 23, 19), float32], %p1: Tensor[(2, 3, 7, 7, 8), float32]",
            "%0 = nn.contrib_conv2d_NCHWc(%p0, %p1, strides=[2, 2], padding=[3, 3, 3, 3], \
             channels=16, kernel_size=[7, 7], kernel_layout=\"OIHW8o\", out_layout=\"NCHW8c\"); \
             %1 = multiply(%0, 0.5f); clip(%1, a_min=0f, a_max=6f)",
            &[&[1, 3, 23, 19], &[2, 3, 7, 7, 8]],
        ),
        (
            "%p0: Tensor[(2, 2, 6, 6, 16), float32], %p1: Tensor[(2, 2, 1, 1, 16, 16), float32], \
             %p2: Tensor[(2, 1, 1, 16), float32], %p3: Tensor[(2, 1, 1, 16), float32]",
            "%0 = nn.contrib_conv2d_NCHWc(%p0, %p1, channels=32, kernel_size=[1, 1], \
             data_layout=\"NCHW16c\", kernel_layout=\"OIHW16i16o\", out_layout=\"NCHW16c\"); \
             add(multiply(%0, %p2), %p3)",
            &[
                &[2, 2, 6, 6, 16],
                &[2, 2, 1, 1, 16, 16],
                &[2, 1, 1, 16],
                &[2, 1, 1, 16],
            ],
        ),
        (
            "%p0: Tensor[(1, 2, 7, 9, 8), float32], %p1: Tensor[(2, 1, 3, 3, 1, 8), float32], \
             %p2: Tensor[(1, 2, 1, 1, 8), float32]",
            "%0 = nn.contrib_depthwise_conv2d_NCHWc(%p0, %p1, strides=[2, 2], \
             padding=[1, 1, 1, 1], groups=16, channels=16, kernel_size=[3, 3], \
             data_layout=\"NCHW8c\", kernel_layout=\"OIHW1i8o\", out_layout=\"NCHW8c\"); \
             clip(add(%0, %p2), a_min=0f, a_max=6f)",
            &[&[1, 2, 7, 9, 8], &[2, 1, 3, 3, 1, 8], &[1, 2, 1, 1, 8]],
        ),
        (
            "%p0: Tensor[(1, 4, 8, 8, 8), float32], %p1: Tensor[(4, 2, 3, 3, 8, 8), float32]",
            "nn.contrib_conv2d_NCHWc(%p0, %p1, padding=[2, 2, 2, 2], dilation=[2, 2], \
             groups=2, channels=32, kernel_size=[3, 3], data_layout=\"NCHW8c\", \
             kernel_layout=\"OIHW8i8o\", out_layout=\"NCHW8c\")",
            &[&[1, 4, 8, 8, 8], &[4, 2, 3, 3, 8, 8]],
        ),
    ];
    for (i, (params, body, shapes)) in cases.iter().enumerate() {
        assert!(is_blocked_conv(params, body), "{body}");
        let f = softmax_primitive(params, body);
        let k = crate::compile_primitive(&f, "k").unwrap_or_else(|e| panic!("{body}: {e}"));
        assert!(k.entry().is_none(), "{body}");
        // Sums of up to 144 products of values in [-1, 1), in another order than the
        // interpreter's float64 sum.
        check_within(&f, &k, shapes, i as u64, (1e-5, 1e-5));
    }
}

/// What the blocked kernel does not compute stays a loop nest: blocks of 4 (a depthwise and an
/// ordinary convolution), a bias broadcast along other axes, another operator after
/// the convolution.
#[test]
fn other_blocked_convolutions_stay_loop_nests() {
    let depthwise =
        "%p0: Tensor[(1, 2, 6, 6, 4), float32], %p1: Tensor[(2, 1, 3, 3, 1, 4), float32]";
    assert!(!is_blocked_conv(
        depthwise,
        "nn.contrib_depthwise_conv2d_NCHWc(%p0, %p1, groups=8, channels=8, kernel_size=[3, 3], \
         data_layout=\"NCHW4c\", kernel_layout=\"OIHW1i4o\", out_layout=\"NCHW4c\")"
    ));
    let four = "%p0: Tensor[(1, 2, 6, 6, 4), float32], %p1: Tensor[(2, 2, 1, 1, 4, 4), float32]";
    assert!(!is_blocked_conv(
        four,
        "nn.contrib_conv2d_NCHWc(%p0, %p1, channels=8, kernel_size=[1, 1], \
         data_layout=\"NCHW4c\", kernel_layout=\"OIHW4i4o\", out_layout=\"NCHW4c\")"
    ));
    let conv = "nn.contrib_conv2d_NCHWc(%p0, %p1, channels=8, kernel_size=[1, 1], \
                data_layout=\"NCHW8c\", kernel_layout=\"OIHW8i8o\", out_layout=\"NCHW8c\")";
    let params = "%p0: Tensor[(1, 1, 6, 6, 8), float32], %p1: Tensor[(1, 1, 1, 1, 8, 8), float32], \
                  %p2: Tensor[(1, 1, 6, 1, 8), float32]";
    assert!(!is_blocked_conv(params, &format!("add({conv}, %p2)")));
    assert!(!is_blocked_conv(params, &format!("tanh({conv})")));
    assert!(is_blocked_conv(params, conv));
}

/// Blocked pooling as `alter_op_layout` writes it — ResNet's 3 × 3 / 2 max pool, an average
/// pool with `count_include_pad` and ceil mode, blocks of 16, global pools (ResNet-50's
/// `[1, 256, 7, 7, 8]` mean, a maximum over a non-square plane) — is one library call that
/// agrees with the interpreter; other layouts and dtypes stay loop nests.
#[test]
fn blocked_pooling_is_one_library_call() {
    let cases: &[(&str, &str, &[&[i64]])] = &[
        (
            "%p0: Tensor[(1, 2, 12, 11, 8), float32]",
            "nn.max_pool2d(%p0, pool_size=[3, 3], strides=[2, 2], padding=[1, 1, 1, 1], \
             layout=\"NCHW8c\")",
            &[&[1, 2, 12, 11, 8]],
        ),
        (
            "%p0: Tensor[(2, 1, 7, 7, 8), float32]",
            "nn.avg_pool2d(%p0, pool_size=[2, 3], strides=[2, 2], padding=[1, 0], \
             ceil_mode=True, count_include_pad=True, layout=\"NCHW8c\", out_layout=\"NCHW8c\")",
            &[&[2, 1, 7, 7, 8]],
        ),
        (
            "%p0: Tensor[(1, 2, 6, 5, 16), float32]",
            "nn.avg_pool2d(%p0, pool_size=[3, 3], padding=[1, 1], layout=\"NCHW16c\")",
            &[&[1, 2, 6, 5, 16]],
        ),
        (
            "%p0: Tensor[(1, 256, 7, 7, 8), float32]",
            "nn.global_avg_pool2d(%p0, layout=\"NCHW8c\")",
            &[&[1, 256, 7, 7, 8]],
        ),
        (
            "%p0: Tensor[(2, 3, 5, 9, 16), float32]",
            "nn.global_max_pool2d(%p0, layout=\"NCHW16c\", out_layout=\"NCHW16c\")",
            &[&[2, 3, 5, 9, 16]],
        ),
    ];
    for (i, (params, body, shapes)) in cases.iter().enumerate() {
        let f = softmax_primitive(params, body);
        assert!(
            matches!(host_op(&f), Some(Ok(HostOp::PoolNchwc(_)))),
            "{body}"
        );
        let k = crate::compile_primitive(&f, "k").unwrap_or_else(|e| panic!("{body}: {e}"));
        assert!(k.entry().is_none(), "{body}");
        check_within(&f, &k, shapes, i as u64, (1e-6, 1e-6));
    }
    let others = [
        (
            "%p0: Tensor[(1, 8, 6, 6), float32]",
            "nn.max_pool2d(%p0, pool_size=[2, 2])",
        ),
        (
            "%p0: Tensor[(1, 1, 6, 6, 4), float32]",
            "nn.max_pool2d(%p0, pool_size=[2, 2], layout=\"NCHW4c\")",
        ),
        (
            "%p0: Tensor[(1, 1, 6, 6, 8), float16]",
            "nn.max_pool2d(%p0, pool_size=[2, 2], layout=\"NCHW8c\")",
        ),
        (
            "%p0: Tensor[(1, 8, 6, 6), float32]",
            "nn.global_avg_pool2d(%p0)",
        ),
    ];
    for (params, body) in others {
        let f = softmax_primitive(params, body);
        assert!(
            !matches!(host_op(&f), Some(Ok(HostOp::PoolNchwc(_)))),
            "{body}"
        );
    }
}
