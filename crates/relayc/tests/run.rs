//! Runs `relayc run` (the built binary): binding inputs from `.npy`/`.npz` files and random data,
//! the errors for missing, misshaped and mistyped inputs, `--output` files and usage errors.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};

use relay::npy::{read_npy_file, read_npz_file, write_npy, write_npz};
use relay::{DType, NDArray};

/// Adds two 2x3 float32 tensors.
const ADD: &str = r#"#[version = "0.0.5"]
def @main(%x: Tensor[(2, 3), float32], %y: Tensor[(2, 3), float32]) -> Tensor[(2, 3), float32] {
  add(%x, %y)
}
"#;

/// Returns a nested tuple: three tensor leaves of two dtypes.
const TUPLE: &str = r#"#[version = "0.0.5"]
def @main(%x: Tensor[(2), float32]) {
  (add(%x, %x), (%x, 7))
}
"#;

/// Returns its inputs unchanged, one of each kind of dtype.
const IDENTITY: &str = r#"#[version = "0.0.5"]
def @main(%f: Tensor[(64), float32], %i: Tensor[(64), int64], %u: Tensor[(64), uint8], %b: Tensor[(64), bool]) {
  (%f, %i, %u, %b)
}
"#;

/// A scratch directory under the system temporary directory, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(test: &str) -> Scratch {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("relayc-run-{}-{n}-{test}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    /// Writes a file and returns its path.
    fn file(&self, name: &str, bytes: &[u8]) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, bytes).unwrap();
        path
    }

    /// Writes a `.npy` file and returns its path.
    fn npy(&self, name: &str, array: &NDArray) -> PathBuf {
        self.file(name, &write_npy(array))
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn f32s(shape: &[i64], values: &[f64]) -> NDArray {
    NDArray::from_f64_slice(DType::F32, shape, values).unwrap()
}

/// Runs `relayc run` with `args`, stderr uncolored.
fn relayc_run(args: &[&dyn AsRef<std::ffi::OsStr>]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_relayc"));
    command.arg("run").env("NO_COLOR", "1");
    for arg in args {
        command.arg(arg);
    }
    command.output().unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Asserts the exit code and that stderr contains `needle`.
#[track_caller]
fn assert_fails(output: &Output, code: i32, needle: &str) {
    let err = stderr(output);
    assert_eq!(output.status.code(), Some(code), "stderr: {err}");
    assert!(err.contains(needle), "expected {needle:?} in stderr: {err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[track_caller]
fn assert_succeeds(output: &Output) {
    assert_eq!(
        output.status.code(),
        Some(0),
        "stderr: {}\nstdout: {}",
        stderr(output),
        String::from_utf8_lossy(&output.stdout)
    );
}

/// A scratch directory holding `ADD` as `add.relay` and good inputs `x.npy`, `y.npy`.
fn add_setup(test: &str) -> (Scratch, PathBuf, PathBuf, PathBuf) {
    let dir = Scratch::new(test);
    let program = dir.file("add.relay", ADD.as_bytes());
    let x = dir.npy("x.npy", &f32s(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]));
    let y = dir.npy("y.npy", &f32s(&[2, 3], &[0.5, 0.5, 0.5, -1.0, -1.0, -1.0]));
    (dir, program, x, y)
}

fn input(name: &str, path: &Path) -> String {
    format!("{name}={}", path.display())
}

#[test]
fn missing_input_names_the_parameter_and_its_type() {
    let (_dir, program, x, _) = add_setup("missing");
    let out = relayc_run(&[&program, &"--input", &input("x", &x)]);
    assert_fails(
        &out,
        1,
        "error: missing input `y` of type `Tensor[(2, 3), float32]`: pass --input y=PATH.npy, \
         --inputs INPUTS.npz or --random-inputs SEED",
    );
}

#[test]
fn inputs_npz_binds_parameters_by_name_and_input_overrides_it() {
    let (dir, program, x, y) = add_setup("inputs_npz");
    let xs = f32s(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let ys = f32s(&[2, 3], &[10.0; 6]);
    let both = dir.file(
        "both.npz",
        &relay::npy::write_npz(&[("x".to_string(), &xs), ("%y".to_string(), &ys)]),
    );
    for executor in ["vm", "interp"] {
        let out = relayc_run(&[&program, &"--inputs", &both, &"--executor", &executor]);
        assert_succeeds(&out);
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            "[[11., 12., 13.],\n [14., 15., 16.]]"
        );
    }
    // `--input` overrides an entry of the file.
    let out = relayc_run(&[&program, &"--inputs", &both, &"--input", &input("y", &y)]);
    assert_succeeds(&out);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "[[1.5, 2.5, 3.5],\n [3. , 4. , 5. ]]"
    );
    // A file with only some parameters leaves the rest missing.
    let only_x = dir.file(
        "only_x.npz",
        &relay::npy::write_npz(&[("x".to_string(), &xs)]),
    );
    let out = relayc_run(&[&program, &"--inputs", &only_x]);
    assert_fails(&out, 1, "error: missing input `y`");
    // An entry that names no parameter, and a file that is not there, are errors.
    let extra = dir.file(
        "extra.npz",
        &relay::npy::write_npz(&[("z".to_string(), &xs)]),
    );
    let out = relayc_run(&[&program, &"--inputs", &extra, &"--input", &input("x", &x)]);
    assert_fails(
        &out,
        1,
        "is not a parameter of `@main`; its parameters are `%x`, `%y`",
    );
    let out = relayc_run(&[&program, &"--inputs", &dir.path("absent.npz")]);
    assert_fails(&out, 1, "error: --inputs: cannot read");
}

#[test]
fn compressed_npz_output() {
    let dir = Scratch::new("compressed_output");
    let program = dir.file(
        "zeros.relay",
        br#"#[version = "0.0.5"]
def @main() { (zeros(shape=[256, 256], dtype="float32"), ones(shape=[3], dtype="int32")) }
"#,
    );
    let (plain, packed) = (dir.path("plain.npz"), dir.path("packed.npz"));
    assert_succeeds(&relayc_run(&[&program, &"--output", &plain]));
    assert_succeeds(&relayc_run(&[
        &program,
        &"--output",
        &packed,
        &"--compress",
    ]));
    let (plain_bytes, packed_bytes) = (
        std::fs::read(&plain).unwrap(),
        std::fs::read(&packed).unwrap(),
    );
    // Deflated entries (zip method 8 in the first local header), much smaller, same arrays.
    assert_eq!(u16::from_le_bytes([packed_bytes[8], packed_bytes[9]]), 8);
    assert!(
        packed_bytes.len() * 10 < plain_bytes.len(),
        "{} {}",
        packed_bytes.len(),
        plain_bytes.len()
    );
    let read = |bytes: &[u8]| relay::npy::read_npz(bytes).unwrap();
    let (a, b) = (read(&plain_bytes), read(&packed_bytes));
    assert_eq!(a.len(), 2);
    for ((na, xa), (nb, xb)) in a.iter().zip(&b) {
        assert_eq!((na, xa.shape(), xa.dtype()), (nb, xb.shape(), xb.dtype()));
        assert_eq!(xa.to_f64_vec(), xb.to_f64_vec());
    }
    // A .npy output is not compressed: bad usage.
    let out = relayc_run(&[&program, &"--output", &dir.path("x.npy"), &"--compress"]);
    assert_fails(
        &out,
        2,
        "--compress deflates the entries of a .npz --output",
    );
}

#[test]
fn a_parameter_that_is_not_a_tensor_says_how_to_call_the_function() {
    let dir = Scratch::new("list_param");
    let program = dir.file(
        "list.relay",
        br#"#[version = "0.0.5"]
type List[A] { Cons(A, List[A]), Nil }
def @main(%l: List[Tensor[(2), float32]]) -> int32 { 0 }
"#,
    );
    let x = dir.npy("x.npy", &f32s(&[2], &[1.0, 2.0]));
    for extra in [
        &[][..],
        &["--random-inputs", "1"],
        &["--input", &input("l", &x)],
    ] {
        let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&program];
        args.extend(extra.iter().map(|a| a as &dyn AsRef<std::ffi::OsStr>));
        let out = relayc_run(&args);
        assert_fails(
            &out,
            1,
            "input `l` has type `List[Tensor[(2), float32]]`, which is not a tensor",
        );
        assert!(
            stderr(&out).contains("relay::Vm::invoke"),
            "{}",
            stderr(&out)
        );
        assert!(!stderr(&out).contains("PATH.npy"), "{}", stderr(&out));
    }
}

#[test]
fn misshaped_input_is_an_error() {
    let (dir, program, x, _) = add_setup("misshaped");
    let y = dir.npy("bad.npy", &f32s(&[3, 2], &[0.0; 6]));
    let out = relayc_run(&[
        &program,
        &"--input",
        &input("x", &x),
        &"--input",
        &input("y", &y),
    ]);
    assert_fails(
        &out,
        1,
        "input `y`: expected `Tensor[(2, 3), float32]`, got a float32 tensor of shape (3, 2)",
    );
    assert!(stderr(&out).contains("bad.npy"), "{}", stderr(&out));
}

#[test]
fn mistyped_input_is_an_error() {
    let (dir, program, x, _) = add_setup("mistyped");
    let y = dir.npy(
        "y64.npy",
        &NDArray::from_f64_slice(DType::F64, &[2, 3], &[0.0; 6]).unwrap(),
    );
    let out = relayc_run(&[
        &program,
        &"--input",
        &input("x", &x),
        &"--input",
        &input("y", &y),
    ]);
    assert_fails(
        &out,
        1,
        "input `y`: expected `Tensor[(2, 3), float32]`, got a float64 tensor of shape (2, 3)",
    );
}

#[test]
fn unknown_input_name_lists_the_parameters() {
    let (_dir, program, x, y) = add_setup("unknown");
    let out = relayc_run(&[
        &program,
        &"--input",
        &input("x", &x),
        &"--input",
        &input("y", &y),
        &"--input",
        &input("z", &y),
    ]);
    assert_fails(
        &out,
        1,
        "--input `z`: `@main` has no parameter `%z`; its parameters are `%x`, `%y`",
    );
}

#[test]
fn bad_npy_files_are_errors() {
    let (dir, program, x, _) = add_setup("badnpy");
    let garbage = dir.file("garbage.npy", b"this is not numpy");
    let out = relayc_run(&[
        &program,
        &"--input",
        &input("x", &x),
        &"--input",
        &input("y", &garbage),
    ]);
    assert_fails(&out, 1, "bad magic");
    assert!(stderr(&out).contains("garbage.npy"), "{}", stderr(&out));

    let missing = dir.path("missing.npy");
    let out = relayc_run(&[
        &program,
        &"--input",
        &input("x", &x),
        &"--input",
        &input("y", &missing),
    ]);
    assert_fails(&out, 1, "cannot read");

    let bad_npz = dir.file("w.npz", b"PK not really");
    let out = relayc_run(&[&program, &"--params", &bad_npz, &"--random-inputs", &"1"]);
    assert_fails(&out, 1, "malformed .npz archive");
}

#[test]
fn output_npy_round_trips() {
    let (dir, program, x, y) = add_setup("outnpy");
    let out_path = dir.path("out.npy");
    let out = relayc_run(&[
        &program,
        &"--input",
        &input("x", &x),
        &"--input",
        &input("y", &y),
        &"--output",
        &out_path,
    ]);
    assert_succeeds(&out);
    let result = read_npy_file(&out_path).unwrap();
    assert_eq!(result, f32s(&[2, 3], &[1.5, 2.5, 3.5, 3.0, 4.0, 5.0]));
}

#[test]
fn output_npz_holds_every_leaf_in_order() {
    let dir = Scratch::new("outnpz");
    let program = dir.file("tuple.relay", TUPLE.as_bytes());
    let x = dir.npy("x.npy", &f32s(&[2], &[1.0, -2.0]));
    let out_path = dir.path("out.npz");
    let out = relayc_run(&[
        &program,
        &"--input",
        &input("x", &x),
        &"--output",
        &out_path,
    ]);
    assert_succeeds(&out);
    let leaves = read_npz_file(&out_path).unwrap();
    let names: Vec<&str> = leaves.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["0", "1", "2"]);
    assert_eq!(leaves[0].1, f32s(&[2], &[2.0, -4.0]));
    assert_eq!(leaves[1].1, f32s(&[2], &[1.0, -2.0]));
    assert_eq!(
        leaves[2].1,
        NDArray::from_i128_slice(DType::I32, &[], &[7]).unwrap()
    );

    // A tuple does not fit in a .npy file.
    let out = relayc_run(&[
        &program,
        &"--input",
        &input("x", &x),
        &"--output",
        &dir.path("out.npy"),
    ]);
    assert_fails(
        &out,
        1,
        "the result is a tuple, which a .npy file cannot hold",
    );
}

