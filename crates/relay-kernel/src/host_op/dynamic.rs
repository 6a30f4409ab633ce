//! Operators whose result shape depends on their inputs' values ([`relay_ops::dynamic`]: the
//! `dyn.*` twins, `arange`, `argwhere`), each a primitive of its own. The shape function reads
//! the values (TVM's data-dependent `shape_func`); the kernel then moves elements:
//! - `dyn.reshape`, `dyn.squeeze`, `dyn.expand_dims`: the data's bytes (the VM makes them a
//!   view, [`DynamicOp::view_source`]);
//! - `dyn.broadcast_to`, `dyn.tile`, `dyn.strided_slice`: a strided view of the data, copied
//!   compactly ([`relay_ops::views::View`]);
//! - `dyn.zeros`, `dyn.ones`, `dyn.full`: one element of the result's dtype repeated;
//! - `arange`: its elements; `argwhere`: the positions of the non-zero elements.
//!
//! `shape_of` of a tensor with `?` dimensions is one too: its shape function reads no values.
//!
//! Any dtype. An input may also be a constant of the primitive (`arange(0, %n, 1)`).

use std::sync::Arc;

use relay_ir::{Attrs, DType, ExprKind, Function, NDArray, OpRef, Type, TypeKind};
use relay_linalg::copy::{Bits, Strided, strided_copy};
use relay_ops::dynamic::{self, Resolved};
use relay_ops::views::View;

/// A primitive computing one value-shaped operator.
#[derive(Clone, Debug)]
pub struct DynamicOp {
    /// The operator.
    op: OpRef,
    /// Its attributes.
    attrs: Attrs,
    /// Each input of the call.
    operands: Vec<Operand>,
}

/// An input of the call.
#[derive(Clone, Debug)]
enum Operand {
    /// Kernel argument `i`.
    Arg(usize),
    /// A constant of the primitive.
    Constant(Arc<NDArray>),
}

/// The kernel's inputs as a shape function and the kernel read them: dtypes, shapes and bytes
/// (empty when only the shapes are known).
pub struct Inputs<'a> {
    /// The element types.
    pub dtypes: &'a [DType],
    /// The shapes.
    pub shapes: &'a [&'a [i64]],
    /// The bytes, compact and row-major.
    pub bytes: &'a [&'a [u8]],
}

impl<'a> Inputs<'a> {
    /// The shape of argument `i`.
    fn shape(&self, i: usize) -> Result<&'a [i64], String> {
        self.shapes
            .get(i)
            .copied()
            .ok_or_else(|| format!("no argument {i}"))
    }

    /// The element type of argument `i`.
    fn dtype(&self, i: usize) -> Result<DType, String> {
        self.dtypes
            .get(i)
            .copied()
            .ok_or_else(|| format!("no argument {i}"))
    }
}

/// The primitive `func` is, when its body is one call of a value-shaped operator on its
/// (tensor) parameters and constants.
pub(super) fn recognize(func: &Function) -> Option<DynamicOp> {
    let (op, args, attrs) = func.body.op_call()?;
    let shape_of = op.name == "shape_of" && crate::is_dynamic(func);
    if !(dynamic::is_value_shaped(op) || shape_of) {
        return None;
    }
    let tensor = |p: &relay_ir::Var| {
        matches!(
            p.checked_type().or(p.ty()).map(|t| t.kind()),
            Some(TypeKind::Tensor { .. })
        )
    };
    if !func.params.iter().all(tensor) {
        return None;
    }
    let operands = args
        .iter()
        .map(|a| match a.kind() {
            ExprKind::Var(v) => func.params.iter().position(|p| p == v).map(Operand::Arg),
            ExprKind::Constant(c) => Some(Operand::Constant(c.clone())),
            _ => None,
        })
        .collect::<Option<Vec<_>>>()?;
    Some(DynamicOp {
        op,
        attrs: attrs.clone(),
        operands,
    })
}

/// How the result is computed, for the inputs' values.
enum Plan {
    /// It is argument `source`'s elements in order.
    Bytes(usize),
    /// A strided view of a source, copied compactly.
    Copy(Source, View),
    /// These elements.
    Values(NDArray),
    /// `argwhere` of argument `source`.
    Argwhere(usize),
}

