//! Layout chains: a primitive function whose body only moves one parameter's elements —
//! reshapes first, then transposes, slices (`strided_slice`), constant-index `take`s,
//! `squeeze`s and `expand_dims`, then reshapes of the result — is a strided view of the
//! parameter copied into a compact result (ONNX Runtime's `Transpose`/`Slice`/`Gather`
//! kernels). At run time the chain gives, for the arguments' shapes, the view of the data
//! ([`LayoutChain::view`]) and the result's shape ([`LayoutChain::output_shape`], its shape
//! function), so one kernel serves every shape.

use relay_ir::{Attrs, DType, Function, OpError};

use super::{
    Link, RESHAPE_LIKE, TakeIndex, chain, chain_shape, input_shape, static_count, tensor_dims,
};
use crate::transform::{permutation, slice_steps, take_view};

/// The operators that pick a strided view of their data.
const LAYOUT: &[&str] = &["transpose", "strided_slice", "take"];

/// Reshapes that only insert or drop dimensions of extent 1: views of any strided view.
const UNIT_RESHAPES: &[&str] = &["squeeze", "expand_dims"];

/// A layout chain of a primitive function (see the module's documentation).
#[derive(Clone, Debug)]
pub struct LayoutChain {
    /// The parameter whose elements move.
    pub data: usize,
    /// Each link, in the order they apply.
    pub links: Vec<Link>,
    /// The element type.
    pub dtype: DType,
}

/// A strided view of a parameter, in elements: element `(i0, i1, ...)` is at `offset + i0 ·
/// strides[0] + ...` of the parameter's compact data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct View {
    /// The extents.
    pub shape: Vec<i64>,
    /// The steps (negative for a reversed slice, 0 for an inserted dimension).
    pub strides: Vec<i64>,
    /// The first element.
    pub offset: i64,
}

/// The layout chain of `f`: a chain (as [`super::reshape_chain`] walks one) of reshapes, then
/// at least one `transpose`, `strided_slice` or `take` of a scalar index (a constant or an
/// integer scalar parameter; with an axis) mixed with `squeeze`s and `expand_dims`, then reshapes; the parameter and the
/// result have one dtype, and the same element count when no link selects (slices or takes).
pub fn layout_chain(f: &Function) -> Option<LayoutChain> {
    let (data, links) = chain(f, &|name| {
        RESHAPE_LIKE.contains(&name) || LAYOUT.contains(&name)
    })?;
    let is_layout = |l: &Link| LAYOUT.contains(&l.op.name);
    let first = links.iter().position(is_layout)?;
    let last = links.iter().rposition(is_layout)?;
    let reshapes_between = links[first..last]
        .iter()
        .any(|l| !is_layout(l) && !UNIT_RESHAPES.contains(&l.op.name));
    if reshapes_between {
        return None;
    }
    let scalar_param = |i: usize| {
        let p = f.params.get(i)?;
        let (dims, dtype) = tensor_dims(p.checked_type().or(p.ty())?)?;
        (dims.is_empty() && dtype.is_int()).then_some(())
    };
    for l in &links {
        if let Some(TakeIndex::Param(i)) = l.index {
            scalar_param(i)?;
        }
    }
    let p = f.params.get(data)?;
    let (input, dtype) = tensor_dims(p.checked_type().or(p.ty())?)?;
    let (output, out_dtype) = tensor_dims(f.body.checked_type().or(f.ret_type.as_ref())?)?;
    let selects = links
        .iter()
        .any(|l| matches!(l.op.name, "strided_slice" | "take"));
    match (static_count(input), static_count(output)) {
        _ if dtype != out_dtype => None,
        (Some(a), Some(b)) if a != b && !selects => None,
        _ => Some(LayoutChain { data, links, dtype }),
    }
}

impl LayoutChain {
    /// The result's shape for arguments of shapes `inputs` (each link's type relation applied
    /// to the concrete types).
    pub fn output_shape(&self, inputs: &[&[i64]]) -> Result<Vec<i64>, OpError> {
        chain_shape(self.data, &self.links, inputs, self.dtype)
    }

    /// The view of the data whose elements, in row-major order, are the result's, for
    /// arguments of shapes `inputs`, with the result's shape; `scalar(i)` is the value of
    /// integer scalar argument `i` (a `take`'s index).
    pub fn view(
        &self,
        inputs: &[&[i64]],
        scalar: &dyn Fn(usize) -> Option<i128>,
    ) -> Result<(View, Vec<i64>), OpError> {
        let data = input_shape(inputs, self.data)?;
        let mut view = View::compact(data);
        let mut moved = false;
        for (i, link) in self.links.iter().enumerate() {
            let mut shape = link.output_shape(&view.shape, inputs, self.dtype)?;
            let name = link.op.name;
            if LAYOUT.contains(&name) {
                view = view.apply(link, scalar)?;
                moved = true;
            } else if !moved {
                // Before any move the view is compact: a reshape keeps it so.
                view = View::compact_from(&shape, view.offset);
            } else if UNIT_RESHAPES.contains(&name) {
                view = view.unit_reshape(&shape)?;
            } else {
                // The trailing reshapes: the copy is compact, so they only rename its shape.
                for l in &self.links[i + 1..] {
                    shape = l.output_shape(&shape, inputs, self.dtype)?;
                }
                view.check_count(&shape)?;
                return Ok((view, shape));
            }
            if view.shape != shape {
                return Err(OpError::shape(format!(
                    "`{name}` gives shape {shape:?}, its view {:?}",
                    view.shape
                )));
            }
        }
        let shape = view.shape.clone();
        Ok((view, shape))
    }
}