#[test]
fn result_is_printed_without_output() {
    let (_dir, program, x, y) = add_setup("print");
    let out = relayc_run(&[
        &program,
        &"--input",
        &input("x", &x),
        &"--input",
        &input("y", &y),
    ]);
    assert_succeeds(&out);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("1.5") && text.contains("3.5"), "{text}");
}

#[test]
fn params_bind_by_name_and_inputs_fill_the_rest() {
    let (dir, program, x, _) = add_setup("params");
    let y = f32s(&[2, 3], &[10.0; 6]);
    let unrelated = f32s(&[1], &[0.0]);
    let params = dir.file(
        "w.npz",
        &write_npz(&[("y".into(), &y), ("not_a_param".into(), &unrelated)]),
    );
    let out_path = dir.path("out.npy");
    let out = relayc_run(&[
        &program,
        &"--params",
        &params,
        &"--input",
        &input("x", &x),
        &"--output",
        &out_path,
    ]);
    assert_succeeds(&out);
    let result = read_npy_file(&out_path).unwrap();
    assert_eq!(result, f32s(&[2, 3], &[11.0, 12.0, 13.0, 14.0, 15.0, 16.0]));

    // Without --input x, x is still missing.
    let out = relayc_run(&[&program, &"--params", &params]);
    assert_fails(&out, 1, "missing input `x`");
}

