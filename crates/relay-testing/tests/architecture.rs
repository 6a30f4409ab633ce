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
