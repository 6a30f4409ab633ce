//! The lexer: logos recognizes raw tokens; [`tokenize`] then classifies keywords, folds a `-`
//! into a following number when it is a sign (the friendly negative-literal rule of SPEC §1),
//! checks numbers, strings and `#[...]` directives, and records lexical errors.
//!
//! Differences from TVM's tokenizer, all deliberate: real multi-character operators
//! (`== != <= >= -> =>`), `.N` projection tokens (so `%x.0.1` lexes), string escapes, `nanf` /
//! `inff` (with optional widths), `i8` suffixes, and errors instead of crashes.

use std::collections::VecDeque;

use logos::Logos;
use relay_ir::{DType, Span, Symbol};

use crate::ParseError;

/// A token as the grammar sees it.
#[derive(Clone, Debug, PartialEq)]
pub enum Tok {
    /// An identifier (`nn`, `Cons`, `float32`, `A`).
    Ident(Symbol),
    /// `%name`.
    Local(Symbol),
    /// `%N`.
    Graph(u64),
    /// `@name`.
    Global(Symbol),
    /// An integer literal with its dtype.
    Int(i64, DType),
    /// A float literal: its value (full `f64` precision) and dtype.
    Float(f64, DType),
    /// `True` / `False`.
    Bool(bool),
    /// A string literal, escapes decoded.
    Str(Box<str>),
    /// `meta[key][index]`.
    Meta(Box<MetaRef>),
    /// `.N` after an expression.
    Proj(u32),
    /// `#[version = "..."]`; the quoted text.
    Version(Box<str>),
    /// `#[metadata]` and the rest of the file.
    Metadata(Box<str>),
    // Keywords.
    Let,
    Fn,
    Def,
    If,
    Else,
    Type,
    Match,
    MatchQ,
    Extern,
    FreeVar,
    Ref,
    RefRead,
    RefWrite,
    Tensor,
    Underscore,
    // Punctuation.
    LParen,
    RParen,
    LBracket,
    RBracket,
    LBrace,
    RBrace,
    Comma,
    Dot,
    Eq,
    Semi,
    Colon,
    Plus,
    Minus,
    Star,
    Slash,
    Lt,
    Gt,
    Le,
    Ge,
    EqEq,
    Ne,
    Arrow,
    FatArrow,
    Question,
}

/// A `meta[key][index]` reference.
#[derive(Clone, Debug, PartialEq)]
pub struct MetaRef {
    /// The type key, e.g. `relay.Constant`.
    pub key: String,
    /// The index.
    pub index: u64,
}

#[derive(Logos, Clone, Debug, PartialEq)]
#[logos(skip r"[ \t\r\n\f]+")]
enum Raw {
    #[regex(r"//[^\n]*", allow_greedy = true)]
    LineComment,
    #[token("/*", block_comment)]
    BlockComment(bool),
    #[regex(r"#\[[^\]\n]*\]?", directive)]
    Directive(Directive),
    #[regex(r"meta\[[^\]\n]*\]\[[0-9]*\]")]
    Meta,
    #[regex(r"%[A-Za-z_][A-Za-z0-9_/]*")]
    Local,
    #[regex(r"%[0-9]+")]
    Graph,
    #[regex(r"@[A-Za-z_][A-Za-z0-9_/]*")]
    Global,
    #[regex(r"[A-Za-z_][A-Za-z0-9_/]*")]
    Ident,
    #[regex(r"[0-9]+(\.[0-9]*)?([eE][+-]?[0-9]+)?[A-Za-z_0-9]*")]
    Number,
    #[regex(r"\.[0-9]+")]
    Proj,
    #[regex(r#""([^"\\]|\\(.|\n))*""#)]
    Str,
    #[regex(r#""([^"\\]|\\(.|\n))*\\?"#)]
    UnterminatedStr,
    #[token("(")]
    LParen,
    #[token(")")]
    RParen,
    #[token("[")]
    LBracket,
    #[token("]")]
    RBracket,
    #[token("{")]
    LBrace,
    #[token("}")]
    RBrace,
    #[token(",")]
    Comma,
    #[token(".")]
    Dot,
    #[token("=")]
    Eq,
    #[token(";")]
    Semi,
    #[token(":")]
    Colon,
    #[token("+")]
    Plus,
    #[token("-")]
    Minus,
    #[token("*")]
    Star,
    #[token("/")]
    Slash,
    #[token("<")]
    Lt,
    #[token(">")]
    Gt,
    #[token("<=")]
    Le,
    #[token(">=")]
    Ge,
    #[token("==")]
    EqEq,
    #[token("!=")]
    Ne,
    #[token("->")]
    Arrow,
    #[token("=>")]
    FatArrow,
    #[token("?")]
    Question,
}

