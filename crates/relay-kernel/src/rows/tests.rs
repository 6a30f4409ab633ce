use super::*;
use crate::host_op::tests::{borrowed, check_generic, noted_cases, softmax_primitive as primitive};

/// Compiles `body` over `params`, checks it is a row kernel, and runs it against the
/// interpreter at each of `cases` (argument shapes).
fn row_cases(params: &str, body: &str, cases: &[&[&[i64]]]) {
    noted_cases(params, body, crate::listing::ROWS_NOTE, cases);
}

#[test]
fn chunks_are_multiples_of_the_aligned_row_count() {
    assert_eq!(chunk_rows(32, 1, 1), vec![512, 8, 1]);
    assert_eq!(chunk_rows(32, 16, 1), vec![512, 128, 16, 1]);
    assert_eq!(chunk_rows(32, 16, 4), vec![512, 128, 16, 4]);
    assert_eq!(chunk_rows(768, 1, 1), vec![21, 8, 1]);
    assert_eq!(chunk_rows(1 << 20, 16, 1), vec![16, 1]);
    assert_eq!(chunk_rows(1, 1, 1), vec![1024, 8, 1]);
}

#[test]
fn layer_norm_pieces_run_at_every_row_count() {
    // The mean is a reduction of the library; the variance and the normalization are rows
    // of 32 and of 1 floats (aligned every 16 rows: the rest run a row at a time).
    let counts: &[&[i64]] = &[
        &[1, 1],
        &[2, 7],
        &[1, 16],
        &[3, 17],
        &[1, 129],
        &[0, 5],
        &[4, 300],
    ];
    let cases: Vec<Vec<Vec<i64>>> = counts
        .iter()
        .map(|c| vec![vec![c[0], c[1], 32], vec![c[0], c[1], 1]])
        .collect();
    row_cases(
        "%p0: Tensor[(?, ?, 32), float32], %p1: Tensor[(?, ?, 1), float32]",
        "variance(%p0, %p1, axis=[-1], keepdims=True)",
        &borrowed(&cases),
    );
    let with_affine: Vec<Vec<Vec<i64>>> = cases
        .iter()
        .map(|c| vec![c[0].clone(), c[1].clone(), c[1].clone(), vec![32], vec![32]])
        .collect();
    row_cases(
        "%p0: Tensor[(?, ?, 32), float32], %p1: Tensor[(?, ?, 1), float32], \
         %p2: Tensor[(?, ?, 1), float32], %p3: Tensor[(32), float32], %p4: Tensor[(32), float32]",
        "%0 = subtract(%p0, %p1); %1 = add(%p2, 1e-5f); %2 = divide(%0, sqrt(%1)); \
         %3 = multiply(%2, %p3); add(%3, %p4)",
        &borrowed(&with_affine),
    );
}

#[test]
fn epilogues_and_other_dtypes_run_in_chunks() {
    // A dense layer's epilogue: a bias, a residual and GELU over the product's rows.
    row_cases(
        "%p0: Tensor[(?, ?, 40), float32], %p1: Tensor[(40), float32], \
         %p2: Tensor[(?, ?, 40), float32]",
        "%1 = add(add(%p0, %p1), %p2); multiply(%1, add(erf(multiply(%1, 0.7f)), 1f))",
        &[
            &[&[1, 1, 40], &[40], &[1, 1, 40]],
            &[&[2, 333, 40], &[40], &[2, 333, 40]],
            &[&[3, 0, 40], &[40], &[3, 0, 40]],
        ],
    );
    // Rows of 3 bytes (aligned every 64 rows) with integer division: the rows after the
    // aligned chunks run one at a time, those that do not start aligned in scratch.
    row_cases(
        "%p0: Tensor[(?, 3), int8], %p1: Tensor[(?, 3), int8]",
        "floor_divide(%p0, maximum(%p1, 1i8))",
        &[
            &[&[1, 3], &[1, 3]],
            &[&[65, 3], &[65, 3]],
            &[&[200, 3], &[200, 3]],
        ],
    );
    // The argmax of a language model's logits: rows of 50,257 floats (aligned every 16
    // rows), one row alone or a few.
    row_cases(
        "%p0: Tensor[(?, 50257), float32]",
        "argmax(%p0, axis=[-1])",
        &[&[&[1, 50257]], &[&[3, 50257]], &[&[17, 50257]]],
    );
    // A softmax over the last axis of float64 rows, with a broadcast row.
    row_cases(
        "%p0: Tensor[(?, 5), float64], %p1: Tensor[(1, 5), float64]",
        "nn.log_softmax(add(%p0, %p1), axis=1)",
        &[&[&[1, 5], &[1, 5]], &[&[37, 5], &[1, 5]]],
    );
}

