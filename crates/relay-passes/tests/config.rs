//! `passes.toml`: the repository's file loads, every kind of error is reported with its message,
//! span and help, errors of one file are reported together, and options reach the passes.

use std::path::PathBuf;

use relay_ir::Module;
use relay_passes::{
    ConfigError, ConfigErrorKind, OptionValue, Pass, PassContext, PassError, PassManager,
    PassOption, PipelineConfig, pass_names,
};

/// A pass with options, outside the registry, that reports their values as statistics.
struct Tunable;

impl Pass for Tunable {
    fn name(&self) -> &'static str {
        "tunable"
    }

    fn description(&self) -> &'static str {
        "reports its options as statistics"
    }

    fn options(&self) -> &'static [PassOption] {
        &[
            PassOption {
                name: "max_depth",
                default: OptionValue::Int(256),
                min: 1,
                doc: "the deepest group",
            },
            PassOption {
                name: "aggressive",
                default: OptionValue::Bool(false),
                min: 0,
                doc: "whether to try harder",
            },
        ]
    }

    fn run(&self, module: Module, cx: &mut PassContext) -> Result<Module, PassError> {
        let depth = cx.int_option("max_depth");
        let aggressive = cx.bool_option("aggressive");
        cx.stat("max_depth", depth);
        cx.stat("aggressive", i64::from(aggressive));
        Ok(module)
    }
}

/// The registry the option tests check against: every registered pass plus [`Tunable`].
fn registry() -> Vec<&'static dyn Pass> {
    let mut passes = relay_passes::all_passes().to_vec();
    passes.push(&Tunable);
    passes
}

/// The error `text` gives, checked against [`registry`].
fn error(text: &str) -> ConfigError {
    match PipelineConfig::parse_in(text, "test.toml", &registry()) {
        Ok(config) => panic!("expected an error, got {config:?}"),
        Err(err) => err,
    }
}

/// The text of `text` at the error's span.
fn spanned<'a>(text: &'a str, err: &ConfigError) -> &'a str {
    let span = err.span.clone().expect("the error has a span");
    &text[span]
}

/// The help of an error.
fn help(err: &ConfigError) -> &str {
    err.help.as_deref().expect("the error has help")
}

#[test]
fn repository_passes_toml_loads() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../passes.toml");
    let config = PipelineConfig::load(&path).unwrap();
    // The default pipeline lists every registered pass once, in registry order, with
    // unpartition first, then eta_expand right after simplify_inference (as TVM's VM
    // pipeline does).
    assert_eq!(config.pass_names(), pass_names());
    assert_eq!(
        config.pass_names()[..3],
        ["unpartition", "simplify_inference", "eta_expand"]
    );
    assert_eq!(config.opt_level, 2);
    assert!(!config.debug.verify_each && !config.debug.time_passes);
    // The built-in copy is the same file.
    let built_in = PipelineConfig::default_pipeline();
    assert_eq!(built_in.pass_names(), config.pass_names());
    assert_eq!(
        PipelineConfig::default_pipeline_text(),
        std::fs::read_to_string(&path).unwrap()
    );
}

#[test]
fn a_full_file_is_read() {
    let text = r#"
[pipeline]
opt_level = 3
passes = ["fuse_ops", "to_anf", "tunable", "fuse_ops"]

[passes.tunable]
aggressive = true
max_depth = 4

[debug]
verify_each = true
time_passes = true
print_before = ["to_anf"]
print_after = ["fuse_ops", "tunable"]
print_after_all = true
skip = ["to_anf"]
"#;
    let config = PipelineConfig::parse_in(text, "test.toml", &registry()).unwrap();
    assert_eq!(config.opt_level, 3);
    assert_eq!(
        config.pass_names(),
        ["fuse_ops", "to_anf", "tunable", "fuse_ops"]
    );
    // Options keep the file's order.
    let options: Vec<_> = config
        .options
        .iter()
        .map(|s| (s.pass, s.option, s.value))
        .collect();
    assert_eq!(
        options,
        [
            ("tunable", "aggressive", OptionValue::Bool(true)),
            ("tunable", "max_depth", OptionValue::Int(4)),
        ]
    );
    let debug = &config.debug;
    assert!(debug.verify_each && debug.time_passes && debug.print_after_all);
    assert_eq!(debug.print_before, ["to_anf"]);
    assert_eq!(debug.print_after, ["fuse_ops", "tunable"]);
    assert_eq!(debug.skip, ["to_anf"]);
}

