//! Times `nn.softmax` over the last axis and the attention's unnormalized rows
//! (`Ops::exp_rows`) with the kernel library's path for this CPU (or `RELAYC_ISA`'s), at the
//! shapes of attention scores, one thread, nanoseconds per element beside a copy of the same
//! rows.
//!
//! `cargo run --release -p relay-linalg --example softmax_rows [REPEATS]`

use std::time::Instant;

use relay_linalg::KernelContext;
use relay_linalg::softmax::{Prologue, Softmax, softmax};

/// Rows × columns: attention scores of 4 and 12 heads at 128 and 512 tokens, and a softmax
/// over a vocabulary.
const SHAPES: [(usize, usize); 5] = [
    (4 * 128, 128),
    (4 * 512, 512),
    (12 * 512, 512),
    (64, 1000),
    (16, 50257),
];

/// The best of `repeats` runs of `f`, in seconds; its first error.
fn best(repeats: usize, mut f: impl FnMut() -> Result<(), String>) -> Result<f64, String> {
    let mut best = f64::INFINITY;
    for _ in 0..repeats {
        let t = Instant::now();
        f()?;
        best = best.min(t.elapsed().as_secs_f64());
    }
    Ok(best)
}

fn main() -> Result<(), String> {
    let repeats = std::env::args()
        .nth(1)
        .map(|r| r.parse().map_err(|e| format!("REPEATS: {e}")))
        .transpose()?
        .unwrap_or(20);
    let ctx = KernelContext::with_threads(1);
    println!("path: {}", ctx.isa());
    for (rows, cols) in SHAPES {
        let len = rows * cols;
        let x: Vec<f32> = (0..len)
            .map(|i| ((i * 7919) % 1000) as f32 * 0.01)
            .collect();
        let mut y = vec![0f32; len];
        let mut sums = vec![0f32; rows];
        let s = Softmax {
            rows,
            cols,
            prologue: Prologue::Div(2.0),
            log: false,
        };
        let per = |t: f64| t * 1e9 / len as f64;
        let full = best(repeats, || softmax(&ctx, &s, &x, &mut y))?;
        let exp = best(repeats, || (ctx.ops().exp_rows)(&s, &x, &mut y, &mut sums))?;
        let copy = best(repeats, || {
            y.copy_from_slice(&x);
            Ok(())
        })?;
        println!(
            "[{rows}, {cols}]: softmax {:.3} ns/element, exp_rows {:.3}, copy {:.3}",
            per(full),
            per(exp),
            per(copy)
        );
    }
    Ok(())
}
