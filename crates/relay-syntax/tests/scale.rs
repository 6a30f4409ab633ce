//! Scale tests (SPEC §1, "Scale"): long binding chains parse, print, re-parse and drop on an
//! ordinary 2 MB thread stack, and deep nesting is either accepted (up to a few hundred levels)
//! or rejected with the "nested too deeply" diagnostic, never a crash.
//!
//! Every test runs its work on a thread spawned with an explicit 2 MB stack (the default for
//! test threads), so a recursive walk over a 100,000-element chain would overflow and abort the
//! test binary rather than pass by luck on a larger main-thread stack.

use miette::Diagnostic;
use relay_ir::structural::module_eq;
use relay_ir::{Module, PrintOptions, print_module};
use relay_syntax::{ParseErrors, parse};

/// Length of the long chains and depth of the deep nestings.
const N: usize = 100_000;

/// A nesting depth that must be accepted.
const SHALLOW: usize = 500;

const HEADER: &str = "#[version = \"0.0.5\"]\n";

/// Runs `f` on a thread with a 2 MB stack and propagates its panic, if any.
fn on_small_stack(name: &str, f: impl FnOnce() + Send + 'static) {
    let handle = std::thread::Builder::new()
        .name(name.to_owned())
        .stack_size(2 << 20)
        .spawn(f)
        .expect("spawn a test thread");
    if let Err(panic) = handle.join() {
        std::panic::resume_unwind(panic);
    }
}

/// Parses `text`, panicking with the rendered diagnostics on failure.
fn parse_ok(text: &str, name: &str) -> Module {
    match parse(text, name) {
        Ok(m) => m,
        Err(errors) => panic!(
            "{name} does not parse:\n{}",
            truncate(&relay_syntax::render_plain(&errors), 4000)
        ),
    }
}