#[test]
fn only_the_pass_list_is_required() {
    let config = PipelineConfig::parse("[pipeline]\npasses = []\n", "min.toml").unwrap();
    assert_eq!(config.opt_level, 2);
    assert!(config.passes.is_empty() && config.options.is_empty());
    assert_eq!(config.debug, relay_passes::DebugConfig::default());

    let err = PipelineConfig::parse("[pipeline]\nopt_level = 1\n", "min.toml").unwrap_err();
    assert_eq!(err.kind, ConfigErrorKind::Syntax);
    assert!(err.message.contains("missing field `passes`"), "{err}");
}

#[test]
fn unknown_pass_in_the_pipeline() {
    let text = "[pipeline]\npasses = [\"simplify_inference\", \"fuse_op\"]\n";
    let err = error(text);
    assert_eq!(err.kind, ConfigErrorKind::UnknownPass);
    assert_eq!(err.message, "unknown pass `fuse_op` in pipeline");
    assert_eq!(spanned(text, &err), "\"fuse_op\"");
    assert_eq!(err.label, "not a pass");
    assert!(
        help(&err).starts_with(
            "did you mean `fuse_ops`? valid passes are: unpartition, simplify_inference, "
        ),
        "{}",
        help(&err)
    );
    assert!(help(&err).contains("const_pool_layout"));
    assert!(err.related.is_empty());
}

#[test]
fn a_name_far_from_every_pass_gets_no_suggestion() {
    let text = "[pipeline]\npasses = [\"vectorize_everything\"]\n";
    let err = error(text);
    assert!(
        help(&err).starts_with("valid passes are: unpartition, simplify_inference, eta_expand,"),
        "{}",
        help(&err)
    );
}

#[test]
fn unknown_pass_in_skip_and_print_lists() {
    for key in ["skip", "print_before", "print_after"] {
        let text =
            format!("[pipeline]\npasses = []\n[debug]\n{key} = [\"to_anf\", \"lamda_lift\"]\n");
        let err = error(&text);
        assert_eq!(err.kind, ConfigErrorKind::UnknownPass, "{key}");
        assert_eq!(err.message, format!("unknown pass `lamda_lift` in {key}"));
        assert_eq!(spanned(&text, &err), "\"lamda_lift\"");
        assert!(
            help(&err).starts_with("did you mean `lambda_lift`?"),
            "{key}"
        );
    }
}

#[test]
fn unknown_pass_table() {
    let text = "[pipeline]\npasses = []\n[passes.fuseops]\nmax_depth = 3\n";
    let err = error(text);
    assert_eq!(err.kind, ConfigErrorKind::UnknownPass);
    assert_eq!(err.message, "unknown pass `fuseops` in [passes] table");
    assert_eq!(spanned(text, &err), "fuseops");
    assert!(help(&err).starts_with("did you mean `fuse_ops`?"));
}

#[test]
fn unknown_option() {
    let text = "[pipeline]\npasses = [\"tunable\"]\n[passes.tunable]\nmax_dept = 3\n";
    let err = error(text);
    assert_eq!(err.kind, ConfigErrorKind::UnknownOption);
    assert_eq!(err.message, "pass `tunable` has no option `max_dept`");
    assert_eq!(spanned(text, &err), "max_dept");
    assert_eq!(
        help(&err),
        "did you mean `max_depth`? the options of `tunable` are: max_depth, aggressive"
    );
}

#[test]
fn option_of_a_pass_without_options() {
    let text = "[pipeline]\npasses = []\n[passes.to_anf]\ndepth = 3\n";
    let err = error(text);
    assert_eq!(err.kind, ConfigErrorKind::UnknownOption);
    assert_eq!(spanned(text, &err), "depth");
    assert_eq!(help(&err), "pass `to_anf` takes no options");
}

