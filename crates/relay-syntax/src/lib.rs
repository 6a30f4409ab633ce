//! The Relay text format (version `0.0.5`): a logos lexer, a lalrpop grammar producing a
//! syntax tree, and a resolver that turns the tree into `relay_ir` with names resolved,
//! operators and attributes checked against the operator registry, and metadata constants
//! loaded. Every problem is a [`ParseError`] with a span; all problems found are reported
//! together as [`ParseErrors`].
//!
//! Accepts everything TVM's parser accepted, with the fixes SPEC §1 lists (graph variables
//! scoped per function, the recursive-let rule, chained projections, string escapes, `nanf`,
//! friendly negative literals, 8-bit integer suffixes, `ref(T)` and `fn [A](A) -> A` types).

mod ast;
mod errors;
mod lexer;
mod resolve;
mod syntax;

lalrpop_util::lalrpop_mod!(
    #[allow(clippy::all, clippy::pedantic, unused_parens, dead_code)]
    grammar
);

use std::sync::Arc;

use miette::{Diagnostic, GraphicalReportHandler, GraphicalTheme, NamedSource};
use relay_ir::{Module, Source};

pub use errors::{ParseError, ParseErrors};

/// Parses a Relay module (definitions) or a single expression program.
///
/// An expression program (TVM's `parse_expr` text, e.g. with `free_var` lines) becomes a module
/// of kind [`relay_ir::ModuleKind::Expr`] whose `@main` takes the free variables as parameters.
/// All problems found are returned together, in source order.
pub fn parse(text: &str, name: &str) -> Result<Module, ParseErrors> {
    let mut errors = Vec::new();
    let mut lexical = Vec::new();
    let mut module = None;
    let mut ctx = ast::Ctx::default();
    let mut lexer = lexer::Lexer::new(text, &mut lexical);
    let result = grammar::ProgramParser::new().parse(&mut ctx, &mut lexer);
    if lexer.fatal() {
        // The token stream stopped at a lexical error: report the lexical errors of the whole
        // text, not the syntax errors the early end caused.
        lexer.drain();
        errors.append(&mut lexical);
    } else {
        errors.append(&mut lexical);
        errors.append(&mut ctx.errors);
        for e in std::mem::take(&mut ctx.recovered) {
            errors.push(syntax::convert(e, text));
        }
        match result {
            Ok(program) => module = Some(resolve::resolve(program, text, &mut errors)),
            Err(e) => errors.push(syntax::convert(e, text)),
        }
    }
    match module {
        Some(mut module) if errors.is_empty() => {
            module.source = Some(Arc::new(Source::new(name, text)));
            Ok(module)
        }
        _ => {
            errors.sort_by_key(|e| {
                e.labels()
                    .and_then(|mut l| l.next())
                    .map_or(0, |l| l.offset())
            });
            Err(ParseErrors {
                src: NamedSource::new(name, Arc::<str>::from(text)),
                errors,
            })
        }
    }
}

/// Renders a diagnostic as plain text (no colors, Unicode box drawing, 80 columns): the form
/// the command line prints when not on a terminal and the form `.stderr` goldens hold.
///
/// miette's graphical renderer pads to a label's column with a format width, which Rust limits
/// to 65,535; a label further along a line (minified text) is rendered in a simpler form
/// instead, so rendering never panics.
pub fn render_plain(diagnostic: &dyn Diagnostic) -> String {
    if has_far_label(diagnostic) {
        let mut out = String::new();
        render_simple(diagnostic, diagnostic.source_code(), &mut out);
        return out;
    }
    let mut out = String::new();
    let handler =
        GraphicalReportHandler::new_themed(GraphicalTheme::unicode_nocolor()).with_width(80);
    if handler.render_report(&mut out, diagnostic).is_err() {
        out.clear();
        render_simple(diagnostic, diagnostic.source_code(), &mut out);
    }
    out
}

/// The column beyond which miette's renderer cannot pad.
const FAR_COLUMN: usize = 60_000;

fn has_far_label(diagnostic: &dyn Diagnostic) -> bool {
    let far = |d: &dyn Diagnostic, source: Option<&dyn miette::SourceCode>| {
        let Some(source) = d.source_code().or(source) else {
            return false;
        };
        d.labels().into_iter().flatten().any(|label| {
            source
                .read_span(label.inner(), 0, 0)
                .is_ok_and(|c| c.column() + label.len() >= FAR_COLUMN)
        })
    };
    far(diagnostic, None)
        || diagnostic
            .related()
            .into_iter()
            .flatten()
            .any(|r| far(r, diagnostic.source_code()))
}

