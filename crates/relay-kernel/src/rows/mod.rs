//! Row kernels: a primitive function whose every operator computes each **row** — an index
//! of its leading dimensions, up to the last `?` — from the same row of its operands alone:
//! elementwise and broadcasting operators whose other operands broadcast over the rows,
//! reductions and softmaxes over trailing axes, `take` from a static table by indices that are
//! the rows (an embedding), and — when the one row dimension is a
//! batch-first layout's batch — convolutions by static weights and pools. Layer norm's pieces,
//! a dense layer's epilogue (its bias, activation and residual: fusion keeps a dynamic product
//! alone, one GEMM of all its rows), attention's scaling of a `[?, heads, ?, 64]` tensor and a
//! CNN's layers with a dynamic batch are such functions.
//!
//! The row dimensions may mix `?` and known extents (`[?, 4, ?]`): a row is then a flat index
//! of them, which is all a row-wise operator needs, since every argument with rows has the
//! same ones ([`Pattern`]). Such a function compiles once into loop nests for a few fixed row
//! counts (**chunks**: the function specialized with its row dimensions' `?` set to 1 but for
//! the last, which holds the chunk), and one [`PackedFunc`] serves every shape: it walks the
//! rows of its arguments a chunk at a time, each chunk a view at the rows' offset (the rows
//! after the last aligned chunk run a step at a time, through an aligned scratch copy where
//! their start is not aligned: [`call`]). Its outputs' shapes are the arguments' row dimensions followed by the static
//! trailing ones (its shape function). A `?` after the rows in an argument is taken to be the
//! result's extent there. Nothing is compiled per shape; a call whose tensors do not share
//! their rows or those extents (a `?` that broadcasts at run time) is not served, and the
//! caller specializes ([`PackedFunc::serves`]).

mod call;

use relay_ir::{Dim, Expr, ExprKind, Function, OpPattern, Type, TypeKind};

use crate::KernelError;
use crate::abi::{ArgSpec, DATA_ALIGNMENT};
use crate::packed::PackedFunc;

pub(crate) use call::{call, call_views, compact_shapes};

/// Convolutions and pools, which compute each sample of a batch-first layout alone.
const PER_SAMPLE: &[&str] = &[
    "nn.conv1d",
    "nn.conv2d",
    "nn.conv3d",
    "nn.max_pool1d",
    "nn.max_pool2d",
    "nn.max_pool3d",
    "nn.avg_pool1d",
    "nn.avg_pool2d",
    "nn.avg_pool3d",
    "nn.global_max_pool2d",
    "nn.global_avg_pool2d",
    "nn.adaptive_max_pool1d",
    "nn.adaptive_avg_pool1d",
    "nn.adaptive_max_pool2d",
    "nn.adaptive_avg_pool2d",
    "nn.adaptive_max_pool3d",
    "nn.adaptive_avg_pool3d",
];

/// The elements a chunk aims at (rows times the widest row): large enough that a call's
/// overhead is small beside it, small enough to stay in the cache.
const CHUNK_ELEMENTS: i64 = 16 * 1024;

/// The most rows in a chunk.
const MAX_CHUNK_ROWS: i64 = 1024;

/// The most rows of known extent a chunk steps by (the product of the row dimensions that are
/// not `?`), times the widest row: beyond it the function is specialized instead.
const MAX_STEP_ELEMENTS: i64 = 1 << 20;

/// A compiled row kernel.
pub struct Rows {
    /// The row dimensions.
    pattern: Pattern,
    /// Each kernel argument, inputs then outputs.
    args: Vec<RowArg>,
    /// The chunk kernels, most rows first; every count is a multiple of the next one's, and
    /// every one but the last (the pattern's step, which may start anywhere) of `align`.
    chunks: Vec<(i64, PackedFunc)>,
    /// The rows from one aligned start of every batched argument to the next.
    align: i64,
}

/// The row dimensions every argument with rows shares: what is known of each (`-1` for `?`),
/// the one a chunk's row count goes in (the last `?`), and the product of the known ones (a
/// chunk's row count is a multiple of it).
#[derive(Clone, Debug, PartialEq)]
struct Pattern {
    dims: Vec<i64>,
    carrier: usize,
    step: i64,
}

