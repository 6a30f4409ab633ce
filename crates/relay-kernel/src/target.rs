//! The instruction sets kernels are compiled for: the host's, which the JIT runs, and — for
//! listings only (`relayc build --target TARGET --emit clif|asm`) — another one, named by a
//! target triple and optional Cranelift ISA features.
//!
//! A target is written `TRIPLE[+FEATURES]`: `x86_64-unknown-linux-gnu`,
//! `x86_64-unknown-linux-gnu+avx2,+fma`, `aarch64-unknown-linux-gnu+lse`,
//! `riscv64gc-unknown-linux-gnu+v`. The features follow the first `+`, comma-separated, each
//! `NAME` or `+NAME` to enable it or `-NAME` to disable it (`x86_64-unknown-linux-gnu+haswell,-fma`;
//! `s390x-unknown-linux-gnu+-vxrs_ext2` only disables). The triple is parsed by
//! `target-lexicon` and its architecture must have a Cranelift backend (x86_64, aarch64,
//! riscv64, s390x; 64-bit pointers, which the kernel ABI assumes). A feature is one of the
//! architecture's Cranelift ISA settings, with or without its `has_` prefix (`avx2` is
//! `has_avx2`), or one of its CPU presets (`haswell`, `x86-64-v3`, `z15`; they can only be
//! enabled). On x86-64 an enabled feature brings those it needs, as rustc's target features
//! do ([`X86_IMPLIED`]: `avx2` and `fma` imply `avx`, which implies `sse42` and down;
//! `avx512*` imply `avx512f`, which implies `avx2` and `fma`), since Cranelift uses AVX2 or FMA
//! only with AVX; a disabled feature is only disabled. Without features a triple gets
//! Cranelift's defaults for it (SSE2 for x86-64), not the host's.

use std::str::FromStr;
use std::sync::Arc;

use cranelift_codegen::isa::{self, LookupError, OwnedTargetIsa, TargetIsa};
use cranelift_codegen::settings::{self, Configurable, SettingKind};
use miette::Diagnostic;
use target_lexicon::{PointerWidth, Triple};
use thiserror::Error;

use crate::error::KernelError;

/// The architectures a [`Target`] may name: those with a Cranelift backend in this build.
pub const ARCHITECTURES: &[&str] = &["x86_64", "aarch64", "riscv64", "s390x"];

/// The host's target triple (`x86_64-unknown-linux-gnu`), as `target-lexicon` knows it from
/// the build.
pub fn host_triple() -> Triple {
    target_lexicon::HOST
}

/// Why a target could not be made.
#[derive(Debug, Clone, PartialEq, Eq, Error, Diagnostic)]
pub enum TargetError {
    /// The text before the features is not a target triple.
    #[error(
        "`{triple}` is not a target triple ({reason}); supported architectures: {}",
        ARCHITECTURES.join(", ")
    )]
    #[diagnostic(code(relay::kernel::target::triple))]
    UnknownTriple {
        /// The text given.
        triple: String,
        /// `target-lexicon`'s reason.
        reason: String,
    },
    /// The triple names an architecture kernels cannot be compiled for.
    #[error(
        "no kernel compiler for `{triple}`: {reason}; supported architectures: {}",
        ARCHITECTURES.join(", ")
    )]
    #[diagnostic(code(relay::kernel::target::unsupported))]
    UnsupportedTriple {
        /// The triple given.
        triple: String,
        /// Why it is not supported.
        reason: String,
    },
    /// A feature is empty (`TRIPLE+`, `TRIPLE+avx2,,fma`).
    #[error("bad feature `{feature}` in `{target}`: write TRIPLE+FEATURE,+FEATURE,-FEATURE")]
    #[diagnostic(code(relay::kernel::target::feature_syntax))]
    FeatureSyntax {
        /// The whole target given.
        target: String,
        /// The item without a name.
        feature: String,
    },
    /// A feature is not one of the architecture's settings.
    #[error(
        "unknown feature `{feature}` for {architecture}; its features: {features}{}",
        if presets.is_empty() { String::new() } else { format!("; its CPU presets: {presets}") }
    )]
    #[diagnostic(code(relay::kernel::target::feature))]
    UnknownFeature {
        /// The architecture of the triple.
        architecture: String,
        /// The feature given.
        feature: String,
        /// The architecture's features, comma-separated.
        features: String,
        /// Its CPU presets, comma-separated (none for some architectures).
        presets: String,
    },
    /// Cranelift refused a feature or their combination (a preset cannot be disabled; RISC-V
    /// needs the G extensions).
    #[error("cannot compile for `{target}`: {message}")]
    #[diagnostic(code(relay::kernel::target::settings))]
    Settings {
        /// The whole target given.
        target: String,
        /// Cranelift's message.
        message: String,
    },
}