/// A line-oriented rendering: code, message, `name:line:column` of each label, help.
fn render_simple(d: &dyn Diagnostic, source: Option<&dyn miette::SourceCode>, out: &mut String) {
    use std::fmt::Write;
    let source = d.source_code().or(source);
    if let Some(code) = d.code() {
        let _ = writeln!(out, "{code}");
    }
    let _ = writeln!(out, "  × {d}");
    for label in d.labels().into_iter().flatten() {
        let place = source
            .and_then(|s| s.read_span(label.inner(), 0, 0).ok())
            .map(|c| {
                let name = c.name().unwrap_or("<input>").to_owned();
                format!("{name}:{}:{}", c.line() + 1, c.column() + 1)
            });
        let _ = writeln!(
            out,
            "  at {}{}",
            place.unwrap_or_else(|| format!("byte {}", label.offset())),
            label.label().map(|l| format!(": {l}")).unwrap_or_default()
        );
    }
    if let Some(help) = d.help() {
        let _ = writeln!(out, "  help: {help}");
    }
    for related in d.related().into_iter().flatten() {
        out.push('\n');
        render_simple(related, source, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Parses, and checks the round trip and the print fixpoint.
    fn ok(text: &str) -> Module {
        let m = match parse(text, "test.relay") {
            Ok(m) => m,
            Err(e) => panic!("{}", render_plain(&e)),
        };
        let opts = relay_ir::PrintOptions::default();
        let printed = relay_ir::print_module(&m, &opts);
        let again = match parse(&printed, "printed.relay") {
            Ok(m) => m,
            Err(e) => panic!(
                "printed text does not re-parse:\n{printed}\n{}",
                render_plain(&e)
            ),
        };
        assert!(
            relay_ir::module_eq(&m, &again),
            "round trip changed the module:\n{text}\n---\n{printed}"
        );
        assert_eq!(
            relay_ir::print_module(&again, &opts),
            printed,
            "printing is not a fixpoint"
        );
        m
    }

    fn err(text: &str) -> String {
        match parse(text, "test.relay") {
            Ok(_) => panic!("expected an error for {text}"),
            Err(e) => render_plain(&e),
        }
    }

    #[test]
    fn conformance_programs_parse() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../conformance");
        for entry in std::fs::read_dir(dir).expect("conformance/ exists") {
            let path = entry.expect("readable").path();
            if path.extension().is_some_and(|e| e == "relay") {
                let text = std::fs::read_to_string(&path).expect("readable");
                ok(&text);
            }
        }
    }

    #[test]
    fn recovers_across_definitions() {
        let text =
            "#[version = \"0.0.5\"]\ndef @f() { 1 + }\ndef @g() { (1, 2 }\ndef @h() { %nope }\n";
        let e = parse(text, "t.relay").expect_err("three errors");
        assert_eq!(e.errors.len(), 3, "{}", render_plain(&e));
    }

    #[test]
    fn tvm_corner_cases() {
        let v = "#[version = \"0.0.5\"]\n";
        // Constructs from the reference catalogue that stress the grammar.
        ok(&format!(
            "{v}def @f(%a: Tensor[(4), float32], Primitive=1, relay.reshape_only=1) {{ %a }}"
        ));
        ok(&format!(
            "{v}def @m(%a {{virtual_device=1}}: float32) {{ %a }}"
        ));
        ok(&format!("{v}def @f() {{ %0 = (1, 2); let %t = %0; %0.1 }}"));
        ok(&format!(
            "{v}def @f(%r) {{ ref_write(%r, 1); ref_read(%r) }}"
        ));
        ok(&format!("{v}def @f() {{ (fn (%q) {{ %q }})(0) }}"));
        ok(&format!("{v}def @f(%f) {{ %f(1)(2) }}"));
        ok(&format!(
            "{v}def @f() {{ zeros(shape=[2, 3], dtype=\"float32\") }}"
        ));
        ok(&format!(
            "{v}def @f(%x) {{ nn.pad(%x, 0f, pad_width=[[0, 0], [1, 1]]) }}"
        ));
        ok(&format!(
            "{v}def @f(%x, %w) {{ nn.dense(%x, %w, units=None) }}"
        ));
        ok(&format!(
            "{v}def @f(%x) {{ clip(%x, a_min=-inff, a_max=inff) }}"
        ));
        ok(&format!(
            "{v}def @f(%a, %b) {{ %2 = fn (%p0) {{ %p0 }}; %2(%a, name=\"n\", attrs_type_key=\"attrs.TestAttrs\") }}"
        ));
        ok(&format!(
            "{v}type Either[A, B] {{ Left(A), Right(B) }} type Void {{ }} type U {{ MkUnit }} extern type T[A]"
        ));
        ok(&format!(
            "{v}def @f(%x: (int32,), %y: fn (int32) -> int32, %z: fn [A](A) -> A, %w: ref(float32), %u: _, %v: Tensor[(?, 1), uint16]) {{ () }}"
        ));
        ok(&format!(
            "{v}def @main[A]() -> fn (A, List[A]) -> List[A] {{ Cons }} type List[A] {{ Cons(A, List[A]), Nil }}"
        ));
        ok(&format!("{v}def @f(%x) {{ 1 * 1 + 1 < 1 == 1 }}"));
        ok(&format!(
            "{v}def @f(%x) {{ let %u: _ = (); {{ let %z = 2; %z }} }}"
        ));
        ok(&format!(
            "{v}def @f(%b: bool) {{ %0 = if (%b) {{ 1 }} else {{ 0 }}; %0 }}"
        ));
        ok(&format!(
            "{v}type nat {{ zero, succ(nat), }} def @f(%n: nat) {{ match %n {{ zero => 0, succ(%m) => 1 }} }}"
        ));
        ok(&format!(
            "{v}type List[A] {{ Cons(A, List[A]), Nil }} def @f(%l: List[()]) {{ match? (%l) {{ Cons((), Nil) => 1, Cons((%x), _) => 2 }} }}"
        ));
        ok(&format!("{v}def @f(%x) {{ (%x, -1) }}"));
        ok(&format!("{v}def @f(%x) {{ add(%x, %x) /* ty=float32 */ }}"));
    }

    /// Every form of nesting, at the deepest level the parser accepts, parses, prints and
    /// round-trips on an ordinary 2 MB thread (in debug builds, whose frames are largest).
    #[test]
    fn deepest_accepted_nesting_fits_a_small_stack() {
        let n = relay_ir::MAX_NESTING as usize - 2;
        let v = "#[version = \"0.0.5\"]\n";
        let nested = |open: &str, leaf: &str, close: &str| {
            format!("{}{leaf}{}", open.repeat(n), close.repeat(n))
        };
        let programs = vec![
            format!("{v}def @f(%x) {{ {} }}", nested("add(%x, ", "%x", ")")),
            format!(
                "{v}type L {{ C(int32, L), N }} def @f() {{ {} }}",
                nested("C(1, ", "N", ")")
            ),
            format!("{v}def @f(%x) {{ %x{} }}", " + %x".repeat(n)),
            format!("{v}def @f(%x) {{ {} }}", nested("(%x, ", "%x", ")")),
            format!(
                "{v}def @f(%b) {{ {} }}",
                nested("if (%b) { ", "1", " } else { 2 }")
            ),
            format!("{v}def @f(%x: {}) {{ %x }}", nested("(", "int32", ",)")),
            format!("{v}def @f(%f) {{ %f{} }}", "(1)".repeat(n)),
        ];
        let handle = std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(move || {
                for p in &programs {
                    ok(p);
                }
            })
            .expect("spawn");
        assert!(
            handle.join().is_ok(),
            "deep nesting overflowed a 2 MB stack"
        );
    }

    #[test]
    fn diagnostics_far_along_a_line_render() {
        let text = format!(
            "#[version = \"0.0.5\"]\ndef @main() {{ {}%nope }}",
            " ".repeat(70_000)
        );
        let e = parse(&text, "long.relay").expect_err("undefined local");
        let rendered = render_plain(&e);
        assert!(
            rendered.contains("undefined local variable `%nope`"),
            "{rendered}"
        );
        assert!(rendered.contains("long.relay:2:"), "{rendered}");
    }

    #[test]
    fn snippets() {
        let v = "#[version = \"0.0.5\"]\n";
        ok(&format!(
            "{v}def @f(%x: int32) -> int32 {{ let %a = %x; let %a = %a + %a; %a }}"
        ));
        ok(&format!(
            "{v}def @f(%x: (int32, (int32, int32))) {{ %x.1.0 }}"
        ));
        ok(&format!(
            "{v}def @f() {{ let %l = fn (%i: int32) -> int32 {{ if (%i == 0) {{ 0 }} else {{ %l(%i - 1) }} }}; %l(3) }}"
        ));
        ok(&format!(
            "{v}type List[A] {{ Cons(A, List[A]), Nil, }} def @g() {{ match (Cons(1, Nil)) {{ Cons(%h, _) => %h, Nil => -1 }} }}"
        ));
        ok(&format!("{v}def @f(%x) {{ %x -1 }}"));
        ok("free_var %x: Tensor[(3), float32];\n%0 = add(%x, %x);\n%0");
        assert!(
            err(&format!("{v}def @f() {{ let %a = %a; %a }}")).contains("undefined local variable")
        );
        assert!(err(&format!("{v}def @f() {{ %0 = 1; %0 = 2; %0 }}")).contains("already bound"));
        assert!(err(&format!("{v}def @f(%x) {{ nn.rleu(%x) }}")).contains("nn.relu"));
        assert!(
            err(&format!("{v}def @f(%x) {{ nn.softmax(%x, axes=1) }}"))
                .contains("has no attribute")
        );
        assert!(err(&format!("{v}def @f(%x) {{ reshape(%x) }}")).contains("requires attribute"));
        assert!(err("def @f() { 1 }").contains("missing version header"));
        assert!(err(&format!("{v}def @f() {{ 1; }}")).contains("unexpected"));
    }
}