impl Pattern {
    /// The pattern of row dimensions `dims`; `None` without a `?` or with a known extent of 0.
    fn new(dims: Vec<i64>) -> Option<Pattern> {
        let carrier = dims.iter().rposition(|&d| d < 0)?;
        let step = dims
            .iter()
            .filter(|&&d| d >= 0)
            .try_fold(1i64, |n, &d| n.checked_mul(d))
            .filter(|&n| n > 0)?;
        Some(Pattern {
            dims,
            carrier,
            step,
        })
    }

    /// The number of row dimensions.
    fn lead(&self) -> usize {
        self.dims.len()
    }

    /// The shape of a chunk of `rows` rows (a multiple of the step) followed by `trailing`.
    fn chunk_shape(&self, rows: i64, trailing: &[i64]) -> Vec<i64> {
        let row = |(i, &d): (usize, &i64)| match i == self.carrier {
            true => rows / self.step,
            false => d.max(1),
        };
        self.dims
            .iter()
            .enumerate()
            .map(row)
            .chain(trailing.iter().copied())
            .collect()
    }

    /// Whether row dimensions `rows` fit it.
    fn fits(&self, rows: &[i64]) -> bool {
        rows.len() == self.dims.len()
            && rows
                .iter()
                .zip(&self.dims)
                .all(|(&r, &d)| r >= 0 && (d < 0 || r == d))
    }
}

/// How a row kernel passes one argument.
#[derive(Clone, Debug)]
struct RowArg {
    /// Whether its leading dimensions are the rows (else it is passed whole to every chunk).
    batched: bool,
    /// Its dimensions after the rows (its whole static shape when not batched).
    trailing: Vec<i64>,
    /// The bytes of one row.
    row_bytes: usize,
}

/// What makes a function a row function: its row dimensions, what is known of them (merged
/// over every argument with rows), and its first result's shape (whose dimensions after the
/// rows stand for an argument's `?` there).
struct Structure {
    lead: usize,
    rows: Vec<Dim>,
    result: Vec<Dim>,
}

impl Structure {
    /// The row structure of a function with results of shapes `results`: as many row
    /// dimensions as there are up to the last `?` of each (the same for all).
    fn of(results: &[&[Dim]]) -> Option<Structure> {
        let last = |s: &[Dim]| s.iter().rposition(|d| matches!(d, Dim::Any)).map(|i| i + 1);
        let (first, rest) = results.split_first()?;
        let lead = last(first)?;
        if rest.iter().any(|s| last(s) != Some(lead)) {
            return None;
        }
        let mut s = Structure {
            lead,
            rows: first[..lead].to_vec(),
            result: first.to_vec(),
        };
        rest.iter().all(|r| s.merge(r)).then_some(s)
    }

    /// Adds what the rows of `shape` (one with rows) say of them; `false` when two known
    /// extents disagree.
    fn merge(&mut self, shape: &[Dim]) -> bool {
        for (known, d) in self.rows.iter_mut().zip(shape) {
            match (*known, *d) {
                (Dim::Any, d) => *known = d,
                (Dim::Known(a), Dim::Known(b)) if a != b => return false,
                _ => {}
            }
        }
        true
    }

    /// Where a tensor of `shape` stands against the rows; `None` when it has a `?` that is
    /// not one of them (and not where the result's extent stands for it), or a known row
    /// dimension the rows do not have.
    fn side(&self, shape: &[Dim]) -> Option<Side> {
        if !shape.contains(&Dim::Any) {
            return Some(Side::Static);
        }
        let (rows, rest) = (shape.get(..self.lead)?, &shape[self.lead..]);
        let row_fits = rows
            .iter()
            .zip(&self.rows)
            .all(|(d, known)| matches!(d, Dim::Any) || d == known);
        let pinned = |(j, d): (usize, &Dim)| {
            !matches!(d, Dim::Any)
                || (shape.len() == self.result.len()
                    && matches!(self.result[self.lead + j], Dim::Known(_)))
        };
        (row_fits && rest.iter().enumerate().all(pinned)).then_some(Side::Rows)
    }

    /// The rows' pattern, when the function steps by a reasonable number of known rows.
    fn pattern(&self) -> Option<Pattern> {
        let dims = self
            .rows
            .iter()
            .map(|d| match d {
                Dim::Known(n) => *n,
                Dim::Any => -1,
            })
            .collect();
        Pattern::new(dims).filter(|p| p.step <= MAX_STEP_ELEMENTS)
    }
}

