//! `// test clif [opt-level=N] [passes=PATH] [block=B]`: as `test kernels` ([`crate::test_kernels`]),
//! on each kernel's Cranelift IR instead of its loop nest — its body and its packed entry,
//! before Cranelift compiles them ([`relay_kernel::print_kernels`] with [`KernelText::Clif`]),
//! each kernel after a `// kernel NAME` line: exactly what `relayc build FILE --emit clif`
//! prints.
//!
//! The text is that of an x86-64 host with SSE4.1 and FMA: the call convention, the pointer
//! type, the rounding instructions (SSE4.1) and the inline math's fused multiply-adds (FMA)
//! come from the host's ISA. On another host the Cranelift IR is still produced, so every
//! kernel must compile, but it is not compared with the expectations.

use relay_kernel::KernelText;

use crate::test_kernels::listing;
use crate::{Failure, Kind, TestFile, checks};

/// The `clif` test kind.
pub(crate) const KIND: Kind = Kind {
    name: "clif",
    options: &["opt-level=", "passes=", "block="],
    checks_own_options: false,
    run,
};

/// Whether this host prints the Cranelift IR the `test clif` files hold.
fn host_matches() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::is_x86_feature_detected!("sse4.1") && std::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

fn run(file: &TestFile<'_>) -> Result<(), Failure> {
    let listing = listing(file, KernelText::Clif)?;
    if !host_matches() {
        return Ok(());
    }
    checks::printed_ir(file, &listing, "the printed Cranelift IR")
}

#[cfg(test)]
mod tests {
    use crate::run_file;

    const PROGRAM: &str = "#[version = \"0.0.5\"]\n\
                           def @main(%x: Tensor[(2, 3), float32]) { nn.relu(add(%x, %x)) }\n";

    fn run(text: &str) -> Result<(), crate::Failure> {
        run_file(&crate::ir_tests_dir().join("kernels/generated.relay"), text)
    }

    #[test]
    fn directives_are_checked_against_the_cranelift_ir() {
        if !super::host_matches() {
            return;
        }
        let text = format!(
            "// test clif\n{PROGRAM}// check: // kernel $(name=fused_add_nn_relu_[0-9a-f]+)\n\
             // nextln: ; kernel $name body\n// nextln: function u0:0(\n// check: return\n"
        );
        run(&text).unwrap();
        let text = format!("// test clif\n{PROGRAM}// check: no such instruction\n");
        let err = run(&text).unwrap_err();
        assert!(err.message().contains("the printed Cranelift IR"), "{err}");
    }
}