#[test]
fn functions_that_mix_rows_are_not_row_kernels() {
    for (params, body) in [
        (
            "%p0: Tensor[(?, 4), float32]",
            "exp(transpose(%p0, axes=[1, 0]))",
        ),
        ("%p0: Tensor[(?, 4), float32]", "exp(sum(%p0, axis=[0]))"),
        (
            "%p0: Tensor[(?, 4), float32]",
            "nn.softmax(exp(%p0), axis=0)",
        ),
        (
            "%p0: Tensor[(?, ?), float32], %p1: Tensor[(5), float32]",
            "nn.bias_add(%p0, %p1, axis=0)",
        ),
        (
            "%p0: Tensor[(?, 4), float32], %p1: Tensor[(3, 4), float32]",
            "add(%p0, %p1)",
        ),
        // A known extent among the rows that an operand varies along.
        (
            "%p0: Tensor[(?, 4, 64, ?), float32], %p1: Tensor[(64, 1), float32]",
            "add(%p0, %p1)",
        ),
        (
            "%p0: Tensor[(?, 4, ?), float32]",
            "sum(%p0, axis=[1], keepdims=True)",
        ),
        // Rows of another rank align from the right in a broadcast, not with the rows.
        (
            "%p0: Tensor[(?, ?, 32), float32], %p1: Tensor[(?, ?), float32]",
            "add(%p0, %p1)",
        ),
        (
            "%p0: Tensor[(?, 4), float32]",
            "exp(reshape(%p0, newshape=[-1, 2]))",
        ),
    ] {
        assert!(!is_row_function(&primitive(params, body)), "{body}");
    }
}

#[test]
fn rows_with_known_extents_among_them_are_a_flat_index() {
    // Attention's scaling of queries `[?, heads, ?, 64]` and of keys `[?, heads, 64, ?]`
    // (rows of one element, stepping by 256): chunks hold whole steps of the known extents.
    row_cases(
        "%p0: Tensor[(?, 4, ?, 64), float32]",
        "multiply(%p0, 0.35f)",
        &[
            &[&[1, 4, 1, 64]],
            &[&[2, 4, 7, 64]],
            &[&[1, 4, 0, 64]],
            &[&[3, 4, 33, 64]],
        ],
    );
    row_cases(
        "%p0: Tensor[(?, 4, 64, ?), float32], %p1: Tensor[(1, 1), float32]",
        "add(multiply(%p0, 0.35f), %p1)",
        &[
            &[&[1, 4, 64, 1], &[1, 1]],
            &[&[1, 4, 64, 13], &[1, 1]],
            &[&[2, 4, 64, 300], &[1, 1]],
            &[&[2, 4, 64, 0], &[1, 1]],
        ],
    );
    // A `?` after a known extent, and an integer function of it.
    row_cases(
        "%p0: Tensor[(4, ?), int32]",
        "add(multiply(%p0, 3), 1)",
        &[&[&[4, 1]], &[&[4, 17]], &[&[4, 1000]], &[&[4, 0]]],
    );
}

