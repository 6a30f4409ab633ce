//! Dynamic kernels are specialized once per distinct argument shapes: repeated calls with
//! shapes already seen compile nothing (the call site keeps its specializations), new shapes
//! compile once each, and every result equals the interpreter's. Those the kernel library
//! computes whole (matrix products, softmax, transposes, slices, takes, concatenations and
//! reductions over adjacent axes) are one generic kernel for every shape.

mod common;

use relay_interp::InterpOptions;
use relay_ir::{DType, Value};
use relay_vm::{Vm, VmOptions};

/// A fused elementwise chain (a row kernel) and a dense layer over a `?` batch dimension, and
/// an integer sum over the batch fused with its cast, which the kernel library does not
/// compute: a loop nest specialized per shape.
const PROGRAM: &str = r#"#[version = "0.0.5"]
def @main(%x: Tensor[(?, 64), float32], %y: Tensor[(?, 64), float32], %w: Tensor[(32, 64), float32]) {
  %0 = add(multiply(%x, 0.5f), %y);
  (%0, nn.dense(%0, %w, units=32), sum(cast(multiply(%x, 8f), dtype="int32"), axis=[0]))
}
"#;

fn inputs(rows: i64, seed: u64) -> Vec<Value> {
    let values = |n: i64, k: u64| -> Vec<f64> {
        (0..n)
            .map(|i| (((i as u64 * 7 + seed * 13 + k) % 17) as f64 - 8.0) / 8.0)
            .collect()
    };
    vec![
        common::tensor(DType::F32, &[rows, 64], &values(rows * 64, 1)),
        common::tensor(DType::F32, &[rows, 64], &values(rows * 64, 2)),
        common::tensor(DType::F32, &[32, 64], &values(32 * 64, 3)),
    ]
}

#[test]
fn seen_shapes_compile_nothing_new_shapes_compile_once() {
    let module = common::typed(PROGRAM, "dynamic.relay").expect("the program type-checks");
    let tol = common::tolerance(PROGRAM);
    let exe = common::build(PROGRAM, "dynamic.relay");
    assert!(
        exe.kernels.iter().any(|k| k.dynamic),
        "the program has dynamic kernels"
    );
    let mut vm = Vm::with_options(
        &exe,
        VmOptions {
            threads: 1,
            ..VmOptions::default()
        },
    );
    let mut compiled_after_first = None;
    for (round, rows) in [3i64, 3, 3, 300, 3, 300, 1, 300].into_iter().enumerate() {
        for call in 0..20 {
            let args = inputs(rows, (round * 20 + call) as u64);
            let got = vm
                .invoke("main", &args)
                .unwrap_or_else(|e| panic!("rows {rows}: {e}"));
            if call == 0 {
                let expected =
                    relay_interp::run(&module, "main", args.clone(), &InterpOptions::default())
                        .unwrap_or_else(|e| panic!("the interpreter fails: {e}"));
                relay_interp::compare_values(&got, &expected, tol.0, tol.1).unwrap_or_else(|why| {
                    panic!("rows {rows}: differs from the interpreter: {why}")
                });
            }
        }
        if round == 0 {
            compiled_after_first = Some(exe.cache.compiled());
        }
    }
    let per_shape = compiled_after_first.expect("a first round");
    assert!(
        per_shape >= 1,
        "the first shapes compiled the dynamic kernels"
    );
    // Three distinct shapes (3, 300 and 1 rows), 160 calls: each shape compiled exactly once.
    assert_eq!(exe.cache.compiled(), 3 * per_shape);
    for k in exe.kernels.iter().filter(|k| k.dynamic) {
        let want = if is_generic(k) { 0 } else { 3 };
        assert_eq!(k.specialized.len(), want, "kernel {}", k.name);
    }
    assert!(
        exe.kernels.iter().any(is_generic),
        "the dense layer is generic"
    );
}

/// Whether a kernel entry serves every shape with one generic kernel.
fn is_generic(k: &relay_vm::KernelEntry) -> bool {
    matches!(k.generic.get(), Some(Some(_)))
}

