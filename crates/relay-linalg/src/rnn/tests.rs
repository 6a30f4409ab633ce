//! Every path of the recurrences against a plain `f64` evaluation of their equations, at
//! sizes that exercise the register blocks and their tails (hidden sizes 1 to 67, batch 1 to
//! 3), in both directions, with clip, peepholes and each variant of the cells.

use super::*;

/// Deterministic values in `[-scale, scale]`.
fn values(n: usize, seed: u64, scale: f32) -> Vec<f32> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ((x >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale
        })
        .collect()
}

fn sig(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// `Σ_k h[k] r[k, col]`.
fn dot(h: &[f64], r: &[f32], ld: usize, col: usize) -> f64 {
    h.iter()
        .enumerate()
        .map(|(k, &v)| v * f64::from(r[k * ld + col]))
        .sum()
}

/// The LSTM's `y` by its equations in `f64`.
fn lstm_reference(s: Sizes, a: &Lstm) -> Vec<f64> {
    let (hs, cols) = (s.hidden, 4 * s.hidden);
    let cl = |x: f64| a.clip.map_or(x, |b| x.clamp(-f64::from(b), f64::from(b)));
    let f = |v: &[f32]| v.iter().map(|&x| f64::from(x)).collect::<Vec<f64>>();
    let (mut h, mut c, p) = (f(a.h0), f(a.c0), f(a.peephole));
    let mut y = vec![0.0; s.seq * s.batch * hs];
    for step in 0..s.seq {
        let t = if a.reverse { s.seq - 1 - step } else { step };
        for b in 0..s.batch {
            let hb = h[b * hs..(b + 1) * hs].to_vec();
            let g = |gate: usize, j: usize| {
                f64::from(a.xw[(t * s.batch + b) * cols + gate * hs + j])
                    + dot(&hb, a.r, cols, gate * hs + j)
            };
            for j in 0..hs {
                let old = c[b * hs + j];
                let i = sig(cl(g(0, j) + p[j] * old));
                let fg = if a.input_forget {
                    1.0 - i
                } else {
                    sig(cl(g(2, j) + p[2 * hs + j] * old))
                };
                let cn = fg * old + i * cl(g(3, j)).tanh();
                let o = sig(cl(g(1, j) + p[hs + j] * cn));
                c[b * hs + j] = cn;
                h[b * hs + j] = o * cl(cn).tanh();
                y[(t * s.batch + b) * hs + j] = h[b * hs + j];
            }
        }
    }
    y
}

/// The GRU's `y` by its equations in `f64`.
fn gru_reference(s: Sizes, a: &Gru) -> Vec<f64> {
    let (hs, cols) = (s.hidden, 3 * s.hidden);
    let cl = |x: f64| a.clip.map_or(x, |b| x.clamp(-f64::from(b), f64::from(b)));
    let mut h: Vec<f64> = a.h0.iter().map(|&x| f64::from(x)).collect();
    let mut y = vec![0.0; s.seq * s.batch * hs];
    for step in 0..s.seq {
        let t = if a.reverse { s.seq - 1 - step } else { step };
        for b in 0..s.batch {
            let hb = h[b * hs..(b + 1) * hs].to_vec();
            let x =
                |gate: usize, j: usize| f64::from(a.xw[(t * s.batch + b) * cols + gate * hs + j]);
            let z: Vec<f64> = (0..hs)
                .map(|j| sig(cl(x(0, j) + dot(&hb, a.r, cols, j))))
                .collect();
            let r: Vec<f64> = (0..hs)
                .map(|j| sig(cl(x(1, j) + dot(&hb, a.r, cols, hs + j))))
                .collect();
            let reset: Vec<f64> = hb.iter().zip(&r).map(|(v, g)| v * g).collect();
            for j in 0..hs {
                let rb = f64::from(a.rbh[j]);
                let inner = if a.linear_before_reset {
                    r[j] * (dot(&hb, a.r, cols, 2 * hs + j) + rb)
                } else {
                    dot(&reset, a.r, cols, 2 * hs + j) + rb
                };
                let cand = cl(x(2, j) + inner).tanh();
                h[b * hs + j] = (1.0 - z[j]) * cand + z[j] * hb[j];
                y[(t * s.batch + b) * hs + j] = h[b * hs + j];
            }
        }
    }
    y
}

fn close(got: &[f32], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len());
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!(
            (f64::from(g) - w).abs() <= 1e-5 * (1.0 + w.abs()),
            "{what}: y[{i}] = {g}, want {w}"
        );
    }
}

