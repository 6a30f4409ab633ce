//! The generators produce deterministic, valid Relay of the requested size.

use relay_benches::{BINDINGS_PER_DEF, chained_bindings, tvm_style_module};

fn parses(text: &str) {
    if let Err(errors) = relay_syntax::parse(text, "generated.relay") {
        panic!(
            "generated text does not parse:\n{}",
            relay_syntax::render_plain(&errors)
        );
    }
}

#[test]
fn tvm_style_module_is_deterministic_and_sized() {
    let a = tvm_style_module(200_000);
    let b = tvm_style_module(200_000);
    assert_eq!(a, b);
    assert!(a.len() >= 200_000);
    // It stops after the block that crosses the target (plus at most one `@select` and `@main`).
    assert!(
        a.len() < 200_000 + 200 * BINDINGS_PER_DEF,
        "{} bytes",
        a.len()
    );
}

#[test]
fn tvm_style_module_has_every_construct() {
    let text = tvm_style_module(0);
    for needle in [
        "type Option[A]",
        "nn.conv2d(",
        "add(",
        "nn.relu(",
        ".0 /* ty=",
        "let %y",
    ] {
        assert!(text.contains(needle), "missing `{needle}`");
    }
    let text = tvm_style_module(400_000);
    assert!(text.contains("match (%o)"));
}

#[test]
fn tvm_style_module_parses() {
    parses(&tvm_style_module(64 << 10));
}

#[test]
fn chained_bindings_parses() {
    let text = chained_bindings(1000);
    assert!(text.contains("%999 = add(%998, %x);"));
    parses(&text);
}
