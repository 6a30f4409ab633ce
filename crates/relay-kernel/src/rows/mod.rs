//! Row kernels: a primitive function whose `?` dimensions are all leading dimensions — the
//! same count, `L`, in every tensor that has one — and whose every operator computes each
//! leading index (a **row**) from the same row of its operands alone: elementwise and
//! broadcasting operators whose other operands broadcast over the rows, reductions and
//! softmaxes over trailing axes, and — when the one row dimension is a batch-first layout's
//! batch — convolutions by static weights and pools. Layer norm's pieces, a dense layer's
//! epilogue (its bias, activation and residual: fusion keeps a dynamic product alone, one
//! GEMM of all its rows) and a CNN's layers with a dynamic batch are such functions.
//!
//! Such a function compiles once into loop nests for a few fixed row counts (**chunks**: the
//! function specialized with its leading dimensions `[1, ..., 1, rows]`), and one
//! [`PackedFunc`] serves every shape: it walks the rows of its arguments a chunk at a time,
//! each chunk a view at the rows' offset (a row count not a multiple of the smallest chunk is
//! run padded, through an aligned scratch copy: [`call`]). Its outputs' shapes are the
//! arguments' leading dimensions followed by the static trailing ones (its shape function).
//! Nothing is compiled per shape; a call whose tensors do not share their leading dimensions
//! (a `?` that broadcasts at run time) is not served, and the caller specializes
//! ([`PackedFunc::serves`]).

mod call;

use relay_ir::{Dim, Expr, ExprKind, Function, OpPattern, Type, TypeKind};

use crate::KernelError;
use crate::abi::{ArgSpec, DATA_ALIGNMENT};
use crate::packed::PackedFunc;

pub(crate) use call::call;

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

/// A compiled row kernel.
pub struct Rows {
    /// The leading (row) dimensions.
    lead: usize,
    /// Each kernel argument, inputs then outputs.
    args: Vec<RowArg>,
    /// The chunk kernels, most rows first; every count is a multiple of the last one's.
    chunks: Vec<(i64, PackedFunc)>,
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

/// The row structure of `func`: the number of leading dimensions and, per parameter, whether
/// it is batched; `None` when `func` is not a row function (see the module's documentation).
fn row_structure(func: &Function) -> Option<(usize, Vec<bool>)> {
    if !crate::is_dynamic(func) {
        return None;
    }
    let result = func.body.checked_type().or(func.ret_type.as_ref())?;
    let lead = leading(result)?;
    let mut batched = Vec::with_capacity(func.params.len());
    for p in &func.params {
        let (shape, _) = tensor(p.checked_type().or(p.ty())?)?;
        batched.push(match rows_of(shape, lead)? {
            Side::Rows => true,
            Side::Static => false,
        });
    }
    row_wise(&func.body, lead).then_some((lead, batched))
}

/// Where a tensor stands against the rows.
enum Side {
    /// Its first `lead` dimensions are `?` (the rows), the rest static.
    Rows,
    /// It has no `?`.
    Static,
}

/// The side of a tensor of `shape` for `lead` leading row dimensions; `None` when a `?` is
/// elsewhere.
fn rows_of(shape: &[Dim], lead: usize) -> Option<Side> {
    let any = |d: &Dim| matches!(d, Dim::Any);
    if !shape.iter().any(any) {
        return Some(Side::Static);
    }
    let (rows, rest) = (shape.get(..lead)?, shape.get(lead..)?);
    (rows.iter().all(any) && !rest.iter().any(any)).then_some(Side::Rows)
}

/// The number of leading `?` dimensions of a tensor type, or of every field of a tuple (all
/// the same), when no `?` follows them.
fn leading(ty: &Type) -> Option<usize> {
    let one = |t: &Type| -> Option<usize> {
        let (shape, _) = tensor(t)?;
        let lead = shape.iter().take_while(|d| matches!(d, Dim::Any)).count();
        (lead > 0 && !shape[lead..].contains(&Dim::Any)).then_some(lead)
    };
    match ty.kind() {
        TypeKind::Tuple(fields) => {
            let first = one(fields.first()?)?;
            fields
                .iter()
                .all(|f| one(f) == Some(first))
                .then_some(first)
        }
        _ => one(ty),
    }
}

/// A tensor type's shape and dtype.
fn tensor(ty: &Type) -> Option<(&[Dim], relay_ir::DType)> {
    match ty.kind() {
        TypeKind::Tensor { shape, dtype } => Some((shape.as_slice(), *dtype)),
        _ => None,
    }
}

/// Whether every operator of `e` computes each row from the same row of its operands.
fn row_wise(e: &Expr, lead: usize) -> bool {
    match e.kind() {
        ExprKind::Var(_) | ExprKind::Constant(_) => true,
        ExprKind::Let { bindings, body } => {
            bindings.iter().all(|b| row_wise(&b.value, lead)) && row_wise(body, lead)
        }
        ExprKind::Tuple(fields) => fields.iter().all(|f| row_wise(f, lead)),
        ExprKind::Proj { tuple, .. } => row_wise(tuple, lead),
        ExprKind::Call { args, .. } => {
            args.iter().all(|a| row_wise(a, lead)) && row_wise_call(e, lead)
        }
        _ => false,
    }
}

/// Whether call `e` of an operator computes each row from the same rows of its operands.
fn row_wise_call(e: &Expr, lead: usize) -> bool {
    let Some((op, args, attrs)) = e.op_call() else {
        return false;
    };
    let Some((out, _)) = e.checked_type().and_then(tensor) else {
        return false;
    };
    if !matches!(rows_of(out, lead), Some(Side::Rows)) {
        return false;
    }
    fn arg_shape(a: &Expr) -> Option<&[Dim]> {
        a.checked_type().and_then(tensor).map(|(s, _)| s)
    }
    let Some(shapes) = args.iter().map(arg_shape).collect::<Option<Vec<_>>>() else {
        return false;
    };
    let rows = |s: &[Dim]| matches!(rows_of(s, lead), Some(Side::Rows));
    // An operand of a broadcast: the rows themselves, or one that broadcasts over them.
    let broadcast = |s: &[Dim]| {
        rows(s)
            || (!s.contains(&Dim::Any)
                && (s.len() + lead <= out.len()
                    || (s.len() == out.len() && s[..lead].iter().all(|d| *d == Dim::Known(1)))))
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
            _ => false,
        },
    }
}

