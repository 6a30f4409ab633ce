//! The LSTM and GRU recurrences (`nn.lstm_recurrence`, `nn.gru_recurrence`; their semantics
//! are in `relay-ops/src/nn/rnn.rs`), float32, as ONNX Runtime's fused kernels compute them:
//! the input projection of every step comes computed (one GEMM over the sequence, outside);
//! each step is one product of the state with the recurrent weights of all the gates at once,
//! then the gate math over the hidden units, vectorized ([`activation`]).
//!
//! The product `q[b, j] += Σ_k h[b, k] · r[k, j]` reads `r` (the recurrent weights transposed,
//! `[hidden, gates·hidden]`) row by row: the columns of a block stay in registers while `k`
//! runs over the state ([`block`]; 128 columns on AVX-512, 64 on AVX2 and the portable path),
//! so each weight is loaded once per step and batch row and no horizontal sums are made. The
//! state lives in the final-state outputs, which each step updates in place.
//!
//! The instruction set is the kernel context's table's ([`crate::Ops`]); the SIMD paths fuse the
//! multiply-adds. One thread: a step depends on the one before, and a product of a
//! `[batch, hidden]` state is too small to share (ONNX Runtime runs these at batch 1 on one
//! thread too).

pub(crate) mod activation;
#[cfg(test)]
mod tests;

use activation::{madd, sigmoid, tanh};

use crate::isa::Isa;

/// A recurrence's steps, batch and hidden size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sizes {
    pub seq: usize,
    pub batch: usize,
    pub hidden: usize,
}

/// The inputs of an LSTM recurrence: `xw` `[seq, batch, 4·hidden]` (gates i, o, f, c), `r`
/// `[hidden, 4·hidden]`, `h0`, `c0` `[batch, hidden]`, `peephole` `[3·hidden]` (i, o, f).
pub struct Lstm<'a> {
    pub xw: &'a [f32],
    pub r: &'a [f32],
    pub h0: &'a [f32],
    pub c0: &'a [f32],
    pub peephole: &'a [f32],
    pub reverse: bool,
    pub clip: Option<f32>,
    pub input_forget: bool,
}

/// The inputs of a GRU recurrence: `xw` `[seq, batch, 3·hidden]` (gates z, r, h), `r`
/// `[hidden, 3·hidden]`, `h0` `[batch, hidden]`, `rbh` `[hidden]`.
pub struct Gru<'a> {
    pub xw: &'a [f32],
    pub r: &'a [f32],
    pub h0: &'a [f32],
    pub rbh: &'a [f32],
    pub reverse: bool,
    pub clip: Option<f32>,
    pub linear_before_reset: bool,
}

/// An LSTM recurrence on one instruction set's path: `y` `[seq, batch, hidden]` gets every
/// step's state, `h` and `c` `[batch, hidden]` the final ones. The slices have the lengths `s`
/// gives them. [`Ops::lstm`](crate::Ops::lstm) is the one of a table.
pub type LstmFn = fn(s: Sizes, a: &Lstm, y: &mut [f32], h: &mut [f32], c: &mut [f32]);

/// A GRU recurrence on one instruction set's path: `y` `[seq, batch, hidden]` gets every
/// step's state, `h` `[batch, hidden]` the final one. [`Ops::gru`](crate::Ops::gru) is the one
/// of a table.
pub type GruFn = fn(s: Sizes, a: &Gru, y: &mut [f32], h: &mut [f32]);

/// The LSTM recurrence of `isa` (the portable one if the CPU lacks it).
pub(crate) fn lstm_for(isa: Isa) -> LstmFn {
    match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the CPU has AVX-512F, AVX2 and FMA (checked).
        Isa::Avx512 if Isa::detected() == Isa::Avx512 => {
            |s, a, y, h, c| unsafe { lstm_avx512(s, a, y, h, c) }
        }
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the CPU has AVX2 and FMA (checked).
        Isa::Avx2 if Isa::detected() != Isa::Portable => {
            |s, a, y, h, c| unsafe { lstm_avx2(s, a, y, h, c) }
        }
        _ => lstm_steps::<false, 64>,
    }
}

