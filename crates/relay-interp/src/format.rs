//! Readable output of values (SPEC §5): tensors as numpy's `array2string(a, separator=", ")`
//! writes them, tuples and ADT values structurally with constructor names taken from the
//! value's type (`Cons(1, Cons(2, Nil))`), closures as `<closure>`, references as `ref(...)`
//! and storage as `storage(24 bytes)`.

use std::collections::HashSet;

use relay_ir::{Module, NDArray, Type, TypeKind, Value};
use relay_runtime::elements::{read_f64, read_i128, write_f64};
use relay_runtime::{DType, DTypeCode};

/// Arrays with more elements than this are summarized with `...` (numpy's `threshold`).
const THRESHOLD: usize = 1000;
/// Elements shown at each end of a summarized axis (numpy's `edgeitems`).
const EDGE_ITEMS: usize = 3;
/// The line width numpy wraps at (`linewidth`).
const LINE_WIDTH: usize = 75;
/// Fractional digits numpy prints at most (`precision`).
const PRECISION: usize = 8;

/// What is left to print, in order.
enum Item {
    /// A value, with its type when known.
    Value(Value, Option<Type>),
    /// Literal text.
    Text(&'static str),
    /// Literal text made at run time.
    Owned(String),
}

/// Formats `value` readably. `ty` is the value's type, if known: it supplies the constructor
/// names of ADT values (without it they print as `#tag(...)`). Works iteratively, so a list
/// of a million elements prints without deep native recursion.
pub fn format_value(value: &Value, ty: Option<&Type>, module: &Module) -> String {
    let mut out = String::new();
    let mut work = vec![Item::Value(value.clone(), ty.cloned())];
    let mut refs_seen: HashSet<*const ()> = HashSet::new();
    while let Some(item) = work.pop() {
        let (value, ty) = match item {
            Item::Text(t) => {
                out.push_str(t);
                continue;
            }
            Item::Owned(t) => {
                out.push_str(&t);
                continue;
            }
            Item::Value(v, t) => (v, t),
        };
        match &value {
            Value::Tensor(t) => out.push_str(&format_tensor(t)),
            Value::Closure(_) => out.push_str("<closure>"),
            Value::Storage(s) => out.push_str(&format!("storage({} bytes)", s.size())),
            Value::Ref(cell) => {
                let inner_ty = ty.as_ref().and_then(|t| match t.kind() {
                    TypeKind::Ref(inner) => Some(inner.clone()),
                    _ => None,
                });
                if !refs_seen.insert(std::sync::Arc::as_ptr(cell).cast()) {
                    out.push_str("ref(...)");
                    continue;
                }
                let inner = cell.lock().unwrap_or_else(|e| e.into_inner()).clone();
                out.push_str("ref(");
                work.push(Item::Text(")"));
                work.push(Item::Value(inner, inner_ty));
            }
            Value::Tuple(fields) => {
                let field_tys: Vec<Option<Type>> = match ty.as_ref().map(Type::kind) {
                    Some(TypeKind::Tuple(ts)) if ts.len() == fields.len() => {
                        ts.iter().cloned().map(Some).collect()
                    }
                    _ => vec![None; fields.len()],
                };
                out.push('(');
                work.push(Item::Text(if fields.len() == 1 { ",)" } else { ")" }));
                push_fields(&mut work, fields, field_tys);
            }
            Value::Adt(adt) => {
                let resolved = ty.as_ref().and_then(|t| module.constructor_of(t, adt.tag));
                let (name, field_tys) = match resolved {
                    Some((name, tys)) if tys.len() == adt.fields.len() => {
                        (name, tys.into_iter().map(Some).collect())
                    }
                    Some((name, _)) => (name, vec![None; adt.fields.len()]),
                    None => (format!("#{}", adt.tag), vec![None; adt.fields.len()]),
                };
                out.push_str(&name);
                if !adt.fields.is_empty() {
                    out.push('(');
                    work.push(Item::Text(")"));
                    push_fields(&mut work, &adt.fields, field_tys);
                }
            }
        }
    }
    out
}

/// Pushes `fields` separated by `", "` so that they pop in order.
fn push_fields(work: &mut Vec<Item>, fields: &[Value], tys: Vec<Option<Type>>) {
    for (i, (f, t)) in fields.iter().zip(tys).enumerate().rev() {
        work.push(Item::Value(f.clone(), t));
        if i > 0 {
            work.push(Item::Owned(", ".to_owned()));
        }
    }
}

/// Formats a tensor as numpy's `array2string(a, separator=", ")` does with default options:
/// `[[1., 2.],\n [3., 4.]]`, a rank-0 tensor as its element (`1.5`), booleans as `True` and
/// `False`, arrays of more than 1000 elements summarized with `...`, lines wrapped at 75
/// columns.
pub fn format_tensor(a: &NDArray) -> String {
    let shape: Vec<usize> = a
        .shape()
        .iter()
        .map(|&d| usize::try_from(d).unwrap_or(0))
        .collect();
    if !shape.is_empty() && shape.contains(&0) {
        return "[]".to_owned();
    }
    let summarize = a.num_elements() > THRESHOLD;
    let mut strides = vec![1usize; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        strides[i] = strides[i + 1].saturating_mul(shape[i + 1]);
    }
    let mut shown = Vec::new();
    shown_elements(&shape, &strides, 0, 0, summarize, &mut shown);
    let printer = Printer {
        array: a,
        format: ElemFormat::new(a, &shown),
        summarize,
        shape,
        strides,
    };
    let mut index = Vec::new();
    printer.recurse(&mut index, " ", LINE_WIDTH)
}

/// Appends the flat indices of the elements printed (all, or the edges of each axis when
/// summarizing), in order.
fn shown_elements(
    shape: &[usize],
    strides: &[usize],
    axis: usize,
    base: usize,
    summarize: bool,
    out: &mut Vec<usize>,
) {
    relay_ir::ensure_sufficient_stack(|| {
        let Some(&len) = shape.get(axis) else {
            out.push(base);
            return;
        };
        for i in axis_indices(len, summarize) {
            shown_elements(
                shape,
                strides,
                axis + 1,
                base + i * strides[axis],
                summarize,
                out,
            );
        }
    })
}

/// The indices printed along an axis of `len`.
fn axis_indices(len: usize, summarize: bool) -> Vec<usize> {
    if summarize && len > 2 * EDGE_ITEMS {
        (0..EDGE_ITEMS).chain(len - EDGE_ITEMS..len).collect()
    } else {
        (0..len).collect()
    }
}

/// numpy's `_formatArray` over one tensor.
struct Printer<'a> {
    array: &'a NDArray,
    format: ElemFormat,
    summarize: bool,
    shape: Vec<usize>,
    strides: Vec<usize>,
}