#[test]
fn embeddings_gather_rows_of_a_static_table() {
    // Token embeddings scaled (a take alone is the kernel library's gather), in both index
    // modes and with indices past the table (wrapped, clipped).
    for mode in ["wrap", "clip"] {
        row_cases(
            "%p0: Tensor[(50, 24), float32], %p1: Tensor[(?, ?), int64]",
            &format!("multiply(take(%p0, %p1, axis=0, mode=\"{mode}\"), 4f)"),
            &[
                &[&[50, 24], &[1, 1]],
                &[&[50, 24], &[2, 77]],
                &[&[50, 24], &[1, 0]],
            ],
        );
    }
    row_cases(
        "%p0: Tensor[(64, 3), int8], %p1: Tensor[(1, ?), int32]",
        "add(take(%p0, %p1, axis=0, mode=\"wrap\"), 1i8)",
        &[&[&[64, 3], &[1, 5]], &[&[64, 3], &[1, 300]]],
    );
    // A gather along another axis, or from a table with rows of its own, mixes rows.
    for (params, body) in [
        (
            "%p0: Tensor[(50, 24), float32], %p1: Tensor[(?), int64]",
            "exp(take(%p0, %p1, axis=1))",
        ),
        (
            "%p0: Tensor[(?, 24), float32], %p1: Tensor[(?), int64]",
            "exp(take(%p0, %p1, axis=0))",
        ),
    ] {
        assert!(!is_row_function(&primitive(params, body)), "{body}");
    }
}

#[test]
fn a_question_mark_after_the_rows_is_the_results_extent() {
    // GPT-2's residual adds one operand whose last extent is not known to be the hidden size.
    let (params, body) = (
        "%p0: Tensor[(?, ?, ?), float32], %p1: Tensor[(?, ?, 16), float32]",
        "add(%p0, %p1)",
    );
    row_cases(
        params,
        body,
        &[&[&[1, 3, 16], &[1, 3, 16]], &[&[2, 70, 16], &[2, 70, 16]]],
    );
    let k = crate::compile_generic(&primitive(params, body), "k")
        .unwrap()
        .unwrap();
    // At run time the `?` is 1, broadcast: not this kernel's, the caller specializes.
    assert!(!k.serves(&[&[2, 7, 1], &[2, 7, 16]]));
    assert!(k.serves(&[&[2, 7, 16], &[2, 7, 16]]));
    // A known 1 among the rows of one argument is a broadcast over the others' rows: a
    // broadcast kernel, which serves every batch.
    let batch = primitive(
        "%p0: Tensor[(1, ?, 24), float32], %p1: Tensor[(?, ?, 24), float32]",
        "add(%p1, cast(%p0, dtype=\"float32\"))",
    );
    assert!(!is_row_function(&batch));
    let k = crate::compile_generic(&batch, "k").unwrap().unwrap();
    assert_eq!(k.generic_note(), Some(crate::listing::BROADCAST_NOTE));
    for (i, shapes) in [[[1, 7, 24], [1, 7, 24]], [[1, 7, 24], [2, 7, 24]]]
        .iter()
        .enumerate()
    {
        let shapes: Vec<&[i64]> = shapes.iter().map(|s| s.as_slice()).collect();
        assert!(k.serves(&shapes));
        check_generic(&batch, &k, &shapes, i as u64);
    }
}

#[test]
fn rows_that_do_not_match_are_errors_and_not_served() {
    let f = primitive(
        "%p0: Tensor[(?, 4), float32], %p1: Tensor[(?, 4), float32]",
        "add(%p0, %p1)",
    );
    let k = crate::compile_generic(&f, "k").unwrap().unwrap();
    // A `?` that broadcasts at run time is not a row kernel's: the caller specializes.
    assert!(!k.serves(&[&[3, 4], &[1, 4]]));
    assert!(k.serves(&[&[3, 4], &[3, 4]]));
    let x = relay_ir::NDArray::zeros(relay_ir::DType::F32, &[3, 4]).unwrap();
    let one = relay_ir::NDArray::zeros(relay_ir::DType::F32, &[1, 4]).unwrap();
    let mut y = relay_ir::NDArray::zeros(relay_ir::DType::F32, &[3, 4]).unwrap();
    assert!(k.call(&[&x, &one], &mut [&mut y]).is_err());
    let mut wrong = relay_ir::NDArray::zeros(relay_ir::DType::F32, &[2, 4]).unwrap();
    assert!(k.call(&[&x, &x], &mut [&mut wrong]).is_err());
    let bad = relay_ir::NDArray::zeros(relay_ir::DType::F32, &[3, 5]).unwrap();
    assert!(k.call(&[&x, &bad], &mut [&mut y]).is_err());
    k.call(&[&x, &x], &mut [&mut y]).unwrap();
}

