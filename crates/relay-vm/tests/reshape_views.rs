//! Reshape-only fused groups (`reshape`, `squeeze`, `expand_dims`, `nn.batch_flatten`,
//! `reshape_like` of one tensor) run as `reshape_tensor` views: no kernel, no storage. Their
//! results equal the interpreter's under every pipeline configuration, the only storage
//! allocated is the computing kernels' outputs, and a `?` dimension of a view is inferred at
//! run time (an error, not a panic, when the element count does not fit).

mod common;

use relay_interp::InterpOptions;
use relay_ir::{DType, NDArray, Value};
use relay_vm::{Instruction, Vm, VmErrorKind, VmOptions};

/// Three computing kernels (two softmaxes and a dense) and two reshape-only groups: the
/// softmax's result flattened for the dense, and the dense's result reshaped (`expand_dims`,
/// `reshape`, `squeeze`) on the way out.
const PROGRAM: &str = r#"#[version = "0.0.5"]
def @main(%x: Tensor[(4, 40, 40), float32], %w: Tensor[(16, 1600), float32]) {
  %0 = nn.softmax(%x, axis=-1);
  %1 = reshape(%0, newshape=[4, 1600]);
  %2 = nn.dense(%1, %w, units=16);
  %3 = nn.softmax(%2, axis=-1);
  squeeze(reshape(expand_dims(%3, axis=0), newshape=[1, 8, 8]), axis=[0])
}
"#;

/// How many times an instruction of kind `name` ran, by the profile.
fn executed(profile: &relay_vm::Profile, name: &str) -> u64 {
    let kind = Instruction::KINDS
        .iter()
        .position(|k| *k == name)
        .unwrap_or_else(|| panic!("no instruction kind `{name}`"));
    profile.instructions[kind].count
}

#[test]
fn reshape_only_groups_are_views_and_allocate_nothing() {
    let module = common::typed(PROGRAM, "reshape_views.relay").expect("the program type-checks");
    let inputs = common::main_inputs(&module, 0);
    let expected = relay_interp::run(&module, "main", inputs.clone(), &InterpOptions::default())
        .unwrap_or_else(|e| panic!("the interpreter fails: {e}"));
    let tol = common::tolerance(PROGRAM);
    for config in common::Config::ALL {
        let exe = common::build_with(PROGRAM, "reshape_views.relay", config);
        let bytecode = common::disassemble(&exe);
        assert!(bytecode.contains("reshape_tensor"), "{config}:\n{bytecode}");
        for kernel in &exe.kernels {
            let name = &kernel.name;
            assert!(
                !["reshape", "squeeze", "expand_dims"]
                    .iter()
                    .any(|op| name.contains(op)),
                "{config}: a reshape-only group is a kernel `{name}`:\n{bytecode}"
            );
        }
        let mut vm = Vm::with_options(
            &exe,
            VmOptions {
                profile: true,
                threads: 1,
                ..VmOptions::default()
            },
        );
        let got = vm.invoke("main", &inputs).expect("the VM runs");
        relay_interp::compare_values(&got, &expected, tol.0, tol.1)
            .unwrap_or_else(|why| panic!("{config}: differs from the interpreter: {why}"));
        assert_eq!(
            got.as_tensor().expect("a tensor").shape(),
            [8, 8],
            "{config}"
        );
        let profile = vm.take_profile().expect("profiling is on");
        let stats = vm.allocator_stats();
        // Every kernel has one output, and nothing else allocates: at opt level 0 each reshape
        // is its own group, at opt level 2 they form two groups, and all are views.
        let kernel_calls: u64 = profile.kernels.iter().map(|k| k.calls).sum();
        assert_eq!(kernel_calls, 3, "{config}:\n{profile}");
        assert!(
            executed(&profile, "reshape_tensor") >= 2,
            "{config}:\n{profile}"
        );
        if config.plan_memory {
            assert!(stats.requests <= kernel_calls, "{config}: {stats:?}");
        } else {
            assert_eq!(stats.requests, kernel_calls, "{config}: {stats:?}");
        }
    }
}

/// A view whose result has one `?` dimension: `vm.reshape_tensor` with `-1` there.
const DYNAMIC: &str = r#"#[version = "0.0.5"]
def @main(%x: Tensor[(?, 6), float32]) -> Tensor[(?, 2, 3), float32] {
  reshape(nn.softmax(%x, axis=-1), newshape=[-1, 2, 3])
}
"#;

