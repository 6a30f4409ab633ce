//! The models in the top-level `examples/` directory, run the way `examples/README.md` says
//! (`relayc run examples/NAME.relay --random-inputs 0` from the workspace root): each one runs in
//! the reference interpreter with results of the expected shapes and meaning (probabilities sum
//! to one, the tree visits its 11 nodes), runs on the default executor and on the VM with the
//! same printed and saved results within a float tolerance, and goes through `relayc opt` and
//! `relayc build`.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{TempFile, code, stderr, stdout};
use relay::NDArray;
use relay::npy::read_npz_file;

/// An example and the shapes of its result's tensor leaves, in depth-first order.
struct Example {
    name: &'static str,
    leaves: &'static [&'static [i64]],
}

/// Every example; the directory must hold exactly these.
const EXAMPLES: &[Example] = &[
    Example {
        name: "mlp",
        leaves: &[&[1, 10]],
    },
    Example {
        name: "resnet_block",
        leaves: &[&[1, 10]],
    },
    Example {
        name: "lstm",
        leaves: &[&[1, 32]],
    },
    Example {
        name: "gru_list",
        leaves: &[&[1, 4], &[1, 4], &[1, 4], &[1, 4], &[1, 4], &[1, 4]],
    },
    Example {
        name: "tree",
        leaves: &[&[1, 3], &[]],
    },
];

/// Relative and absolute tolerance between executors: the kernels may sum in another order
/// than the interpreter.
const RTOL: f64 = 1e-3;
const ATOL: f64 = 1e-5;

/// The workspace root, where the README's commands run.
fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The example's path relative to the workspace root, as the README writes it.
fn relative_path(name: &str) -> String {
    format!("examples/{name}.relay")
}

/// Runs `relayc` from the workspace root with colors off.
fn relayc_at_root(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_relayc"))
        .args(args)
        .current_dir(workspace_root())
        .env("NO_COLOR", "1")
        .output()
        .unwrap()
}

/// Runs an example with `--random-inputs 0` and the extra arguments, requiring success; returns
/// standard output.
fn run_example(name: &str, extra: &[&str]) -> String {
    let path = relative_path(name);
    let mut args = vec!["run", path.as_str(), "--random-inputs", "0"];
    args.extend_from_slice(extra);
    let output = relayc_at_root(&args);
    assert_eq!(
        code(&output),
        0,
        "relayc {} failed:\n{}",
        args.join(" "),
        stderr(&output)
    );
    stdout(&output)
}

/// Runs an example with `--output` into a fresh `.npz` file and returns its tensors in order.
fn run_example_npz(name: &str, executor: &[&str]) -> Vec<NDArray> {
    let file = TempFile::path_for(&format!("example-{name}.npz"));
    let mut extra = executor.to_vec();
    extra.extend_from_slice(&["--output", file.arg()]);
    let printed = run_example(name, &extra);
    assert_eq!(printed, "", "{name}: --output printed something");
    let entries = read_npz_file(file.path()).unwrap();
    for (i, (key, _)) in entries.iter().enumerate() {
        assert_eq!(key, &i.to_string(), "{name}: npz keys out of order");
    }
    entries.into_iter().map(|(_, array)| array).collect()
}

