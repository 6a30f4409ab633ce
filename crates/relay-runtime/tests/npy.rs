//! `.npy` and `.npz` reading and writing: round trips, files numpy wrote (the fixtures under
//! `tests/fixtures/`, made by `make_fixtures.py`, and the conformance inputs and expected
//! outputs), and malformed input.

use std::path::{Path, PathBuf};

use relay_runtime::npy::{
    NpyError, read_npy, read_npy_file, read_npz, read_npz_file, write_npy, write_npz,
    write_npz_compressed, write_npz_compressed_file,
};
use relay_runtime::{DType, NDArray};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// Every dtype of SPEC §2.
const DTYPES: [DType; 12] = [
    DType::BOOL,
    DType::I8,
    DType::I16,
    DType::I32,
    DType::I64,
    DType::U8,
    DType::U16,
    DType::U32,
    DType::U64,
    DType::F16,
    DType::F32,
    DType::F64,
];

/// `arange(size) - 2` in `dtype` and `shape` (booleans: odd positions true), as
/// `make_fixtures.py` writes.
fn values(dtype: DType, shape: &[i64]) -> NDArray {
    let n: i64 = shape.iter().product();
    if dtype == DType::BOOL {
        let v: Vec<bool> = (0..n).map(|i| i % 2 == 1).collect();
        return NDArray::from_bool_slice(shape, &v).unwrap();
    }
    let v: Vec<i128> = (0..n).map(|i| i128::from(i) - 2).collect();
    NDArray::from_i128_slice(dtype, shape, &v).unwrap()
}

#[test]
fn npy_round_trips_every_dtype_and_shape() {
    for dtype in DTYPES {
        for shape in [
            &[][..],
            &[0],
            &[3],
            &[2, 3],
            &[0, 4],
            &[2, 1, 3, 1],
            &[4, 0, 2],
        ] {
            let a = values(dtype, shape);
            let bytes = write_npy(&a);
            let b = read_npy(&bytes).unwrap_or_else(|e| panic!("{dtype} {shape:?}: {e}"));
            assert_eq!(a, b, "{dtype} {shape:?}");
        }
    }
}

#[test]
fn npz_round_trips_in_order() {
    let arrays: Vec<NDArray> = DTYPES.iter().map(|&d| values(d, &[2, 3])).collect();
    let mut entries: Vec<(String, &NDArray)> =
        arrays.iter().map(|a| (a.dtype().to_string(), a)).collect();
    let scalar = values(DType::F32, &[]);
    let empty = values(DType::I64, &[0, 5]);
    entries.push(("scalar".into(), &scalar));
    entries.push(("nested/empty".into(), &empty));
    let back = read_npz(&write_npz(&entries)).unwrap();
    assert_eq!(back.len(), entries.len());
    for ((name, a), (back_name, b)) in entries.iter().zip(&back) {
        assert_eq!(name, back_name);
        assert_eq!(*a, b, "{name}");
    }
    assert!(read_npz(&write_npz(&[])).unwrap().is_empty());
}

#[test]
fn compressed_npz_round_trips_every_dtype_and_shape() {
    let shapes: [&[i64]; 6] = [&[], &[0], &[3], &[2, 3], &[0, 4], &[2, 1, 3, 1]];
    let arrays: Vec<(String, NDArray)> = DTYPES
        .iter()
        .flat_map(|&d| {
            shapes
                .iter()
                .map(move |&s| (format!("{d}{s:?}"), values(d, s)))
        })
        .collect();
    let entries: Vec<(String, &NDArray)> = arrays.iter().map(|(n, a)| (n.clone(), a)).collect();
    let zip = write_npz_compressed(&entries);
    let back = read_npz(&zip).unwrap();
    assert_eq!(back.len(), entries.len());
    for ((name, a), (back_name, b)) in entries.iter().zip(&back) {
        assert_eq!(name, back_name);
        assert_eq!(*a, b, "{name}");
    }
    assert!(read_npz(&write_npz_compressed(&[])).unwrap().is_empty());
}

