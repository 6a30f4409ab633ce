//! Reductions over one run of adjacent axes of a contiguous float tensor, at sizes known only
//! at run time: `y[o, i] = fold(x[o, r, i] for r)` for a tensor viewed as `[outer, len,
//! inner]` (ONNX Runtime's `ReduceSum`/`ReduceMean`/... on a contiguous range of axes).
//!
//! With `inner > 1` each output row is folded a whole input row at a time (contiguous, so the
//! compiler vectorizes it); with `inner == 1` each output element folds one contiguous row,
//! sums and products in 8 partial results. Floats accumulate in their own type. `Max`/`Min`
//! propagate NaN (the first met wins, as numpy's); an empty sum or product gives the
//! identity, an empty mean NaN (0/0), and an empty extreme is an error (numpy's).

/// How values fold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fold {
    /// `+`.
    Sum,
    /// `+`, then divided by the count.
    Mean,
    /// `·`.
    Prod,
    /// The greatest (NaN wins).
    Max,
    /// The least (NaN wins).
    Min,
}

/// A float element a reduction folds.
pub trait Element:
    Copy + PartialOrd + std::ops::Add<Output = Self> + std::ops::Mul<Output = Self>
{
    /// `0`, `1`, `-inf` and `+inf`.
    const ZERO: Self;
    /// `1`.
    const ONE: Self;
    /// `-inf`.
    const LOWEST: Self;
    /// `+inf`.
    const HIGHEST: Self;
    /// Whether it is NaN.
    fn nan(self) -> bool;
    /// `self / n`.
    fn div_count(self, n: usize) -> Self;
}

macro_rules! element {
    ($t:ty) => {
        impl Element for $t {
            const ZERO: $t = 0.0;
            const ONE: $t = 1.0;
            const LOWEST: $t = <$t>::NEG_INFINITY;
            const HIGHEST: $t = <$t>::INFINITY;
            fn nan(self) -> bool {
                self.is_nan()
            }
            fn div_count(self, n: usize) -> $t {
                self / n as $t
            }
        }
    };
}
element!(f32);
element!(f64);

impl Fold {
    fn identity<T: Element>(self) -> T {
        match self {
            Fold::Sum | Fold::Mean => T::ZERO,
            Fold::Prod => T::ONE,
            Fold::Max => T::LOWEST,
            Fold::Min => T::HIGHEST,
        }
    }

    #[inline(always)]
    fn combine<T: Element>(self, acc: T, v: T) -> T {
        match self {
            Fold::Sum | Fold::Mean => acc + v,
            Fold::Prod => acc * v,
            Fold::Max => pick(acc, v, v > acc),
            Fold::Min => pick(acc, v, v < acc),
        }
    }
}

/// `v` when it wins over `acc` or is the first NaN, else `acc`.
#[inline(always)]
fn pick<T: Element>(acc: T, v: T, wins: bool) -> T {
    if !acc.nan() && (wins || v.nan()) {
        v
    } else {
        acc
    }
}

/// The shape of a reduction: `x` is `[outer, len, inner]`, `y` is `[outer, inner]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reduction {
    /// The product of the axes before the folded ones.
    pub outer: usize,
    /// The product of the folded axes.
    pub len: usize,
    /// The product of the axes after them.
    pub inner: usize,
    /// How values fold.
    pub fold: Fold,
}

/// Folds `x` into `y` as `r` says; an error when the lengths do not match the shape.
pub fn reduce<T: Element>(r: &Reduction, x: &[T], y: &mut [T]) -> Result<(), String> {
    let rows = r.outer.checked_mul(r.inner);
    let all = rows.and_then(|n| n.checked_mul(r.len));
    if rows != Some(y.len()) || all != Some(x.len()) {
        return Err(format!(
            "a reduction of {:?} from {} elements into {}",
            r,
            x.len(),
            y.len()
        ));
    }
    if y.is_empty() {
        return Ok(());
    }
    if r.len == 0 && matches!(r.fold, Fold::Max | Fold::Min) {
        return Err(format!(
            "cannot take the {:?} of an empty reduction",
            r.fold
        ));
    }
    let block = r.len * r.inner;
    for (o, out) in y.chunks_exact_mut(r.inner).enumerate() {
        let x = &x[o * block..(o + 1) * block];
        if r.inner == 1 {
            out[0] = fold_row(r.fold, x);
        } else {
            out.fill(r.fold.identity());
            for row in x.chunks_exact(r.inner) {
                for (a, &v) in out.iter_mut().zip(row) {
                    *a = r.fold.combine(*a, v);
                }
            }
        }
        if r.fold == Fold::Mean {
            out.iter_mut().for_each(|a| *a = a.div_count(r.len));
        }
    }
    Ok(())
}