impl Printer<'_> {
    /// The text of the sub-array at `index` (numpy's `recurser`).
    fn recurse(&self, index: &mut Vec<usize>, hanging: &str, width: usize) -> String {
        relay_ir::ensure_sufficient_stack(|| {
            let axis = index.len();
            let Some(&len) = self.shape.get(axis) else {
                let flat: usize = index.iter().zip(&self.strides).map(|(i, s)| i * s).sum();
                return self.format.format(self.array, flat);
            };
            let axes_left = self.shape.len() - axis;
            let next_hanging = format!("{hanging} ");
            let next_width = width.saturating_sub(1);
            let show_summary = self.summarize && 2 * EDGE_ITEMS < len;
            let (leading, trailing) = if show_summary {
                (EDGE_ITEMS, EDGE_ITEMS)
            } else {
                (0, len)
            };
            let sub = |index: &mut Vec<usize>, i: usize| {
                index.push(i);
                let text = self.recurse(index, &next_hanging, next_width);
                index.pop();
                text
            };
            let mut s = String::new();
            if axes_left == 1 {
                let elem_width = width.saturating_sub(1);
                let mut line = hanging.to_owned();
                for i in 0..leading {
                    let word = sub(index, i);
                    extend_line(&mut s, &mut line, &word, elem_width, hanging);
                    line.push_str(", ");
                }
                if show_summary {
                    extend_line(&mut s, &mut line, "...", elem_width, hanging);
                    line.push_str(", ");
                }
                for i in (2..=trailing).rev() {
                    let word = sub(index, len - i);
                    extend_line(&mut s, &mut line, &word, elem_width, hanging);
                    line.push_str(", ");
                }
                let word = sub(index, len - 1);
                extend_line(&mut s, &mut line, &word, elem_width, hanging);
                s.push_str(&line);
            } else {
                let line_sep = format!(",{}", "\n".repeat(axes_left - 1));
                for i in 0..leading {
                    s.push_str(hanging);
                    s.push_str(&sub(index, i));
                    s.push_str(&line_sep);
                }
                if show_summary {
                    s.push_str(hanging);
                    s.push_str("...");
                    s.push_str(&line_sep);
                }
                for i in (2..=trailing).rev() {
                    s.push_str(hanging);
                    s.push_str(&sub(index, len - i));
                    s.push_str(&line_sep);
                }
                s.push_str(hanging);
                s.push_str(&sub(index, len - 1));
            }
            format!("[{}]", s.get(hanging.len()..).unwrap_or(""))
        })
    }
}