/// The row counts of the chunks for rows of at most `widest` elements whose every row start
/// is aligned every `align` rows: multiples of `align`, most first.
fn chunk_rows(widest: i64, align: i64) -> Vec<i64> {
    let target = (CHUNK_ELEMENTS / widest.max(1)).clamp(1, MAX_CHUNK_ROWS);
    let big = (target / align).max(1) * align;
    let mut rows = vec![big, 8 * align, align];
    rows.retain(|&r| r <= big);
    rows.dedup();
    rows
}

/// Whether `func` is a row function (compiled by [`compile`]).
pub(crate) fn is_row_function(func: &Function) -> bool {
    row_structure(func).is_some()
}

/// The row kernel of `func`, named `name`, when it is a row function.
pub(crate) fn compile(func: &Function, name: &str) -> Option<Result<PackedFunc, KernelError>> {
    let (lead, batched) = row_structure(func)?;
    Some(compile_rows(func, name, lead, &batched))
}

fn compile_rows(
    func: &Function,
    name: &str,
    lead: usize,
    batched: &[bool],
) -> Result<PackedFunc, KernelError> {
    let malformed = |message: String| KernelError::Malformed {
        kernel: name.to_owned(),
        message,
    };
    let (spec, inputs) = crate::host_op::kernel_spec(func, name, true)?;
    let mut args = Vec::with_capacity(spec.args.len());
    for (i, a) in spec.args.iter().enumerate() {
        let is_batched = batched.get(i).copied().unwrap_or(true);
        args.push(row_arg(a, lead, is_batched).map_err(malformed)?);
    }
    let batched_args = args.iter().filter(|a| a.batched);
    let widest = batched_args
        .clone()
        .map(|a| a.trailing.iter().product::<i64>())
        .max()
        .unwrap_or(1);
    // Rows per aligned start: each batched argument's chunks start on the entry's alignment.
    let align = batched_args.fold(1i64, |g, a| {
        let step = DATA_ALIGNMENT as usize / gcd(DATA_ALIGNMENT as usize, a.row_bytes.max(1));
        lcm(g, step as i64)
    });
    let mut chunks = Vec::new();
    for rows in chunk_rows(widest, align) {
        let types: Vec<Type> = (0..inputs)
            .map(|i| chunk_type(&spec.args[i], &args[i], lead, rows))
            .collect::<Result<_, _>>()
            .map_err(malformed)?;
        let kernel = crate::compile_primitive_for(func, name, &types)?;
        chunks.push((rows, kernel));
    }
    let rows = Rows { lead, args, chunks };
    Ok(PackedFunc::rows(name.to_owned(), spec, inputs, rows))
}

/// How argument `a` is passed.
fn row_arg(a: &ArgSpec, lead: usize, batched: bool) -> Result<RowArg, String> {
    let bytes = usize::from(a.dtype.bits).div_ceil(8);
    let trailing = if batched {
        a.shape
            .get(lead..)
            .ok_or("a batched argument without rows")?
    } else {
        &a.shape[..]
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
        trailing: trailing.to_vec(),
        row_bytes: elements.checked_mul(bytes).ok_or("a row too large")?,
    })
}

/// The type of argument `a` in a chunk of `rows` rows.
fn chunk_type(a: &ArgSpec, arg: &RowArg, lead: usize, rows: i64) -> Result<Type, String> {
    let dtype = relay_ir::DType::parse(&crate::abi::dtype_name(a.dtype))
        .ok_or_else(|| format!("argument {}: an unknown dtype", a.name))?;
    let shape = match arg.batched {
        true => chunk_shape(lead, rows, &arg.trailing),
        false => arg.trailing.clone(),
    };
    Ok(Type::tensor(&shape, dtype))
}

/// `[1, ..., 1, rows] ++ trailing`, with `lead` leading dimensions.
fn chunk_shape(lead: usize, rows: i64, trailing: &[i64]) -> Vec<i64> {
    let mut shape = vec![1; lead];
    if let Some(last) = shape.last_mut() {
        *last = rows;
    }
    shape.extend_from_slice(trailing);
    shape
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

    /// The rows (leading dimensions) every batched input of shapes `inputs` shares, checking
    /// their trailing dimensions.
    fn rows<'s>(&self, inputs: &[&'s [i64]]) -> Result<&'s [i64], String> {
        let mut rows: Option<&[i64]> = None;
        for (i, (shape, a)) in inputs.iter().zip(&self.args).enumerate() {
            if !a.batched {
                continue;
            }
            let fits = shape.len() == self.lead + a.trailing.len()
                && shape[self.lead..] == a.trailing[..]
                && shape[..self.lead].iter().all(|&d| d >= 0);
            if !fits {
                return Err(format!(
                    "argument {i}: expected {} rows then {:?}, got {shape:?}",
                    self.lead, a.trailing
                ));
            }
            match rows {
                Some(r) if r != &shape[..self.lead] => {
                    return Err(format!(
                        "arguments with rows {r:?} and {:?}: a row kernel takes one row shape",
                        &shape[..self.lead]
                    ));
                }
                _ => rows = Some(&shape[..self.lead]),
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