#[test]
fn a_question_mark_dimension_is_inferred_at_run_time() {
    let module = common::typed(DYNAMIC, "dynamic_view.relay").expect("the program type-checks");
    let tol = common::tolerance(DYNAMIC);
    for config in common::Config::ALL {
        let exe = common::build_with(DYNAMIC, "dynamic_view.relay", config);
        let bytecode = common::disassemble(&exe);
        assert!(bytecode.contains("reshape_tensor"), "{config}:\n{bytecode}");
        let mut vm = Vm::new(&exe);
        for rows in [1i64, 5, 0] {
            let values: Vec<f64> = (0..rows * 6).map(|i| (i as f64) * 0.25 - 1.0).collect();
            let x = common::tensor(DType::F32, &[rows, 6], &values);
            let got = vm
                .invoke("main", std::slice::from_ref(&x))
                .expect("the VM runs");
            let expected = relay_interp::run(&module, "main", vec![x], &InterpOptions::default())
                .unwrap_or_else(|e| panic!("the interpreter fails: {e}"));
            assert_eq!(
                got.as_tensor().expect("a tensor").shape(),
                [rows, 2, 3],
                "{config}"
            );
            relay_interp::compare_values(&got, &expected, tol.0, tol.1)
                .unwrap_or_else(|why| panic!("{config}, {rows} rows: {why}"));
        }
    }
}

/// `vm.reshape_tensor` with a shape computed at run time: one `-1` is inferred; two, another
/// negative dimension, or a count the shape does not fit are errors like a reshape kernel's.
const SHAPE_ARGUMENT: &str = r#"#[version = "0.0.5"]
def @main(%x: Tensor[(4, 6), float32], %shape: Tensor[(2), int64]) -> Tensor[(?, ?), float32] {
  vm.reshape_tensor(%x, %shape, newshape=[-1, -1])
}
"#;

#[test]
fn minus_one_in_a_run_time_shape() {
    let exe = common::build(SHAPE_ARGUMENT, "shape_argument.relay");
    let mut vm = Vm::new(&exe);
    let values: Vec<f64> = (0..24).map(f64::from).collect();
    let x = common::tensor(DType::F32, &[4, 6], &values);
    let shape = |dims: &[i128]| {
        Value::tensor(NDArray::from_i128_slice(DType::I64, &[2], dims).expect("a shape"))
    };
    let run = |vm: &mut Vm, dims: &[i128]| vm.invoke("main", &[x.clone(), shape(dims)]);
    let got = run(&mut vm, &[-1, 8]).expect("the VM runs");
    let got = got.as_tensor().expect("a tensor");
    assert_eq!(got.shape(), [3, 8]);
    assert_eq!(got.to_f64_vec(), values);
    let got = run(&mut vm, &[12, -1]).expect("the VM runs");
    assert_eq!(got.as_tensor().expect("a tensor").shape(), [12, 2]);
    for (dims, kind, why) in [
        (&[-1, -1][..], VmErrorKind::Kernel, "more than one -1"),
        (&[-1, 5], VmErrorKind::Kernel, "cannot reshape 24 elements"),
        (&[-1, 0], VmErrorKind::Kernel, "cannot reshape 24 elements"),
        (&[5, 5], VmErrorKind::Kernel, "cannot reshape"),
        (&[-3, 8], VmErrorKind::Kernel, "-3 is not a valid extent"),
    ] {
        let err = run(&mut vm, dims).expect_err("rejected");
        assert_eq!(err.kind, kind, "{dims:?}: {err}");
        assert!(err.to_string().contains(why), "{dims:?}: {err}");
    }
    // The VM still runs good inputs.
    assert!(run(&mut vm, &[2, -1]).is_ok());
}

/// At opt level 0 `add` of two scalars is a scalar kernel the VM computes unboxed, and the
/// `expand_dims` after it a view of that scalar, boxed first.
const SCALAR: &str = r#"#[version = "0.0.5"]
def @main(%a: int32, %b: int32) -> Tensor[(1), int32] {
  expand_dims(add(%a, %b), axis=0)
}
"#;

#[test]
fn a_view_of_an_unboxed_scalar() {
    for config in common::Config::ALL {
        let exe = common::build_with(SCALAR, "scalar_view.relay", config);
        let mut vm = Vm::new(&exe);
        let got = vm
            .invoke(
                "main",
                &[
                    common::scalar(DType::I32, 40.0),
                    common::scalar(DType::I32, 2.0),
                ],
            )
            .unwrap_or_else(|e| panic!("{config}: {e}\n{}", common::disassemble(&exe)));
        let got = got.as_tensor().expect("a tensor");
        assert_eq!(got.shape(), [1], "{config}");
        assert_eq!(got.to_i128_vec(), [42], "{config}");
    }
}