/// numpy's `_extendLine`: appends `word` to `line`, first moving `line` into `s` and starting
/// a new one if the word would pass `width` (unless the line is still empty).
fn extend_line(s: &mut String, line: &mut String, word: &str, width: usize, prefix: &str) {
    let needs_wrap = line.len() + word.len() > width && line.len() > prefix.len();
    if needs_wrap {
        s.push_str(line.trim_end());
        s.push('\n');
        *line = prefix.to_owned();
    }
    line.push_str(word);
}

/// How elements of one tensor are written, fitted to the elements shown (numpy's
/// `BoolFormat`, `IntegerFormat` and `FloatingFormat` with `floatmode="maxprec"`).
enum ElemFormat {
    Bool {
        /// `" True"` in arrays (aligned with `"False"`), `"True"` for rank 0.
        true_str: &'static str,
    },
    Int {
        width: usize,
    },
    Float(FloatFormat),
}

/// numpy's `FloatingFormat` state after `fillFormat`.
struct FloatFormat {
    exp_format: bool,
    pad_left: usize,
    pad_right: usize,
    /// Mantissa digits in scientific form (every element gets exactly this many).
    precision: usize,
    /// Exponent digits in scientific form.
    exp_size: usize,
}

/// A float element at its own precision, so that the shortest round-trip digits are those of
/// the element's dtype.
#[derive(Clone, Copy)]
enum Float {
    F32(f32),
    F64(f64),
}

impl Float {
    /// The element at flat index `i` of float tensor `a`.
    fn read(a: &NDArray, i: usize) -> Float {
        let d = a.dtype();
        let size = d.size_bytes();
        let bytes = a.as_bytes().get(i * size..(i + 1) * size).unwrap_or(&[]);
        if bytes.len() < size || size == 0 {
            return Float::F64(f64::NAN);
        }
        let v = read_f64(d, bytes);
        match (d.code, d.bits) {
            (DTypeCode::Float, 32) => Float::F32(v as f32),
            (DTypeCode::Float, 64) => Float::F64(v),
            // Narrow types: find the shortest decimal that reads back as the same element,
            // then print that decimal.
            _ => Float::F64(shortest_narrow(d, v)),
        }
    }

    fn value(self) -> f64 {
        match self {
            Float::F32(v) => v as f64,
            Float::F64(v) => v,
        }
    }

    /// The shortest round-trip digits, positional.
    fn positional(self) -> String {
        match self {
            Float::F32(v) => format!("{v}"),
            Float::F64(v) => format!("{v}"),
        }
    }

