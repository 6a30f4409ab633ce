//! The architecture invariants of docs/design.md that Cargo can check: which workspace crates
//! each crate may depend on. Read from `cargo metadata`, so a new dependency that breaks a
//! layer fails `cargo test` with the crate, the dependency and the rule it breaks.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use serde_json::Value;

/// What each workspace crate may name in its `[dependencies]` among the workspace's crates.
/// `None`: anything (test tooling). A crate missing here is an error: a new crate states its
/// place in the layers.
fn allowed(name: &str) -> Option<Option<&'static [&'static str]>> {
    let rule: Option<&'static [&'static str]> = match name {
        "relay-runtime" | "relay-testing" => Some(&[]),
        // The host kernel library knows nothing of Relay: pointers, strides and sizes.
        "relay-linalg" => Some(&["relay-runtime"]),
        "relay-ir" => Some(&["relay-runtime"]),
        "relay-ops" | "relay-types" => Some(&["relay-runtime", "relay-ir"]),
        "relay-syntax" | "relay-interp" => Some(&["relay-runtime", "relay-ir", "relay-ops"]),
        "relay-passes" | "relay-onnx" => {
            Some(&["relay-runtime", "relay-ir", "relay-ops", "relay-types"])
        }
        "relay-kernel" => Some(&[
            "relay-runtime",
            "relay-linalg",
            "relay-ir",
            "relay-ops",
            "relay-types",
        ]),
        "relay-vm" => Some(&[
            "relay-runtime",
            "relay-ir",
            "relay-ops",
            "relay-linalg",
            "relay-kernel",
            "relay-syntax",
            "relay-types",
        ]),
        // The library: every library crate but the interpreter (the oracle of its tests).
        "relay" => Some(&[
            "relay-runtime",
            "relay-linalg",
            "relay-ir",
            "relay-ops",
            "relay-syntax",
            "relay-types",
            "relay-passes",
            "relay-kernel",
            "relay-vm",
            "relay-onnx",
            "relay-interp",
        ]),
        // The command line and the Python package are clients of the library.
        "relayc" | "relay-python" => Some(&["relay"]),
        "relay-filetests" | "relay-benches" => None,
        _ => return None,
    };
    Some(rule)
}

/// The workspace's crates and, for each, its normal (not dev or build) dependencies among them.
fn workspace_dependencies() -> BTreeMap<String, BTreeSet<String>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let out = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: Value = serde_json::from_slice(&out.stdout).expect("cargo metadata prints JSON");
    let packages = meta["packages"].as_array().expect("a package list");
    let names: BTreeSet<String> = packages
        .iter()
        .filter_map(|p| p["name"].as_str().map(str::to_owned))
        .collect();
    packages
        .iter()
        .map(|p| {
            let deps = p["dependencies"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|d| d["kind"].is_null())
                .filter_map(|d| d["name"].as_str())
                .filter(|d| names.contains(*d))
                .map(str::to_owned)
                .collect();
            (p["name"].as_str().unwrap_or_default().to_owned(), deps)
        })
        .collect()
}

#[test]
fn every_crate_depends_only_on_the_layers_below_it() {
    let crates = workspace_dependencies();
    assert!(crates.contains_key("relay-linalg"), "{crates:?}");
    let mut broken = Vec::new();
    for (name, deps) in &crates {
        match allowed(name) {
            None => broken.push(format!("{name} is not in the architecture's table")),
            Some(None) => {}
            Some(Some(rule)) => {
                for d in deps.iter().filter(|d| !rule.contains(&d.as_str())) {
                    broken.push(format!("{name} depends on {d}; it may use only {rule:?}"));
                }
            }
        }
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

#[test]
fn test_support_is_never_a_dependency_of_a_library() {
    for (name, deps) in workspace_dependencies() {
        assert!(
            !deps.contains("relay-testing"),
            "{name} depends on relay-testing outside [dev-dependencies]"
        );
    }
}

/// The `.rs` files below `dir`, with their text.
fn sources(dir: &std::path::Path) -> Vec<(std::path::PathBuf, String)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).expect("a source directory") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).expect("a readable source file");
                out.push((path, text));
            }
        }
    }
    out
}

#[test]
fn the_kernel_compiler_runs_one_way() {
    // compose → schedule → lower → loops::verify → codegen: no module names a stage after it
    // (the analyses they share sit below both and name neither).
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../relay-kernel/src");
    let rules: [(&str, &[&str]); 5] = [
        ("compose.rs", &["schedule", "lower", "codegen"]),
        ("analysis", &["schedule", "lower", "codegen"]),
        ("schedule", &["lower", "codegen"]),
        ("lower", &["codegen"]),
        ("loops", &["schedule", "lower", "codegen"]),
    ];
    let mut broken = Vec::new();
    for (stage, later) in rules {
        let path = src.join(stage);
        let files = if path.is_dir() {
            sources(&path)
        } else {
            vec![(
                path.clone(),
                std::fs::read_to_string(&path).expect("a stage file"),
            )]
        };
        assert!(!files.is_empty(), "{stage} has no sources");
        for (file, text) in files {
            // Tests may use anything.
            let code = text.split("#[cfg(test)]").next().unwrap_or_default();
            for module in later {
                let uses = code.lines().any(|line| {
                    let code = line.split("//").next().unwrap_or_default();
                    code.contains(&format!("crate::{module}::"))
                        || code.contains(&format!("crate::{module}}}"))
                        || code.contains(&format!("crate::{module};"))
                });
                if uses {
                    broken.push(format!("{} uses crate::{module}", file.display()));
                }
            }
        }
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}
