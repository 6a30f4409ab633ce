//! The multiply-add peak of this CPU per instruction set, measured: a loop of independent
//! fused multiply-adds on registers only (12 chains, more than an FMA's latency times its
//! ports on current cores), so that benchmarks can state a kernel's speed as a fraction of
//! what the core can do rather than of a datasheet's clock.

use std::hint::black_box;
use std::time::Instant;

use crate::isa::{Isa, IsaError};

/// Iterations of one timed run (each 12 vector multiply-adds).
const ITERATIONS: usize = 2_000_000;

/// The float32 multiply-add peak of one core with `isa`, in GFLOP/s (a multiply-add is two
/// operations): the best of `runs` timed loops. The portable path's "peak" is that of
/// 4-lane multiplies and adds, what the baseline's vectors do.
pub fn fma_peak(isa: Isa, runs: usize) -> Result<f64, IsaError> {
    let isa = isa.check()?;
    let (loop_fn, lanes): (fn(usize) -> f32, usize) = match isa {
        // SAFETY: `check` found the instruction set on this CPU.
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => (|n| unsafe { x86::chains512(n) }, 16),
        // SAFETY: as above.
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => (|n| unsafe { x86::chains256(n) }, 8),
        _ => (portable, 4),
    };
    let mut best = f64::INFINITY;
    for _ in 0..runs.max(1) {
        let t = Instant::now();
        black_box(loop_fn(black_box(ITERATIONS)));
        best = best.min(t.elapsed().as_secs_f64());
    }
    Ok((ITERATIONS * 12 * lanes * 2) as f64 / best / 1e9)
}

/// 12 chains of 4-lane multiply-adds.
fn portable(n: usize) -> f32 {
    let mut acc = [[1.0f32; 4]; 12];
    let (m, a) = (black_box([0.999_9f32; 4]), black_box([1e-4f32; 4]));
    for _ in 0..n {
        for v in &mut acc {
            *v = std::array::from_fn(|i| v[i] * m[i] + a[i]);
        }
    }
    acc.iter().flatten().sum()
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;
    use std::hint::black_box;

    /// 12 chains of 8-lane fused multiply-adds.
    ///
    /// # Safety
    ///
    /// The CPU has AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn chains256(n: usize) -> f32 {
        let mut acc = [_mm256_set1_ps(1.0); 12];
        let (m, a) = (
            _mm256_set1_ps(black_box(0.999_9)),
            _mm256_set1_ps(black_box(1e-4)),
        );
        for _ in 0..n {
            for v in &mut acc {
                *v = _mm256_fmadd_ps(*v, m, a);
            }
        }
        let mut sum = _mm256_setzero_ps();
        for v in acc {
            sum = _mm256_add_ps(sum, v);
        }
        _mm256_cvtss_f32(sum)
    }

    /// 12 chains of 16-lane fused multiply-adds.
    ///
    /// # Safety
    ///
    /// The CPU has AVX-512F.
    #[target_feature(enable = "avx512f,avx2,fma")]
    pub(super) unsafe fn chains512(n: usize) -> f32 {
        let mut acc = [_mm512_set1_ps(1.0); 12];
        let (m, a) = (
            _mm512_set1_ps(black_box(0.999_9)),
            _mm512_set1_ps(black_box(1e-4)),
        );
        for _ in 0..n {
            for v in &mut acc {
                *v = _mm512_fmadd_ps(*v, m, a);
            }
        }
        let mut sum = _mm512_setzero_ps();
        for v in acc {
            sum = _mm512_add_ps(sum, v);
        }
        _mm512_reduce_add_ps(sum)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_isa_this_cpu_runs_has_a_peak() {
        let peaks: Vec<f64> = Isa::available()
            .into_iter()
            .map(|isa| fma_peak(isa, 1).unwrap())
            .collect();
        assert!(peaks.iter().all(|&p| p.is_finite() && p > 0.0), "{peaks:?}");
        for isa in Isa::ALL.into_iter().filter(|i| !i.runs_here()) {
            assert!(fma_peak(isa, 1).is_err());
        }
    }
}
