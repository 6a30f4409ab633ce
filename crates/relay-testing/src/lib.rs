//! Test support shared by the workspace's test suites.
//!
//! [`proptest_config`] is the one configuration every property test uses, so that `cargo test`
//! is deterministic where it must be and searching where it may be:
//!
//! - under CI (the `CI` variable set, as `.ci/run` runs) every property test draws its cases
//!   from a fixed seed ([`CI_SEED`]), so a run fails or passes the same way every time;
//! - elsewhere each run draws new cases, and a failure it finds is written, shrunk, to the
//!   `.proptest-regressions` file beside the test's source; commit that file and every later
//!   run, CI's included, replays the case first;
//! - `PROPTEST_CASES=N` runs `N` cases instead of the test's default, and
//!   `PROPTEST_RNG_SEED=S` replays seed `S` (proptest's own variables).
//!
//! [`RecordingAllocator`] is the global allocator of tests that bound what reading hostile
//! input may allocate; it records per thread, so tests running beside each other do not see
//! each other's allocations.

mod alloc;

pub use alloc::{RecordingAllocator, largest_allocation};

use proptest::test_runner::{Config, FileFailurePersistence, RngSeed};

/// The seed of every property test under CI.
pub const CI_SEED: u64 = 0x5eed_2e1a_7c00_0029;

/// Whether this run is CI's: `CI` set to anything but empty, `0` or `false`.
pub fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !matches!(v.trim(), "" | "0" | "false" | "FALSE" | "False"))
}

/// The configuration of a property test whose default is `cases` cases (see the crate docs).
pub fn proptest_config(cases: u32) -> Config {
    let mut config = Config::default();
    if std::env::var_os("PROPTEST_CASES").is_none() {
        config.cases = cases;
    }
    if under_ci() && std::env::var_os("PROPTEST_RNG_SEED").is_none() {
        config.rng_seed = RngSeed::Fixed(CI_SEED);
    }
    config.failure_persistence = Some(Box::new(FileFailurePersistence::SourceParallel(
        "proptest-regressions",
    )));
    config
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_case_count_holds_unless_the_environment_sets_one() {
        let config = proptest_config(17);
        match std::env::var("PROPTEST_CASES") {
            Ok(n) => assert_eq!(config.cases.to_string(), n.trim()),
            Err(_) => assert_eq!(config.cases, 17),
        }
    }

    #[test]
    fn ci_runs_draw_from_the_fixed_seed() {
        let config = proptest_config(1);
        if under_ci() && std::env::var_os("PROPTEST_RNG_SEED").is_none() {
            assert_eq!(config.rng_seed, RngSeed::Fixed(CI_SEED));
        } else if std::env::var_os("PROPTEST_RNG_SEED").is_none() {
            assert_eq!(config.rng_seed, RngSeed::Random);
        }
        assert!(config.failure_persistence.is_some());
    }
}