/// Printed text split into its numbers and the rest with whitespace removed, so that two
/// printings of close values compare however numpy-style formatting aligned them.
fn split_numbers(text: &str) -> (String, Vec<f64>) {
    let chars: Vec<char> = text.chars().collect();
    let mut skeleton = String::new();
    let mut numbers = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied().unwrap_or(' ');
        if c.is_whitespace() {
            i += 1;
        } else if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            match word.as_str() {
                "nan" => numbers.push(f64::NAN),
                "inf" => numbers.push(f64::INFINITY),
                _ => skeleton.push_str(&word),
            }
        } else if c == '-' && chars[i + 1..].starts_with(&['i', 'n', 'f']) {
            numbers.push(f64::NEG_INFINITY);
            i += 4;
        } else if c.is_ascii_digit()
            || (c == '-' && (next.is_ascii_digit() || next == '.'))
            || (c == '.' && next.is_ascii_digit())
        {
            let start = i;
            i += 1;
            while i < chars.len() {
                let d = chars[i];
                let exponent_sign = (d == '-' || d == '+') && matches!(chars[i - 1], 'e' | 'E');
                if d.is_ascii_digit() || d == '.' || d == 'e' || d == 'E' || exponent_sign {
                    i += 1;
                } else {
                    break;
                }
            }
            let token: String = chars[start..i].iter().collect();
            let value: f64 = token
                .parse()
                .unwrap_or_else(|e| panic!("bad number `{token}` in {text}: {e}"));
            numbers.push(value);
        } else {
            skeleton.push(c);
            i += 1;
        }
    }
    (skeleton, numbers)
}

/// Checks two printed results: the same structure and numbers within the tolerance.
fn assert_printed_close(what: &str, actual: &str, expected: &str) {
    let (actual_skeleton, actual_numbers) = split_numbers(actual);
    let (expected_skeleton, expected_numbers) = split_numbers(expected);
    assert_eq!(
        actual_skeleton, expected_skeleton,
        "{what}: printed structure differs:\n{actual}\nexpected:\n{expected}"
    );
    assert_eq!(
        actual_numbers.len(),
        expected_numbers.len(),
        "{what}: printed {} numbers, expected {}:\n{actual}\nexpected:\n{expected}",
        actual_numbers.len(),
        expected_numbers.len()
    );
    for (i, (a, e)) in actual_numbers.iter().zip(&expected_numbers).enumerate() {
        assert!(
            relay::interp::floats_close(*a, *e, RTOL, ATOL),
            "{what}: printed number {i} is {a}, expected {e}:\n{actual}\nexpected:\n{expected}"
        );
    }
}

/// Every row of a 2-d probability tensor is non-negative and sums to one.
fn assert_probabilities(what: &str, array: &NDArray) {
    let shape = array.shape();
    assert_eq!(shape.len(), 2, "{what}: not a matrix");
    let width = usize::try_from(shape[1]).unwrap();
    let values = array.to_f64_vec();
    for row in values.chunks(width) {
        assert!(
            row.iter().all(|p| (0.0..=1.0).contains(p)),
            "{what}: not probabilities: {row:?}"
        );
        let sum: f64 = row.iter().sum();
        assert!((sum - 1.0).abs() < 1e-4, "{what}: sums to {sum}: {row:?}");
    }
}

/// Checks what each example's result means, beyond its shapes.
fn assert_meaning(example: &Example, leaves: &[NDArray]) {
    let name = example.name;
    match name {
        "mlp" | "resnet_block" | "gru_list" => {
            for (i, leaf) in leaves.iter().enumerate() {
                assert_probabilities(&format!("{name} leaf {i}"), leaf);
            }
        }
        "lstm" => {
            // h = o * tanh(c) with o in (0, 1): strictly inside (-1, 1), and not all zero.
            let h = leaves[0].to_f64_vec();
            assert!(h.iter().all(|v| v.abs() < 1.0), "lstm: |h| >= 1: {h:?}");
            assert!(h.iter().any(|v| v.abs() > 1e-3), "lstm: h is zero: {h:?}");
        }
        "tree" => {
            assert_probabilities("tree leaf 0", &leaves[0]);
            assert_eq!(
                leaves[1].to_f64_vec(),
                vec![11.0],
                "tree: 6 leaves and 5 inner nodes"
            );
        }
        other => panic!("no expectations for example `{other}`"),
    }
}

/// Checks a run's tensors against the example's leaf shapes.
fn assert_leaf_shapes(example: &Example, leaves: &[NDArray], executor: &str) {
    let shapes: Vec<&[i64]> = leaves.iter().map(NDArray::shape).collect();
    assert_eq!(
        shapes, example.leaves,
        "{} ({executor}): result leaf shapes",
        example.name
    );
}

