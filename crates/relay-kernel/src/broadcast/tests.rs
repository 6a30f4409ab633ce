use super::*;
use crate::host_op::tests::{borrowed, noted_cases, softmax_primitive as primitive};

/// Compiles `body` over `params`, checks it is a broadcast kernel, and runs it against the
/// interpreter at each of `cases` (argument shapes).
fn broadcast_cases(params: &str, body: &str, cases: &[&[&[i64]]]) {
    noted_cases(params, body, crate::listing::BROADCAST_NOTE, cases);
}

#[test]
fn causal_masks_run_at_every_length() {
    // GPT-2's causal mask: positions against positions, and the attention mask.
    let params = "%p0: Tensor[(1, 1, 1, ?), int64], %p1: Tensor[(1, 1, ?, 1), int64], \
                  %p2: Tensor[(?, ?, ?, ?), bool]";
    let body = "%0 = less_equal(%p0, %p1); %1 = logical_and(True, cast(%0, dtype=\"bool\")); \
                logical_and(%1, cast(%p2, dtype=\"bool\"))";
    let cases: Vec<Vec<Vec<i64>>> = [(1, 1), (1, 5), (2, 70), (1, 600), (3, 0)]
        .iter()
        .map(|&(b, n)| vec![vec![1, 1, 1, n], vec![1, 1, n, 1], vec![b, 1, n, n]])
        .collect();
    broadcast_cases(params, body, &borrowed(&cases));
    // The same mask broadcast over the batch and the heads.
    broadcast_cases(
        params,
        body,
        &[&[&[1, 1, 1, 9], &[1, 1, 9, 1], &[1, 1, 1, 9]]],
    );
}

#[test]
fn outer_products_and_static_operands_broadcast() {
    // GPT-2's position ids: a column times a static gather of constants, plus a row.
    broadcast_cases(
        "%p0: Tensor[(2), int64], %p1: Tensor[(1), int64], %p2: Tensor[(?, 1, 1, 1), int64], \
         %p3: Tensor[(1, 1, 1, ?), int64]",
        "%0 = take(%p0, %p1, axis=0, mode=\"wrap\"); add(%p3, multiply(%p2, %0))",
        &[
            &[&[2], &[1], &[1, 1, 1, 1], &[1, 1, 1, 7]],
            &[&[2], &[1], &[3, 1, 1, 1], &[1, 1, 1, 515]],
            &[&[2], &[1], &[4, 1, 1, 1], &[1, 1, 1, 0]],
        ],
    );
    // Float outer sums: spans of 512, 64, 8 and 1, a merged column, a constant row.
    broadcast_cases(
        "%p0: Tensor[(?, 1), float32], %p1: Tensor[(1, ?), float32]",
        "add(%p0, %p1)",
        &[
            &[&[1, 1], &[1, 1]],
            &[&[3, 1], &[1, 700]],
            &[&[1000, 1], &[1, 1]],
            &[&[0, 1], &[1, 5]],
        ],
    );
    broadcast_cases(
        "%p0: Tensor[(?, 1, 16), float16], %p1: Tensor[(1, ?, 16), float16]",
        "multiply(add(%p0, %p1), 0.5f16)",
        &[&[&[3, 1, 16], &[1, 5, 16]], &[&[1, 1, 16], &[1, 7, 16]]],
    );
}

#[test]
fn arguments_that_do_not_broadcast_as_compiled_are_not_served() {
    let f = primitive(
        "%p0: Tensor[(?, ?), float32], %p1: Tensor[(1, ?), float32]",
        "add(%p0, %p1)",
    );
    let k = crate::compile_generic(&f, "k").unwrap().unwrap();
    assert_eq!(k.generic_note(), Some(crate::listing::BROADCAST_NOTE));
    assert!(k.serves(&[&[3, 5], &[1, 5]]));
    // The first argument runs along the span, but its innermost extent is 1 here.
    assert!(!k.serves(&[&[3, 1], &[1, 5]]));
    // Extents that do not broadcast are an error of the shape function.
    assert!(k.output_shapes(&[&[3, 5], &[1, 4]], &[]).is_err());
    let x = relay_ir::NDArray::zeros(relay_ir::DType::F32, &[3, 1]).unwrap();
    let row = relay_ir::NDArray::zeros(relay_ir::DType::F32, &[1, 5]).unwrap();
    let mut y = relay_ir::NDArray::zeros(relay_ir::DType::F32, &[3, 5]).unwrap();
    assert!(k.call(&[&x, &row], &mut [&mut y]).is_err());
}

#[test]
fn functions_that_are_not_elementwise_are_not_broadcast_kernels() {
    for (params, body) in [
        ("%p0: Tensor[(?, ?), float32]", "sum(%p0, axis=[1])"),
        (
            "%p0: Tensor[(?, ?), float32]",
            "transpose(%p0, axes=[1, 0])",
        ),
        // An operand with a known extent other than 1 in front of the innermost.
        (
            "%p0: Tensor[(?, 1), float32], %p1: Tensor[(4, ?), float32]",
            "add(%p0, %p1)",
        ),
        (
            "%p0: Tensor[(?, 4), float32], %p1: Tensor[(4), float32]",
            "nn.bias_add(%p0, %p1, axis=1)",
        ),
    ] {
        assert!(!is_broadcast_function(&primitive(params, body)), "{body}");
    }
}

#[test]
fn index_normalization_of_the_dynamo_exporter_broadcasts() {
    // BERT's mask indices as `torch.onnx.export(dynamo=True)` writes them: negative indices
    // wrapped by extents gathered from a static shape vector.
    broadcast_cases(
        "%p0: Tensor[(2), int64], %p1: Tensor[(?, 1, 1, ?), int64], \
         %p2: Tensor[(?, 1, 1, ?), int64]",
        "%0 = take(%p0, 0i64, axis=0); %1 = take(%p0, 1i64, axis=0); \
         %2 = multiply(1i64, %1); %3 = where(less(%p1, 0i64), add(%p1, %0), %p1); \
         %4 = multiply(%3, %2); %5 = take(%p0, 1i64, axis=0); \
         %6 = where(less(%p2, 0i64), add(%p2, %5), %p2); add(%4, multiply(%6, 1i64))",
        &[
            &[&[2], &[1, 1, 1, 1], &[1, 1, 1, 1]],
            &[&[2], &[3, 1, 1, 9], &[3, 1, 1, 9]],
            &[&[2], &[3, 1, 1, 9], &[1, 1, 1, 9]],
        ],
    );
}