#[test]
fn random_inputs_are_deterministic_and_in_range() {
    let dir = Scratch::new("random");
    let program = dir.file("identity.relay", IDENTITY.as_bytes());
    let run = |seed: &str, name: &str| {
        let path = dir.path(name);
        let out = relayc_run(&[&program, &"--random-inputs", &seed, &"--output", &path]);
        assert_succeeds(&out);
        std::fs::read(&path).unwrap()
    };
    let a = run("42", "a.npz");
    let b = run("42", "b.npz");
    let c = run("43", "c.npz");
    assert_eq!(a, b);
    assert_ne!(a, c);

    let leaves = read_npz_file(&dir.path("a.npz")).unwrap();
    let dtypes: Vec<DType> = leaves.iter().map(|(_, l)| l.dtype()).collect();
    assert_eq!(dtypes, [DType::F32, DType::I64, DType::U8, DType::BOOL]);
    let f = leaves[0].1.to_f64_vec();
    assert!(f.iter().all(|v| (-1.0..1.0).contains(v)), "{f:?}");
    assert!(f.iter().any(|&v| v < 0.0) && f.iter().any(|&v| v > 0.0));
    let i = leaves[1].1.to_i128_vec();
    assert!(i.iter().all(|v| (-10..10).contains(v)), "{i:?}");
    assert!(i.iter().any(|&v| v < 0));
    let u = leaves[2].1.to_i128_vec();
    assert!(u.iter().all(|v| (0..10).contains(v)), "{u:?}");
    let bools = leaves[3].1.to_bool_vec();
    assert!(bools.contains(&true) && bools.contains(&false));

    // Explicit inputs win over random data.
    let f = dir.npy("f.npy", &f32s(&[64], &[5.0; 64]));
    let path = dir.path("d.npz");
    let out = relayc_run(&[
        &program,
        &"--random-inputs",
        &"42",
        &"--input",
        &input("f", &f),
        &"--output",
        &path,
    ]);
    assert_succeeds(&out);
    let leaves = read_npz_file(&path).unwrap();
    assert_eq!(leaves[0].1, f32s(&[64], &[5.0; 64]));
}