/// Matrix products and a scaled softmax over dynamic dimensions (attention's core), each the
/// kernel library's, and reshapes to shapes with two `?` (views whose shapes come from the
/// arguments').
const ATTENTION: &str = r#"#[version = "0.0.5"]
def @main(%q: Tensor[(?, ?, 8), float32], %k: Tensor[(?, ?, 8), float32], %v: Tensor[(?, ?, 8), float32], %w: Tensor[(?, 8), float32]) {
  %0 = nn.batch_matmul(%q, %k, transpose_b=True);
  %1 = nn.softmax(multiply(%0, 0.35f), axis=-1);
  %2 = nn.batch_matmul(%1, %v, transpose_b=False);
  %3 = reshape(%1, newshape=[-3, 0]);
  %4 = reshape_like(%3, %1, lhs_begin=0, lhs_end=1, rhs_begin=0, rhs_end=2);
  (nn.dense(%2, %w, units=None), %4)
}
"#;

#[test]
fn generic_kernels_run_at_fifty_random_shapes_and_compile_nothing() {
    let module = common::typed(ATTENTION, "attention.relay").expect("the program type-checks");
    let tol = common::tolerance(ATTENTION);
    let exe = common::build(ATTENTION, "attention.relay");
    let mut vm = Vm::with_options(
        &exe,
        VmOptions {
            threads: 2,
            ..VmOptions::default()
        },
    );
    let mut rng = relay_interp::SplitMix64::new(31);
    let mut pick = |lo: u64, hi: u64| (lo + rng.next_u64() % (hi - lo + 1)) as i64;
    for case in 0..50 {
        let (batch, seq, units) = (pick(1, 4), pick(0, 70), pick(1, 40));
        let values = |n: i64, k: i64| -> Vec<f64> {
            (0..n)
                .map(|i| (((i * 7 + k * 13 + case) % 23) as f64 - 11.0) / 8.0)
                .collect()
        };
        let t = |shape: &[i64], k| {
            common::tensor(DType::F32, shape, &values(shape.iter().product(), k))
        };
        let args = vec![
            t(&[batch, seq, 8], 1),
            t(&[batch, seq, 8], 2),
            t(&[batch, seq, 8], 3),
            t(&[units, 8], 4),
        ];
        let got = vm
            .invoke("main", &args)
            .unwrap_or_else(|e| panic!("case {case} ({batch}, {seq}, {units}): {e}"));
        let expected = relay_interp::run(&module, "main", args, &InterpOptions::default())
            .unwrap_or_else(|e| panic!("the interpreter fails: {e}"));
        relay_interp::compare_values(&got, &expected, tol.0, tol.1)
            .unwrap_or_else(|why| panic!("case {case}: differs from the interpreter: {why}"));
    }
    assert_eq!(exe.cache.compiled(), 0, "no kernel was compiled per shape");
    assert!(
        exe.kernels.iter().any(|k| k.name.contains("reshape_like")),
        "the reshapes are kernels of the executable"
    );
    for k in exe.kernels.iter().filter(|k| k.dynamic) {
        assert!(is_generic(k), "kernel {} is generic", k.name);
    }
    // Operands that do not fit each other are an error, not a crash.
    let bad = vec![
        common::tensor(DType::F32, &[2, 3, 8], &[0.0; 48]),
        common::tensor(DType::F32, &[3, 3, 8], &[0.0; 72]),
        common::tensor(DType::F32, &[3, 3, 8], &[0.0; 72]),
        common::tensor(DType::F32, &[1, 8], &[0.0; 8]),
    ];
    let e = vm.invoke("main", &bad).unwrap_err();
    assert!(e.to_string().contains("batch_matmul"), "{e}");
}

#[test]
fn a_call_site_keeps_a_bounded_number_of_specializations() {
    let exe = common::build(PROGRAM, "dynamic.relay");
    let mut vm = Vm::with_options(
        &exe,
        VmOptions {
            threads: 1,
            ..VmOptions::default()
        },
    );
    let limit = relay_vm::specialized::MAX_SPECIALIZATIONS as i64;
    for rows in 1..=limit + 5 {
        vm.invoke("main", &inputs(rows, 0))
            .unwrap_or_else(|e| panic!("rows {rows}: {e}"));
    }
    for k in exe.kernels.iter().filter(|k| k.dynamic && !is_generic(k)) {
        assert_eq!(k.specialized.len(), limit as usize, "kernel {}", k.name);
    }
    // The oldest shapes were forgotten: calling with them again compiles anew, and is right.
    let before = exe.cache.compiled();
    vm.invoke("main", &inputs(1, 0)).expect("rows 1 again");
    assert!(exe.cache.compiled() > before);
}

