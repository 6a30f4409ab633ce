//! `// test fmt`: everything `test parse` checks, and the printed text must equal the file's
//! `// output:` block (rewritten by `RELAY_BLESS=1`).

use crate::{Failure, Kind, TestFile, checks, golden, round_trip};

/// The `fmt` test kind.
pub(crate) const KIND: Kind = Kind {
    name: "fmt",
    options: &[],
    checks_own_options: false,
    run,
};

fn run(file: &TestFile<'_>) -> Result<(), Failure> {
    let module = round_trip::parse(file.program(), &file.name)?;
    let printed = round_trip::check(&module, &file.name)?;
    checks::filecheck(file, &printed, "the printed text")?;
    golden::check_output_block(file, &printed)
}