/// The row structure of `func` and, per parameter, whether it is batched; `None` when `func`
/// is not a row function (see the module's documentation).
fn row_structure(func: &Function) -> Option<(Structure, Vec<bool>)> {
    if !crate::is_dynamic(func) {
        return None;
    }
    let result = func.body.checked_type().or(func.ret_type.as_ref())?;
    let results: Vec<&[Dim]> = match result.kind() {
        TypeKind::Tuple(fields) => fields
            .iter()
            .map(|f| tensor(f).map(|(s, _)| s))
            .collect::<Option<_>>()?,
        _ => vec![tensor(result)?.0],
    };
    let mut s = Structure::of(&results)?;
    let mut batched = Vec::with_capacity(func.params.len());
    for p in &func.params {
        let (shape, _) = tensor(p.checked_type().or(p.ty())?)?;
        if shape.contains(&Dim::Any) && !s.merge(shape) {
            return None;
        }
        batched.push(matches!(s.side(shape)?, Side::Rows));
    }
    s.pattern()?;
    // A known 1 among the rows where the result has a `?` is a broadcast: served only when
    // the result has 1 there too. A broadcast kernel serves every shape.
    let ones = s
        .rows
        .iter()
        .zip(&s.result)
        .any(|(r, o)| *r == Dim::Known(1) && *o == Dim::Any);
    if ones && crate::broadcast::is_broadcast_function(func) {
        return None;
    }
    row_wise(&func.body, &s).then_some((s, batched))
}

/// Where a tensor stands against the rows.
enum Side {
    /// Its row dimensions are the rows, the rest static (or the result's).
    Rows,
    /// It has no `?`.
    Static,
}

/// A tensor type's shape and dtype.
fn tensor(ty: &Type) -> Option<(&[Dim], relay_ir::DType)> {
    match ty.kind() {
        TypeKind::Tensor { shape, dtype } => Some((shape.as_slice(), *dtype)),
        _ => None,
    }
}

/// Whether every operator of `e` computes each row from the same row of its operands.
fn row_wise(e: &Expr, s: &Structure) -> bool {
    match e.kind() {
        ExprKind::Var(_) | ExprKind::Constant(_) => true,
        ExprKind::Let { bindings, body } => {
            bindings.iter().all(|b| row_wise(&b.value, s)) && row_wise(body, s)
        }
        ExprKind::Tuple(fields) => fields.iter().all(|f| row_wise(f, s)),
        ExprKind::Proj { tuple, .. } => row_wise(tuple, s),
        ExprKind::Call { args, .. } => args.iter().all(|a| row_wise(a, s)) && row_wise_call(e, s),
        _ => false,
    }
}

/// Whether call `e` of an operator computes each row from the same rows of its operands.
fn row_wise_call(e: &Expr, s: &Structure) -> bool {
    let Some((op, args, attrs)) = e.op_call() else {
        return false;
    };
    let Some((out, _)) = e.checked_type().and_then(tensor) else {
        return false;
    };
    let lead = s.lead;
    let rows = |shape: &[Dim]| matches!(s.side(shape), Some(Side::Rows));
    if !rows(out) {
        return false;
    }
    fn arg_shape(a: &Expr) -> Option<&[Dim]> {
        a.checked_type().and_then(tensor).map(|(s, _)| s)
    }
    let Some(shapes) = args.iter().map(arg_shape).collect::<Option<Vec<_>>>() else {
        return false;
    };
    // An operand of a broadcast: the rows themselves (of the result's rank: a broadcast
    // aligns extents from the right), or one that broadcasts over them (its extents that
    // align with row dimensions are 1).
    let broadcast = |shape: &[Dim]| {
        let on_rows = (shape.len() + lead).saturating_sub(out.len());
        (rows(shape) && shape.len() == out.len())
            || (!shape.contains(&Dim::Any)
                && shape.len() <= out.len()
                && shape[..on_rows].iter().all(|d| *d == Dim::Known(1)))
    };
    // An axis attribute (`nn.bias_add`'s, a reduction's) must not name a row dimension.
    let axis_off_rows = || match relay_ops::support::attr_opt_int(attrs, "axis") {
        Ok(Some(axis)) => {
            let rank = shapes.first().map_or(0, |s| s.len()) as i64;
            let axis = if axis < 0 { axis + rank } else { axis };
            axis >= lead as i64 && axis < rank
        }
        _ => true,
    };
    match op.pattern {
        OpPattern::ElemWise | OpPattern::Broadcast => {
            axis_off_rows() && shapes.iter().all(|s| broadcast(s))
        }
        OpPattern::CommReduce => {
            let Some((data, rest)) = shapes.split_first() else {
                return false;
            };
            let folds_rows = relay_ops::reduced_mask(data.len(), attrs)
                .map_or(true, |mask| mask[..lead.min(mask.len())].contains(&true));
            rows(data) && !folds_rows && rest.iter().all(|s| broadcast(s))
        }
        _ if PER_SAMPLE.contains(&op.name) => {
            // A convolution or pool of a batch-first layout computes each sample alone: the
            // batch is the one row dimension, the weights static.
            let layout_ok = |name: &str| {
                relay_ops::support::attr_str(attrs, name)
                    .map_or(true, |l| l.is_empty() || l.starts_with('N'))
            };
            let first = shapes.first().copied().unwrap_or_default();
            lead == 1
                && rows(first)
                && shapes.iter().skip(1).all(|s| !s.contains(&Dim::Any))
                && ["data_layout", "layout", "out_layout"]
                    .iter()
                    .all(|n| layout_ok(n))
        }
        _ => match (op.name, shapes.as_slice()) {
            ("nn.softmax" | "nn.log_softmax", [data]) => rows(data) && axis_off_rows(),
            // A gather from a static table (an embedding) by indices that are the rows.
            ("take", [data, indices]) => {
                let axis = relay_ops::support::attr_opt_int(attrs, "axis");
                matches!(axis, Ok(Some(0)))
                    && !data.contains(&Dim::Any)
                    && indices.len() == lead
                    && rows(indices)
            }
            _ => false,
        },
    }
}

