//! The x86-64 vector instruction sets the host kernels (the GEMM's microkernels, the depthwise
//! convolution) have code for, detected once per process with `std::arch`'s feature detection.

use std::sync::OnceLock;

/// The instruction sets a host kernel exists for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Isa {
    /// Scalar code the compiler vectorizes with the baseline ISA (any target).
    Portable,
    /// AVX2 and FMA (256-bit vectors, 8 float32 lanes).
    Avx2,
    /// AVX-512F with AVX2 and FMA (512-bit vectors, 16 float32 lanes).
    Avx512,
}

impl Isa {
    /// The best ISA this CPU has (detected once).
    pub fn detected() -> Isa {
        static ISA: OnceLock<Isa> = OnceLock::new();
        *ISA.get_or_init(|| {
            #[cfg(target_arch = "x86_64")]
            {
                let avx2 =
                    std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma");
                if avx2 && std::is_x86_feature_detected!("avx512f") {
                    return Isa::Avx512;
                }
                if avx2 {
                    return Isa::Avx2;
                }
            }
            Isa::Portable
        })
    }

    /// Every ISA this CPU can run, portable first.
    pub fn available() -> Vec<Isa> {
        match Isa::detected() {
            Isa::Portable => vec![Isa::Portable],
            Isa::Avx2 => vec![Isa::Portable, Isa::Avx2],
            Isa::Avx512 => vec![Isa::Portable, Isa::Avx2, Isa::Avx512],
        }
    }

    /// Whether this CPU can run `self`.
    pub fn runs_here(self) -> bool {
        Isa::available().contains(&self)
    }
}
