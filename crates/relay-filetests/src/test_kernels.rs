//! `// test kernels [opt-level=N] [passes=PATH] [block=B]`: the file parses, type-checks and lowers
//! through the pipeline as in `test bytecode`; every primitive function of the lowered module
//! ([`relay_kernel::primitive_functions`]) lowers to a loop nest; and the filecheck directives
//! and/or the `// output:` block (at least one is required) match the listing
//! [`relay_kernel::print_kernels`] prints — exactly what `relayc build FILE --emit kernels`
//! prints: each kernel after a `// kernel NAME` line, in the order relayc lists them, one blank
//! line between kernels.
//!
//! `test clif` ([`crate::test_clif`]) runs the same steps on the kernels' Cranelift IR.

use relay_kernel::KernelText;

use crate::failure::indent;
use crate::test_bytecode::lower;
use crate::{Failure, Kind, TestFile, checks};

/// The `kernels` test kind.
pub(crate) const KIND: Kind = Kind {
    name: "kernels",
    options: &["opt-level=", "passes=", "block="],
    checks_own_options: false,
    run,
};

fn run(file: &TestFile<'_>) -> Result<(), Failure> {
    let listing = listing(file, KernelText::LoopNest)?;
    checks::printed_ir(file, &listing, "the printed loop nests")
}

/// Lowers the file and prints the `text` of every kernel of the lowered module, as relayc
/// prints them. A module without kernels, or with a kernel that cannot be compiled, fails.
pub(crate) fn listing(file: &TestFile<'_>, text: KernelText) -> Result<String, Failure> {
    let lowered = lower(file)?;
    let kernels = relay_kernel::primitive_functions(&lowered);
    if kernels.is_empty() {
        return Err(Failure::new(
            "the lowered module has no primitive function, hence no kernel to print",
        ));
    }
    relay_kernel::print_kernels(&kernels, text).map_err(|failures| {
        let mut message = String::from("kernels cannot be compiled\n\n");
        for (index, error) in failures {
            let name = kernels.get(index).map_or("?", |(name, _)| name.as_str());
            message.push_str(&indent(&format!("{name}: {error}")));
        }
        Failure::new(message)
    })
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
    fn directives_are_checked_against_the_loop_nests() {
        let text = format!(
            "// test kernels\n{PROGRAM}// check: // kernel $(name=fused_add_nn_relu_[0-9a-f]+)\n\
             // nextln: kernel $name(\n// check: vectorized(4)\n"
        );
        run(&text).unwrap();
        let text = format!("// test kernels\n{PROGRAM}// check: parallel\n");
        let err = run(&text).unwrap_err();
        assert!(err.message().contains("the printed loop nests"), "{err}");
        assert!(err.message().contains("kernel fused_add_nn_relu"), "{err}");
    }

    #[test]
    fn the_listing_is_what_relayc_emits() {
        let text = format!("// test kernels\n{PROGRAM}// output:\n// kernel x\n");
        let err = run(&text).unwrap_err();
        let message = err.message();
        assert!(
            message.contains("differs from the `// output:` block"),
            "{message}"
        );
        assert!(
            message.contains("+// kernel fused_add_nn_relu"),
            "{message}"
        );
        assert!(message.contains("+kernel fused_add_nn_relu"), "{message}");
    }

    #[test]
    fn dynamic_kernels_are_named_with_a_note() {
        // A row function compiles once for chunks of rows; a broadcast with a known extent in
        // front of a `?` is specialized when called.
        let program = "#[version = \"0.0.5\"]\n\
                       def @main(%x: Tensor[(?, 3), float32], %t: Tensor[(3, ?), float32], %u: Tensor[(?, 1), float32]) { (nn.relu(%x), add(%u, %t)) }\n";
        let text = format!(
            "// test kernels\n{program}// check: // kernel fused_nn_relu_$(hash=[0-9a-f]+): rows of any number\n\
             // check: // kernel fused_add_$(hash2=[0-9a-f]+): dynamic shapes\n\
             // not: for i\n"
        );
        run(&text).unwrap();
    }

    #[test]
    fn a_test_without_expectations_is_a_failure() {
        if crate::golden::blessing() {
            return;
        }
        let err = run(&format!("// test kernels\n{PROGRAM}")).unwrap_err();
        assert!(
            err.message().contains("needs filecheck directives"),
            "{err}"
        );
        assert!(err.message().contains("kernel fused_add_nn_relu"), "{err}");
    }

    #[test]
    fn a_module_without_kernels_is_a_failure() {
        let program = "#[version = \"0.0.5\"]\ndef @main(%x: Tensor[(2), float32]) { %x }\n";
        let err = run(&format!("// test kernels\n{program}// check: x\n")).unwrap_err();
        assert!(err.message().contains("no kernel to print"), "{err}");
    }

    #[test]
    fn options_are_checked() {
        let text = format!("// test kernels opt-level=7\n{PROGRAM}// check: x\n");
        let err = run(&text).unwrap_err();
        assert!(err.message().contains("`opt-level` expects"), "{err}");
        let text = format!("// test kernels jit\n{PROGRAM}// check: x\n");
        let err = run(&text).unwrap_err();
        assert!(
            err.message().contains("valid options: opt-level=, passes="),
            "{err}"
        );
    }

    #[test]
    fn kernels_that_cannot_compile_are_named() {
        let program = "#[version = \"0.0.5\"]\n\
                       def @main(%x: Tensor[(2, 3), float32]) { nn.fast_softmax(%x) }\n";
        let err = run(&format!("// test kernels\n{program}// check: x\n")).unwrap_err();
        let message = err.message();
        assert!(message.contains("kernels cannot be compiled"), "{message}");
        assert!(message.contains("fused_nn_fast_softmax"), "{message}");
    }
}