#[derive(Clone, Debug, PartialEq)]
enum Directive {
    Version(String),
    Metadata(String),
    Other(String),
}

/// Consumes a nested block comment; `true` when it is closed.
fn block_comment(lex: &mut logos::Lexer<Raw>) -> bool {
    let rest = lex.remainder().as_bytes();
    let mut depth = 1usize;
    let mut i = 0;
    while i < rest.len() {
        if rest[i..].starts_with(b"/*") {
            depth += 1;
            i += 2;
        } else if rest[i..].starts_with(b"*/") {
            depth -= 1;
            i += 2;
            if depth == 0 {
                lex.bump(i);
                return true;
            }
        } else {
            i += 1;
        }
    }
    lex.bump(rest.len());
    false
}

/// Classifies `#[...]`; `#[metadata]` swallows the rest of the file.
fn directive(lex: &mut logos::Lexer<Raw>) -> Directive {
    let text = lex.slice();
    let inner = text.trim_start_matches("#[").trim_end_matches(']').trim();
    if inner == "metadata" && text.ends_with(']') {
        let rest = lex.remainder().to_owned();
        lex.bump(lex.remainder().len());
        return Directive::Metadata(rest);
    }
    if let Some((key, value)) = inner.split_once('=')
        && key.trim() == "version"
        && text.ends_with(']')
    {
        return Directive::Version(value.trim().to_owned());
    }
    Directive::Other(inner.to_owned())
}

/// A token with its byte span, as lalrpop wants it.
pub type Spanned = (usize, Tok, usize);

/// The token stream the grammar reads: raw logos tokens are classified one at a time, with a
/// small lookahead buffer for the two rules that need it (signs glued to numbers, `match?`).
///
/// Lexical errors are appended to the error list. Number errors are not fatal: a placeholder
/// token keeps the parse going so later errors are found too. A fatal error (an invalid
/// character, an unterminated string or comment, a malformed directive) ends the stream with
/// one `Err(())`; [`Lexer::drain`] then scans the rest of the text for further lexical errors.
pub struct Lexer<'t, 'e> {
    text: &'t str,
    raw: logos::Lexer<'t, Raw>,
    peeked: VecDeque<(Raw, usize, usize)>,
    errors: &'e mut Vec<ParseError>,
    prev_ends_operand: bool,
    fatal: bool,
    stopped: bool,
}

impl<'t, 'e> Lexer<'t, 'e> {
    /// A lexer over `text`, appending problems to `errors`.
    pub fn new(text: &'t str, errors: &'e mut Vec<ParseError>) -> Self {
        Lexer {
            text,
            raw: Raw::lexer(text),
            peeked: VecDeque::new(),
            errors,
            prev_ends_operand: false,
            fatal: false,
            stopped: false,
        }
    }

    /// Whether a fatal lexical error was found.
    pub fn fatal(&self) -> bool {
        self.fatal
    }

    /// Scans the rest of the text, recording its lexical errors.
    pub fn drain(&mut self) {
        while self.next_token().is_some() {}
    }

    /// The next raw token, comments skipped and raw-level errors recorded.
    fn next_raw(&mut self) -> Option<(Raw, usize, usize)> {
        if let Some(t) = self.peeked.pop_front() {
            return Some(t);
        }
        self.pull_raw()
    }

