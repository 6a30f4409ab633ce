//! Float constants the host kernels' vector math shares with the kernel compiler's inline
//! math (relay-kernel's `codegen/vmath.rs`, which documents the method), so that a fused
//! recurrence, a softmax and a compiled kernel compute the same `exp`, `sigmoid` and `tanh`
//! values; and the scalar `exp` the host kernels write in loops that vectorize.

/// `1.5 * 2^23`: adding it to a float below `2^22` in magnitude rounds it to an integer `k`
/// held in the low mantissa bits (`bits(k + MAGIC) = bits(MAGIC) + k`).
pub const MAGIC: f32 = 12_582_912.0;
/// `log2(e)`.
pub const LOG2E: f32 = std::f32::consts::LOG2_E;
/// `ln 2 = LN2_HI + LN2_LO`, the head with 9 significant bits (Cephes' `C1`, `-C2`).
pub const LN2_HI: f32 = 0.693_359_4;
/// The tail of `ln 2` (see [`LN2_HI`]).
pub const LN2_LO: f32 = -2.121_944_4e-4;
/// `(e^r - 1 - r) / r^2` on `[-ln2/2, ln2/2]`, lowest degree first.
pub const EXP_P: [f32; 6] = [
    0.5,
    0.166_666_67,
    0.041_666_463,
    0.008_333_298,
    0.001_393_390_2,
    0.000_198_996_12,
];
/// `(tanh(a) - a) / a^3` in `t = a^2` on `[0, 0.625^2]`.
pub const TANH_P: [f32; 5] = [
    -0.333_333_28,
    0.133_327_83,
    -0.053_852_5,
    0.021_003_641,
    -0.006_104_948,
];
/// Where `tanh` switches from the series to `1 - 2 / (exp(2|x|) + 1)`.
pub const TANH_SPLIT: f32 = 0.625;
/// The largest `2|x|` whose exponential `tanh` computes: `tanh` is 1 in `float32` from 9.01.
pub const TANH_CAP: f32 = 40.0;

/// `a · b + c`, fused when `FMA`.
#[inline(always)]
pub(crate) fn madd<const FMA: bool>(a: f32, b: f32, c: f32) -> f32 {
    if FMA { a.mul_add(b, c) } else { a * b + c }
}

/// `Σ c[i] x^i` by Horner's rule.
#[inline(always)]
pub(crate) fn poly<const FMA: bool>(x: f32, c: &[f32]) -> f32 {
    c.iter().rev().fold(0.0, |acc, &k| madd::<FMA>(acc, x, k))
}

/// `2^n` for `n` in the normal exponent range.
#[inline(always)]
fn pow2(n: i32) -> f32 {
    f32::from_bits(((n + 127) as u32) << 23)
}

/// `e^x` for `x` in `[-104, 89]` (or NaN): `x = k ln2 + r`, `e^r = 1 + r + r² P(r)`, scaled
/// by `2^k` in two factors when `split` (results that are subnormal or near overflow).
#[inline(always)]
pub(crate) fn exp_clamped<const FMA: bool>(x: f32, split: bool) -> f32 {
    let km = x * LOG2E + MAGIC;
    let k = km - MAGIC;
    let n = km.to_bits() as i32 - MAGIC.to_bits() as i32;
    let r = madd::<FMA>(k, -LN2_HI, x);
    let r = madd::<FMA>(k, -LN2_LO, r);
    let y = madd::<FMA>(poly::<FMA>(r, &EXP_P), r * r, r) + 1.0;
    if split {
        let half = n >> 1;
        y * pow2(half) * pow2(n - half)
    } else {
        y * pow2(n)
    }
}

/// `x` clamped to `[lo, hi]`, NaN kept.
#[inline(always)]
pub(crate) fn clamp(x: f32, lo: f32, hi: f32) -> f32 {
    let x = if x < lo { lo } else { x };
    if x > hi { hi } else { x }
}