/// The loop whose tensor grows a row per iteration (a tail-recursive `@step` over a
/// `Tensor[(?, 64)]`): its products, softmax, transpose, mean and concatenation are generic.
const GROWING: &str = r#"#[version = "0.0.5"]
def @step(%i: int32, %n: int32, %kv: Tensor[(?, 64), float32], %w: Tensor[(64, 64), float32]) -> Tensor[(?, 64), float32] {
  if (greater_equal(%i, %n)) {
    %kv
  } else {
    let %h = nn.dense(%kv, %w, units=None);
    let %att = nn.softmax(nn.dense(%h, %kv, units=None), axis=-1);
    let %ctx = nn.dense(%att, transpose(%kv, axes=[1, 0]), units=None);
    let %row = mean(%ctx, axis=[0], keepdims=True);
    @step(add(%i, 1), %n, concatenate((%kv, tanh(%row)), axis=0), %w)
  }
}
def @main(%x: Tensor[(1, 64), float32], %w: Tensor[(64, 64), float32], %n: int32) -> Tensor[(?, 64), float32] {
  @step(0, %n, %x, %w)
}
"#;

/// Attention heads split and merged by reshapes and transposes, a token picked by a run-time
/// index, the others sliced off, a mean over the last axis, and a concatenation: each a
/// strided copy or reduction of the kernel library at every shape.
const LAYOUT: &str = r#"#[version = "0.0.5"]
def @main(%x: Tensor[(?, ?, 32), float32], %i: int64) {
  %0 = transpose(reshape(%x, newshape=[0, 0, 4, 8]), axes=[0, 2, 1, 3]);
  %1 = reshape(transpose(%0, axes=[0, 2, 1, 3]), newshape=[0, 0, 32]);
  %2 = take(%1, %i, axis=1, mode="wrap");
  %3 = strided_slice(%1, begin=[1], end=[9223372036854775807], strides=[1], axes=[1]);
  %4 = mean(%3, axis=[-1], keepdims=True);
  (%2, concatenate((%3, %3), axis=1), %4, %0)
}
"#;

/// Runs `text`'s `@main` at each of `args` on the VM against the interpreter, and checks that
/// every dynamic kernel is generic and nothing was compiled per shape.
fn generic_everywhere(text: &str, args: impl Iterator<Item = Vec<Value>>) {
    let exe = common::build(text, "generic.relay");
    generic_everywhere_in(&exe, text, args);
}

/// [`generic_everywhere`] on the executable `exe` of `text`.
fn generic_everywhere_in(
    exe: &relay_vm::Executable,
    text: &str,
    args: impl Iterator<Item = Vec<Value>>,
) {
    let module = common::typed(text, "generic.relay").expect("the program type-checks");
    let tol = common::tolerance(text);
    let mut vm = Vm::with_options(exe, VmOptions::default());
    for (case, args) in args.enumerate() {
        let got = vm
            .invoke("main", &args)
            .unwrap_or_else(|e| panic!("case {case}: {e}"));
        let expected = relay_interp::run(&module, "main", args, &InterpOptions::default())
            .unwrap_or_else(|e| panic!("the interpreter fails: {e}"));
        relay_interp::compare_values(&got, &expected, tol.0, tol.1)
            .unwrap_or_else(|why| panic!("case {case}: differs from the interpreter: {why}"));
    }
    assert_eq!(exe.cache.compiled(), 0, "no kernel was compiled per shape");
    for k in exe.kernels.iter().filter(|k| k.dynamic) {
        assert!(is_generic(k), "kernel {} is generic", k.name);
    }
}

