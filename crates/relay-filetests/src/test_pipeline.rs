//! `// test pipeline [passes=PATH]`: as `test pass`, but the passes are a whole pipeline read
//! from a `passes.toml` (the repository's own by default; `passes=PATH` names another,
//! relative to the test file's directory), run with every pass's output type-checked and
//! verified.

use std::path::PathBuf;

use relay_passes::{PassManager, PipelineConfig};

use crate::failure::indent;
use crate::test_pass::{check_transformed, parse_and_check};
use crate::{Failure, Kind, TestFile, corpus};

/// The `pipeline` test kind.
pub(crate) const KIND: Kind = Kind {
    name: "pipeline",
    options: &["passes="],
    checks_own_options: false,
    run,
};

/// The repository's default pipeline configuration.
pub fn default_config_path() -> PathBuf {
    corpus::repository_root().join("passes.toml")
}

/// The default pipeline with every pass's output type-checked and verified, as the
/// property tests run it.
pub fn default_pipeline() -> Result<PassManager, Failure> {
    pipeline(&default_config_path())
}

/// The pipeline `path` configures, with verify-each switched on.
fn pipeline(path: &std::path::Path) -> Result<PassManager, Failure> {
    let config = PipelineConfig::load(path).map_err(|err| {
        Failure::new(format!(
            "cannot load `{}`\n\n{}",
            path.display(),
            indent(&relay_syntax::render_plain(&err))
        ))
    })?;
    let manager = PassManager::from_config(&config);
    Ok(manager.verify_each(true))
}

fn run(file: &TestFile<'_>) -> Result<(), Failure> {
    let mut path = default_config_path();
    for option in &file.options {
        if let Some(value) = option.strip_prefix("passes=") {
            let dir = file.path.parent().unwrap_or(std::path::Path::new("."));
            path = dir.join(value);
        }
    }
    let manager = pipeline(&path)?;
    let module = parse_and_check(file)?;
    check_transformed(file, &module, &manager)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::run_file;

    const PROGRAM: &str = "#[version = \"0.0.5\"]\n\
                           def @main(%x: Tensor[(2, 3), float32]) { nn.relu(add(%x, %x)) }\n";

    #[test]
    fn the_default_pipeline_runs() {
        let text = format!("// test pipeline\n{PROGRAM}// check: def @main\n");
        let path = crate::ir_tests_dir().join("pipeline/generated.relay");
        run_file(&path, &text).unwrap();
    }

    #[test]
    fn the_passes_option_names_a_configuration_next_to_the_test() {
        let dir = std::env::temp_dir().join(format!("relay-test-pipeline-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("fuse_only.toml"),
            "[pipeline]\nopt_level = 2\npasses = [\"fuse_ops\"]\n",
        )
        .unwrap();
        let path = dir.join("y.relay");
        let text = format!(
            "// test pipeline passes=fuse_only.toml\n{PROGRAM}// check: Primitive=1\n\
             // not: memory.alloc_storage\n"
        );
        let result = run_file(&path, &text);
        let text = format!("// test pipeline\n{PROGRAM}// not: memory.alloc_storage\n");
        let default = run_file(&path, &text);
        let _ = std::fs::remove_dir_all(&dir);
        result.unwrap();
        let err = default.unwrap_err();
        assert!(
            err.message().contains("filecheck directives do not match"),
            "{err}"
        );
    }

    #[test]
    fn a_missing_configuration_is_a_failure() {
        let text = format!("// test pipeline passes=no_such.toml\n{PROGRAM}// check: x\n");
        let err = run_file(Path::new("/nonexistent/y.relay"), &text).unwrap_err();
        assert!(err.message().contains("cannot load"), "{err}");
        assert!(err.message().contains("no_such.toml"), "{err}");
    }

    #[test]
    fn only_the_passes_option_is_accepted() {
        let text = format!("// test pipeline fuse_ops\n{PROGRAM}// check: x\n");
        let err = run_file(Path::new("y.relay"), &text).unwrap_err();
        assert!(err.message().contains("valid options: passes="), "{err}");
    }
}
