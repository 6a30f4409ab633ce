//! Syntax errors: lalrpop's errors turned into diagnostics that say, in words, what was found
//! and what would have been accepted.

use lalrpop_util::ParseError as LalrpopError;

use crate::ParseError;
use crate::lexer::Tok;

/// Converts a grammar error.
pub fn convert(e: LalrpopError<usize, Tok, ()>, text: &str) -> ParseError {
    match e {
        LalrpopError::InvalidToken { location } => ParseError::UnexpectedToken {
            found: "token".into(),
            expected: "a valid token".into(),
            span: (location, 0).into(),
            help: None,
        },
        LalrpopError::UnrecognizedEof { location, expected } => {
            let help = eof_help(text, location, &expected);
            // Point at the last character of the text, where the reader's eye is.
            let end = text[..location.min(text.len())].trim_end().len();
            let span = if end == 0 { (0, 0) } else { (end - 1, 1) };
            ParseError::UnexpectedEof {
                expected: words(&expected),
                span: span.into(),
                help,
            }
        }
        LalrpopError::UnrecognizedToken {
            token: (lo, tok, hi),
            expected,
        } => {
            let help = token_help(
                &tok,
                &expected,
                text[..lo.min(text.len())].trim_end().ends_with(';'),
            );
            ParseError::UnexpectedToken {
                found: describe(&tok),
                expected: words(&expected),
                span: (lo, hi - lo).into(),
                help,
            }
        }
        LalrpopError::ExtraToken {
            token: (lo, tok, hi),
        } => ParseError::UnexpectedToken {
            found: describe(&tok),
            expected: "the end of the input".into(),
            span: (lo, hi - lo).into(),
            help: None,
        },
        LalrpopError::User { error: () } => ParseError::UnexpectedToken {
            found: "token".into(),
            expected: "a valid token".into(),
            span: (0, 0).into(),
            help: None,
        },
    }
}

/// How a token reads in a message.
fn describe(tok: &Tok) -> String {
    match tok {
        Tok::Ident(s) => format!("identifier `{s}`"),
        Tok::Local(s) => format!("local variable `%{s}`"),
        Tok::Graph(n) => format!("graph variable `%{n}`"),
        Tok::Global(s) => format!("global `@{s}`"),
        Tok::Int(v, _) => format!("integer `{v}`"),
        Tok::Float(v, _) => format!("float `{v}`"),
        Tok::Bool(b) => format!("`{}`", if *b { "True" } else { "False" }),
        Tok::Str(s) => format!("string {s:?}"),
        Tok::Meta(m) => format!("meta reference `meta[{}][{}]`", m.key, m.index),
        Tok::Proj(i) => format!("projection `.{i}`"),
        Tok::Version(_) => "version header".into(),
        Tok::Metadata(_) => "metadata section".into(),
        other => format!("`{}`", spelling(other)),
    }
}

fn spelling(tok: &Tok) -> &'static str {
    match tok {
        Tok::Let => "let",
        Tok::Fn => "fn",
        Tok::Def => "def",
        Tok::If => "if",
        Tok::Else => "else",
        Tok::Type => "type",
        Tok::Match => "match",
        Tok::MatchQ => "match?",
        Tok::Extern => "extern",
        Tok::FreeVar => "free_var",
        Tok::Ref => "ref",
        Tok::RefRead => "ref_read",
        Tok::RefWrite => "ref_write",
        Tok::Tensor => "Tensor",
        Tok::Underscore => "_",
        Tok::LParen => "(",
        Tok::RParen => ")",
        Tok::LBracket => "[",
        Tok::RBracket => "]",
        Tok::LBrace => "{",
        Tok::RBrace => "}",
        Tok::Comma => ",",
        Tok::Dot => ".",
        Tok::Eq => "=",
        Tok::Semi => ";",
        Tok::Colon => ":",
        Tok::Plus => "+",
        Tok::Minus => "-",
        Tok::Star => "*",
        Tok::Slash => "/",
        Tok::Lt => "<",
        Tok::Gt => ">",
        Tok::Le => "<=",
        Tok::Ge => ">=",
        Tok::EqEq => "==",
        Tok::Ne => "!=",
        Tok::Arrow => "->",
        Tok::FatArrow => "=>",
        Tok::Question => "?",
        _ => "token",
    }
}