/// An instruction set to compile kernels for: a Cranelift ISA and the name it was made from.
#[derive(Clone)]
pub struct Target {
    /// The target as given (`aarch64-unknown-linux-gnu+lse`), or the host triple.
    name: String,
    /// The ISA.
    isa: OwnedTargetIsa,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Target({})", self.name)
    }
}

impl FromStr for Target {
    type Err = TargetError;

    fn from_str(text: &str) -> Result<Target, TargetError> {
        Target::parse(text)
    }
}

impl Target {
    /// The host: its triple and every ISA feature `cranelift-native` detects (`has_sse41`,
    /// `has_avx2`, `has_fma`, ...), what the JIT compiles kernels for.
    pub fn host() -> Result<Target, KernelError> {
        let host = |message: String| KernelError::Host { message };
        let isa = cranelift_native::builder()
            .map_err(|e| host(e.to_string()))?
            .finish(settings::Flags::new(shared_flags(cfg!(debug_assertions))))
            .map_err(|e| host(e.to_string()))?;
        Ok(Target {
            name: target_lexicon::HOST.to_string(),
            isa,
        })
    }

    /// The target written `TRIPLE[+FEATURES]` (see the module documentation),
    /// with the verifier on: its kernels are only listed, never run.
    pub fn parse(text: &str) -> Result<Target, TargetError> {
        let (triple_text, features) = match text.find('+') {
            Some(at) => (&text[..at], Some(&text[at + 1..])),
            None => (text, None),
        };
        let triple = Triple::from_str(triple_text).map_err(|error| TargetError::UnknownTriple {
            triple: triple_text.to_owned(),
            reason: error.to_string(),
        })?;
        let pointers = triple.pointer_width();
        let mut builder = isa::lookup(triple).map_err(|error| TargetError::UnsupportedTriple {
            triple: triple_text.to_owned(),
            reason: match error {
                LookupError::SupportDisabled => "its Cranelift backend is not built".to_owned(),
                LookupError::Unsupported => "Cranelift has no backend for it".to_owned(),
            },
        })?;
        if pointers != Ok(PointerWidth::U64) {
            return Err(TargetError::UnsupportedTriple {
                triple: triple_text.to_owned(),
                reason: "kernels need 64-bit pointers".to_owned(),
            });
        }
        for item in features.into_iter().flat_map(|f| f.split(',')) {
            apply_feature(&mut builder, text, item)?;
        }
        let isa = builder
            .finish(settings::Flags::new(shared_flags(true)))
            .map_err(|e| TargetError::Settings {
                target: text.to_owned(),
                message: e.to_string(),
            })?;
        Ok(Target {
            name: text.to_owned(),
            isa,
        })
    }

    /// The target as given, or the host triple.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The Cranelift ISA.
    pub fn isa(&self) -> OwnedTargetIsa {
        Arc::clone(&self.isa)
    }

    /// The ISA's boolean settings that are on (`has_sse41`, `has_avx2`, `has_fma`, ...), in
    /// Cranelift's order.
    pub fn enabled_features(&self) -> Vec<&'static str> {
        self.isa
            .isa_flags()
            .iter()
            .filter(|flag| flag.as_bool() == Some(true))
            .map(|flag| flag.name)
            .collect()
    }
}

/// Whether Cranelift compiles 128-bit vector types (`f32x4`, `i16x8`, ...) for `isa`: every
/// backend does but riscv64's without the V extension (`has_v`), which cannot lower them.
pub(crate) fn has_vectors(isa: &dyn TargetIsa) -> bool {
    isa.name() != "riscv64"
        || isa
            .isa_flags()
            .iter()
            .any(|flag| flag.name == "has_v" && flag.as_bool() == Some(true))
}

/// The ISA-independent Cranelift settings of every kernel: `opt_level=speed`, the verifier
/// on when `verify`, no colocated libcalls and no position-independent code (the JIT places
/// code anywhere and resolves symbols to absolute addresses).
pub(crate) fn shared_flags(verify: bool) -> settings::Builder {
    let mut flags = settings::builder();
    for (name, value) in [
        ("opt_level", "speed"),
        ("enable_verifier", if verify { "true" } else { "false" }),
        ("use_colocated_libcalls", "false"),
        ("is_pic", "false"),
    ] {
        // The names and values are Cranelift's own: setting them cannot fail.
        if let Err(error) = flags.set(name, value) {
            unreachable!("the shared Cranelift setting {name}={value}: {error}");
        }
    }
    flags
}