#[test]
fn option_of_the_wrong_kind() {
    let text = "[pipeline]\npasses = []\n[passes.tunable]\nmax_depth = \"deep\"\naggressive = 1\n";
    let err = error(text);
    assert_eq!(err.kind, ConfigErrorKind::OptionKind);
    assert_eq!(
        err.message,
        "option `tunable.max_depth` expects an integer, found a string"
    );
    assert_eq!(spanned(text, &err), "\"deep\"");
    assert_eq!(err.label, "an integer");
    assert_eq!(help(&err), "max_depth: the deepest group");
    // Both errors of the file are reported, in file order.
    assert_eq!(err.related.len(), 1);
    let second = &err.related[0];
    assert_eq!(
        second.message,
        "option `tunable.aggressive` expects a boolean, found an integer"
    );
    assert_eq!(spanned(text, second), "1");
}

#[test]
fn option_out_of_range() {
    let text = "[pipeline]\npasses = []\n[passes.tunable]\nmax_depth = 0\n";
    let err = error(text);
    assert_eq!(err.kind, ConfigErrorKind::OptionKind);
    assert_eq!(
        err.message,
        "option `tunable.max_depth` expects at least 1, found 0"
    );
    assert_eq!(spanned(text, &err), "0");
    assert_eq!(err.label, "out of range");

    let mut manager = PassManager::new(vec![&Tunable], 2);
    let err = manager
        .set_option("tunable", "max_depth", "-5")
        .unwrap_err();
    assert_eq!(
        err,
        "option `tunable.max_depth` expects at least 1, found -5"
    );
}

#[test]
fn opt_level_out_of_range() {
    for level in ["4", "-1", "99999999999"] {
        let text = format!("[pipeline]\nopt_level = {level}\npasses = []\n");
        let err = error(&text);
        assert_eq!(err.kind, ConfigErrorKind::OptLevel, "{level}");
        assert_eq!(
            err.message,
            format!("opt_level must be between 0 and 3, found {level}")
        );
        assert_eq!(spanned(&text, &err), level);
    }
}

#[test]
fn opt_level_of_the_wrong_type() {
    let text = "[pipeline]\nopt_level = \"two\"\npasses = []\n";
    let err = error(text);
    assert_eq!(err.kind, ConfigErrorKind::Syntax);
    assert!(
        err.message.contains("invalid type: string \"two\""),
        "{}",
        err.message
    );
    assert_eq!(spanned(text, &err), "\"two\"");
}

#[test]
fn toml_syntax_error() {
    let text = "[pipeline]\npasses = [\"to_anf\"\n";
    let err = error(text);
    assert_eq!(err.kind, ConfigErrorKind::Syntax);
    let span = err.span.clone().unwrap();
    assert!(span.start >= text.find('[').unwrap() + 10, "{span:?}");
    assert!(span.end <= text.len(), "{span:?}");
}

#[test]
fn unknown_fields() {
    // (text, the unknown key, a suggestion expected in the help)
    let cases = [
        (
            "[pipline]\npasses = []\n",
            "pipline",
            Some("did you mean `pipeline`?"),
        ),
        (
            "[pipeline]\npasses = []\nopt-level = 2\n",
            "opt-level",
            Some("did you mean `opt_level`?"),
        ),
        (
            "[pipeline]\npasses = []\n[debug]\nverify = true\n",
            "verify",
            None,
        ),
        (
            "[pipeline]\npasses = []\n[debug]\nprint_after_al = true\n",
            "print_after_al",
            Some("did you mean `print_after_all`?"),
        ),
    ];
    for (text, key, suggestion) in cases {
        let err = error(text);
        assert_eq!(err.kind, ConfigErrorKind::UnknownField, "{text}");
        assert!(
            err.message.starts_with(&format!("unknown field `{key}`")),
            "{}",
            err.message
        );
        assert!(spanned(text, &err).contains(key), "{text}: {:?}", err.span);
        let help = help(&err);
        assert!(help.contains("valid keys are: "), "{help}");
        if let Some(suggestion) = suggestion {
            assert!(help.starts_with(suggestion), "{help}");
        }
    }
}

#[test]
fn every_error_of_a_file_is_reported_in_file_order() {
    let text = r#"[pipeline]
opt_level = 9
passes = ["to_anf", "nope"]
[passes.tunable]
max_depth = true
[debug]
skip = ["nada"]
"#;
    let err = error(text);
    let all: Vec<_> = err.all().map(|e| (e.kind, spanned(text, e))).collect();
    assert_eq!(
        all,
        [
            (ConfigErrorKind::OptLevel, "9"),
            (ConfigErrorKind::UnknownPass, "\"nope\""),
            (ConfigErrorKind::OptionKind, "true"),
            (ConfigErrorKind::UnknownPass, "\"nada\""),
        ]
    );
    // Only the first carries the text; miette renders the related ones against it.
    assert!(err.src.is_some() && err.related.iter().all(|e| e.src.is_none()));
}