/// Terminals that can start an expression.
const EXPR_START: &[&str] = &[
    "integer",
    "float",
    "boolean",
    "local variable",
    "graph variable",
    "global variable",
    "meta reference",
    "identifier",
    "fn",
    "if",
    "ref",
    "ref_read",
    "ref_write",
    "(",
    "let",
    "free_var",
    "match",
    "match?",
    "{",
];

/// Terminals that can start a type.
const TYPE_START: &[&str] = &["(", "fn", "Tensor", "identifier", "_", "ref"];

/// Lists what the grammar expected, in words.
fn words(expected: &[String]) -> String {
    let names: Vec<&str> = expected.iter().map(|s| s.trim_matches('"')).collect();
    let has = |set: &[&str]| set.iter().filter(|t| names.contains(t)).count();
    let mut items: Vec<String> = Vec::new();
    let mut skip: Vec<&str> = Vec::new();
    if has(EXPR_START) >= 8 {
        items.push("an expression".into());
        skip.extend(EXPR_START);
    } else if has(TYPE_START) == TYPE_START.len() {
        items.push("a type".into());
        skip.extend(TYPE_START);
    }
    for n in &names {
        if skip.contains(n) {
            continue;
        }
        items.push(match *n {
            "identifier" => "a name".into(),
            "local variable" => "a local variable (`%name`)".into(),
            "graph variable" => "a graph variable (`%0`)".into(),
            "global variable" => "a global (`@name`)".into(),
            "integer" | "float" | "boolean" | "string" | "projection" => format!("a {n}"),
            "meta reference" => "a meta reference".into(),
            "version header" => "the version header".into(),
            "metadata section" => "the metadata section".into(),
            other => format!("`{other}`"),
        });
    }
    if items.len() > 8 {
        items.truncate(7);
        items.push("others".into());
    }
    match items.len() {
        0 => "nothing more".into(),
        1 => items.remove(0),
        n => format!("{} or {}", items[..n - 1].join(", "), items[n - 1]),
    }
}

fn token_help(tok: &Tok, expected: &[String], after_semicolon: bool) -> Option<String> {
    let expects = |t: &str| expected.iter().any(|e| e.trim_matches('"') == t);
    match tok {
        Tok::Ident(s) if expects("local variable") && !expects("identifier") => {
            Some(format!("local variables are written with `%`: `%{s}`"))
        }
        Tok::RBrace if after_semicolon && expects("local variable") && expects("integer") => {
            Some("every `;` must be followed by an expression; remove the trailing `;`".into())
        }
        Tok::Minus if expects("integer") => {
            Some("Relay has no unary minus on expressions: write `negative(x)`".into())
        }
        Tok::Eq if expects("==") => Some("comparison is written `==`".into()),
        Tok::Eq if expects("=>") => Some("write `=>` with no space between `=` and `>`".into()),
        Tok::Question if expects("local variable") => {
            Some("a partial match is written `match?`, with no space before `?`".into())
        }
        Tok::Int(..) if expected.len() == 1 && expects("(") => {
            Some("tensor shapes are parenthesised: `Tensor[(3), float32]`".into())
        }
        _ => None,
    }
}

fn eof_help(text: &str, location: usize, expected: &[String]) -> Option<String> {
    let before = text[..location.min(text.len())].trim_end();
    if before.ends_with(';') && expected.iter().any(|e| e.contains("local variable")) {
        let tail = &before[before.rfind('\n').map_or(0, |i| i + 1)..];
        if tail.trim_start().starts_with("free_var") {
            return Some(
                "`free_var` declarations must be followed by an expression that uses them".into(),
            );
        }
        return Some("every `;` must be followed by an expression".into());
    }
    None
}