/// The x86-64 features each feature implies (Cranelift's names), as rustc's target features
/// imply them.
pub const X86_IMPLIED: &[(&str, &[&str])] = &[
    ("has_ssse3", &["has_sse3"]),
    ("has_sse41", &["has_ssse3"]),
    ("has_sse42", &["has_sse41"]),
    ("has_avx", &["has_sse42"]),
    ("has_avx2", &["has_avx"]),
    ("has_fma", &["has_avx"]),
    ("has_avx_vnni", &["has_avx2"]),
    ("has_avx512f", &["has_avx2", "has_fma"]),
    ("has_avx512bitalg", &["has_avx512f"]),
    ("has_avx512dq", &["has_avx512f"]),
    ("has_avx512vl", &["has_avx512f"]),
    ("has_avx512vbmi", &["has_avx512f"]),
    ("has_avx512vnni", &["has_avx512f"]),
];

/// Enables `setting` of `builder` and, on x86-64, the features it implies ([`X86_IMPLIED`]).
fn enable(builder: &mut isa::Builder, setting: &str) -> Result<(), settings::SetError> {
    if builder.triple().architecture == target_lexicon::Architecture::X86_64
        && let Some((_, implied)) = X86_IMPLIED.iter().find(|(name, _)| *name == setting)
    {
        for &required in *implied {
            enable(builder, required)?;
        }
    }
    builder.enable(setting)
}

/// Applies one `NAME`, `+NAME` or `-NAME` item of `target`'s features to `builder`.
fn apply_feature(builder: &mut isa::Builder, target: &str, item: &str) -> Result<(), TargetError> {
    let syntax = || TargetError::FeatureSyntax {
        target: target.to_owned(),
        feature: item.to_owned(),
    };
    let (enabled, name) = match item.strip_prefix('-') {
        Some(name) => (false, name),
        None => (true, item.strip_prefix('+').unwrap_or(item)),
    };
    if name.is_empty() {
        return Err(syntax());
    }
    let setting = feature_setting(builder, name)?;
    let result = if enabled {
        enable(builder, setting)
    } else {
        builder.set(setting, "false")
    };
    result.map_err(|error| TargetError::Settings {
        target: target.to_owned(),
        message: format!("feature `{name}`: {error}"),
    })
}

/// The name of the boolean setting or preset of `builder` that feature `name` means: itself or
/// `has_NAME`.
fn feature_setting(builder: &isa::Builder, name: &str) -> Result<&'static str, TargetError> {
    let is_feature = |kind| matches!(kind, SettingKind::Bool | SettingKind::Preset);
    let prefixed = format!("has_{name}");
    builder
        .iter()
        .filter(|s| is_feature(s.kind))
        .find(|s| s.name == name || s.name == prefixed)
        .map(|s| s.name)
        .ok_or_else(|| TargetError::UnknownFeature {
            architecture: builder.triple().architecture.to_string(),
            feature: name.to_owned(),
            features: settings_of(builder, SettingKind::Bool).join(", "),
            presets: settings_of(builder, SettingKind::Preset).join(", "),
        })
}

