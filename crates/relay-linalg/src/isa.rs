//! The x86-64 vector instruction sets the host kernels have code for (the GEMM's microkernels,
//! the depthwise convolution, the recurrences), detected once per process with `std::arch`'s
//! feature detection, and the override that picks another one for testing and benchmarking:
//! `RELAYC_ISA=portable|avx2|avx512` (or `relayc run --isa`, or
//! [`KernelContext::with_isa`](crate::KernelContext::with_isa)).

use std::sync::OnceLock;

/// The environment variable that overrides the detected instruction set.
pub const ISA_VAR: &str = "RELAYC_ISA";

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

/// A request for an instruction set that cannot be met.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum IsaError {
    /// The name is none of `portable`, `avx2` or `avx512`.
    #[error("unknown instruction set `{name}`: expected portable, avx2 or avx512")]
    Unknown {
        /// The name asked for.
        name: String,
    },
    /// This CPU lacks the instruction set.
    #[error("this CPU cannot run {asked} kernels: the best it has is {detected}")]
    Unavailable {
        /// The instruction set asked for.
        asked: Isa,
        /// The best one this CPU has.
        detected: Isa,
    },
}

impl Isa {
    /// Every instruction set, portable first.
    pub const ALL: [Isa; 3] = [Isa::Portable, Isa::Avx2, Isa::Avx512];

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
        Isa::ALL.into_iter().filter(|isa| isa.runs_here()).collect()
    }

    /// Whether this CPU can run `self`.
    pub fn runs_here(self) -> bool {
        // Each ISA includes the ones before it in `ALL`.
        let rank = |isa: Isa| Isa::ALL.iter().position(|&i| i == isa);
        rank(self) <= rank(Isa::detected())
    }

    /// Its name as `RELAYC_ISA` and `--isa` spell it.
    pub fn name(self) -> &'static str {
        match self {
            Isa::Portable => "portable",
            Isa::Avx2 => "avx2",
            Isa::Avx512 => "avx512",
        }
    }

    /// `self` if this CPU can run it, else [`IsaError::Unavailable`].
    pub fn check(self) -> Result<Isa, IsaError> {
        if self.runs_here() {
            Ok(self)
        } else {
            Err(IsaError::Unavailable {
                asked: self,
                detected: Isa::detected(),
            })
        }
    }

    /// The instruction set named `name` (`portable`, `avx2`, `avx512`, any case), if this CPU
    /// can run it.
    pub fn select(name: &str) -> Result<Isa, IsaError> {
        name.parse::<Isa>()?.check()
    }

    /// The instruction set `RELAYC_ISA` asks for: `None` when it is unset or empty, an error
    /// when it names an unknown one or one this CPU lacks.
    pub fn from_env() -> Result<Option<Isa>, IsaError> {
        match std::env::var(ISA_VAR) {
            Ok(name) if !name.trim().is_empty() => Isa::select(name.trim()).map(Some),
            _ => Ok(None),
        }
    }

    /// The instruction set kernels use unless told otherwise: `RELAYC_ISA`'s when it is set and
    /// valid, else the detected one (read once). Front ends check the variable with
    /// [`Isa::from_env`] first, so that a bad value is an error rather than ignored.
    pub fn process_default() -> Isa {
        static ISA: OnceLock<Isa> = OnceLock::new();
        *ISA.get_or_init(|| Isa::from_env().ok().flatten().unwrap_or_else(Isa::detected))
    }
}

impl std::fmt::Display for Isa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Isa {
    type Err = IsaError;

    fn from_str(name: &str) -> Result<Isa, IsaError> {
        Isa::ALL
            .into_iter()
            .find(|isa| isa.name().eq_ignore_ascii_case(name))
            .ok_or_else(|| IsaError::Unknown {
                name: name.to_owned(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back_and_unknown_ones_are_errors() {
        for isa in Isa::ALL {
            assert_eq!(isa.name().parse::<Isa>(), Ok(isa));
            assert_eq!(isa.name().to_uppercase().parse::<Isa>(), Ok(isa));
        }
        let err = "sse2".parse::<Isa>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown instruction set `sse2`: expected portable, avx2 or avx512"
        );
    }

    #[test]
    fn an_isa_the_cpu_lacks_is_an_error() {
        assert_eq!(Isa::select("portable"), Ok(Isa::Portable));
        for isa in Isa::ALL {
            match Isa::select(isa.name()) {
                Ok(got) => assert!(got.runs_here()),
                Err(e) => {
                    assert!(!isa.runs_here());
                    assert!(e.to_string().contains("this CPU cannot run"), "{e}");
                }
            }
        }
        assert_eq!(Isa::detected().check(), Ok(Isa::detected()));
    }
}