/// The row counts of the chunks for rows of at most `widest` elements whose row starts are
/// aligned every `align` rows, `align` a multiple of `step` (the rows of the known row
/// dimensions): multiples of `align`, most first, then `step` for the rows left, so that one
/// row of an embedding's 50,257 logits (aligned every 16 rows) runs as one row, not sixteen.
fn chunk_rows(widest: i64, align: i64, step: i64) -> Vec<i64> {
    let target = (CHUNK_ELEMENTS / widest.max(1)).clamp(1, MAX_CHUNK_ROWS);
    let big = (target / align).max(1) * align;
    let mut rows = vec![big, 8 * align, align];
    rows.retain(|&r| r <= big);
    rows.push(step);
    rows.dedup();
    rows
}

/// Whether `func` is a row function (compiled by [`compile`]).
pub(crate) fn is_row_function(func: &Function) -> bool {
    row_structure(func).is_some()
}

/// The row kernel of `func`, named `name`, when it is a row function.
pub(crate) fn compile(func: &Function, name: &str) -> Option<Result<PackedFunc, KernelError>> {
    let (structure, batched) = row_structure(func)?;
    Some(compile_rows(func, name, &structure, &batched))
}

fn compile_rows(
    func: &Function,
    name: &str,
    structure: &Structure,
    batched: &[bool],
) -> Result<PackedFunc, KernelError> {
    let malformed = |message: String| KernelError::Malformed {
        kernel: name.to_owned(),
        message,
    };
    let pattern = structure
        .pattern()
        .ok_or_else(|| malformed("rows without a `?`".into()))?;
    let (spec, inputs) = crate::host_op::kernel_spec(func, name, true)?;
    let mut args = Vec::with_capacity(spec.args.len());
    for (i, a) in spec.args.iter().enumerate() {
        let is_batched = batched.get(i).copied().unwrap_or(true);
        args.push(row_arg(a, structure, is_batched).map_err(malformed)?);
    }
    let batched_args = args.iter().filter(|a| a.batched);
    let widest = batched_args
        .clone()
        .map(|a| a.trailing.iter().product::<i64>())
        .max()
        .unwrap_or(1);
    // Rows per aligned start: each batched argument's chunks start on the entry's alignment,
    // and hold whole steps of the known row dimensions.
    let align = batched_args.fold(pattern.step, |g, a| {
        let step = DATA_ALIGNMENT as usize / gcd(DATA_ALIGNMENT as usize, a.row_bytes.max(1));
        lcm(g, step as i64)
    });
    if align.saturating_mul(widest) > MAX_STEP_ELEMENTS {
        return Err(malformed(format!(
            "chunks of {align} rows of {widest} elements"
        )));
    }
    let mut chunks = Vec::new();
    for rows in chunk_rows(widest, align, pattern.step) {
        let types: Vec<Type> = (0..inputs)
            .map(|i| chunk_type(&spec.args[i], &args[i], &pattern, rows))
            .collect::<Result<_, _>>()
            .map_err(malformed)?;
        let kernel = crate::compile_primitive_for(func, name, &types)?;
        chunks.push((rows, kernel));
    }
    let rows = Rows {
        pattern,
        args,
        chunks,
        align,
    };
    Ok(PackedFunc::rows(name.to_owned(), spec, inputs, rows))
}

