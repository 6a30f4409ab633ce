//! Reshape-only primitives with `?` dimensions whose result shape `manifest_alloc` cannot
//! write before the call (two or more `?`; [`relay_ops::views`]): the shape comes from the
//! chain's relations applied to the arguments' shapes, and the VM makes the result a view of
//! the data's storage ([`crate::PackedFunc::view_source`]); called directly, the kernel copies the
//! bytes. Any dtype.

use std::sync::Arc;

use relay_ops::views::ReshapeChain;

/// A reshape-only primitive's chain.
#[derive(Clone, Debug)]
pub struct ViewOp {
    /// The reshapes.
    pub chain: Arc<ReshapeChain>,
}

/// The view `func` is, when it is a reshape-only primitive with `?` dimensions.
pub(super) fn recognize(func: &relay_ir::Function) -> Option<ViewOp> {
    if !crate::is_dynamic(func) {
        return None;
    }
    let chain = relay_ops::views::reshape_chain(func)?;
    Some(ViewOp {
        chain: Arc::new(chain),
    })
}

impl ViewOp {
    /// The result's shape for arguments of shapes `inputs`.
    pub(super) fn output_shapes(&self, inputs: &[&[i64]]) -> Result<Vec<Vec<i64>>, String> {
        let out = self.chain.output_shape(inputs).map_err(|e| e.to_string())?;
        let count = |s: &[i64]| s.iter().try_fold(1i64, |n, &d| n.checked_mul(d));
        let data = inputs.get(self.chain.data).copied().unwrap_or_default();
        if count(&out) != count(data) {
            return Err(format!("a reshape of {data:?} to {out:?}"));
        }
        Ok(vec![out])
    }

    /// Copies the data's bytes (argument `self.chain.data`) to the output (the last argument).
    pub(super) fn run(&self, args: &mut [&mut [u8]]) -> Result<(), String> {
        let (out, inputs) = args.split_last_mut().ok_or("a reshape has an output")?;
        let data = inputs.get(self.chain.data).ok_or("a reshape has data")?;
        if data.len() != out.len() {
            return Err(format!(
                "a reshape of {} bytes into {}",
                data.len(),
                out.len()
            ));
        }
        out.copy_from_slice(data);
        Ok(())
    }
}