    fn pull_raw(&mut self) -> Option<(Raw, usize, usize)> {
        loop {
            let result = self.raw.next()?;
            let span = self.raw.span();
            match result {
                Ok(Raw::LineComment) | Ok(Raw::BlockComment(true)) => {}
                Ok(Raw::BlockComment(false)) => {
                    self.fatal = true;
                    self.errors.push(ParseError::UnterminatedComment {
                        span: (span.start, 2).into(),
                    });
                }
                Ok(Raw::UnterminatedStr) => {
                    self.fatal = true;
                    self.errors.push(ParseError::UnterminatedString {
                        span: (span.start, 1).into(),
                    });
                }
                Ok(tok) => return Some((tok, span.start, span.end)),
                Err(()) => {
                    self.fatal = true;
                    let slice = self.raw.slice();
                    self.errors.push(ParseError::InvalidCharacter {
                        text: slice.to_owned(),
                        span: (span.start, span.end - span.start).into(),
                        help: invalid_character_help(slice),
                    });
                }
            }
        }
    }

    /// The raw token `k` places ahead (0 is the next one).
    fn peek_raw(&mut self, k: usize) -> Option<&(Raw, usize, usize)> {
        while self.peeked.len() <= k {
            let t = self.pull_raw()?;
            self.peeked.push_back(t);
        }
        self.peeked.get(k)
    }

    /// The next classified token, or `None` at the end of the text.
    fn next_token(&mut self) -> Option<Spanned> {
        loop {
            let (raw, lo, hi) = self.next_raw()?;
            if let Some(t) = self.classify(raw, lo, hi) {
                self.prev_ends_operand = ends_operand(&t.1);
                return Some(t);
            }
        }
    }