#[test]
fn random_inputs_need_known_tensor_types() {
    let dir = Scratch::new("randomany");
    let any = dir.file(
        "any.relay",
        br#"#[version = "0.0.5"]
def @main(%x: Tensor[(?, 3), float32]) { %x }
"#,
    );
    let out = relayc_run(&[&any, &"--random-inputs", &"1"]);
    assert_fails(
        &out,
        1,
        "cannot make a random input `x`: its type `Tensor[(?, 3), float32]` has an unknown \
         dimension; pass --input x=PATH.npy",
    );
    let tuple = dir.file(
        "tuple.relay",
        br#"#[version = "0.0.5"]
def @main(%t: (float32, float32)) { %t.0 }
"#,
    );
    let out = relayc_run(&[&tuple, &"--random-inputs", &"1"]);
    assert_fails(
        &out,
        1,
        "input `t` has type `(float32, float32)`, which is not a tensor",
    );
}

#[test]
fn missing_entry_lists_the_globals() {
    let (_dir, program, _, _) = add_setup("entry");
    let out = relayc_run(&[&program, &"--entry", &"forward", &"--random-inputs", &"1"]);
    assert_fails(&out, 1, "no function `@forward`");
    assert!(
        stderr(&out).contains("it defines `@main`"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn bad_programs_are_user_errors() {
    let dir = Scratch::new("badprog");
    let parse = dir.file("parse.relay", b"def @main() { %y }");
    assert_fails(&relayc_run(&[&parse]), 1, "error");
    let types = dir.file(
        "types.relay",
        br#"#[version = "0.0.5"]
def @main(%x: Tensor[(2, 3), float32], %y: Tensor[(4), float32]) { add(%x, %y) }
"#,
    );
    let out = relayc_run(&[&types, &"--random-inputs", &"1"]);
    assert_fails(&out, 1, "relay::type");
    let missing = dir.path("missing.relay");
    assert_fails(&relayc_run(&[&missing]), 1, "cannot read");
}

#[test]
fn usage_errors_exit_2() {
    let (dir, program, x, _) = add_setup("usage");
    assert_fails(
        &relayc_run(&[&program, &"--output", &dir.path("out.txt")]),
        2,
        "must end in `.npy` or `.npz`",
    );
    assert_fails(
        &relayc_run(&[&program, &"--input", &x]),
        2,
        "expected NAME=PATH.npy",
    );
    assert_fails(&relayc_run(&[&program, &"--random-inputs", &"abc"]), 2, "");
    assert_fails(&relayc_run(&[&program, &"--max-frames", &"-1"]), 2, "");
    assert_fails(&relayc_run(&[&program, &"--executor", &"jit"]), 2, "");
    assert_fails(&relayc_run(&[]), 2, "FILE");
}

/// Re-rounds a float8 input to bfloat16 and widens it: kernels that only convert.
const NARROW: &str = r#"#[version = "0.0.5"]
def @main(%x: Tensor[(4), float8_e4m3fn]) {
  %0 = cast(%x, dtype="bfloat16");
  (%0, cast(%0, dtype="float32"))
}
"#;

/// A bfloat16 or float8 parameter takes its bits (`uint8` here) or float values; the results
/// are written as raw elements, read back as their bits.
#[test]
fn narrow_float_inputs_take_bits_or_values() {
    let dir = Scratch::new("narrow");
    let program = dir.file("narrow.relay", NARROW.as_bytes());
    // 1, -2.5, 448 (the largest) and NaN in float8_e4m3fn.
    let bits = NDArray::from_i128_slice(DType::U8, &[4], &[0x38, 0xc2, 0x7e, 0x7f]).unwrap();
    let values = f32s(&[4], &[1.0, -2.5, 448.0, f64::NAN]);
    for (name, given) in [("bits.npy", bits), ("values.npy", values)] {
        let x = dir.npy(name, &given);
        let out_path = dir.path("out.npz");
        let out = relayc_run(&[
            &program,
            &"--input",
            &input("x", &x),
            &"--output",
            &out_path,
        ]);
        assert_succeeds(&out);
        let leaves = read_npz_file(&out_path).unwrap();
        // bfloat16 bits of 1, -2.5, 448 and its NaN.
        let want = NDArray::from_i128_slice(DType::U16, &[4], &[0x3f80, 0xc020, 0x43e0, 0x7fc0]);
        assert_eq!(leaves[0].1, want.unwrap(), "{name}");
        let widened = leaves[1].1.to_f64_vec();
        assert_eq!(widened[..3], [1.0, -2.5, 448.0], "{name}");
        assert!(widened[3].is_nan(), "{name}");
    }
    let ints = dir.npy(
        "ints.npy",
        &NDArray::from_i128_slice(DType::I32, &[4], &[1, 2, 3, 4]).unwrap(),
    );
    let out = relayc_run(&[&program, &"--input", &input("x", &ints)]);
    assert_fails(&out, 1, "expected `Tensor[(4), float8_e4m3fn]`");
}