#[test]
fn errors_render_against_the_file() {
    let text = "[pipeline]\npasses = [\"fuse_op\"]\n[debug]\nskip = [\"tail_cal\"]\n";
    let err = PipelineConfig::parse(text, "my-passes.toml").unwrap_err();
    let rendered = relay_syntax::render_plain(&err);
    assert!(
        rendered.contains("relay::config::unknown_pass"),
        "{rendered}"
    );
    assert!(
        rendered.contains("unknown pass `fuse_op` in pipeline"),
        "{rendered}"
    );
    assert!(rendered.contains("my-passes.toml:2:"), "{rendered}");
    assert!(rendered.contains("did you mean `fuse_ops`?"), "{rendered}");
    assert!(
        rendered.contains("unknown pass `tail_cal` in skip"),
        "{rendered}"
    );
    assert!(rendered.contains("did you mean `tail_call`?"), "{rendered}");
}

#[test]
fn unreadable_file() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("no-such-passes.toml");
    let err = PipelineConfig::load(&path).unwrap_err();
    assert_eq!(err.kind, ConfigErrorKind::Io);
    assert!(err.message.starts_with("cannot read `"), "{}", err.message);
    assert!(err.message.contains("no-such-passes.toml"));
}

/// The statistics `Tunable` reports when `manager` runs it on an empty module.
fn tunable_stats(manager: &PassManager) -> Vec<(String, i64)> {
    let (_, timings) = manager.run(Module::default()).unwrap();
    assert_eq!(timings.len(), 1);
    timings[0].stats.clone()
}

#[test]
fn options_reach_the_pass() {
    let stats = |depth: i64, aggressive: i64| {
        vec![
            ("max_depth".to_string(), depth),
            ("aggressive".to_string(), aggressive),
        ]
    };
    // Defaults.
    let manager = PassManager::new(vec![&Tunable], 2);
    assert_eq!(tunable_stats(&manager), stats(256, 0));

    // From the file.
    let text = "[pipeline]\npasses = [\"tunable\"]\n[passes.tunable]\nmax_depth = 7\n";
    let config = PipelineConfig::parse_in(text, "t.toml", &registry()).unwrap();
    let mut manager = PassManager::from_config(&config);
    assert_eq!(tunable_stats(&manager), stats(7, 0));

    // Overridden one at a time, from text.
    manager.set_option("tunable", "aggressive", "true").unwrap();
    assert_eq!(tunable_stats(&manager), stats(7, 1));
    manager.set_option("tunable", "max_depth", "3").unwrap();
    assert_eq!(tunable_stats(&manager), stats(3, 1));
}

#[test]
fn set_option_errors_name_the_valid_choices() {
    let mut manager = PassManager::new(vec![&Tunable], 2);
    let err = manager.set_option("tunabel", "max_depth", "3").unwrap_err();
    assert!(err.starts_with("unknown pass `tunabel`; "), "{err}");
    assert!(
        err.contains("valid passes are: unpartition, simplify_inference"),
        "{err}"
    );

    let err = manager.set_option("tunable", "depth", "3").unwrap_err();
    assert_eq!(
        err,
        "pass `tunable` has no option `depth`; the options of `tunable` are: max_depth, aggressive"
    );

    let err = manager
        .set_option("tunable", "max_depth", "3.5")
        .unwrap_err();
    assert_eq!(
        err,
        "option `tunable.max_depth` expects an integer, found `3.5`"
    );
    let err = manager
        .set_option("tunable", "aggressive", "yes")
        .unwrap_err();
    assert_eq!(
        err,
        "option `tunable.aggressive` expects a boolean, found `yes`"
    );

    let err = manager.set_option("fuse_ops", "nonsense", "1").unwrap_err();
    assert!(
        err.starts_with("pass `fuse_ops` has no option `nonsense`"),
        "{err}"
    );

    // Nothing changed.
    assert_eq!(
        tunable_stats(&manager),
        vec![
            ("max_depth".to_string(), 256),
            ("aggressive".to_string(), 0)
        ]
    );
}
