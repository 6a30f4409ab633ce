//! Robustness: no input makes the parser or the type checker panic. Random programs are built
//! from real Relay tokens in random order (so they get past the lexer and exercise the grammar,
//! the resolver and the checker), and real programs are mutated by deleting, duplicating and
//! swapping tokens.

use proptest::prelude::*;

/// Tokens of the text format, including ones that only make sense in some positions.
const VOCABULARY: &[&str] = &[
    "#[version = \"0.0.5\"]\n",
    "def",
    "@main",
    "@f",
    "(",
    ")",
    "{",
    "}",
    "[",
    "]",
    ",",
    ";",
    ":",
    "=",
    "->",
    "=>",
    "%x",
    "%y",
    "%0",
    "%1",
    "let",
    "fn",
    "if",
    "else",
    "match",
    "match?",
    "type",
    "List",
    "Cons",
    "Nil",
    "[A]",
    "A",
    "_",
    "Tensor[(2, 3), float32]",
    "float32",
    "int32",
    "bool",
    "(int32, float32)",
    "1",
    "-1",
    "2.5f",
    "1i64",
    "True",
    "nanf",
    "add",
    "multiply",
    "nn.relu",
    "nn.conv2d",
    "reshape",
    "newshape=[-1]",
    "axis=1",
    "split",
    "indices_or_sections=2",
    "concatenate",
    "nn.dense",
    "units=None",
    "sum",
    "keepdims=True",
    "ref",
    "ref_read",
    "ref_write",
    ".0",
    ".1",
    "+",
    "-",
    "*",
    "/",
    "==",
    "<",
    "free_var",
    "\"s\"",
    "meta[relay.Constant][0]",
    "Primitive=1",
    "fn [A](A) -> A",
    "ref(int32)",
];

const REAL: &str = r#"#[version = "0.0.5"]
type List[A] { Cons(A, List[A]), Nil }
def @len[A](%l: List[A]) -> int32 { match (%l) { Cons(_, %t) => 1 + @len(%t), Nil => 0 } }
def @main(%x: Tensor[(2, 3), float32], %w: Tensor[(4, 3), float32]) {
  %0 = nn.dense(%x, %w, units=4);
  let %r = ref(0);
  ref_write(%r, @len(Cons(1, Nil)));
  %1 = split(%0, indices_or_sections=2, axis=1);
  (nn.relu(%1.0), reshape(%1.1, newshape=[-1]), ref_read(%r))
}
"#;

/// Parses, then type-checks what parses; either may fail, neither may panic.
fn survive(text: &str) {
    if let Ok(module) = relay_syntax::parse(text, "random.relay") {
        let _ = relay_types::check_module(&module);
    }
}

fn tokens_of(text: &str) -> Vec<&str> {
    text.split_inclusive(|c: char| c.is_whitespace() || "(){}[],;".contains(c))
        .collect()
}

proptest! {
    #![proptest_config(relay_testing::proptest_config(512))]

    #[test]
    fn token_soup_never_panics(picks in proptest::collection::vec(0..VOCABULARY.len(), 0..60)) {
        let mut text = String::from("#[version = \"0.0.5\"]\n");
        for i in picks {
            text.push_str(VOCABULARY[i]);
            text.push(' ');
        }
        survive(&text);
    }

    #[test]
    fn mutated_programs_never_panic(
        edits in proptest::collection::vec((0usize..3, 0usize..1000, 0usize..1000), 1..6)
    ) {
        let mut tokens: Vec<&str> = tokens_of(REAL);
        for (kind, a, b) in edits {
            if tokens.is_empty() {
                break;
            }
            let (a, b) = (a % tokens.len(), b % tokens.len());
            match kind {
                0 => {
                    tokens.remove(a);
                }
                1 => {
                    let t = tokens[a];
                    tokens.insert(b, t);
                }
                _ => tokens.swap(a, b),
            }
        }
        survive(&tokens.concat());
    }
}

#[test]
fn the_unmutated_program_checks() {
    let module = relay_syntax::parse(REAL, "real.relay").expect("parses");
    relay_types::check_module(&module).expect("type-checks");
}