#[test]
fn examples_directory_holds_the_documented_models() {
    let dir = workspace_root().join("examples");
    let mut found: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "relay"))
        .map(|path| path.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    found.sort();
    let mut expected: Vec<&str> = EXAMPLES.iter().map(|e| e.name).collect();
    expected.sort_unstable();
    assert_eq!(found, expected, "the .relay files in {}", dir.display());

    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
    for example in EXAMPLES {
        let command = format!(
            "relayc run {} --random-inputs 0",
            relative_path(example.name)
        );
        assert!(
            readme.contains(&command),
            "examples/README.md does not show `{command}`"
        );
        let text =
            std::fs::read_to_string(workspace_root().join(relative_path(example.name))).unwrap();
        let mut lines = text.lines();
        assert_eq!(
            lines.next(),
            Some(r#"#[version = "0.0.5"]"#),
            "{}",
            example.name
        );
        assert!(
            lines.next().is_some_and(|l| l.starts_with("// ")),
            "{}: the second line is not a comment saying what it is",
            example.name
        );
        assert!(
            text.contains(&command),
            "{}: its comment does not show `{command}`",
            example.name
        );
    }
}

#[test]
fn examples_run_in_the_interpreter() {
    for example in EXAMPLES {
        let leaves = run_example_npz(example.name, &["--executor", "interp"]);
        assert_leaf_shapes(example, &leaves, "interp");
        assert_meaning(example, &leaves);
        let printed = run_example(example.name, &["--executor", "interp"]);
        assert!(printed.ends_with('\n'), "{}: {printed:?}", example.name);
    }
}

#[test]
fn examples_run_the_same_on_the_vm_as_in_the_interpreter() {
    for example in EXAMPLES {
        let name = example.name;
        let reference = run_example_npz(name, &["--executor", "interp"]);
        let reference_printed = run_example(name, &["--executor", "interp"]);
        for executor in [&[][..], &["--executor", "vm"][..]] {
            let label = if executor.is_empty() {
                "default executor".to_string()
            } else {
                executor.join(" ")
            };
            let leaves = run_example_npz(name, executor);
            assert_leaf_shapes(example, &leaves, &label);
            for (i, (actual, expected)) in leaves.iter().zip(&reference).enumerate() {
                if let Some(problem) = relay::interp::compare_tensors(actual, expected, RTOL, ATOL)
                {
                    panic!("{name} ({label}) leaf {i} differs from the interpreter's: {problem}");
                }
            }
            assert_meaning(example, &leaves);
            let printed = run_example(name, executor);
            assert_printed_close(&format!("{name} ({label})"), &printed, &reference_printed);
        }
    }
}

#[test]
fn examples_go_through_the_pass_pipeline_and_the_kernel_compiler() {
    for example in EXAMPLES {
        let path = relative_path(example.name);
        for command in ["check", "opt", "build"] {
            let output = relayc_at_root(&[command, path.as_str()]);
            assert_eq!(
                code(&output),
                0,
                "relayc {command} {path} failed:\n{}",
                stderr(&output)
            );
        }
    }
}

#[test]
fn printed_numbers_split_from_the_structure() {
    let (skeleton, numbers) =
        split_numbers("Cons([[ 1.5e-03, -2. ],\n [nan, -inf]], Nil)\n(x, 11)");
    assert_eq!(skeleton, "Cons([[,],[,]],Nil)(x,)");
    assert_eq!(numbers.len(), 5);
    assert_eq!(numbers[0], 1.5e-3);
    assert_eq!(numbers[1], -2.0);
    assert!(numbers[2].is_nan());
    assert_eq!(numbers[3], f64::NEG_INFINITY);
    assert_eq!(numbers[4], 11.0);
}