const SIZES: [(usize, usize, usize); 6] = [
    (1, 1, 1),
    (3, 1, 5),
    (4, 2, 16),
    (5, 3, 33),
    (2, 1, 67),
    (3, 2, 130),
];

#[test]
fn lstm_paths_match_the_equations() {
    for isa in Isa::available() {
        for (n, &(seq, batch, hidden)) in SIZES.iter().enumerate() {
            let s = Sizes { seq, batch, hidden };
            let seed = n as u64 * 10;
            let (xw, r) = (
                values(seq * batch * 4 * hidden, seed, 2.0),
                values(hidden * 4 * hidden, seed + 1, 0.3),
            );
            let (h0, c0) = (
                values(batch * hidden, seed + 2, 1.0),
                values(batch * hidden, seed + 3, 1.0),
            );
            let p = values(3 * hidden, seed + 4, 0.5);
            for (reverse, clip, input_forget) in [
                (false, None, false),
                (true, Some(0.7), false),
                (false, None, true),
            ] {
                let a = Lstm {
                    xw: &xw,
                    r: &r,
                    h0: &h0,
                    c0: &c0,
                    peephole: &p,
                    reverse,
                    clip,
                    input_forget,
                };
                let (mut y, mut h, mut c) = (
                    vec![0.0; seq * batch * hidden],
                    vec![0.0; batch * hidden],
                    vec![0.0; batch * hidden],
                );
                lstm_for(isa)(s, &a, &mut y, &mut h, &mut c);
                let want = lstm_reference(s, &a);
                close(
                    &y,
                    &want,
                    &format!("{isa:?} lstm {s:?} reverse={reverse} clip={clip:?}"),
                );
                let last = if reverse { 0 } else { seq - 1 };
                assert_eq!(h, y[last * batch * hidden..(last + 1) * batch * hidden]);
            }
        }
    }
}

#[test]
fn gru_paths_match_the_equations() {
    for isa in Isa::available() {
        for (n, &(seq, batch, hidden)) in SIZES.iter().enumerate() {
            let s = Sizes { seq, batch, hidden };
            let seed = n as u64 * 10 + 5;
            let (xw, r) = (
                values(seq * batch * 3 * hidden, seed, 2.0),
                values(hidden * 3 * hidden, seed + 1, 0.3),
            );
            let (h0, rbh) = (
                values(batch * hidden, seed + 2, 1.0),
                values(hidden, seed + 3, 0.5),
            );
            for (reverse, clip, linear_before_reset) in [
                (false, None, true),
                (true, Some(0.7), true),
                (false, None, false),
                (true, None, false),
            ] {
                let a = Gru {
                    xw: &xw,
                    r: &r,
                    h0: &h0,
                    rbh: &rbh,
                    reverse,
                    clip,
                    linear_before_reset,
                };
                let (mut y, mut h) = (vec![0.0; seq * batch * hidden], vec![0.0; batch * hidden]);
                gru_for(isa)(s, &a, &mut y, &mut h);
                let want = gru_reference(s, &a);
                close(
                    &y,
                    &want,
                    &format!("{isa:?} gru {s:?} reverse={reverse} lbr={linear_before_reset}"),
                );
            }
        }
    }
}

#[test]
fn empty_sequences_keep_the_initial_state() {
    let s = Sizes {
        seq: 0,
        batch: 2,
        hidden: 3,
    };
    let (h0, c0, p) = (values(6, 1, 1.0), values(6, 2, 1.0), vec![0.0; 9]);
    let a = Lstm {
        xw: &[],
        r: &values(36, 3, 1.0),
        h0: &h0,
        c0: &c0,
        peephole: &p,
        reverse: false,
        clip: None,
        input_forget: false,
    };
    let (mut h, mut c) = (vec![0.0; 6], vec![0.0; 6]);
    (crate::Ops::process_default().lstm)(s, &a, &mut [], &mut h, &mut c);
    assert_eq!((h, c), (h0, c0));
}