impl View {
    /// The compact row-major view of `shape`.
    pub fn compact(shape: &[i64]) -> View {
        View::compact_from(shape, 0)
    }

    fn compact_from(shape: &[i64], offset: i64) -> View {
        let mut strides = vec![0i64; shape.len()];
        let mut step = 1i64;
        for (s, &d) in strides.iter_mut().zip(shape).rev() {
            *s = step;
            step = step.saturating_mul(d.max(1));
        }
        View {
            shape: shape.to_vec(),
            strides,
            offset,
        }
    }

    /// The view after layout link `link`.
    fn apply(
        mut self,
        link: &Link,
        scalar: &dyn Fn(usize) -> Option<i128>,
    ) -> Result<View, OpError> {
        match link.op.name {
            "transpose" => {
                let perm = permutation(self.shape.len(), &link.attrs)?;
                self.shape = perm.iter().map(|&p| self.shape[p]).collect();
                self.strides = perm.iter().map(|&p| self.strides[p]).collect();
            }
            "strided_slice" => return self.sliced(&link.attrs),
            "take" => {
                let index = match link.index {
                    Some(TakeIndex::Constant(i)) => i,
                    Some(TakeIndex::Param(p)) => scalar(p)
                        .ok_or_else(|| OpError::value(format!("argument {p} is not an index")))?,
                    None => return Err(OpError::unsupported("a `take` of a tensor of indices")),
                };
                let (axis, at) = take_view(&self.shape, index, &link.attrs)?;
                self.offset += at * self.strides[axis];
                self.shape.remove(axis);
                self.strides.remove(axis);
            }
            other => return Err(OpError::unsupported(format!("`{other}` is not a view"))),
        }
        Ok(self)
    }

    /// The view `strided_slice` with attributes `attrs` takes of this one.
    pub fn sliced(mut self, attrs: &Attrs) -> Result<View, OpError> {
        let steps = slice_steps(&self.shape, attrs)?;
        for (d, (begin, step, len)) in steps.into_iter().enumerate() {
            if len > 0 {
                self.offset += begin * self.strides[d];
            }
            self.strides[d] *= step;
            self.shape[d] = len;
        }
        Ok(self)
    }

    /// This view broadcast to `shape` (numpy's rules, right-aligned): a dimension of 1
    /// repeats with step 0.
    pub fn broadcast(self, shape: &[i64]) -> Result<View, OpError> {
        let lead = shape.len().checked_sub(self.shape.len()).ok_or_else(|| {
            OpError::shape(format!("cannot broadcast {:?} to {shape:?}", self.shape))
        })?;
        let mut strides = vec![0i64; lead];
        for (i, (&d, &s)) in self.shape.iter().zip(&self.strides).enumerate() {
            let to = shape[lead + i];
            match d {
                _ if d == to => strides.push(s),
                1 => strides.push(0),
                _ => {
                    return Err(OpError::shape(format!(
                        "cannot broadcast {:?} to {shape:?}",
                        self.shape
                    )));
                }
            }
        }
        Ok(View {
            shape: shape.to_vec(),
            strides,
            offset: self.offset,
        })
    }

    /// The view whose row-major elements are `tile`'s result for repeats `reps` (TVM's
    /// rule: the shorter of the data's shape and `reps` is padded with 1s in front): the
    /// dimensions `[r0, d0, r1, d1, ...]`, each repeat of step 0.
    pub fn tiled(self, reps: &[i64]) -> Result<View, OpError> {
        if let Some(r) = reps.iter().find(|&&r| r < 0) {
            return Err(OpError::value(format!("a negative repeat {r}")));
        }
        let rank = reps.len().max(self.shape.len());
        let pad = |n: usize| rank - n;
        let mut view = View {
            shape: Vec::with_capacity(2 * rank),
            strides: Vec::with_capacity(2 * rank),
            offset: self.offset,
        };
        for i in 0..rank {
            let rep = match i.checked_sub(pad(reps.len())) {
                Some(k) => reps[k],
                None => 1,
            };
            let (d, s) = match i.checked_sub(pad(self.shape.len())) {
                Some(k) => (self.shape[k], self.strides[k]),
                None => (1, 0),
            };
            view.shape.extend([rep, d]);
            view.strides.extend([0, s]);
        }
        Ok(view)
    }

    /// The view with the dimensions of extent 1 of `shape` inserted or dropped (the
    /// others, in order, are the view's).
    fn unit_reshape(self, shape: &[i64]) -> Result<View, OpError> {
        let mut kept = self
            .shape
            .iter()
            .zip(&self.strides)
            .filter(|&(&d, _)| d != 1);
        let mut strides = Vec::with_capacity(shape.len());
        for &d in shape {
            if d == 1 {
                strides.push(0);
                continue;
            }
            match kept.next() {
                Some((&k, &s)) if k == d => strides.push(s),
                _ => {
                    return Err(OpError::shape(format!(
                        "{shape:?} is not {:?} with dimensions of 1 inserted or dropped",
                        self.shape
                    )));
                }
            }
        }
        if kept.next().is_some() {
            return Err(OpError::shape(format!(
                "{shape:?} drops a dimension of {:?} that is not 1",
                self.shape
            )));
        }
        Ok(View {
            shape: shape.to_vec(),
            strides,
            offset: self.offset,
        })
    }

    /// Checks that `shape` has the view's element count.
    fn check_count(&self, shape: &[i64]) -> Result<(), OpError> {
        let count = |s: &[i64]| s.iter().try_fold(1i64, |n, &d| n.checked_mul(d));
        if count(shape) != count(&self.shape) {
            return Err(OpError::shape(format!(
                "a reshape of {:?} to {shape:?}",
                self.shape
            )));
        }
        Ok(())
    }
}