/// The names of `builder`'s settings of `kind`, `has_` prefixes dropped.
fn settings_of(builder: &isa::Builder, kind: SettingKind) -> Vec<&'static str> {
    builder
        .iter()
        .filter(|s| s.kind == kind)
        .map(|s| s.name.strip_prefix("has_").unwrap_or(s.name))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The target `text`, which must parse.
    fn target(text: &str) -> Target {
        match Target::parse(text) {
            Ok(target) => target,
            Err(error) => panic!("{text}: {error}"),
        }
    }

    #[test]
    fn the_supported_triples_parse() {
        for (text, name) in [
            ("x86_64-unknown-linux-gnu", "x64"),
            ("aarch64-unknown-linux-gnu", "aarch64"),
            ("aarch64-apple-darwin", "aarch64"),
            ("riscv64gc-unknown-linux-gnu", "riscv64"),
            ("s390x-unknown-linux-gnu", "s390x"),
        ] {
            let t = target(text);
            assert_eq!(t.name(), text);
            assert_eq!(t.isa().name(), name, "{text}");
            assert_eq!(t.isa().triple().to_string(), text);
        }
    }

    #[test]
    fn features_are_enabled_and_disabled() {
        let plain = target("x86_64-unknown-linux-gnu");
        assert!(!plain.enabled_features().contains(&"has_avx2"));
        let t = target("x86_64-unknown-linux-gnu+avx2,has_fma");
        let on = t.enabled_features();
        for flag in ["has_sse41", "has_avx", "has_avx2", "has_fma"] {
            assert!(on.contains(&flag), "{flag} in {on:?}");
        }
        assert!(!on.contains(&"has_avx512f"), "{on:?}");
        assert!(t.isa().has_native_fma());
        let on = target("x86_64-unknown-linux-gnu+avx512vl").enabled_features();
        for flag in ["has_avx512f", "has_avx2", "has_fma", "has_sse3"] {
            assert!(on.contains(&flag), "{flag} in {on:?}");
        }
        // Disabling is only disabling.
        let on = target("x86_64-unknown-linux-gnu+avx2,-avx").enabled_features();
        assert!(
            on.contains(&"has_avx2") && !on.contains(&"has_avx"),
            "{on:?}"
        );
        let t = target("x86_64-unknown-linux-gnu+haswell,-fma");
        assert!(t.enabled_features().contains(&"has_avx2"));
        assert!(!t.enabled_features().contains(&"has_fma"));
        assert!(target("aarch64-unknown-linux-gnu+lse").enabled_features() == ["has_lse"]);
        assert!(
            target("riscv64gc-unknown-linux-gnu+v")
                .enabled_features()
                .contains(&"has_v")
        );
    }

    #[test]
    fn the_host_is_a_target() {
        let host = Target::host().unwrap();
        assert_eq!(host.name(), target_lexicon::HOST.to_string());
        assert_eq!(*host.isa().triple(), target_lexicon::HOST);
    }

    #[test]
    fn an_unknown_triple_lists_the_architectures() {
        let error = Target::parse("potato-unknown-linux-gnu").unwrap_err();
        assert!(
            matches!(error, TargetError::UnknownTriple { .. }),
            "{error:?}"
        );
        let message = error.to_string();
        assert!(
            message.starts_with("`potato-unknown-linux-gnu` is not a target triple"),
            "{message}"
        );
        assert!(
            message.ends_with("supported architectures: x86_64, aarch64, riscv64, s390x"),
            "{message}"
        );
    }

    #[test]
    fn an_architecture_without_a_backend_is_unsupported() {
        for text in [
            "mips64-unknown-linux-gnuabi64",
            "wasm32-unknown-unknown",
            "sparc-unknown-linux-gnu",
            // 32-bit pointers on an architecture with a backend.
            "x86_64-unknown-linux-gnux32",
        ] {
            let error = Target::parse(text).unwrap_err();
            assert!(
                matches!(error, TargetError::UnsupportedTriple { .. }),
                "{text}: {error:?}"
            );
            assert!(
                error
                    .to_string()
                    .contains("x86_64, aarch64, riscv64, s390x")
            );
        }
    }

    #[test]
    fn an_unknown_feature_lists_the_features() {
        let error = Target::parse("aarch64-unknown-linux-gnu+avx2").unwrap_err();
        let TargetError::UnknownFeature {
            architecture,
            feature,
            features,
            ..
        } = &error
        else {
            panic!("{error:?}");
        };
        assert_eq!(
            (architecture.as_str(), feature.as_str()),
            ("aarch64", "avx2")
        );
        assert!(features.split(", ").any(|f| f == "lse"), "{features}");
        let message = error.to_string();
        assert!(
            message.contains("unknown feature `avx2` for aarch64"),
            "{message}"
        );
        let error = Target::parse("x86_64-unknown-linux-gnu+sse9").unwrap_err();
        assert!(error.to_string().contains("avx512f"), "{error}");
        assert!(error.to_string().contains("x86-64-v3"), "{error}");
    }

    #[test]
    fn an_empty_feature_is_a_syntax_error() {
        for text in [
            "x86_64-unknown-linux-gnu+",
            "x86_64-unknown-linux-gnu+avx2,,fma",
            "x86_64-unknown-linux-gnu+avx2,-",
        ] {
            let error = Target::parse(text).unwrap_err();
            assert!(
                matches!(error, TargetError::FeatureSyntax { .. }),
                "{text}: {error:?}"
            );
        }
    }

    #[test]
    fn refused_settings_are_errors() {
        // RISC-V needs the G extensions; a preset cannot be disabled.
        for text in [
            "riscv64gc-unknown-linux-gnu+-d",
            "x86_64-unknown-linux-gnu+-haswell",
        ] {
            let error = Target::parse(text).unwrap_err();
            assert!(
                matches!(error, TargetError::Settings { .. }),
                "{text}: {error:?}"
            );
        }
    }
}