/// What a [`Plan::Copy`] reads.
enum Source {
    /// Kernel argument `i`.
    Arg(usize),
    /// One element of the result's dtype.
    Element(NDArray),
}

impl DynamicOp {
    /// The argument whose bytes the result is, when the operator only reshapes.
    pub fn view_source(&self) -> Option<usize> {
        let reshapes = matches!(
            self.op.name,
            "dyn.reshape" | "dyn.squeeze" | "dyn.expand_dims"
        );
        match self.operands.first() {
            Some(Operand::Arg(i)) if reshapes => Some(*i),
            _ => None,
        }
    }

    /// Whether the result's shape depends on the inputs' values (all but `shape_of`'s).
    pub fn reads_values(&self) -> bool {
        self.op.name != "shape_of"
    }

    /// The result's shape for inputs `inputs` (their values read where the shape depends on
    /// them).
    pub fn output_shape(&self, inputs: &Inputs<'_>) -> Result<Vec<i64>, String> {
        match self.op.name {
            "shape_of" => Ok(vec![inputs.shape(self.arg(0)?)?.len() as i64]),
            "arange" => {
                let [a, b, s] = [0, 1, 2].map(|i| self.array(inputs, i));
                dynamic::arange_length(&*a?, &*b?, &*s?)
                    .map(|n| vec![n])
                    .map_err(|e| e.to_string())
            }
            "argwhere" => {
                let i = self.arg(0)?;
                let n = nonzero(inputs.dtype(i)?, input_bytes(inputs, i)?).count();
                Ok(vec![n as i64, inputs.shape(i)?.len() as i64])
            }
            _ => {
                let r = self.resolve(inputs)?;
                r.output_shape(&self.twin_types(&r, inputs)?)
                    .map_err(|e| e.to_string())
            }
        }
    }

    /// Computes the result into `out` (compact, of shape `shape`, elements of `dtype`).
    pub fn run(
        &self,
        inputs: &Inputs<'_>,
        out: &mut [u8],
        shape: &[i64],
        dtype: DType,
    ) -> Result<(), String> {
        match self.plan(inputs, shape, dtype)? {
            Plan::Bytes(i) => {
                let src = input_bytes(inputs, i)?;
                if src.len() != out.len() {
                    return Err(format!("{} bytes into {}", src.len(), out.len()));
                }
                out.copy_from_slice(src);
                Ok(())
            }
            Plan::Values(v) => {
                if v.as_bytes().len() != out.len() {
                    return Err(format!("{} bytes into {}", v.as_bytes().len(), out.len()));
                }
                out.copy_from_slice(v.as_bytes());
                Ok(())
            }
            Plan::Copy(source, view) => {
                let src = match &source {
                    Source::Arg(i) => input_bytes(inputs, *i)?,
                    Source::Element(e) => e.as_bytes(),
                };
                copy_view(src, &view, out, dtype.bits.div_ceil(8) as usize)
            }
            Plan::Argwhere(i) => argwhere(inputs, i, out),
        }
    }

    /// The plan for inputs `inputs` and a result of shape `shape` and dtype `dtype`.
    fn plan(&self, inputs: &Inputs<'_>, shape: &[i64], dtype: DType) -> Result<Plan, String> {
        let name = self.op.name;
        if name == "arange" {
            let [a, b, s] = [0, 1, 2].map(|i| self.array(inputs, i));
            return dynamic::arange(&*a?, &*b?, &*s?)
                .map(Plan::Values)
                .map_err(|e| e.to_string());
        }
        if name == "shape_of" {
            let dims: Vec<i128> = inputs
                .shape(self.arg(0)?)?
                .iter()
                .map(|&d| i128::from(d))
                .collect();
            let values = NDArray::from_i128_slice(dtype, &[dims.len() as i64], &dims);
            return values.map(Plan::Values).map_err(|e| e.to_string());
        }
        if name == "argwhere" {
            return Ok(Plan::Argwhere(self.arg(0)?));
        }
        if let Some(i) = self.view_source() {
            return Ok(Plan::Bytes(i));
        }
        let r = self.resolve(inputs)?;
        let data = |k: usize| -> Result<(usize, View), String> {
            let i = self.arg(*r.data.get(k).ok_or("a missing input")?)?;
            Ok((i, View::compact(inputs.shape(i)?)))
        };
        let err = |e: relay_ir::OpError| e.to_string();
        Ok(match r.op.name {
            "broadcast_to" => {
                let (i, v) = data(0)?;
                Plan::Copy(Source::Arg(i), v.broadcast(shape).map_err(err)?)
            }
            "tile" => {
                let (i, v) = data(0)?;
                let reps = relay_ops::support::attr_ints(&r.attrs, "reps").map_err(err)?;
                Plan::Copy(Source::Arg(i), v.tiled(&reps).map_err(err)?)
            }
            "strided_slice" => {
                let (i, v) = data(0)?;
                Plan::Copy(Source::Arg(i), v.sliced(&r.attrs).map_err(err)?)
            }
            "zeros" | "ones" | "full" => {
                let element = self.element(&r, inputs)?;
                if element.dtype() != dtype {
                    return Err(format!("a {} fill for a {dtype} result", element.dtype()));
                }
                let view = View::compact(&[]).broadcast(shape).map_err(err)?;
                Plan::Copy(Source::Element(element), view)
            }
            other => return Err(format!("`{name}` as `{other}` is not computed here")),
        })
    }