/// Zip's local header of the first entry: its compression method and its compressed and
/// uncompressed sizes.
fn first_entry_header(zip: &[u8]) -> (u16, u32, u32) {
    let u16_at = |at: usize| u16::from_le_bytes([zip[at], zip[at + 1]]);
    let u32_at = |at: usize| u32::from_le_bytes([zip[at], zip[at + 1], zip[at + 2], zip[at + 3]]);
    assert_eq!(u32_at(0), 0x0403_4b50, "a local file header first");
    (u16_at(8), u32_at(18), u32_at(22))
}

#[test]
fn compressed_npz_is_deflated_and_smaller() {
    // Four megabytes of float32 with few distinct values, and an incompressible array.
    let n = 1 << 20;
    let ramp: Vec<f64> = (0..n).map(|i| (i % 1000) as f64).collect();
    let ramp = NDArray::from_f64_slice(DType::F32, &[1024, n / 1024], &ramp).unwrap();
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let noise: Vec<i128> = (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            i128::from(state as u8)
        })
        .collect();
    let noise = NDArray::from_i128_slice(DType::U8, &[n], &noise).unwrap();

    let stored = write_npz(&[("ramp".into(), &ramp)]);
    let compressed = write_npz_compressed(&[("ramp".into(), &ramp)]);
    let (method, packed, unpacked) = first_entry_header(&compressed);
    assert_eq!(method, 8, "deflated");
    assert_eq!(unpacked as usize, write_npy(&ramp).len());
    assert!(
        compressed.len() * 10 < stored.len(),
        "compressed {} bytes (entry {packed}), stored {}",
        compressed.len(),
        stored.len()
    );
    assert_eq!(first_entry_header(&stored).0, 0, "stored");

    let entries = [("ramp".to_string(), &ramp), ("noise".to_string(), &noise)];
    let back = read_npz(&write_npz_compressed(&entries)).unwrap();
    assert_eq!(back[0], ("ramp".to_string(), ramp.clone()));
    assert_eq!(back[1], ("noise".to_string(), noise.clone()));

    let dir = std::env::temp_dir().join(format!("relay-npz-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("compressed.npz");
    write_npz_compressed_file(&path, &entries).unwrap();
    let back = read_npz_file(&path).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(back.len(), 2);
    assert_eq!(back[1].1, noise);
}

/// The names, dtypes and shapes `make_fixtures.py` saves with `np.savez` and
/// `np.savez_compressed`.
fn check_savez(entries: &[(String, NDArray)]) {
    let expected: Vec<(&str, DType, &[i64])> = vec![
        ("b", DType::BOOL, &[2, 3]),
        ("i8", DType::I8, &[5]),
        ("i16", DType::I16, &[2, 2]),
        ("i32", DType::I32, &[3, 1, 2]),
        ("i64", DType::I64, &[4]),
        ("u8", DType::U8, &[3]),
        ("u16", DType::U16, &[3]),
        ("u32", DType::U32, &[3]),
        ("u64", DType::U64, &[3]),
        ("f16", DType::F16, &[2, 3]),
        ("f32", DType::F32, &[2, 3]),
        ("f64", DType::F64, &[2, 3]),
        ("scalar", DType::F32, &[]),
        ("empty", DType::F32, &[0, 3]),
    ];
    let names: Vec<&str> = entries.iter().map(|(n, _)| n.as_str()).collect();
    let expected_names: Vec<&str> = expected.iter().map(|e| e.0).collect();
    assert_eq!(names, expected_names);
    for ((name, array), (_, dtype, shape)) in entries.iter().zip(expected) {
        assert_eq!(array.dtype(), dtype, "{name}");
        assert_eq!(array.shape(), shape, "{name}");
        let want = match name.as_str() {
            // Unsigned: `(arange(3) - 2).astype(u) + 2` wraps around to 0, 1, 2.
            n if n.starts_with('u') => NDArray::from_i128_slice(dtype, shape, &[0, 1, 2]).unwrap(),
            "scalar" => NDArray::from_f64_slice(dtype, shape, &[-2.0]).unwrap(),
            _ => values(dtype, shape),
        };
        assert_eq!(*array, want, "{name}");
    }
}

#[test]
fn reads_numpy_savez() {
    check_savez(&read_npz_file(&fixture("savez.npz")).unwrap());
}

#[test]
fn reads_numpy_savez_compressed() {
    check_savez(&read_npz_file(&fixture("savez_compressed.npz")).unwrap());
}

#[test]
fn reads_numpy_savez_compressed_blocks() {
    let entries = read_npz_file(&fixture("savez_compressed_blocks.npz")).unwrap();
    let ramp: Vec<i128> = (0..50_000).map(|i| i % 1000).collect();
    let ramp = NDArray::from_i128_slice(DType::I32, &[50, 1000], &ramp).unwrap();
    let hashed: Vec<i128> = (0..3000u64)
        .map(|i| i128::from(((i * 2_654_435_761) >> 13) as u8))
        .collect();
    let hashed = NDArray::from_i128_slice(DType::U8, &[3000], &hashed).unwrap();
    assert_eq!(
        entries,
        vec![("ramp".to_string(), ramp), ("hashed".to_string(), hashed)]
    );
}

#[test]
fn reads_fortran_order_big_endian_and_later_versions() {
    for (file, dtype, shape) in [
        ("fortran_f64.npy", DType::F64, &[2, 3, 4][..]),
        ("fortran_i32.npy", DType::I32, &[3, 2]),
        ("big_endian_i32.npy", DType::I32, &[3, 2]),
        ("big_endian_f64.npy", DType::F64, &[2, 3]),
        ("version_2.npy", DType::F32, &[2, 3]),
        ("version_3.npy", DType::F32, &[2, 3]),
    ] {
        let a = read_npy_file(&fixture(file)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(a, values(dtype, shape), "{file}");
    }
}

#[test]
fn reads_the_conformance_files() {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = here.join("../../conformance");
    read_conformance_files(&root);
    let x = read_npy_file(&root.join("attention/x.npy")).unwrap();
    assert_eq!((x.dtype(), x.shape()), (DType::F32, &[6, 8][..]));
    let expected = read_npz_file(&root.join("elementwise/expected.npz")).unwrap();
    assert_eq!(expected.len(), 28);
    assert_eq!(expected[1].1.dtype(), DType::I32);
    assert_eq!(expected[11].1.dtype(), DType::BOOL);
    assert_eq!(expected[11].1.shape(), &[3, 6]);
    let reductions = read_npz_file(&root.join("reductions/expected.npz")).unwrap();
    assert_eq!(reductions[9].1.shape(), &[] as &[i64]);
    // The shared conformance files too, when they are beside the repository.
    let shared = here.join("../../../shared/conformance");
    if shared.is_dir() {
        read_conformance_files(&shared);
    }
}

/// Reads every `.npy` and `.npz` file of the program directories under `root`, checking the
/// `.npz` entries are named "0", "1", ... and that there are some of each.
fn read_conformance_files(root: &Path) {
    let mut npy = 0;
    let mut npz = 0;
    for dir in std::fs::read_dir(root).unwrap() {
        let dir = dir.unwrap().path();
        if !dir.is_dir() {
            continue;
        }
        for file in std::fs::read_dir(&dir).unwrap() {
            let file = file.unwrap().path();
            match file.extension().and_then(|e| e.to_str()) {
                Some("npy") => {
                    read_npy_file(&file).unwrap();
                    npy += 1;
                }
                Some("npz") => {
                    let entries = read_npz_file(&file).unwrap();
                    for (i, (name, _)) in entries.iter().enumerate() {
                        assert_eq!(*name, i.to_string(), "{}", file.display());
                    }
                    npz += 1;
                }
                _ => {}
            }
        }
    }
    assert!(
        npy > 10 && npz >= 6,
        "found {npy} .npy and {npz} .npz files in {}",
        root.display()
    );
}

/// A `.npy` version 1.0 file with `header` (padded as numpy pads it) followed by `data`.
fn npy_with_header(header: &str, data: &[u8]) -> Vec<u8> {
    let mut h = header.to_string();
    while !(10 + h.len() + 1).is_multiple_of(64) {
        h.push(' ');
    }
    h.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(h.len() as u16).to_le_bytes());
    out.extend_from_slice(h.as_bytes());
    out.extend_from_slice(data);
    out
}

fn error_text(result: Result<NDArray, NpyError>) -> String {
    match result {
        Ok(a) => panic!("expected an error, got {a:?}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn malformed_npy_files_are_errors() {
    let good = write_npy(&values(DType::F32, &[2, 3]));
    // Every truncation is an error, never a panic.
    for len in 0..good.len() {
        assert!(read_npy(&good[..len]).is_err(), "prefix of {len} bytes");
    }
    let mut long = good.clone();
    long.push(0);
    let text = error_text(read_npy(&long));
    assert!(
        text.contains("needs 24 bytes of data, the file has 25"),
        "{text}"
    );
    let text = error_text(read_npy(&good[..good.len() - 4]));
    assert!(
        text.contains("shape (2, 3) of float32 needs 24 bytes"),
        "{text}"
    );

    let text = error_text(read_npy(b"PK\x03\x04 not npy"));
    assert!(text.contains("bad magic"), "{text}");
    let text = error_text(read_npy(b""));
    assert!(text.contains("bad magic"), "{text}");

    let mut version = good.clone();
    version[6] = 4;
    let text = error_text(read_npy(&version));
    assert!(
        text.contains("unsupported .npy format version 4.0"),
        "{text}"
    );

    let text = error_text(read_npy(&npy_with_header("[1, 2, 3]", &[])));
    assert!(
        text.contains("malformed .npy header: expected a dict"),
        "{text}"
    );
    let text = error_text(read_npy(&npy_with_header(
        "{'descr': '<f4', 'shape': (2,), }",
        &[0; 8],
    )));
    assert!(text.contains("missing key 'fortran_order'"), "{text}");

    let text = error_text(read_npy_file(&fixture("complex64.npy")));
    assert!(
        text.contains("unsupported dtype descriptor `<c8`"),
        "{text}"
    );
    assert!(text.contains("complex64.npy"), "{text}");
    let text = error_text(read_npy(&npy_with_header(
        "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }",
        &[0; 8],
    )));
    assert!(text.contains("structured dtype"), "{text}");

    // Huge shapes are rejected before anything is allocated.
    let text = error_text(read_npy(&npy_with_header(
        "{'descr': '<f8', 'fortran_order': False, 'shape': (1099511627776, 1099511627776), }",
        &[],
    )));
    assert!(text.contains("too large"), "{text}");
    let text = error_text(read_npy(&npy_with_header(
        "{'descr': '<f8', 'fortran_order': False, 'shape': (1000000000000,), }",
        &[0; 8],
    )));
    assert!(text.contains("needs 8000000000000 bytes of data"), "{text}");

    // A header length pointing past the end of the file.
    let mut header_len = good.clone();
    header_len[8] = 0xff;
    header_len[9] = 0xff;
    let text = error_text(read_npy(&header_len));
    assert!(text.contains("truncated file: the header needs"), "{text}");
}

#[test]
fn malformed_npz_files_are_errors() {
    let a = values(DType::F32, &[2, 3]);
    let b = values(DType::I32, &[4]);
    let good = write_npz(&[("a".into(), &a), ("b".into(), &b)]);
    let compressed = std::fs::read(fixture("savez_compressed.npz")).unwrap();
    for archive in [&good, &compressed] {
        for len in 0..archive.len() {
            assert!(read_npz(&archive[..len]).is_err(), "prefix of {len} bytes");
        }
        // Corrupting any one byte gives an error or (for fields nobody reads, such as a
        // timestamp) the same data; never a panic.
        for at in 0..archive.len() {
            let mut bad = archive.to_vec();
            bad[at] ^= 0x55;
            let _ = read_npz(&bad);
        }
    }

    let text = read_npz(b"not a zip").unwrap_err().to_string();
    assert!(text.contains("not a zip archive"), "{text}");

    // Flipping a data byte breaks the CRC-32 check and names the entry.
    let mut bad = good.clone();
    bad[30 + "a.npy".len() + 70] ^= 1;
    let text = read_npz(&bad).unwrap_err().to_string();
    assert!(
        text.contains("entry `a.npy`: malformed .npz archive: CRC-32"),
        "{text}"
    );

    // Entries that share their data (a zip bomb: one deflate stream inflated once per entry)
    // are rejected before any is inflated twice.
    let text = read_npz(&shared_data_archive(16)).unwrap_err().to_string();
    assert!(
        text.contains("the entries' data adds up to more than the archive's"),
        "{text}"
    );
    assert_eq!(read_npz(&shared_data_archive(1)).unwrap().len(), 1);

    let missing = read_npz_file(Path::new("/nonexistent/w.npz")).unwrap_err();
    assert!(
        missing
            .to_string()
            .starts_with("cannot read `/nonexistent/w.npz`"),
        "{missing}"
    );
}

/// A compressed archive of one zero-filled megabyte whose central directory lists that entry
/// `copies` times, every copy pointing at the same deflate stream.
fn shared_data_archive(copies: usize) -> Vec<u8> {
    let zeros = NDArray::zeros(DType::F32, &[1 << 18]).unwrap();
    let zip = write_npz_compressed(&[("z".into(), &zeros)]);
    let u32_at = |at: usize| u32::from_le_bytes([zip[at], zip[at + 1], zip[at + 2], zip[at + 3]]);
    let eocd = zip.len() - 22;
    let (cd_size, cd_offset) = (u32_at(eocd + 12) as usize, u32_at(eocd + 16) as usize);
    let mut out = zip[..cd_offset].to_vec();
    for _ in 0..copies {
        out.extend_from_slice(&zip[cd_offset..cd_offset + cd_size]);
    }
    let mut end = zip[eocd..].to_vec();
    end[8..10].copy_from_slice(&(copies as u16).to_le_bytes());
    end[10..12].copy_from_slice(&(copies as u16).to_le_bytes());
    end[12..16].copy_from_slice(&((cd_size * copies) as u32).to_le_bytes());
    out.extend_from_slice(&end);
    out
}

/// bfloat16 and 8-bit float arrays are written as raw `V2`/`V1` elements (numpy has no type
/// for them; ml_dtypes arrays are saved so), read back as their bits, and taken by a
/// parameter of such a type as bits or as float values (`NDArray::to_minifloat`).
#[test]
fn narrow_float_arrays_travel_as_raw_elements() {
    for (name, want) in [
        ("bfloat16", [1.0, -2.5, 0.0078125, f64::INFINITY]),
        ("float8_e4m3fn", [1.0, -2.5, 0.0078125, 448.0]),
        ("float8_e5m2fnuz", [1.0, -2.5, 0.0078125, 57344.0]),
    ] {
        let d = DType::parse(name).unwrap();
        let a = NDArray::from_f64_slice(d, &[2, 2], &want).unwrap();
        let bytes = write_npy(&a);
        let raw = read_npy(&bytes).unwrap();
        assert_eq!(raw.dtype().bits, d.bits, "{name}");
        assert_eq!(raw.as_bytes(), a.as_bytes(), "{name}");
        assert_eq!(raw.to_minifloat(d), Some(a.clone()), "{name} from its bits");
        let floats = NDArray::from_f64_slice(DType::F32, &[2, 2], &want).unwrap();
        assert_eq!(
            floats.to_minifloat(d),
            Some(a.clone()),
            "{name} from floats"
        );
        assert_eq!(a.to_f64_vec(), want, "{name}");
        // Integers that are not its bits, and other target types, are not converted.
        assert_eq!(values(DType::I32, &[2, 2]).to_minifloat(d), None);
        assert_eq!(floats.to_minifloat(DType::F32), None);
    }
    let header = "{'descr': '|V3', 'fortran_order': False, 'shape': (1,), }";
    let err = error_text(read_npy(&npy_with_header(header, &[0, 0, 0])));
    assert!(err.contains("|V3"), "{err}");
}
