//! `// test schedule [opt-level=N] [passes=PATH] [block=B]`: as `test kernels` ([`crate::test_kernels`]),
//! on each kernel's schedule instead of its loop nest — the decisions lowering made: its stages
//! in order, each with the buffer it writes and whether it runs in place, and its loops
//! (extent, serial, vectorized or parallel, partitioned) and GEMMs
//! ([`relay_kernel::print_kernels`] with [`KernelText::Schedule`]), each kernel after a
//! `// kernel NAME` line: exactly what `relayc build FILE --emit schedule` prints.

use relay_kernel::KernelText;

use crate::test_kernels::listing;
use crate::{Failure, Kind, TestFile, checks};

/// The `schedule` test kind.
pub(crate) const KIND: Kind = Kind {
    name: "schedule",
    options: &["opt-level=", "passes=", "block="],
    checks_own_options: false,
    run,
};

fn run(file: &TestFile<'_>) -> Result<(), Failure> {
    let listing = listing(file, KernelText::Schedule)?;
    checks::printed_ir(file, &listing, "the printed schedules")
}

#[cfg(test)]
mod tests {
    use crate::run_file;

    const PROGRAM: &str = "#[version = \"0.0.5\"]\n\
                           def @main(%x: Tensor[(64, 784), float32], %w: Tensor[(512, 784), float32]) \
                           { nn.relu(nn.dense(%x, %w, units=None)) }\n";

    fn run(text: &str) -> Result<(), crate::Failure> {
        run_file(&crate::ir_tests_dir().join("kernels/generated.relay"), text)
    }

    #[test]
    fn directives_are_checked_against_the_schedules() {
        let text = format!(
            "// test schedule\n{PROGRAM}// check: schedule fused_nn_dense_nn_relu_$(h=[0-9a-f]+)\n\
             // nextln: stage 0: T_relu (out)\n// nextln: gemm T_relu = \n\
             // check: stage 1: T_relu (out), in place\n"
        );
        run(&text).unwrap();
        let text = format!("// test schedule\n{PROGRAM}// check: scratch\n");
        let err = run(&text).unwrap_err();
        assert!(err.message().contains("the printed schedules"), "{err}");
    }
}