#[test]
fn a_growing_loop_compiles_nothing_per_iteration() {
    let mut rng = relay_interp::SplitMix64::new(7);
    let cases = (0..12).map(|case| {
        let n = (rng.next_u64() % 40) as i64;
        let values = |len: i64, k: i64| -> Vec<f64> {
            (0..len)
                .map(|i| (((i * 7 + k * 13 + case) % 23) as f64 - 11.0) / 80.0)
                .collect()
        };
        vec![
            common::tensor(DType::F32, &[1, 64], &values(64, 1)),
            common::tensor(DType::F32, &[64, 64], &values(64 * 64, 2)),
            common::tensor(DType::I32, &[], &[n as f64]),
        ]
    });
    generic_everywhere(GROWING, cases);
}

#[test]
fn layout_kernels_run_at_fifty_random_shapes_and_compile_nothing() {
    let mut rng = relay_interp::SplitMix64::new(11);
    let cases = (0..50).map(|case| {
        let (batch, seq) = (1 + rng.next_u64() % 3, 1 + rng.next_u64() % 40);
        let index = (rng.next_u64() % 100) as f64 - 50.0;
        let n = (batch * seq * 32) as i64;
        let values: Vec<f64> = (0..n).map(|i| ((i * 5 + case) % 19) as f64 - 9.0).collect();
        vec![
            common::tensor(DType::F32, &[batch as i64, seq as i64, 32], &values),
            common::tensor(DType::I64, &[], &[index]),
        ]
    });
    generic_everywhere(LAYOUT, cases);
}

/// The repository's ONNX attention block with a dynamic batch and sequence
/// (`relay-onnx/tests/data/dynamic/`) as the importer writes it: layer norm, three
/// projections split into heads, scaled attention, the heads merged, a projection with a
/// residual and GELU, a token taken and the rest sliced. Every kernel is generic.
const BLOCK: &str = r#"#[version = "0.0.5"]
def @main(%x: Tensor[(?, ?, 32), float32], %ln_s: Tensor[(32), float32], %ln_b: Tensor[(32), float32], %scale: float32, %sqrt2: float32, %one: float32, %half: float32, %zero: int64, %weight_t: Tensor[(32, 32), float32], %weight_t_1: Tensor[(32, 32), float32], %weight_t_2: Tensor[(32, 32), float32], %weight_t_3: Tensor[(32, 32), float32]) {
  %0 = nn.layer_norm(%x, %ln_s, %ln_b, epsilon=9.999999747378752e-6f);
  %1 = nn.dense(%0, %weight_t, units=32);
  %2 = reshape(%1, newshape=[0, 0, 4, 8]);
  %3 = transpose(%2, axes=[0, 2, 1, 3]);
  %4 = nn.dense(%0, %weight_t_1, units=32);
  %5 = reshape(%4, newshape=[0, 0, 4, 8]);
  %6 = transpose(%5, axes=[0, 2, 3, 1]);
  %7 = nn.dense(%0, %weight_t_2, units=32);
  %8 = reshape(%7, newshape=[0, 0, 4, 8]);
  %9 = transpose(%8, axes=[0, 2, 1, 3]);
  %10 = reshape(%3, newshape=[-3, 0, 0]);
  %11 = reshape(%6, newshape=[-3, 0, 0]);
  %12 = nn.batch_matmul(%10, %11);
  %13 = reshape_like(%12, %3, lhs_end=1, rhs_end=2);
  %14 = divide(%13, %scale);
  %15 = nn.softmax(%14, axis=3);
  %16 = reshape(%15, newshape=[-3, 0, 0]);
  %17 = reshape(%9, newshape=[-3, 0, 0]);
  %18 = nn.batch_matmul(%16, %17);
  %19 = reshape_like(%18, %15, lhs_end=1, rhs_end=2);
  %20 = transpose(%19, axes=[0, 2, 1, 3]);
  %21 = reshape(%20, newshape=[0, 0, 32]);
  %22 = nn.dense(%21, %weight_t_3, units=32);
  %23 = add(%22, %x);
  %24 = divide(%23, %sqrt2);
  %25 = erf(%24);
  %26 = add(%25, %one);
  %27 = multiply(%23, %26);
  %28 = multiply(%27, %half);
  %29 = take(%28, %zero, axis=1, mode="wrap");
  %30 = strided_slice(%28, begin=[1], end=[9223372036854775807], strides=[1], axes=[1]);
  (%28, %29, %30)
}
"#;