    /// The one element a fill (`zeros`, `ones`, `full`) repeats: the twin evaluated at shape
    /// `[]`.
    fn element(&self, r: &Resolved, inputs: &Inputs<'_>) -> Result<NDArray, String> {
        let eval = r.op.eval.ok_or("a fill without an evaluation")?;
        let args = r
            .data
            .iter()
            .map(|&k| self.array(inputs, k).map(relay_ir::Value::Tensor))
            .collect::<Result<Vec<_>, _>>()?;
        let attrs = r
            .attrs
            .with("shape", relay_ir::AttrValue::Array(Vec::new()));
        match eval(&args, &attrs).map_err(|e| e.to_string())? {
            relay_ir::Value::Tensor(t) => Ok((*t).clone()),
            _ => Err("a fill that is not a tensor".into()),
        }
    }

    /// The call resolved to its static twin for the inputs' values.
    fn resolve(&self, inputs: &Inputs<'_>) -> Result<Resolved, String> {
        let values = |i: usize| -> Result<Vec<i64>, relay_ir::OpError> {
            let a = self.array(inputs, i).map_err(relay_ir::OpError::value)?;
            if !a.dtype().is_int() {
                return Err(relay_ir::OpError::dtype("a shape of non-integers"));
            }
            a.to_i128_vec()
                .into_iter()
                .map(|v| i64::try_from(v).map_err(|_| relay_ir::OpError::value("out of range")))
                .collect()
        };
        dynamic::resolve(self.op.name, &self.attrs, &values).map_err(|e| e.to_string())
    }

    /// The types of the twin's data inputs.
    fn twin_types(&self, r: &Resolved, inputs: &Inputs<'_>) -> Result<Vec<Type>, String> {
        r.data
            .iter()
            .map(|&k| match self.operands.get(k) {
                Some(Operand::Arg(i)) => Ok(Type::tensor(inputs.shape(*i)?, inputs.dtype(*i)?)),
                Some(Operand::Constant(c)) => Ok(Type::tensor(c.shape(), c.dtype())),
                None => Err("a missing input".to_owned()),
            })
            .collect()
    }

    /// The kernel argument that input `k` of the call is.
    fn arg(&self, k: usize) -> Result<usize, String> {
        match self.operands.get(k) {
            Some(Operand::Arg(i)) => Ok(*i),
            Some(Operand::Constant(_)) => Err(format!("input {k} is a constant")),
            None => Err(format!("no input {k}")),
        }
    }

    /// Input `k` of the call as an array (a small one: a shape, a scalar); a constant is
    /// shared, not copied.
    fn array(&self, inputs: &Inputs<'_>, k: usize) -> Result<Arc<NDArray>, String> {
        match self.operands.get(k) {
            Some(Operand::Constant(c)) => Ok(c.clone()),
            Some(Operand::Arg(i)) => {
                let (dtype, shape) = (inputs.dtype(*i)?, inputs.shape(*i)?);
                NDArray::from_bytes(dtype, shape, input_bytes(inputs, *i)?)
                    .map(Arc::new)
                    .map_err(|e| e.to_string())
            }
            None => Err(format!("no input {k}")),
        }
    }
}