fn truncate(s: &str, max: usize) -> &str {
    match s.char_indices().nth(max) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

/// Checks the round-trip properties of `module` and returns its printed text:
/// `module_eq(parse(print(m)), m)` and `print(parse(print(m))) == print(m)`.
fn round_trip(module: &Module, name: &str) -> String {
    let printed = print_module(module, &PrintOptions::default());
    let reparsed = parse_ok(&printed, &format!("{name} (printed)"));
    let reprinted = print_module(&reparsed, &PrintOptions::default());
    assert!(reprinted == printed, "{name}: printing is not a fixpoint");
    assert!(
        module_eq(&reparsed, module),
        "{name}: the printed text re-parses to a different module"
    );
    printed
}

/// The error codes of a failed parse.
fn codes(errors: &ParseErrors) -> Vec<String> {
    errors
        .errors
        .iter()
        .map(|e| e.code().map(|c| c.to_string()).unwrap_or_default())
        .collect()
}

/// Asserts that `text` fails with (only) the "nested too deeply" diagnostic, and that the
/// diagnostics render. With `may_parse`, the nesting leaves no trace in the IR (grouping
/// parentheses, blocks without bindings), so parsing successfully is allowed too; then the
/// module must round-trip.
fn assert_nested_too_deeply(text: &str, name: &str, may_parse: bool) {
    let errors = match parse(text, name) {
        Ok(module) if may_parse => {
            round_trip(&module, name);
            return;
        }
        Ok(_) => panic!("{name}: a {N}-deep nesting parsed, but it exceeds relay_ir::MAX_NESTING"),
        Err(errors) => errors,
    };
    let codes = codes(&errors);
    assert!(
        !codes.is_empty() && codes.iter().all(|c| c == "relay::parse::nested_too_deeply"),
        "{name}: expected only relay::parse::nested_too_deeply, got {codes:?}"
    );
    let rendered = relay_syntax::render_plain(&errors);
    assert!(
        rendered.contains("nested too deeply"),
        "{name}: rendered as\n{}",
        truncate(&rendered, 2000)
    );
    drop(errors);
}

// ----- Long chains -----

/// `%0 = add(%x, %x); %1 = add(%0, %0); ...` with `n` bindings, in canonical layout.
fn graph_chain(n: usize) -> String {
    let mut s = String::with_capacity(n * 32);
    s.push_str(HEADER);
    s.push_str("def @main(%x: Tensor[(2), float32]) -> Tensor[(2), float32] {\n");
    s.push_str("  %0 = add(%x, %x);\n");
    for i in 1..n {
        s.push_str(&format!("  %{i} = add(%{p}, %{p});\n", p = i - 1));
    }
    s.push_str(&format!("  %{}\n}}\n", n - 1));
    s
}

/// `let %v0 = add(%p, %p); let %v1 = multiply(%v0, %p); ...` with `n` bindings, in canonical
/// layout.
fn let_chain(n: usize) -> String {
    let mut s = String::with_capacity(n * 40);
    s.push_str(HEADER);
    s.push_str("def @main(%p: Tensor[(2), float32]) -> Tensor[(2), float32] {\n");
    s.push_str("  let %v0 = add(%p, %p);\n");
    for i in 1..n {
        s.push_str(&format!("  let %v{i} = multiply(%v{}, %p);\n", i - 1));
    }
    s.push_str(&format!("  %v{}\n}}\n", n - 1));
    s
}

#[test]
fn graph_binding_chain_of_100000() {
    on_small_stack("graph_chain", || {
        let text = graph_chain(N);
        let module = parse_ok(&text, "graph_chain.relay");
        let printed = round_trip(&module, "graph_chain.relay");
        assert!(
            printed == text,
            "the canonical chain should print unchanged"
        );
        drop(module);
    });
}

#[test]
fn let_chain_of_100000() {
    on_small_stack("let_chain", || {
        let text = let_chain(N);
        let module = parse_ok(&text, "let_chain.relay");
        let printed = round_trip(&module, "let_chain.relay");
        assert!(
            printed == text,
            "the canonical chain should print unchanged"
        );
        drop(module);
    });
}

#[test]
fn sequence_and_mixed_chain_of_100000() {
    on_small_stack("mixed_chain", || {
        // Sequencing, graph bindings and lets interleaved in one chain.
        let mut s = String::from(HEADER);
        s.push_str("def @main(%r: ref(int32)) -> int32 {\n");
        for i in 0..N / 4 {
            s.push_str(&format!("  %{i} = ref_read(%r);\n"));
            s.push_str(&format!("  let %a{i} = add(%{i}, 1);\n"));
            s.push_str(&format!("  ref_write(%r, %a{i});\n"));
            s.push_str("  ();\n");
        }
        s.push_str("  ref_read(%r)\n}\n");
        let module = parse_ok(&s, "mixed_chain.relay");
        round_trip(&module, "mixed_chain.relay");
        drop(module);
    });
}

#[test]
fn chain_inside_nested_function_and_clause() {
    on_small_stack("nested_chain", || {
        // Long chains in a function literal and in a match clause body.
        let mut s = String::from(HEADER);
        s.push_str("type List[A] { Cons(A, List[A]), Nil }\n");
        s.push_str("def @main(%l: List[int32]) -> int32 {\n  %0 = fn (%x: int32) -> int32 {\n");
        for i in 0..N / 2 {
            s.push_str(&format!("    let %y{i} = add(%x, {i});\n"));
        }
        s.push_str("    %x\n  };\n  match (%l) {\n    Cons(%h, _) => {\n");
        for i in 0..N / 2 {
            s.push_str(&format!("      %{} = %0(%h);\n", i + 1));
        }
        s.push_str(&format!(
            "      %{}\n    }},\n    Nil => {{\n      0\n    }},\n  }}\n}}\n",
            N / 2
        ));
        let module = parse_ok(&s, "nested_chain.relay");
        round_trip(&module, "nested_chain.relay");
        drop(module);
    });
}

// ----- Deep nesting -----

/// `add(add(...add(%x, %x)..., %x), %x)`, `depth` calls deep.
fn nested_calls(depth: usize) -> String {
    let mut s = String::from(HEADER);
    s.push_str("def @main(%x: float32) {\n");
    for _ in 0..depth {
        s.push_str("add(\n");
    }
    s.push_str("%x");
    for _ in 0..depth {
        s.push_str(", %x)\n");
    }
    s.push_str("}\n");
    s
}

/// `((((%x))))`, `depth` parentheses deep.
fn nested_parens(depth: usize) -> String {
    format!(
        "{HEADER}def @main(%x: float32) {{\n{}%x{}\n}}\n",
        "(\n".repeat(depth),
        ")\n".repeat(depth)
    )
}

/// `Cons(1, Cons(1, ... Nil))`, `depth` constructors deep.
fn nested_constructors(depth: usize) -> String {
    format!(
        "{HEADER}type List[A] {{ Cons(A, List[A]), Nil }}\ndef @main() -> List[int32] {{\n{}Nil{}\n}}\n",
        "Cons(1,\n".repeat(depth),
        ")\n".repeat(depth)
    )
}

/// `1 + 1 + ... + 1`: a left-deep chain of `depth` additions.
fn infix_chain(depth: usize) -> String {
    let mut s = String::from(HEADER);
    s.push_str("def @main() {\n1");
    for i in 0..depth {
        s.push_str(if i % 16 == 15 { " +\n1" } else { " + 1" });
    }
    s.push_str("\n}\n");
    s
}

/// `fn () -> fn () -> ... -> int32`, a type `depth` function types deep.
fn nested_fn_types(depth: usize) -> String {
    format!(
        "{HEADER}def @main(%f: {}int32) {{\n%f\n}}\n",
        "fn () ->\n".repeat(depth)
    )
}

/// `((((int32,),),),)`, a tuple type `depth` levels deep.
fn nested_tuple_types(depth: usize) -> String {
    format!(
        "{HEADER}def @main(%t: {}int32{}) {{\n%t\n}}\n",
        "(\n".repeat(depth),
        ",)\n".repeat(depth)
    )
}

/// `{ { { %x } } }`, `depth` blocks deep.
fn nested_blocks(depth: usize) -> String {
    format!(
        "{HEADER}def @main(%x: int32) {{\n{}%x{}\n}}\n",
        "{\n".repeat(depth),
        "}\n".repeat(depth)
    )
}

/// `if (%c) { if (%c) { ... } else { 0 } } else { 0 }`, `depth` ifs deep.
fn nested_ifs(depth: usize) -> String {
    format!(
        "{HEADER}def @main(%c: bool) {{\n{}0{}\n}}\n",
        "if (%c) {\n".repeat(depth),
        "} else { 1 }\n".repeat(depth)
    )
}

/// `fn () { fn () { ... } }`, `depth` function literals deep.
fn nested_functions(depth: usize) -> String {
    format!(
        "{HEADER}def @main() {{\n{}0{}\n}}\n",
        "fn () {\n".repeat(depth),
        "}\n".repeat(depth)
    )
}

/// `match (%l) { Cons(_, Cons(_, ... Nil)) => 1, _ => 0 }`, a pattern `depth` deep.
fn nested_patterns(depth: usize) -> String {
    format!(
        "{HEADER}type List[A] {{ Cons(A, List[A]), Nil }}\ndef @main(%l: List[int32]) -> int32 {{\nmatch (%l) {{\n{}Nil{} => 1,\n_ => 0,\n}}\n}}\n",
        "Cons(_,\n".repeat(depth),
        ")\n".repeat(depth)
    )
}

/// `%x.0.0.0...`, `depth` projections deep.
fn nested_projections(depth: usize) -> String {
    format!("{HEADER}def @main(%x) {{\n%x{}\n}}\n", ".0".repeat(depth))
}

/// `((%x,),)`, a tuple expression `depth` deep.
fn nested_tuples(depth: usize) -> String {
    format!(
        "{HEADER}def @main(%x: int32) {{\n{}%x{}\n}}\n",
        "(\n".repeat(depth),
        ",)\n".repeat(depth)
    )
}

/// `let %a = (let %a = (... 1 ...); %a); %a`: `let` values nested `depth` deep.
fn nested_let_values(depth: usize) -> String {
    format!(
        "{HEADER}def @main() {{\n{}1{}\n}}\n",
        "let %a = (\n".repeat(depth),
        ");\n%a\n".repeat(depth)
    )
}

/// Every deep form: its name, its text at a given depth, and whether the deep form may parse
/// (because the nesting leaves no trace in the IR).
type DeepForm = (&'static str, fn(usize) -> String, bool);

const DEEP_FORMS: &[DeepForm] = &[
    ("nested_calls", nested_calls, false),
    ("nested_parens", nested_parens, true),
    ("nested_constructors", nested_constructors, false),
    ("infix_chain", infix_chain, false),
    ("nested_fn_types", nested_fn_types, false),
    ("nested_tuple_types", nested_tuple_types, false),
    ("nested_blocks", nested_blocks, true),
    ("nested_ifs", nested_ifs, false),
    ("nested_functions", nested_functions, false),
    ("nested_patterns", nested_patterns, false),
    ("nested_projections", nested_projections, false),
    ("nested_tuples", nested_tuples, false),
    ("nested_let_values", nested_let_values, false),
];

fn deep_test(form: usize) {
    let (name, make, may_parse) = DEEP_FORMS[form];
    on_small_stack(name, move || {
        let shallow = make(SHALLOW);
        let module = parse_ok(&shallow, &format!("{name}_{SHALLOW}.relay"));
        round_trip(&module, &format!("{name}_{SHALLOW}.relay"));
        drop(module);

        assert_nested_too_deeply(&make(N), &format!("{name}_{N}.relay"), may_parse);
    });
}

#[test]
fn deep_calls() {
    deep_test(0);
}

#[test]
fn deep_parens() {
    deep_test(1);
}

#[test]
fn deep_constructors() {
    deep_test(2);
}

#[test]
fn deep_infix_chain() {
    deep_test(3);
}

#[test]
fn deep_fn_types() {
    deep_test(4);
}

#[test]
fn deep_tuple_types() {
    deep_test(5);
}

#[test]
fn deep_blocks() {
    deep_test(6);
}

#[test]
fn deep_ifs() {
    deep_test(7);
}

#[test]
fn deep_functions() {
    deep_test(8);
}

#[test]
fn deep_patterns() {
    deep_test(9);
}

#[test]
fn deep_projections() {
    deep_test(10);
}

#[test]
fn deep_tuples() {
    deep_test(11);
}

#[test]
fn deep_let_values() {
    deep_test(12);
}

#[test]
fn deep_forms_cover_every_test() {
    assert_eq!(DEEP_FORMS.len(), 13, "add a #[test] for every deep form");
}

// ----- Lexer-level depth -----

#[test]
fn nested_block_comments_100000_deep_are_one_comment() {
    on_small_stack("nested_comments", || {
        let text = format!(
            "{HEADER}{}{}def @main() {{ () }}\n",
            "/* ".repeat(N),
            "*/ ".repeat(N)
        );
        let module = parse_ok(&text, "nested_comments.relay");
        let printed = round_trip(&module, "nested_comments.relay");
        assert_eq!(printed, format!("{HEADER}def @main() {{\n  ()\n}}\n"));
    });
}

#[test]
fn unterminated_nested_block_comment_100000_deep() {
    on_small_stack("unterminated_comments", || {
        let text = format!("{HEADER}def @main() {{ () }}\n{}", "/* ".repeat(N));
        let errors =
            parse(&text, "unterminated_comments.relay").expect_err("an unterminated comment");
        assert_eq!(codes(&errors), ["relay::parse::unterminated_comment"]);
    });
}

#[test]
fn deeply_nested_error_does_not_hide_other_errors_or_crash() {
    // Garbage after a deep nesting: the parser may stop at the first problem, but it must not
    // crash, and it must report something.
    on_small_stack("deep_garbage", || {
        let text = format!(
            "{HEADER}def @main(%x: float32) {{\n{}%x )) ]] }}\n",
            "add(".repeat(N)
        );
        let errors = parse(&text, "deep_garbage.relay").expect_err("garbage must not parse");
        assert!(!errors.errors.is_empty());
        let _ = relay_syntax::render_plain(&errors);
    });
}

#[test]
fn diagnostic_far_along_a_long_line_renders() {
    // Machine-written text can put a whole program on one line; a diagnostic 70,000 columns
    // into it must still render (miette's column arithmetic must not be what fails).
    on_small_stack("long_line", || {
        let text = format!("{HEADER}def @main() {{ {}%nope }}\n", " ".repeat(70_000));
        let errors = parse(&text, "long_line.relay").expect_err("an undefined local");
        assert_eq!(codes(&errors), ["relay::parse::undefined_local"]);
        let rendered = relay_syntax::render_plain(&errors);
        assert!(rendered.contains("%nope"), "{}", truncate(&rendered, 2000));
    });
}
