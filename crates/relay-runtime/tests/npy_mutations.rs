//! Hostile `.npy` and `.npz` files: thousands of random mutations of valid ones (the fixtures
//! numpy wrote and files the writers make, stored and deflated), read back. Each must read or
//! give an `NpyError` — never panic — and no allocation may be out of proportion to the file
//! (an allocator in this test binary records the largest request of each thread). Mutations
//! flip bits, cut the file short, splice bytes in, set a zip header's length, size, offset or
//! count field to an extreme value, and rewrite a `.npy` header's shape. `MUTATIONS_TRACE=1 cargo test -p
//! relay-runtime --test npy_mutations -- --nocapture` prints each case and its outcome;
//! `PROPTEST_CASES=N` runs more. `fuzz/`'s `read_npy_npz` target is the same property for
//! cargo-fuzz.

use std::path::Path;
use std::sync::OnceLock;

use proptest::prelude::*;
use relay_runtime::npy::{read_npy, read_npz, write_npy, write_npz, write_npz_compressed};
use relay_runtime::{DType, NDArray};
use relay_testing::{RecordingAllocator, largest_allocation};

// Per thread: the test that reads the seeds runs beside the property on another thread, and
// its allocations (an inflated archive entry of 10 KB) must not count against a case's file.
#[global_allocator]
static ALLOCATOR: RecordingAllocator = RecordingAllocator;

/// Deflate's largest expansion: a stream of `n` bytes inflates to at most about 1032 `n`.
const DEFLATE_RATIO: usize = 1032;

/// The seed files: `.npy` and `.npz` fixtures and archives of both kinds the writers make.
fn seeds() -> &'static [Vec<u8>] {
    static SEEDS: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    SEEDS.get_or_init(|| {
        let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
        let mut seeds: Vec<Vec<u8>> = [
            "fortran_f64.npy",
            "big_endian_i32.npy",
            "version_2.npy",
            "version_3.npy",
            "savez.npz",
            "savez_compressed.npz",
            "savez_compressed_blocks.npz",
        ]
        .iter()
        .map(|f| std::fs::read(fixtures.join(f)).unwrap())
        .collect();
        let values: Vec<f64> = (0..60).map(|i| f64::from(i % 7) - 3.0).collect();
        let a = NDArray::from_f64_slice(DType::F32, &[3, 4, 5], &values).unwrap();
        let b = NDArray::from_bool_slice(&[2], &[true, false]).unwrap();
        let c = NDArray::from_f64_slice(DType::F16, &[], &[1.5]).unwrap();
        let empty = NDArray::zeros(DType::I64, &[0, 3]).unwrap();
        seeds.push(write_npy(&a));
        seeds.push(write_npy(&empty));
        let entries = [
            ("a".to_string(), &a),
            ("b".to_string(), &b),
            ("c".to_string(), &c),
            ("e".to_string(), &empty),
        ];
        seeds.push(write_npz(&entries));
        seeds.push(write_npz_compressed(&entries));
        seeds
    })
}

/// A change to a file.
#[derive(Clone, Debug)]
enum Mutation {
    /// Flip bit `bit` of the byte at `at` (a fraction of the length).
    Flip { at: f64, bit: u8 },
    /// Keep the first `at` of the bytes.
    Cut { at: f64 },
    /// Insert `bytes` at `at`.
    Splice { at: f64, bytes: Vec<u8> },
    /// Set zip field `which` (of those [`zip_fields`] finds) to `value`, truncated to the
    /// field's width; `None` is the field's value plus `delta`.
    ZipField {
        which: usize,
        value: Option<u64>,
        delta: i8,
    },
    /// Replace a `.npy` file's shape tuple with `dims`, fixing the header length field.
    Shape { dims: Vec<u64> },
}

/// Extreme values for a length, size, offset or count field, and small ones.
fn field_value() -> impl Strategy<Value = Option<u64>> {
    prop_oneof![
        Just(None),
        Just(Some(0u64)),
        Just(Some(1)),
        Just(Some(u64::from(u16::MAX))),
        Just(Some(u64::from(u32::MAX))),
        Just(Some(u64::from(u32::MAX) - 1)),
        Just(Some(u64::MAX)),
        Just(Some(1 << 40)),
        (0u64..4096).prop_map(Some),
    ]
}

