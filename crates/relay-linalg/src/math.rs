//! Float constants the host kernels' vector math shares with the kernel compiler's inline
//! math (relay-kernel's `codegen/vmath.rs`, which documents the method), so that a fused
//! recurrence, a softmax, a pointwise function and a compiled kernel compute the same `exp`,
//! `sigmoid`, `tanh` and `erf` values; and the scalar functions the host kernels write in
//! loops that vectorize.

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

/// `erf(a) / a - 1` in `t = a^2` on `[0, 1]`.
pub const ERF_Q: [f32; 7] = [
    0.128_379_17,
    -0.376_126_27,
    0.112_835_97,
    -0.026_854_329,
    0.005_189_312,
    -0.000_801_885_5,
    7.882_497_4e-5,
];
/// `erfc(a)` in `u = a - 2.5` on `[1, 3.92]`.
pub const ERFC_E: [f32; 15] = [
    0.000_406_954_8,
    -0.002_178_218_4,
    0.005_445_562,
    -0.008_351_264,
    0.008_623_678,
    -0.006_111_239,
    0.002_794_182_9,
    -0.000_556_562_3,
    -0.000_253_733_9,
    0.000_267_355_03,
    -8.487_308_5e-5,
    -1.642_421_2e-5,
    1.712_341_7e-5,
    -7.077_015_3e-7,
    -1.094_436_2e-6,
];
/// Where `erf` switches from the series to `1 - erfc`.
pub const ERF_SPLIT: f32 = 1.0;
/// Where `erf` is 1 in `float32`.
pub const ERF_ONE: f32 = 3.92;

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

/// `erf`: `|x| + |x| Q(x²)` below 1, `1 - E(|x| - 2.5)` up to 3.92 (`E` ≈ `erfc`), 1 from
/// there, the sign put back; branch-free, so that a loop of it vectorizes.
#[inline(always)]
pub(crate) fn erf<const FMA: bool>(x: f32) -> f32 {
    let a = x.abs();
    let small = madd::<FMA>(a, poly::<FMA>(a * a, &ERF_Q), a);
    let large = 1.0 - poly::<FMA>(a - 2.5, &ERFC_E);
    let r = if a < ERF_SPLIT { small } else { large };
    let r = if a >= ERF_ONE { 1.0 } else { r };
    r.copysign(x)
}

/// `x` clamped to `[lo, hi]`, NaN kept.
#[inline(always)]
pub(crate) fn clamp(x: f32, lo: f32, hi: f32) -> f32 {
    let x = if x < lo { lo } else { x };
    if x > hi { hi } else { x }
}