    /// Turns one raw token (and, for signs and `match?`, the ones after it) into a token.
    fn classify(&mut self, raw: Raw, lo: usize, hi: usize) -> Option<Spanned> {
        let text = self.text;
        let slice = &text[lo..hi];
        // A run of `-` glued to a number is a sign when the previous token cannot end an operand.
        if raw == Raw::Minus && !self.prev_ends_operand {
            let mut minuses = 1;
            let mut end = hi;
            while let Some(&(Raw::Minus, l, h)) = self.peek_raw(minuses - 1) {
                if l != end {
                    break;
                }
                minuses += 1;
                end = h;
            }
            if let Some(&(ref next, nlo, nhi)) = self.peek_raw(minuses - 1)
                && nlo == end
                && is_numeric(next, &text[nlo..nhi])
            {
                self.peeked.drain(..minuses);
                let tok = number(
                    &text[nlo..nhi],
                    minuses % 2 == 1,
                    Span::new(lo, nhi),
                    self.errors,
                );
                return Some((lo, tok, nhi));
            }
        }
        let errors = &mut *self.errors;
        let tok = match raw {
            Raw::Ident => match keyword(slice) {
                Some(Tok::Match)
                    if self
                        .peek_raw(0)
                        .is_some_and(|n| n.0 == Raw::Question && n.1 == hi) =>
                {
                    // `match?` is one token only when the `?` is glued to `match`.
                    self.peeked.pop_front();
                    return Some((lo, Tok::MatchQ, hi + 1));
                }
                Some(t) => t,
                None => {
                    special_float(slice, false).unwrap_or_else(|| Tok::Ident(Symbol::intern(slice)))
                }
            },
            Raw::Local => Tok::Local(Symbol::intern(&slice[1..])),
            Raw::Global => Tok::Global(Symbol::intern(&slice[1..])),
            Raw::Graph => match slice[1..].parse::<u64>() {
                Ok(n) => Tok::Graph(n),
                Err(_) => {
                    errors.push(bad_number(
                        format!("graph variable number `{slice}` is too large"),
                        Span::new(lo, hi),
                        "too large",
                        None,
                    ));
                    Tok::Graph(u64::MAX)
                }
            },
            Raw::Number => number(slice, false, Span::new(lo, hi), errors),
            Raw::Proj => match slice[1..].parse::<u32>() {
                Ok(n) => Tok::Proj(n),
                Err(_) => {
                    errors.push(bad_number(
                        format!("tuple index `{}` is too large", &slice[1..]),
                        Span::new(lo, hi),
                        "too large",
                        None,
                    ));
                    Tok::Proj(u32::MAX)
                }
            },
            Raw::Str => match unescape(&slice[1..slice.len() - 1], lo + 1) {
                Ok(s) => Tok::Str(s.into()),
                Err((text, at, len)) => {
                    errors.push(ParseError::BadEscape {
                        text,
                        span: (at, len).into(),
                    });
                    self.fatal = true;
                    Tok::Str("".into())
                }
            },
            Raw::Meta => match meta_ref(slice) {
                Some(m) => Tok::Meta(Box::new(m)),
                None => {
                    errors.push(ParseError::BadMetaReference {
                        message: format!("malformed meta reference `{slice}`"),
                        span: (lo, hi - lo).into(),
                        label: "expected `meta[TypeKey][index]`".into(),
                        help: None,
                    });
                    self.fatal = true;
                    Tok::Meta(Box::new(MetaRef {
                        key: String::new(),
                        index: 0,
                    }))
                }
            },
            Raw::Directive(Directive::Version(v)) => Tok::Version(v.into()),
            Raw::Directive(Directive::Metadata(m)) => Tok::Metadata(m.into()),
            Raw::Directive(Directive::Other(inner)) => {
                self.fatal = true;
                let message = if slice.ends_with(']') {
                    format!("unsupported directive `#[{inner}]`")
                } else {
                    "unterminated directive: `#[` needs a closing `]`".to_owned()
                };
                errors.push(ParseError::BadDirective {
                    message,
                    span: (lo, hi - lo).into(),
                });
                return None;
            }
            Raw::LParen => Tok::LParen,
            Raw::RParen => Tok::RParen,
            Raw::LBracket => Tok::LBracket,
            Raw::RBracket => Tok::RBracket,
            Raw::LBrace => Tok::LBrace,
            Raw::RBrace => Tok::RBrace,
            Raw::Comma => Tok::Comma,
            Raw::Dot => Tok::Dot,
            Raw::Eq => Tok::Eq,
            Raw::Semi => Tok::Semi,
            Raw::Colon => Tok::Colon,
            Raw::Plus => Tok::Plus,
            Raw::Minus => Tok::Minus,
            Raw::Star => Tok::Star,
            Raw::Slash => Tok::Slash,
            Raw::Lt => Tok::Lt,
            Raw::Gt => Tok::Gt,
            Raw::Le => Tok::Le,
            Raw::Ge => Tok::Ge,
            Raw::EqEq => Tok::EqEq,
            Raw::Ne => Tok::Ne,
            Raw::Arrow => Tok::Arrow,
            Raw::FatArrow => Tok::FatArrow,
            Raw::Question => Tok::Question,
            // Comments and unterminated strings never leave `pull_raw`.
            Raw::LineComment | Raw::BlockComment(_) | Raw::UnterminatedStr => return None,
        };
        Some((lo, tok, hi))
    }
}

impl Iterator for Lexer<'_, '_> {
    type Item = Result<Spanned, ()>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.stopped {
            return None;
        }
        let token = self.next_token();
        if self.fatal {
            self.stopped = true;
            return Some(Err(()));
        }
        token.map(Ok)
    }
}

fn invalid_character_help(slice: &str) -> Option<String> {
    Some(
        match slice {
            "!" => "Relay has no `!` operator: write `logical_not(x)`",
            "&" | "|" => {
                "Relay has no `&&`/`||` operators: write `logical_and(a, b)` / `logical_or(a, b)`"
            }
            "%" => "`%` starts a variable name (`%x`, `%0`); modulo is `mod(a, b)`",
            "@" => "`@` starts a global name such as `@main`",
            "#" => "directives are written `#[version = \"0.0.5\"]` or `#[metadata]`",
            _ => return None,
        }
        .to_owned(),
    )
}