/// Dimensions that overflow, that are zero, and ordinary ones.
fn dim() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(0u64),
        Just(1),
        Just(i64::MAX as u64),
        Just(1 << 32),
        Just(1 << 62),
        2u64..64,
    ]
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        2 => (0.0..1.0f64, 0u8..8).prop_map(|(at, bit)| Mutation::Flip { at, bit }),
        1 => (0.0..1.0f64).prop_map(|at| Mutation::Cut { at }),
        1 => (0.0..1.0f64, proptest::collection::vec(any::<u8>(), 1..12))
            .prop_map(|(at, bytes)| Mutation::Splice { at, bytes }),
        3 => (0usize..64, field_value(), -4i8..5)
            .prop_map(|(which, value, delta)| Mutation::ZipField { which, value, delta }),
        1 => proptest::collection::vec(dim(), 0..4).prop_map(|dims| Mutation::Shape { dims }),
    ]
}

/// The byte offset a fraction `at` of `len` stands for.
fn offset(at: f64, len: usize) -> usize {
    ((at * len as f64) as usize).min(len)
}

/// The (offset, width) of every length, size, offset, count and method field of the zip
/// records found in `bytes`, by their signatures.
fn zip_fields(bytes: &[u8]) -> Vec<(usize, usize)> {
    const LOCAL: &[(usize, usize)] = &[(6, 2), (8, 2), (18, 4), (22, 4), (26, 2), (28, 2)];
    const CENTRAL: &[(usize, usize)] = &[
        (8, 2),
        (10, 2),
        (20, 4),
        (24, 4),
        (28, 2),
        (30, 2),
        (32, 2),
        (34, 2),
        (42, 4),
    ];
    const EOCD: &[(usize, usize)] = &[(4, 2), (8, 2), (10, 2), (12, 4), (16, 4), (20, 2)];
    const ZIP64_EOCD: &[(usize, usize)] = &[(4, 8), (24, 8), (32, 8), (40, 8), (48, 8)];
    const ZIP64_LOCATOR: &[(usize, usize)] = &[(8, 8)];
    let mut fields = Vec::new();
    for at in 0..bytes.len().saturating_sub(3) {
        let layout = match &bytes[at..at + 4] {
            b"PK\x03\x04" => LOCAL,
            b"PK\x01\x02" => CENTRAL,
            b"PK\x05\x06" => EOCD,
            b"PK\x06\x06" => ZIP64_EOCD,
            b"PK\x06\x07" => ZIP64_LOCATOR,
            _ => continue,
        };
        fields.extend(
            layout
                .iter()
                .map(|&(field, width)| (at + field, width))
                .filter(|&(field, width)| field + width <= bytes.len()),
        );
    }
    fields
}

/// Applies `m` to the file `bytes`; a mutation that does not apply (a zip field of a file with
/// none, a shape of a file that is not a `.npy` one) leaves them as they are.
fn apply(bytes: &mut Vec<u8>, m: &Mutation) {
    match m {
        Mutation::Flip { at, bit } => {
            if !bytes.is_empty() {
                let i = offset(*at, bytes.len() - 1);
                bytes[i] ^= 1 << bit;
            }
        }
        Mutation::Cut { at } => bytes.truncate(offset(*at, bytes.len())),
        Mutation::Splice { at, bytes: more } => {
            let i = offset(*at, bytes.len());
            bytes.splice(i..i, more.iter().copied());
        }
        Mutation::ZipField {
            which,
            value,
            delta,
        } => {
            let fields = zip_fields(bytes);
            if fields.is_empty() {
                return;
            }
            let (at, width) = fields[which % fields.len()];
            let mut old = [0u8; 8];
            old[..width].copy_from_slice(&bytes[at..at + width]);
            let new = value
                .unwrap_or_else(|| u64::from_le_bytes(old).wrapping_add_signed(i64::from(*delta)));
            bytes[at..at + width].copy_from_slice(&new.to_le_bytes()[..width]);
        }
        Mutation::Shape { dims } => {
            // Version 1.0 files only: a two-byte header length at offset 8.
            if !bytes.starts_with(b"\x93NUMPY\x01\x00") || bytes.len() < 10 {
                return;
            }
            let len = usize::from(u16::from_le_bytes([bytes[8], bytes[9]]));
            let Some(Ok(header)) = bytes.get(10..10 + len).map(std::str::from_utf8) else {
                return;
            };
            let Some(start) = header.find("'shape': (") else {
                return;
            };
            let start = start + "'shape': (".len();
            let Some(end) = header[start..].find(')') else {
                return;
            };
            let tuple: Vec<String> = dims.iter().map(u64::to_string).collect();
            let tuple = match tuple.len() {
                1 => format!("{},", tuple[0]),
                _ => tuple.join(", "),
            };
            let header = format!("{}{tuple}{}", &header[..start], &header[start + end..]);
            let mut out = bytes[..8].to_vec();
            out.extend_from_slice(&(header.len() as u16).to_le_bytes());
            out.extend_from_slice(header.as_bytes());
            out.extend_from_slice(&bytes[10 + len..]);
            *bytes = out;
        }
    }
}

