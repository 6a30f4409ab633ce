//! Dynamic kernels are specialized once per distinct argument shapes: repeated calls with
//! shapes already seen compile nothing (the call site keeps its specializations), new shapes
//! compile once each, and every result equals the interpreter's. Those the kernel library
//! computes whole (matrix products, softmax) are one generic kernel for every shape.

mod common;

use relay_interp::InterpOptions;
use relay_ir::{DType, Value};
use relay_vm::{Vm, VmOptions};

/// A fused elementwise chain and a dense layer over a `?` batch dimension.
const PROGRAM: &str = r#"#[version = "0.0.5"]
def @main(%x: Tensor[(?, 64), float32], %y: Tensor[(?, 64), float32], %w: Tensor[(32, 64), float32]) {
  %0 = add(multiply(%x, 0.5f), %y);
  (%0, nn.dense(%0, %w, units=32))
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