/// Tokenizes the whole text at once (for tests): the tokens, and whether a fatal error was found.
#[cfg(test)]
pub fn tokenize(text: &str, errors: &mut Vec<ParseError>) -> (Vec<Spanned>, bool) {
    let mut lexer = Lexer::new(text, errors);
    let mut tokens = Vec::new();
    while let Some(t) = lexer.next_token() {
        tokens.push(t);
    }
    (tokens, lexer.fatal())
}

fn keyword(s: &str) -> Option<Tok> {
    Some(match s {
        "let" => Tok::Let,
        "fn" => Tok::Fn,
        "def" => Tok::Def,
        "if" => Tok::If,
        "else" => Tok::Else,
        "type" => Tok::Type,
        "match" => Tok::Match,
        "extern" => Tok::Extern,
        "free_var" => Tok::FreeVar,
        "ref" => Tok::Ref,
        "ref_read" => Tok::RefRead,
        "ref_write" => Tok::RefWrite,
        "Tensor" => Tok::Tensor,
        "True" => Tok::Bool(true),
        "False" => Tok::Bool(false),
        "_" => Tok::Underscore,
        _ => return None,
    })
}

/// `inff`, `nanf`, with an optional width (`inff64`), as float tokens.
fn special_float(s: &str, negative: bool) -> Option<Tok> {
    let (value, width) = if let Some(w) = s.strip_prefix("inff") {
        (
            if negative {
                f64::NEG_INFINITY
            } else {
                f64::INFINITY
            },
            w,
        )
    } else if let Some(w) = s.strip_prefix("nanf") {
        (f64::NAN, w)
    } else {
        return None;
    };
    let dtype = match width {
        "" | "32" => DType::F32,
        "16" => DType::F16,
        "64" => DType::F64,
        _ => return None,
    };
    Some(Tok::Float(value, dtype))
}

fn is_numeric(tok: &Raw, slice: &str) -> bool {
    *tok == Raw::Number || (*tok == Raw::Ident && special_float(slice, false).is_some())
}

/// Whether a token can be the last token of an operand, so a following `-` is binary.
fn ends_operand(tok: &Tok) -> bool {
    matches!(
        tok,
        Tok::Ident(_)
            | Tok::Local(_)
            | Tok::Graph(_)
            | Tok::Global(_)
            | Tok::Int(..)
            | Tok::Float(..)
            | Tok::Bool(_)
            | Tok::Str(_)
            | Tok::Meta(_)
            | Tok::Proj(_)
            | Tok::RParen
            | Tok::RBracket
            | Tok::RBrace
    )
}

fn bad_number(message: String, span: Span, label: &str, help: Option<String>) -> ParseError {
    ParseError::BadNumber {
        message,
        span: ParseError::span_of(span),
        label: label.to_owned(),
        help,
    }
}

