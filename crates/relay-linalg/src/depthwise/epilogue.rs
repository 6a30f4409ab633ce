//! The epilogue a depthwise convolution applies to each result while its row is in registers
//! or in cache: per output channel `o`, `y = clamp(y·scale[o] + shift[o], lo, hi)` — a fused
//! batch norm's multiply and add, then `clip` (ReLU6) — each part optional, with `clip`'s
//! rule that a NaN stays NaN (`hi < y ? hi : y`, then `y < lo ? lo : y`).

/// The epilogue as the JIT'd kernel passes it: `scale` and `shift` point at one value per
/// output channel or are null (no multiply, no add); `lo`/`hi` are the clamp's bounds
/// (`-inf`/`inf`: none).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct DepthwiseEpilogue {
    /// Per output channel multipliers, or null.
    pub scale: *const f32,
    /// Per output channel addends, or null.
    pub shift: *const f32,
    /// The clamp's lower bound.
    pub lo: f32,
    /// The clamp's upper bound.
    pub hi: f32,
}

impl DepthwiseEpilogue {
    /// No epilogue.
    pub const NONE: DepthwiseEpilogue = DepthwiseEpilogue {
        scale: std::ptr::null(),
        shift: std::ptr::null(),
        lo: f32::NEG_INFINITY,
        hi: f32::INFINITY,
    };

    /// Output channel `oc`'s epilogue.
    ///
    /// # Safety
    ///
    /// `scale` and `shift` are null or valid for more than `oc` elements.
    pub(crate) unsafe fn channel(&self, oc: i64) -> ChannelEpilogue {
        // SAFETY: forwarded from this function's contract.
        let at = |p: *const f32| (!p.is_null()).then(|| unsafe { *p.offset(oc as isize) });
        let (scale, shift) = (at(self.scale), at(self.shift));
        ChannelEpilogue {
            scale,
            shift,
            lo: self.lo,
            hi: self.hi,
            active: scale.is_some()
                || shift.is_some()
                || self.lo != f32::NEG_INFINITY
                || self.hi != f32::INFINITY,
        }
    }
}

/// One output channel's epilogue.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ChannelEpilogue {
    pub(crate) scale: Option<f32>,
    pub(crate) shift: Option<f32>,
    pub(crate) lo: f32,
    pub(crate) hi: f32,
    /// Whether it changes anything.
    pub(crate) active: bool,
}

impl ChannelEpilogue {
    /// No epilogue.
    pub(crate) const NONE: ChannelEpilogue = ChannelEpilogue {
        scale: None,
        shift: None,
        lo: f32::NEG_INFINITY,
        hi: f32::INFINITY,
        active: false,
    };

    /// `v` through the epilogue.
    pub(crate) fn apply(&self, mut v: f32) -> f32 {
        if let Some(s) = self.scale {
            v *= s;
        }
        if let Some(b) = self.shift {
            v += b;
        }
        let v = if self.hi < v { self.hi } else { v };
        if v < self.lo { self.lo } else { v }
    }

    /// The epilogue over the `n` results at `out`.
    ///
    /// # Safety
    ///
    /// `out` is valid for `n` elements.
    pub(crate) unsafe fn row(&self, out: *mut f32, n: usize) {
        if !self.active {
            return;
        }
        // SAFETY: forwarded from this function's contract.
        let row = unsafe { std::slice::from_raw_parts_mut(out, n) };
        for v in row {
            *v = self.apply(*v);
        }
    }
}