/// How argument `a` is passed: a `?` after the rows is the first result's extent there.
fn row_arg(a: &ArgSpec, s: &Structure, batched: bool) -> Result<RowArg, String> {
    let bytes = usize::from(a.dtype.bits).div_ceil(8);
    let trailing: Vec<i64> = match batched {
        true => {
            let pinned = |(j, &d): (usize, &i64)| match (d, s.result.get(s.lead + j)) {
                (-1, Some(Dim::Known(n))) if a.shape.len() == s.result.len() => *n,
                _ => d,
            };
            let rest = a
                .shape
                .get(s.lead..)
                .ok_or("a batched argument without rows")?;
            rest.iter().enumerate().map(pinned).collect()
        }
        false => a.shape.clone(),
    };
    if trailing.iter().any(|&d| d < 0) {
        return Err(format!("argument {}: a `?` after the rows", a.name));
    }
    let elements = trailing
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(usize::try_from(d).ok()?))
        .ok_or("a row too large")?;
    Ok(RowArg {
        batched,
        trailing,
        row_bytes: elements.checked_mul(bytes).ok_or("a row too large")?,
    })
}

/// The type of argument `a` in a chunk of `rows` rows.
fn chunk_type(a: &ArgSpec, arg: &RowArg, pattern: &Pattern, rows: i64) -> Result<Type, String> {
    let dtype = relay_ir::DType::parse(&crate::abi::dtype_name(a.dtype))
        .ok_or_else(|| format!("argument {}: an unknown dtype", a.name))?;
    let shape = match arg.batched {
        true => pattern.chunk_shape(rows, &arg.trailing),
        false => arg.trailing.clone(),
    };
    Ok(Type::tensor(&shape, dtype))
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 { a } else { gcd(b, a % b) }
}

fn lcm(a: i64, b: i64) -> i64 {
    a / gcd(a as usize, b as usize) as i64 * b
}

impl Rows {
    /// The outputs' shapes for inputs of shapes `inputs`: their rows, then each output's
    /// trailing dimensions.
    pub(crate) fn output_shapes(
        &self,
        inputs: &[&[i64]],
        num_inputs: usize,
    ) -> Result<Vec<Vec<i64>>, String> {
        let rows = self.rows(inputs)?;
        Ok(self.args[num_inputs.min(self.args.len())..]
            .iter()
            .map(|a| rows.iter().chain(&a.trailing).copied().collect())
            .collect())
    }

    /// The row dimensions every batched input of shapes `inputs` shares, checking their
    /// trailing dimensions.
    fn rows<'s>(&self, inputs: &[&'s [i64]]) -> Result<&'s [i64], String> {
        let mut rows: Option<&[i64]> = None;
        for (i, (shape, a)) in inputs.iter().zip(&self.args).enumerate() {
            if !a.batched {
                continue;
            }
            let lead = self.pattern.lead();
            let fits = shape.len() == lead + a.trailing.len()
                && shape[lead..] == a.trailing[..]
                && self.pattern.fits(&shape[..lead]);
            if !fits {
                return Err(format!(
                    "argument {i}: expected rows {:?} (-1 for any) then {:?}, got {shape:?}",
                    self.pattern.dims, a.trailing
                ));
            }
            match rows {
                Some(r) if r != &shape[..lead] => {
                    return Err(format!(
                        "arguments with rows {r:?} and {:?}: a row kernel takes one row shape",
                        &shape[..lead]
                    ));
                }
                _ => rows = Some(&shape[..lead]),
            }
        }
        rows.ok_or_else(|| "no argument has rows".into())
    }

    /// Whether it computes inputs of shapes `inputs` (their batched arguments share their
    /// rows).
    pub(crate) fn serves(&self, inputs: &[&[i64]]) -> bool {
        self.rows(inputs).is_ok()
    }
}

#[cfg(test)]
mod tests;