/// Checks and converts a numeric literal (without its sign).
fn number(slice: &str, negative: bool, span: Span, errors: &mut Vec<ParseError>) -> Tok {
    if let Some(t) = special_float(slice, negative) {
        return t;
    }
    // Split into the numeric body and the suffix.
    let bytes = slice.as_bytes();
    let mut end = 0;
    while end < bytes.len() && bytes[end].is_ascii_digit() {
        end += 1;
    }
    let mut is_float_body = false;
    if end < bytes.len() && bytes[end] == b'.' {
        is_float_body = true;
        end += 1;
        while end < bytes.len() && bytes[end].is_ascii_digit() {
            end += 1;
        }
    }
    if end < bytes.len() && (bytes[end] == b'e' || bytes[end] == b'E') {
        let mut k = end + 1;
        if k < bytes.len() && (bytes[k] == b'+' || bytes[k] == b'-') {
            k += 1;
        }
        if k < bytes.len() && bytes[k].is_ascii_digit() {
            while k < bytes.len() && bytes[k].is_ascii_digit() {
                k += 1;
            }
            is_float_body = true;
            end = k;
        }
    }
    let body = &slice[..end];
    let suffix = &slice[end..];
    let signed = if negative {
        format!("-{body}")
    } else {
        body.to_owned()
    };
    let text = if negative {
        format!("-{slice}")
    } else {
        slice.to_owned()
    };

    let float_dtype = match suffix {
        "f" | "f32" => Some(DType::F32),
        "f16" => Some(DType::F16),
        "f64" => Some(DType::F64),
        _ => None,
    };
    if let Some(dtype) = float_dtype {
        // Range against the dtype is checked by the resolver, which knows whether this is a
        // constant (float16/32/64) or an attribute (a double). Here only a value beyond even
        // float64 is an error.
        let value = signed.parse::<f64>().unwrap_or(f64::NAN);
        if !value.is_finite() {
            errors.push(bad_number(
                format!("float literal `{text}` is out of range"),
                span,
                "out of range",
                Some("write `inff` or `-inff` for infinity".into()),
            ));
            return Tok::Float(0.0, dtype);
        }
        return Tok::Float(value, dtype);
    }
    let int_dtype = match suffix {
        "" => None,
        "i" | "i32" => Some(DType::I32),
        "i8" => Some(DType::I8),
        "i16" => Some(DType::I16),
        "i64" => Some(DType::I64),
        _ => {
            errors.push(ParseError::BadSuffix {
                suffix: suffix.to_owned(),
                span: ParseError::span_of(span),
            });
            return Tok::Int(0, DType::I32);
        }
    };
    if is_float_body {
        errors.push(bad_number(
            format!("float literal `{text}` has no width suffix"),
            span,
            "needs a suffix",
            Some(format!(
                "float literals need a width suffix: write `{text}f`"
            )),
        ));
        return Tok::Float(signed.parse::<f64>().unwrap_or(0.0), DType::F32);
    }
    let Ok(value) = signed.parse::<i128>() else {
        errors.push(bad_number(
            format!("integer literal `{text}` is too large"),
            span,
            "too large",
            None,
        ));
        return Tok::Int(0, DType::I32);
    };
    let dtype = match int_dtype {
        Some(d) => d,
        None if i32::try_from(value).is_ok() => DType::I32,
        None => DType::I64,
    };
    let bits = dtype.bits as u32;
    let (min, max) = (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1);
    if value < min || value > max {
        errors.push(bad_number(
            format!("integer literal `{text}` is out of range for {dtype}"),
            span,
            "out of range",
            Some(format!("{dtype} holds {min} to {max}")),
        ));
        return Tok::Int(0, dtype);
    }
    Tok::Int(value as i64, dtype)
}

/// Decodes the escapes of a string literal's body; an unknown escape is returned as its text
/// and byte range.
fn unescape(body: &str, offset: usize) -> Result<String, (String, usize, usize)> {
    let mut out = String::with_capacity(body.len());
    let mut chars = body.char_indices();
    while let Some((i, c)) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some((_, '"')) => out.push('"'),
            Some((_, '\\')) => out.push('\\'),
            Some((_, 'n')) => out.push('\n'),
            Some((_, 't')) => out.push('\t'),
            Some((_, other)) => {
                return Err((format!("\\{other}"), offset + i, 1 + other.len_utf8()));
            }
            None => return Err(("\\".into(), offset + i, 1)),
        }
    }
    Ok(out)
}