#[test]
fn an_attention_block_runs_at_thirty_random_shapes_and_compiles_nothing() {
    let exe = common::build(BLOCK, "generic.relay");
    generic_everywhere_in(&exe, BLOCK, block_inputs(5, 30));
    // Saved and loaded, its generic kernels serve every shape as well.
    let bytes = exe.to_bytes().expect("the executable saves");
    let loaded = relay_vm::Executable::from_bytes(&bytes).expect("the executable loads");
    generic_everywhere_in(&loaded, BLOCK, block_inputs(6, 10));
}

/// `count` random inputs of the attention block, of random batch and sequence from `seed`.
fn block_inputs(seed: u64, count: i64) -> impl Iterator<Item = Vec<Value>> {
    let mut rng = relay_interp::SplitMix64::new(seed);
    (0..count).map(move |case| {
        let (batch, seq) = (1 + rng.next_u64() % 3, 1 + rng.next_u64() % 80);
        let values = |n: i64, k: i64| -> Vec<f64> {
            (0..n)
                .map(|i| (((i * 7 + k * 13 + case) % 23) as f64 - 11.0) / 16.0)
                .collect()
        };
        let t = |shape: &[i64], k| {
            common::tensor(DType::F32, shape, &values(shape.iter().product(), k))
        };
        let mut args = vec![
            t(&[batch as i64, seq as i64, 32], 1),
            t(&[32], 2),
            t(&[32], 3),
        ];
        // The scale, sqrt(2), one and a half.
        for v in [0.35, 1.41, 1.0, 0.5] {
            args.push(common::tensor(DType::F32, &[], &[v]));
        }
        args.push(common::tensor(DType::I64, &[], &[0.0]));
        for k in 8..12 {
            args.push(t(&[32, 32], k));
        }
        args
    })
}

/// The operators whose result shape depends on values (`dyn.*`, `arange`, `argwhere`), their
/// shapes computed from the input's shape and a run-time integer: each a generic kernel whose
/// shape function reads the values.
const VALUE_SHAPED: &str = r#"#[version = "0.0.5"]
def @main(%x: Tensor[(?, ?, 4), float32], %k: int64) {
  %0 = shape_of(%x, dtype="int64");
  %1 = take(%0, 0);
  %2 = take(%0, 1);
  %3 = arange(0i64, %2, 1i64, dtype="int64");
  %4 = dyn.broadcast_to(expand_dims(%3, axis=0), stack((%1, %2)));
  %5 = dyn.reshape(%x, stack((%2, multiply(%1, 4i64))), allowzero=True);
  %6 = dyn.tile(%x, stack((1i64, add(%k, 1i64), 1i64)));
  %7 = dyn.strided_slice(%x, stack((0i64, %k)), stack((%1, %2)), stack((1i64, 2i64)));
  %8 = dyn.full(1.5f, stack((%2, 3i64)), dtype="float16");
  %9 = argwhere(greater(%x, 0.5f));
  %10 = dyn.zeros(stack((%1, 2i64)), dtype="int8");
  %11 = dyn.ones(%0, dtype="bool");
  %12 = dyn.expand_dims(%x, 1i64, num_newaxis=2);
  %13 = dyn.squeeze(%12, stack((1i64, 2i64)));
  %14 = arange(0.5f, cast(%2, dtype="float32"), 0.25f, dtype="float32");
  (%3, %4, %5, %6, %7, %8, %9, %10, %11, %13, %14, dyn.broadcast_to(%x, stack((%k, %1, %2, 4i64))))
}
"#;

#[test]
fn value_shaped_operators_run_at_fifty_random_shapes_and_compile_nothing() {
    let mut rng = relay_interp::SplitMix64::new(13);
    let cases = (0..50).map(|case| {
        let (batch, seq) = (rng.next_u64() % 4, rng.next_u64() % 12);
        let k = (rng.next_u64() % 4) as f64;
        let n = (batch * seq * 4) as i64;
        let values: Vec<f64> = (0..n).map(|i| ((i * 5 + case) % 7) as f64 / 6.0).collect();
        vec![
            common::tensor(DType::F32, &[batch as i64, seq as i64, 4], &values),
            common::tensor(DType::I64, &[], &[k]),
        ]
    });
    generic_everywhere(VALUE_SHAPED, cases);
}