#[test]
fn rows_too_many_to_address_are_an_error() {
    use crate::abi::{
        DEVICE_CPU, DLDataType, DLDevice, DLTensor, TVMValue, TYPE_CODE_DLTENSOR_HANDLE,
    };
    // (`abs`: an `exp` would be the kernel library's pointwise function.)
    let f = primitive("%p0: Tensor[(?, ?, 4), float32]", "abs(%p0)");
    let k = crate::compile_generic(&f, "k").unwrap().unwrap();
    let mut data = [0f32; 16];
    let mut shapes = [[1i64 << 40, 1 << 40, 4], [1 << 40, 1 << 40, 4]];
    let mut tensors: Vec<DLTensor> = shapes
        .iter_mut()
        .map(|s| DLTensor {
            data: data.as_mut_ptr().cast(),
            device: DLDevice {
                device_type: DEVICE_CPU,
                device_id: 0,
            },
            ndim: 3,
            dtype: DLDataType {
                code: 2,
                bits: 32,
                lanes: 1,
            },
            shape: s.as_mut_ptr(),
            strides: std::ptr::null_mut(),
            byte_offset: 0,
        })
        .collect();
    let values: Vec<TVMValue> = tensors
        .iter_mut()
        .map(|t| TVMValue {
            v_handle: (t as *mut DLTensor).cast(),
        })
        .collect();
    let codes = [TYPE_CODE_DLTENSOR_HANDLE; 2];
    let mut ctx = relay_linalg::KernelContext::default();
    // SAFETY: the shapes are too large, which the kernel reports before touching any data.
    let rc = unsafe { k.call_raw(values.as_ptr(), codes.as_ptr(), 2, &mut ctx) };
    assert_ne!(rc, 0);
    let message = ctx.error.unwrap_or_default();
    assert!(message.contains("too many"), "{message}");
}

#[test]
fn convolutions_and_pools_of_a_dynamic_batch_run_a_sample_at_a_time() {
    row_cases(
        "%p0: Tensor[(?, 3, 9, 9), float32], %p1: Tensor[(8, 3, 3, 3), float32], \
         %p2: Tensor[(8, 1, 1), float32]",
        "%0 = nn.conv2d(%p0, %p1, padding=[1, 1, 1, 1], channels=8, kernel_size=[3, 3]); \
         nn.relu(add(%0, %p2))",
        &[
            &[&[1, 3, 9, 9], &[8, 3, 3, 3], &[8, 1, 1]],
            &[&[5, 3, 9, 9], &[8, 3, 3, 3], &[8, 1, 1]],
            &[&[0, 3, 9, 9], &[8, 3, 3, 3], &[8, 1, 1]],
        ],
    );
    row_cases(
        "%p0: Tensor[(?, 4, 6, 6), float32]",
        "nn.global_avg_pool2d(nn.max_pool2d(%p0, pool_size=[2, 2], strides=[2, 2], \
         padding=[0, 0, 0, 0]))",
        &[&[&[1, 4, 6, 6]], &[&[19, 4, 6, 6]]],
    );
    // Another layout's batch is not first, and a second `?` is not the batch.
    for (params, body) in [
        (
            "%p0: Tensor[(3, ?, 9, 9), float32], %p1: Tensor[(8, 3, 3, 3), float32]",
            "nn.conv2d(%p0, %p1, channels=8, kernel_size=[3, 3], data_layout=\"CNHW\")",
        ),
        (
            "%p0: Tensor[(?, ?, 6, 6), float32]",
            "nn.max_pool2d(%p0, pool_size=[2, 2], strides=[2, 2], padding=[0, 0, 0, 0])",
        ),
    ] {
        assert!(!is_row_function(&primitive(params, body)), "{body}");
    }
}
