//! A reduction with `?` dimensions (`sum`, `mean`, `prod`, `max`, `min` of a `float32` or
//! `float64` parameter, over axes that are adjacent), computed by the kernel library
//! ([`relay_linalg::reduce`]) at every shape: the tensor is viewed as `[outer, len, inner]`
//! from its run-time shape.

use relay_ir::{DType, Function, TypeKind};
use relay_linalg::reduce::{Element, Fold, Reduction, reduce};

/// A reduction primitive.
#[derive(Clone, Debug)]
pub struct ReduceOp {
    /// How values fold.
    pub fold: Fold,
    /// The first folded axis.
    pub first: usize,
    /// One past the last.
    pub end: usize,
    /// Whether the folded axes stay, as 1.
    pub keepdims: bool,
}

/// The reduction `func` is: `op(%p0, axis=..., keepdims=..., exclude=...)` with `?`
/// dimensions, a float32 or float64 parameter and adjacent folded axes.
pub(super) fn recognize(func: &Function) -> Option<ReduceOp> {
    if !crate::is_dynamic(func) || func.params.len() != 1 {
        return None;
    }
    let (op, args, attrs) = func.body.op_call()?;
    let fold = match op.name {
        "sum" => Fold::Sum,
        "mean" => Fold::Mean,
        "prod" => Fold::Prod,
        "max" => Fold::Max,
        "min" => Fold::Min,
        _ => return None,
    };
    let [arg] = args else { return None };
    match arg.kind() {
        relay_ir::ExprKind::Var(v) if *v == func.params[0] => {}
        _ => return None,
    }
    let p = &func.params[0];
    let TypeKind::Tensor { dtype, shape } = p.checked_type().or(p.ty())?.kind() else {
        return None;
    };
    if ![DType::F32, DType::F64].contains(dtype) {
        return None;
    }
    let mask = relay_ops::reduced_mask(shape.len(), attrs).ok()?;
    let first = mask.iter().position(|&m| m)?;
    let end = mask.iter().rposition(|&m| m)? + 1;
    if !mask[first..end].iter().all(|&m| m) {
        return None;
    }
    let keepdims = relay_ops::support::attr_bool(attrs, "keepdims").ok()?;
    Some(ReduceOp {
        fold,
        first,
        end,
        keepdims,
    })
}

impl ReduceOp {
    /// The result's shape for data of shape `inputs[0]`.
    pub(super) fn output_shapes(&self, inputs: &[&[i64]]) -> Result<Vec<Vec<i64>>, String> {
        let data = inputs.first().ok_or("a reduction has data")?;
        if data.len() < self.end {
            return Err(format!(
                "a reduction of axes {}..{} of {data:?}",
                self.first, self.end
            ));
        }
        let mut out = data[..self.first].to_vec();
        if self.keepdims {
            out.extend(std::iter::repeat_n(1, self.end - self.first));
        }
        out.extend_from_slice(&data[self.end..]);
        Ok(vec![out])
    }

    /// Folds the data (the first argument, of shape `data`) into the output (the last).
    pub(super) fn run<T: Element>(
        &self,
        args: &mut [&mut [T]],
        data: &[i64],
    ) -> Result<(), String> {
        let product = |s: &[i64]| s.iter().map(|&d| d.max(0) as usize).product::<usize>();
        let r = Reduction {
            outer: product(data.get(..self.first).ok_or("a bad axis")?),
            len: product(data.get(self.first..self.end).ok_or("a bad axis")?),
            inner: product(data.get(self.end..).ok_or("a bad axis")?),
            fold: self.fold,
        };
        let (out, inputs) = args.split_last_mut().ok_or("a reduction has an output")?;
        let x = inputs.first().ok_or("a reduction has data")?;
        reduce(&r, x, out)
    }
}