    /// Positional, rounded to `p` fractional digits.
    fn positional_fixed(self, p: usize) -> String {
        match self {
            Float::F32(v) => format!("{v:.p$}"),
            Float::F64(v) => format!("{v:.p$}"),
        }
    }

    /// The shortest round-trip digits, scientific (`1.5e-5`).
    fn scientific(self) -> String {
        match self {
            Float::F32(v) => format!("{v:e}"),
            Float::F64(v) => format!("{v:e}"),
        }
    }

    /// Scientific with `p` mantissa digits after the point.
    fn scientific_fixed(self, p: usize) -> String {
        match self {
            Float::F32(v) => format!("{v:.p$e}"),
            Float::F64(v) => format!("{v:.p$e}"),
        }
    }
}

/// The shortest decimal (as an `f64`) that converts back to the same value of the narrow float
/// type `d` (`float16`, `bfloat16`) as `v`.
fn shortest_narrow(d: DType, v: f64) -> f64 {
    if !v.is_finite() {
        return v;
    }
    let size = d.size_bytes();
    let mut want = vec![0u8; size];
    write_f64(d, &mut want, v);
    let mut got = vec![0u8; size];
    for p in 0..17 {
        if let Ok(candidate) = format!("{v:.p$e}").parse::<f64>() {
            write_f64(d, &mut got, candidate);
            if got == want {
                return candidate;
            }
        }
    }
    v
}

/// Splits numpy-style digits `-12.5` into `("-12", "5")`.
fn split_point(s: &str) -> (&str, &str) {
    s.split_once('.').unwrap_or((s, ""))
}

/// Removes trailing zeros of a fraction.
fn trim_zeros(frac: &str) -> &str {
    frac.trim_end_matches('0')
}

/// numpy's `dragon4_positional(x, precision=8, unique=True, trim='.')`: the shortest digits,
/// rounded to 8 fractional digits if longer, trailing zeros removed.
fn positional_parts(x: Float) -> (String, String) {
    let shortest = x.positional();
    let (int, frac) = split_point(&shortest);
    if frac.len() <= PRECISION {
        return (int.to_owned(), frac.to_owned());
    }
    let fixed = x.positional_fixed(PRECISION);
    let (int, frac) = split_point(&fixed);
    (int.to_owned(), trim_zeros(frac).to_owned())
}

/// numpy's `dragon4_scientific(x, precision=8, unique=True, trim='.')`, as (integer digit,
/// fraction, exponent).
fn scientific_parts(x: Float) -> (String, String, i32) {
    let mut text = x.scientific();
    let mut parts = split_sci(&text);
    if parts.1.len() > PRECISION {
        text = x.scientific_fixed(PRECISION);
        parts = split_sci(&text);
        parts.1 = trim_zeros(&parts.1).to_owned();
    }
    parts
}

/// Splits Rust's `1.5e-5` into `("1", "5", -5)`.
fn split_sci(text: &str) -> (String, String, i32) {
    let (mantissa, exp) = text.split_once('e').unwrap_or((text, "0"));
    let (int, frac) = split_point(mantissa);
    (int.to_owned(), frac.to_owned(), exp.parse().unwrap_or(0))
}

impl ElemFormat {
    /// The format of tensor `a`, fitted to the elements at flat indices `shown`.
    fn new(a: &NDArray, shown: &[usize]) -> ElemFormat {
        let d = a.dtype();
        if d.code == DTypeCode::Bool {
            return ElemFormat::Bool {
                true_str: if a.shape().is_empty() {
                    "True"
                } else {
                    " True"
                },
            };
        }
        if !d.is_float() {
            let width = shown
                .iter()
                .map(|&i| int_at(a, i).to_string().len())
                .max()
                .unwrap_or(0);
            return ElemFormat::Int { width };
        }
        ElemFormat::Float(FloatFormat::new(a, shown))
    }

    /// The text of element `i` of `a`.
    fn format(&self, a: &NDArray, i: usize) -> String {
        match self {
            ElemFormat::Bool { true_str } => {
                if int_at(a, i) != 0 {
                    (*true_str).to_owned()
                } else {
                    "False".to_owned()
                }
            }
            ElemFormat::Int { width } => format!("{:>width$}", int_at(a, i)),
            ElemFormat::Float(f) => f.format(Float::read(a, i)),
        }
    }
}