proptest! {
    #![proptest_config(relay_testing::proptest_config(4_000))]

    #[test]
    fn mutated_files_read_or_fail_cleanly(
        seed in any::<prop::sample::Index>(),
        mutations in proptest::collection::vec(mutation(), 1..4),
    ) {
        let seeds = seeds();
        let mut bytes = seeds[seed.index(seeds.len())].clone();
        for m in &mutations {
            apply(&mut bytes, m);
        }
        let trace = std::env::var_os("MUTATIONS_TRACE").is_some();
        if trace {
            eprintln!("case: seed {} {mutations:?}", seed.index(seeds.len()));
        }
        let (npy, npy_largest) = largest_allocation(|| read_npy(&bytes));
        let (npz, npz_largest) = largest_allocation(|| read_npz(&bytes));
        if trace {
            let outcome = |ok: bool, e: Option<String>| match e {
                Some(e) => e.chars().take(80).collect(),
                None => if ok { "read".to_string() } else { String::new() },
            };
            eprintln!(
                "npy: {}\nnpz: {}",
                outcome(npy.is_ok(), npy.as_ref().err().map(|e| e.to_string())),
                outcome(npz.is_ok(), npz.as_ref().err().map(|e| e.to_string())),
            );
        }
        // A `.npy` file's array is at most as large as the file; an archive's entries inflate
        // by at most deflate's ratio.
        let npy_bound = 2 * bytes.len() + 4096;
        prop_assert!(
            npy_largest <= npy_bound,
            "read_npy allocated {npy_largest} bytes at once for a file of {} bytes",
            bytes.len()
        );
        let npz_bound = DEFLATE_RATIO * bytes.len() + 4096;
        prop_assert!(
            npz_largest <= npz_bound,
            "read_npz allocated {npz_largest} bytes at once for a file of {} bytes",
            bytes.len()
        );
    }
}

/// Every seed reads as it is, so the mutations start from valid files.
#[test]
fn the_seeds_are_valid() {
    for (i, seed) in seeds().iter().enumerate() {
        let ok = if seed.starts_with(b"\x93NUMPY") {
            read_npy(seed).map(|_| ())
        } else {
            read_npz(seed).map(|_| ())
        };
        assert!(ok.is_ok(), "seed {i}: {ok:?}");
    }
}

/// The case of the issue that made the property flaky: a header declaring shape
/// `(0, 2**62)` (no elements) over an empty body reads as an empty array, allocating little.
/// It failed only when the seeds test, on another thread, inflated an archive at the same
/// moment; the allocator now records per thread.
#[test]
fn an_empty_array_with_a_huge_dimension_reads_in_proportion_to_its_file() {
    let mut bytes = write_npy(&NDArray::zeros(DType::F32, &[0, 3]).unwrap());
    apply(
        &mut bytes,
        &Mutation::Shape {
            dims: vec![0, 1 << 62],
        },
    );
    let (array, largest) = largest_allocation(|| read_npy(&bytes));
    let array = array.unwrap();
    assert_eq!(array.shape(), [0, 1 << 62]);
    assert!(
        largest <= 2 * bytes.len() + 4096,
        "{largest} bytes for {}",
        bytes.len()
    );
}