fn meta_ref(slice: &str) -> Option<MetaRef> {
    let rest = slice.strip_prefix("meta[")?;
    let (key, rest) = rest.split_once("][")?;
    let index = rest.strip_suffix(']')?.parse::<u64>().ok()?;
    Some(MetaRef {
        key: key.trim().to_owned(),
        index,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(text: &str) -> Vec<Tok> {
        let mut errors = Vec::new();
        let (toks, fatal) = tokenize(text, &mut errors);
        assert!(errors.is_empty() && !fatal, "{text}: {errors:?}");
        toks.into_iter().map(|(_, t, _)| t).collect()
    }

    fn first_error(text: &str) -> String {
        let mut errors = Vec::new();
        tokenize(text, &mut errors);
        errors.first().map(|e| e.to_string()).unwrap_or_default()
    }

    #[test]
    fn numbers() {
        assert_eq!(toks("1"), vec![Tok::Int(1, DType::I32)]);
        assert_eq!(toks("2147483648"), vec![Tok::Int(2147483648, DType::I64)]);
        assert_eq!(
            toks("5i8 5i16 5i 5i64"),
            vec![
                Tok::Int(5, DType::I8),
                Tok::Int(5, DType::I16),
                Tok::Int(5, DType::I32),
                Tok::Int(5, DType::I64)
            ]
        );
        assert_eq!(toks("1e-05f"), vec![Tok::Float(1e-5, DType::F32)]);
        assert_eq!(
            toks("3f16 2.5f64 1.f"),
            vec![
                Tok::Float(3.0, DType::F16),
                Tok::Float(2.5, DType::F64),
                Tok::Float(1.0, DType::F32)
            ]
        );
        assert!(first_error("1.5").contains("no width suffix"));
        assert!(first_error("2147483648i32").contains("out of range"));
        assert!(first_error("32768i16").contains("out of range"));
        assert!(first_error("1e400f").contains("out of range"));
        assert!(first_error("5u8").contains("unsupported numeric suffix"));
    }

    #[test]
    fn signs() {
        assert_eq!(toks("(-1)")[1], Tok::Int(-1, DType::I32));
        assert_eq!(toks("(--10)")[1], Tok::Int(10, DType::I32));
        assert_eq!(toks("(---10)")[1], Tok::Int(-10, DType::I32));
        assert_eq!(toks("%x -1")[1], Tok::Minus);
        assert_eq!(
            toks("1-2"),
            vec![Tok::Int(1, DType::I32), Tok::Minus, Tok::Int(2, DType::I32)]
        );
        assert_eq!(
            toks("(-inff)")[1],
            Tok::Float(f64::NEG_INFINITY, DType::F32)
        );
        assert_eq!(toks("(-2147483648)")[1], Tok::Int(-2147483648, DType::I32));
    }

    #[test]
    fn names_and_projections() {
        assert_eq!(
            toks("%x.0.1"),
            vec![Tok::Local("x".into()), Tok::Proj(0), Tok::Proj(1)]
        );
        assert_eq!(toks("%0.0"), vec![Tok::Graph(0), Tok::Proj(0)]);
        assert_eq!(
            toks("nn.relu"),
            vec![Tok::Ident("nn".into()), Tok::Dot, Tok::Ident("relu".into())]
        );
        assert_eq!(toks("%base/x"), vec![Tok::Local("base/x".into())]);
        assert_eq!(
            toks("match? match ?"),
            vec![Tok::MatchQ, Tok::Match, Tok::Question]
        );
        assert_eq!(
            toks("/* a /* b */ c */ _ _x"),
            vec![Tok::Underscore, Tok::Ident("_x".into())]
        );
    }

    #[test]
    fn strings_and_directives() {
        assert_eq!(toks(r#""a\"b\\c\nd""#), vec![Tok::Str("a\"b\\c\nd".into())]);
        assert_eq!(
            toks("#[version = \"0.0.5\"]"),
            vec![Tok::Version("\"0.0.5\"".into())]
        );
        assert_eq!(toks("#[metadata]\n{}"), vec![Tok::Metadata("\n{}".into())]);
        assert!(first_error("\"abc").contains("unterminated string"));
        assert!(first_error("/* abc").contains("unterminated block comment"));
        assert!(first_error("#[foo]").contains("unsupported directive"));
        assert!(first_error(r#""\q""#).contains("unknown escape"));
        assert_eq!(
            toks("meta[relay.Constant][3]"),
            vec![Tok::Meta(Box::new(MetaRef {
                key: "relay.Constant".into(),
                index: 3
            }))]
        );
    }
}