/// The bytes of argument `i`: an error when the caller gave only shapes.
fn input_bytes<'a>(inputs: &Inputs<'a>, i: usize) -> Result<&'a [u8], String> {
    inputs
        .bytes
        .get(i)
        .copied()
        .ok_or_else(|| format!("the shape depends on the values of argument {i}, not given"))
}

/// Copies `view` of `src` compactly into `out`, elements of `width` bytes.
fn copy_view(src: &[u8], view: &View, out: &mut [u8], width: usize) -> Result<(), String> {
    let extents = |s: &[i64]| -> Result<Vec<usize>, String> {
        s.iter()
            .map(|&d| usize::try_from(d).map_err(|_| format!("a negative extent {d}")))
            .collect()
    };
    let from = Strided {
        shape: extents(&view.shape)?,
        strides: view.strides.iter().map(|&s| s as isize).collect(),
        offset: usize::try_from(view.offset).map_err(|_| "a negative offset")?,
    };
    let into = Strided::compact(&from.shape, 0);
    copy_bytes(src, &from, out, &into, width)
}

/// Copies view `from` of `src` into view `into` of `out`, elements of `width` bytes.
pub(super) fn copy_bytes(
    src: &[u8],
    from: &Strided,
    out: &mut [u8],
    into: &Strided,
    width: usize,
) -> Result<(), String> {
    match width {
        1 => copy_as::<u8>(src, from, out, into),
        2 => copy_as::<u16>(src, from, out, into),
        4 => copy_as::<u32>(src, from, out, into),
        8 => copy_as::<u64>(src, from, out, into),
        _ => Err(format!("a copy of {width}-byte elements")),
    }
}

/// [`strided_copy`] of bytes as elements of `T`, which both buffers must be aligned to.
fn copy_as<T: Bits>(
    src: &[u8],
    from: &Strided,
    out: &mut [u8],
    into: &Strided,
) -> Result<(), String> {
    // SAFETY: `T` is a plain integer (`Bits`), valid for any bytes.
    let (head, src, tail) = unsafe { src.align_to::<T>() };
    // SAFETY: as above; writes through `out` are writes of its bytes.
    let (out_head, out, out_tail) = unsafe { out.align_to_mut::<T>() };
    if !(head.is_empty() && tail.is_empty() && out_head.is_empty() && out_tail.is_empty()) {
        return Err("a buffer not aligned to its elements".into());
    }
    strided_copy(src, from, out, into).map_err(|e| e.to_string())
}

/// The row-major positions of the non-zero elements of `bytes` (elements of `dtype`; NaN is
/// non-zero, and so is every bit pattern of a float but the zeros).
fn nonzero(dtype: DType, bytes: &[u8]) -> impl Iterator<Item = usize> + '_ {
    let width = (dtype.bits.div_ceil(8) as usize).max(1);
    let is_float = dtype.is_float();
    bytes
        .chunks_exact(width)
        .enumerate()
        .filter(move |(_, e)| match is_float {
            true => {
                relay_runtime::elements::read_f64(dtype, e) != 0.0
                    || relay_runtime::elements::read_f64(dtype, e).is_nan()
            }
            false => e.iter().any(|&b| b != 0),
        })
        .map(|(i, _)| i)
}

/// `argwhere` of argument `i` into `out` (`int32`, `[count, rank]`).
fn argwhere(inputs: &Inputs<'_>, i: usize, out: &mut [u8]) -> Result<(), String> {
    let shape = inputs.shape(i)?;
    let bytes = input_bytes(inputs, i)?;
    let mut at = out.chunks_exact_mut(4);
    for flat in nonzero(inputs.dtype(i)?, bytes) {
        let mut rest = flat;
        let mut index = [0i32; 16];
        let rank = shape.len();
        if rank > index.len() {
            return Err(format!("`argwhere` of rank {rank}"));
        }
        for (k, &d) in shape.iter().enumerate().rev() {
            let d = d.max(1) as usize;
            index[k] = i32::try_from(rest % d).map_err(|_| "an index past int32")?;
            rest /= d;
        }
        for &x in &index[..rank] {
            at.next()
                .ok_or("more non-zero elements than the result holds")?
                .copy_from_slice(&x.to_le_bytes());
        }
    }
    Ok(())
}
