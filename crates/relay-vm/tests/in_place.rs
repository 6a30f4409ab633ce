//! `strided_set` writes its result over its data when the data is dead after the call and
//! nothing else holds it (`invoke_packed_update`): a loop filling a preallocated buffer row by
//! row keeps one buffer live, not two. Where anything else still holds the data — a later use,
//! the caller's argument, a tuple — the result is a copy and the data is unchanged. Every
//! result equals the interpreter's under every pipeline configuration.

mod common;

use relay_interp::InterpOptions;
use relay_ir::{DType, Value};
use relay_vm::{Vm, VmOptions};

/// Fills row `i` of a 256 × 1024 `float32` buffer (1 MiB) with `i`, for `i` below `%n`.
const FILL: &str = r#"#[version = "0.0.5"]
def @fill(%i: int32, %n: int32, %buf: Tensor[(256, 1024), float32]) -> Tensor[(256, 1024), float32] {
  if (greater_equal(%i, %n)) {
    %buf
  } else {
    let %row = full(cast(%i, dtype="float32"), shape=[1, 1024], dtype="float32");
    let %at = stack((%i, 0), axis=0);
    let %to = stack((add(%i, 1), 1024), axis=0);
    let %next = strided_set(%buf, %row, %at, %to, ones(shape=[2], dtype="int32"));
    @fill(add(%i, 1), %n, %next)
  }
}

def @main(%n: int32) -> Tensor[(256, 1024), float32] {
  @fill(0, %n, zeros(shape=[256, 1024], dtype="float32"))
}
"#;

const MIB: usize = 1 << 20;

fn interpreted(text: &str, name: &str, inputs: &[Value]) -> Value {
    let module = common::typed(text, name).expect("the program type-checks");
    relay_interp::run(&module, "main", inputs.to_vec(), &InterpOptions::default())
        .unwrap_or_else(|e| panic!("the interpreter fails: {e}"))
}

#[test]
fn a_loop_fills_one_preallocated_buffer_in_place() {
    let n = common::scalar(DType::I32, 200.0);
    let expected = interpreted(FILL, "fill.relay", std::slice::from_ref(&n));
    for config in common::Config::ALL {
        let exe = common::build_with(FILL, "fill.relay", config);
        let bytecode = common::disassemble(&exe);
        // Below opt level 1 nothing is killed, so no input is known dead: every write copies.
        let in_place = config.opt_level >= 1;
        assert_eq!(
            bytecode.contains("invoke_packed_update"),
            in_place,
            "{config}:\n{bytecode}"
        );
        let mut vm = Vm::with_options(
            &exe,
            VmOptions {
                threads: 1,
                ..VmOptions::default()
            },
        );
        let got = vm
            .invoke("main", std::slice::from_ref(&n))
            .expect("the VM runs");
        relay_interp::compare_values(&got, &expected, 0.0, 0.0)
            .unwrap_or_else(|why| panic!("{config}: differs from the interpreter: {why}"));
        // The first write copies the constant zeros; every later one writes in place, so the
        // buffer and its copy were never both live again. A copy per row would keep 2 MiB live.
        let stats = vm.allocator_stats();
        assert_eq!(
            stats.peak_live_bytes < MIB + MIB / 2,
            in_place,
            "{config}: {stats:?}\n{bytecode}"
        );
    }
}

/// `strided_set` of data that is still read afterwards, or held by a tuple.
const SHARED: &str = r#"#[version = "0.0.5"]
def @main(%x: Tensor[(3, 4), float32], %v: Tensor[(1, 4), float32]) {
  let %at = stack((1, 0), axis=0);
  let %to = stack((2, 4), axis=0);
  let %s = stack((1, 1), axis=0);
  let %y = strided_set(%x, %v, %at, %to, %s);
  let %t = (%y, 1f);
  let %z = strided_set(%t.0, %v, stack((2, 0), axis=0), stack((3, 4), axis=0), %s);
  (%x, %y, %z, %t)
}
"#;

/// `strided_set` of the caller's argument, dead after the call.
const ARGUMENT: &str = r#"#[version = "0.0.5"]
def @main(%x: Tensor[(3, 4), float32], %v: Tensor[(1, 4), float32]) {
  strided_set(%x, %v, stack((0, 0), axis=0), stack((1, 4), axis=0), stack((1, 1), axis=0))
}
"#;

#[test]
fn data_anything_else_holds_is_copied_not_written() {
    let x = common::tensor(
        DType::F32,
        &[3, 4],
        &(0..12).map(f64::from).collect::<Vec<_>>(),
    );
    let v = common::tensor(DType::F32, &[1, 4], &[-1.0, -2.0, -3.0, -4.0]);
    let before = x.as_tensor().expect("a tensor").as_bytes().to_vec();
    let inputs = [x.clone(), v];
    for (text, name) in [(SHARED, "shared.relay"), (ARGUMENT, "argument.relay")] {
        let expected = interpreted(text, name, &inputs);
        for config in common::Config::ALL {
            let exe = common::build_with(text, name, config);
            let got = Vm::new(&exe).invoke("main", &inputs).expect("the VM runs");
            relay_interp::compare_values(&got, &expected, 0.0, 0.0)
                .unwrap_or_else(|why| panic!("{name}, {config}: {why}"));
            // The caller's array is never written.
            assert_eq!(x.as_tensor().expect("a tensor").as_bytes(), before);
        }
    }
}