/// The GRU recurrence of `isa` (the portable one if the CPU lacks it).
pub(crate) fn gru_for(isa: Isa) -> GruFn {
    match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the CPU has AVX-512F, AVX2 and FMA (checked).
        Isa::Avx512 if Isa::detected() == Isa::Avx512 => {
            |s, a, y, h| unsafe { gru_avx512(s, a, y, h) }
        }
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the CPU has AVX2 and FMA (checked).
        Isa::Avx2 if Isa::detected() != Isa::Portable => {
            |s, a, y, h| unsafe { gru_avx2(s, a, y, h) }
        }
        _ => gru_steps::<false, 64>,
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn lstm_avx512(s: Sizes, a: &Lstm, y: &mut [f32], h: &mut [f32], c: &mut [f32]) {
    lstm_steps::<true, 128>(s, a, y, h, c);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn lstm_avx2(s: Sizes, a: &Lstm, y: &mut [f32], h: &mut [f32], c: &mut [f32]) {
    lstm_steps::<true, 64>(s, a, y, h, c);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn gru_avx512(s: Sizes, a: &Gru, y: &mut [f32], h: &mut [f32]) {
    gru_steps::<true, 128>(s, a, y, h);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn gru_avx2(s: Sizes, a: &Gru, y: &mut [f32], h: &mut [f32]) {
    gru_steps::<true, 64>(s, a, y, h);
}

/// The time step of iteration `step`.
#[inline(always)]
fn time(s: Sizes, step: usize, reverse: bool) -> usize {
    if reverse { s.seq - 1 - step } else { step }
}

/// `x` clamped to `[-bound, bound]` (NaN kept).
#[inline(always)]
fn clip(x: f32, bound: f32) -> f32 {
    let x = if x < -bound { -bound } else { x };
    if x > bound { bound } else { x }
}

#[inline(always)]
fn lstm_steps<const FMA: bool, const BLOCK: usize>(
    s: Sizes,
    a: &Lstm,
    y: &mut [f32],
    h: &mut [f32],
    c: &mut [f32],
) {
    let (hs, cols) = (s.hidden, 4 * s.hidden);
    let rows = s.batch * cols;
    let bound = a.clip.unwrap_or(f32::INFINITY);
    h.copy_from_slice(a.h0);
    c.copy_from_slice(a.c0);
    let mut gates = vec![0.0f32; rows];
    for step in 0..s.seq {
        let t = time(s, step, a.reverse);
        gates.copy_from_slice(&a.xw[t * rows..(t + 1) * rows]);
        product::<FMA, BLOCK>(&mut gates, cols, h, hs, a.r, 0, cols);
        for ((g, hb), cb) in gates
            .chunks_exact(cols)
            .zip(h.chunks_exact_mut(hs))
            .zip(c.chunks_exact_mut(hs))
        {
            lstm_cell::<FMA>(g, hb, cb, a.peephole, bound, a.input_forget);
        }
        y[t * s.batch * hs..(t + 1) * s.batch * hs].copy_from_slice(h);
    }
}

/// One LSTM step of one batch row: the gates `g` (i, o, f, c, summed) update `h` and `c`.
#[inline(always)]
fn lstm_cell<const FMA: bool>(
    g: &[f32],
    h: &mut [f32],
    c: &mut [f32],
    p: &[f32],
    bound: f32,
    coupled: bool,
) {
    let hs = h.len();
    let (gi, go, gf, gc) = (
        &g[..hs],
        &g[hs..2 * hs],
        &g[2 * hs..3 * hs],
        &g[3 * hs..4 * hs],
    );
    let (pi, po, pf) = (&p[..hs], &p[hs..2 * hs], &p[2 * hs..3 * hs]);
    let c = &mut c[..hs];
    for j in 0..hs {
        let old = c[j];
        let i = sigmoid::<FMA>(clip(madd::<FMA>(pi[j], old, gi[j]), bound));
        let f = if coupled {
            1.0 - i
        } else {
            sigmoid::<FMA>(clip(madd::<FMA>(pf[j], old, gf[j]), bound))
        };
        let fresh = madd::<FMA>(f, old, i * tanh::<FMA>(clip(gc[j], bound)));
        let o = sigmoid::<FMA>(clip(madd::<FMA>(po[j], fresh, go[j]), bound));
        c[j] = fresh;
        h[j] = o * tanh::<FMA>(clip(fresh, bound));
    }
}

#[inline(always)]
fn gru_steps<const FMA: bool, const BLOCK: usize>(s: Sizes, a: &Gru, y: &mut [f32], h: &mut [f32]) {
    let (hs, cols) = (s.hidden, 3 * s.hidden);
    let rows = s.batch * cols;
    let bound = a.clip.unwrap_or(f32::INFINITY);
    h.copy_from_slice(a.h0);
    // Per batch row: the sums of gates z and r, and h's recurrent part.
    let mut q = vec![0.0f32; rows];
    let mut reset = vec![0.0f32; s.batch * hs];
    for step in 0..s.seq {
        let t = time(s, step, a.reverse);
        let x = &a.xw[t * rows..(t + 1) * rows];
        for (qb, xb) in q.chunks_exact_mut(cols).zip(x.chunks_exact(cols)) {
            qb[..2 * hs].copy_from_slice(&xb[..2 * hs]);
            if a.linear_before_reset {
                qb[2 * hs..].copy_from_slice(a.rbh);
            } else {
                for ((q, &x), &b) in qb[2 * hs..].iter_mut().zip(&xb[2 * hs..]).zip(a.rbh) {
                    *q = x + b;
                }
            }
        }
        if a.linear_before_reset {
            // q_h = h · r_h + rb_h, applied after the reset.
            product::<FMA, BLOCK>(&mut q, cols, h, hs, a.r, 0, cols);
            for ((qb, xb), hb) in q
                .chunks_exact(cols)
                .zip(x.chunks_exact(cols))
                .zip(h.chunks_exact_mut(hs))
            {
                gru_cell_before_reset::<FMA>(qb, &xb[2 * hs..], hb, bound);
            }
        } else {
            // q_h = x_h + rb_h + (r ⊙ h) · r_h.
            product::<FMA, BLOCK>(&mut q, cols, h, hs, a.r, 0, 2 * hs);
            for ((qb, hb), rb) in q
                .chunks_exact_mut(cols)
                .zip(h.chunks_exact(hs))
                .zip(reset.chunks_exact_mut(hs))
            {
                gru_gates::<FMA>(qb, hb, rb, bound);
            }
            product::<FMA, BLOCK>(&mut q, cols, &reset, hs, a.r, 2 * hs, cols);
            for (qb, hb) in q.chunks_exact(cols).zip(h.chunks_exact_mut(hs)) {
                let (z, qh) = (&qb[..hs], &qb[2 * hs..3 * hs]);
                for j in 0..hs.min(hb.len()) {
                    let candidate = tanh::<FMA>(clip(qh[j], bound));
                    hb[j] = madd::<FMA>(z[j], hb[j] - candidate, candidate);
                }
            }
        }
        y[t * s.batch * hs..(t + 1) * s.batch * hs].copy_from_slice(h);
    }
}

/// A GRU step of one batch row with `linear_before_reset`: `q` holds the sums of z and r and
/// `h · r_h + rb_h`, `xh` the input part of the candidate.
#[inline(always)]
fn gru_cell_before_reset<const FMA: bool>(q: &[f32], xh: &[f32], h: &mut [f32], bound: f32) {
    let hs = h.len();
    let (qz, qr, qh, xh) = (&q[..hs], &q[hs..2 * hs], &q[2 * hs..3 * hs], &xh[..hs]);
    for j in 0..hs {
        let z = sigmoid::<FMA>(clip(qz[j], bound));
        let r = sigmoid::<FMA>(clip(qr[j], bound));
        let candidate = tanh::<FMA>(clip(madd::<FMA>(r, qh[j], xh[j]), bound));
        h[j] = madd::<FMA>(z, h[j] - candidate, candidate);
    }
}

/// The gates z (stored over its sum in `q`) and r of a GRU step without
/// `linear_before_reset`, and `reset = r ⊙ h`.
#[inline(always)]
fn gru_gates<const FMA: bool>(q: &mut [f32], h: &[f32], reset: &mut [f32], bound: f32) {
    let hs = h.len();
    let (qz, rest) = q.split_at_mut(hs);
    let qr = &rest[..hs];
    let reset = &mut reset[..hs];
    for j in 0..hs {
        qz[j] = sigmoid::<FMA>(clip(qz[j], bound));
        reset[j] = sigmoid::<FMA>(clip(qr[j], bound)) * h[j];
    }
}

/// `q[b, j] += Σ_k state[b, k] · r[k, j]` for the columns `j` in `from..to` of every batch
/// row `b` (`q`'s rows `ld` apart, as are `r`'s; `state` rows `hs` long).
#[inline(always)]
fn product<const FMA: bool, const BLOCK: usize>(
    q: &mut [f32],
    ld: usize,
    state: &[f32],
    hs: usize,
    r: &[f32],
    from: usize,
    to: usize,
) {
    for (qb, hb) in q.chunks_exact_mut(ld).zip(state.chunks_exact(hs)) {
        let mut j = from;
        while j + BLOCK <= to {
            block::<FMA, BLOCK>(&mut qb[j..j + BLOCK], hb, r, ld, j);
            j += BLOCK;
        }
        while j + 16 <= to {
            block::<FMA, 16>(&mut qb[j..j + 16], hb, r, ld, j);
            j += 16;
        }
        for (col, out) in qb.iter_mut().enumerate().take(to).skip(j) {
            *out = hb
                .iter()
                .enumerate()
                .fold(*out, |acc, (k, &v)| madd::<FMA>(v, r[k * ld + col], acc));
        }
    }
}

/// `out[l] += Σ_k h[k] · r[k, col + l]` for `W` columns, accumulated in registers.
#[inline(always)]
fn block<const FMA: bool, const W: usize>(
    out: &mut [f32],
    h: &[f32],
    r: &[f32],
    ld: usize,
    col: usize,
) {
    let mut acc = [0.0f32; W];
    acc.copy_from_slice(&out[..W]);
    for (k, &v) in h.iter().enumerate() {
        let row = &r[k * ld + col..k * ld + col + W];
        for l in 0..W {
            acc[l] = madd::<FMA>(v, row[l], acc[l]);
        }
    }
    out[..W].copy_from_slice(&acc);
}