/// The fold of one contiguous row.
fn fold_row<T: Element>(fold: Fold, x: &[T]) -> T {
    const PARTS: usize = 8;
    match fold {
        Fold::Sum | Fold::Mean | Fold::Prod => {
            let mut acc = [fold.identity::<T>(); PARTS];
            let mut chunks = x.chunks_exact(PARTS);
            for c in &mut chunks {
                for (a, &v) in acc.iter_mut().zip(c) {
                    *a = fold.combine(*a, v);
                }
            }
            let tail = chunks
                .remainder()
                .iter()
                .fold(fold.identity(), |a, &v| fold.combine(a, v));
            acc.iter().fold(tail, |a, &v| fold.combine(a, v))
        }
        Fold::Max | Fold::Min => x.iter().fold(fold.identity(), |a, &v| fold.combine(a, v)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(r: &Reduction, x: &[f64]) -> Vec<f64> {
        let mut y = Vec::new();
        for o in 0..r.outer {
            for i in 0..r.inner {
                let vals = (0..r.len).map(|k| x[(o * r.len + k) * r.inner + i]);
                y.push(match r.fold {
                    Fold::Sum => vals.sum(),
                    Fold::Mean => vals.sum::<f64>() / r.len as f64,
                    Fold::Prod => vals.product(),
                    Fold::Max => vals.fold(f64::NEG_INFINITY, |a, v| {
                        if a.is_nan() || v.is_nan() {
                            f64::NAN
                        } else {
                            a.max(v)
                        }
                    }),
                    Fold::Min => vals.fold(f64::INFINITY, |a, v| {
                        if a.is_nan() || v.is_nan() {
                            f64::NAN
                        } else {
                            a.min(v)
                        }
                    }),
                });
            }
        }
        y
    }

    #[test]
    fn every_fold_at_every_layout_matches_the_reference() {
        let folds = [Fold::Sum, Fold::Mean, Fold::Prod, Fold::Max, Fold::Min];
        for (outer, len, inner) in [(1, 1, 1), (3, 17, 1), (2, 5, 7), (1, 9, 64), (0, 3, 2)] {
            let x: Vec<f64> = (0..outer * len * inner)
                .map(|k| ((k * 37 % 11) as f64 - 5.0) / 4.0)
                .collect();
            for fold in folds {
                let r = Reduction {
                    outer,
                    len,
                    inner,
                    fold,
                };
                let mut y = vec![0.0; outer * inner];
                reduce(&r, &x, &mut y).unwrap();
                let want = naive(&r, &x);
                for (g, w) in y.iter().zip(&want) {
                    assert!(
                        g == w || (g.is_nan() && w.is_nan()) || (g - w).abs() < 1e-12,
                        "{r:?}: {y:?} {want:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn extremes_propagate_nan_and_wrong_lengths_are_errors() {
        let x = [1.0f32, f32::NAN, 3.0, 2.0];
        for fold in [Fold::Max, Fold::Min] {
            let r = Reduction {
                outer: 1,
                len: 4,
                inner: 1,
                fold,
            };
            let mut y = [0.0f32];
            reduce(&r, &x, &mut y).unwrap();
            assert!(y[0].is_nan());
        }
        let empty = Reduction {
            outer: 4,
            len: 0,
            inner: 3,
            fold: Fold::Sum,
        };
        let mut y = [1.0f32; 12];
        reduce(&empty, &[], &mut y).unwrap();
        assert_eq!(y, [0.0; 12]);
        let empty = Reduction {
            fold: Fold::Max,
            ..empty
        };
        assert!(reduce(&empty, &[], &mut y).is_err());
        let r = Reduction {
            outer: 2,
            len: 2,
            inner: 1,
            fold: Fold::Sum,
        };
        assert!(reduce(&r, &x, &mut [0.0f32; 3]).is_err());
        assert!(reduce(&r, &x[..3], &mut [0.0f32; 2]).is_err());
    }
}