/// Element `i` of integer (or boolean) tensor `a`.
fn int_at(a: &NDArray, i: usize) -> i128 {
    let d = a.dtype();
    let size = d.size_bytes();
    match a.as_bytes().get(i * size..(i + 1) * size) {
        Some(bytes) if size > 0 => read_i128(d, bytes),
        _ => 0,
    }
}

impl FloatFormat {
    /// numpy's `FloatingFormat.fillFormat` over the shown elements.
    fn new(a: &NDArray, shown: &[usize]) -> FloatFormat {
        let values: Vec<Float> = shown.iter().map(|&i| Float::read(a, i)).collect();
        let finite: Vec<Float> = values
            .iter()
            .copied()
            .filter(|v| v.value().is_finite())
            .collect();
        let abs_non_zero: Vec<f64> = finite
            .iter()
            .map(|v| v.value().abs())
            .filter(|&v| v != 0.0)
            .collect();
        let mut exp_format = false;
        if !abs_non_zero.is_empty() {
            let max = abs_non_zero.iter().copied().fold(f64::MIN, f64::max);
            let min = abs_non_zero.iter().copied().fold(f64::MAX, f64::min);
            exp_format = max >= 1e8 || min < 1e-4 || max / min > 1000.0;
        }
        let mut f = FloatFormat {
            exp_format,
            pad_left: 0,
            pad_right: 0,
            precision: 0,
            exp_size: 0,
        };
        if finite.is_empty() {
            f.exp_format = false;
        } else if exp_format {
            let parts: Vec<(String, String, i32)> =
                finite.iter().map(|&v| scientific_parts(v)).collect();
            f.exp_size = parts
                .iter()
                .map(|p| p.2.unsigned_abs().to_string().len().max(2))
                .max()
                .unwrap_or(2);
            f.precision = parts.iter().map(|p| p.1.len()).max().unwrap_or(0);
            f.pad_left = parts.iter().map(|p| p.0.len()).max().unwrap_or(0);
            f.pad_right = f.exp_size + 2 + f.precision;
        } else {
            let parts: Vec<(String, String)> =
                finite.iter().map(|&v| positional_parts(v)).collect();
            f.pad_left = parts.iter().map(|p| p.0.len()).max().unwrap_or(0);
            f.pad_right = parts.iter().map(|p| p.1.len()).max().unwrap_or(0);
        }
        if finite.len() != values.len() {
            let neg_inf = values
                .iter()
                .any(|v| v.value().is_infinite() && v.value() < 0.0);
            let offset = f.pad_right + 1;
            let nan_len = 3usize;
            let inf_len = 3 + usize::from(neg_inf);
            f.pad_left = f
                .pad_left
                .max(nan_len.saturating_sub(offset))
                .max(inf_len.saturating_sub(offset));
        }
        f
    }

    /// numpy's `FloatingFormat.__call__`.
    fn format(&self, x: Float) -> String {
        let v = x.value();
        if !v.is_finite() {
            let text = if v.is_nan() {
                "nan"
            } else if v < 0.0 {
                "-inf"
            } else {
                "inf"
            };
            let width = self.pad_left + self.pad_right + 1;
            return format!("{text:>width$}");
        }
        if self.exp_format {
            let (int, frac, exp) = scientific_parts(x);
            let sign = if exp < 0 { '-' } else { '+' };
            format!(
                "{int:>pl$}.{frac:0<p$}e{sign}{e:0>es$}",
                pl = self.pad_left,
                p = self.precision,
                e = exp.unsigned_abs(),
                es = self.exp_size
            )
        } else {
            let (int, frac) = positional_parts(x);
            format!(
                "{int:>pl$}.{frac:<pr$}",
                pl = self.pad_left,
                pr = self.pad_right
            )
        }
    }
}
