//! Float constants the host kernels' vector math shares with the kernel compiler's inline
//! math (relay-kernel's `codegen/vmath.rs`, which documents the method), so that a fused
//! recurrence and a compiled kernel compute the same `exp`, `sigmoid` and `tanh` values.

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
