//! NumPy's `.npy` and `.npz` file formats: reading and writing [`NDArray`]s.
//!
//! A `.npy` file is a magic string, a format version, a Python dict literal header such as
//! `{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }` and the raw element data. A
//! `.npz` file is a zip archive of `.npy` entries, as `np.savez` (stored entries) and
//! `np.savez_compressed` (deflated entries) write it.
//!
//! Reading accepts header versions 1.0, 2.0 and 3.0, little- and big-endian descriptors (big-endian
//! data is byte-swapped), Fortran-order data (transposed into C order) and every dtype of SPEC §2.
//! Writing produces version 1.0, little-endian, C order, and stored ([`write_npz`]) or deflated
//! ([`write_npz_compressed`]) zip entries with zip64 records only where sizes or offsets need
//! them, as Python's `zipfile` does.
//!
//! Nothing here panics on malformed input: every length is checked against the bytes present
//! before anything is allocated, and every problem is an [`NpyError`] that says what is wrong.
//! Inflating is the one place output may outgrow its input, by deflate's own bound (about 1032
//! to 1): each entry inflates to at most its declared size, and the entries' compressed data
//! together may be no larger than the archive (entries cannot share it), so an archive
//! inflates to at most that multiple of its length.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::{DType, DTypeCode, NDArray, NDArrayError};

/// The magic bytes every `.npy` file starts with.
const MAGIC: &[u8; 6] = b"\x93NUMPY";

/// The `.npy` header (magic, version, length field and dict) is padded to a multiple of this.
const HEADER_ALIGN: usize = 64;

/// What went wrong reading or writing a `.npy` or `.npz` file.
#[derive(Debug, thiserror::Error)]
pub enum NpyError {
    /// The data does not start with `\x93NUMPY`.
    #[error("not a .npy file: bad magic {found:?}, expected \"\\x93NUMPY\"")]
    BadMagic {
        /// The first bytes found, escaped.
        found: String,
    },
    /// The file ends before something it declares.
    #[error("truncated file: {what} needs {needed} bytes, only {available} present")]
    Truncated {
        /// What was being read.
        what: &'static str,
        /// The bytes it needs.
        needed: u64,
        /// The bytes present.
        available: u64,
    },
    /// A `.npy` format version other than 1.0, 2.0 and 3.0.
    #[error("unsupported .npy format version {major}.{minor}, expected 1.0, 2.0 or 3.0")]
    UnsupportedVersion {
        /// The major version byte.
        major: u8,
        /// The minor version byte.
        minor: u8,
    },
    /// The header is not the dict literal numpy writes.
    #[error("malformed .npy header: {0}")]
    BadHeader(String),
    /// A dtype descriptor that has no relayc dtype.
    #[error(
        "unsupported dtype descriptor `{0}`; supported: bool, int8-64, uint8-64, float16/32/64"
    )]
    UnsupportedDType(String),
    /// The data after the header does not have the size the shape and dtype require.
    #[error("shape {shape} of {dtype} needs {expected} bytes of data, the file has {actual}")]
    DataLength {
        /// The shape, as a Python tuple.
        shape: String,
        /// The element type.
        dtype: DType,
        /// The bytes the shape needs.
        expected: u64,
        /// The bytes present.
        actual: u64,
    },
    /// The shape is invalid or too large for memory.
    #[error("invalid shape: {0}")]
    Shape(#[from] NDArrayError),
    /// The zip structure of a `.npz` file is broken or unsupported.
    #[error("malformed .npz archive: {0}")]
    BadZip(String),
    /// An error in one entry of a `.npz` archive.
    #[error("entry `{name}`: {source}")]
    Entry {
        /// The entry's file name inside the archive.
        name: String,
        /// What is wrong with it.
        source: Box<NpyError>,
    },
    /// Reading or writing a file failed.
    #[error("cannot {action} `{}`: {source}", path.display())]
    Io {
        /// `"read"` or `"write"`.
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The contents of a file are malformed.
    #[error("`{}`: {source}", path.display())]
    InFile {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        source: Box<NpyError>,
    },
}

impl NpyError {
    /// Attaches the file name to an error about a file's contents.
    fn in_file(self, path: &Path) -> NpyError {
        NpyError::InFile {
            path: path.to_path_buf(),
            source: Box::new(self),
        }
    }

    /// Attaches the entry name to an error about one `.npz` entry.
    fn in_entry(self, name: &str) -> NpyError {
        NpyError::Entry {
            name: name.to_string(),
            source: Box::new(self),
        }
    }
}

/// Formats a shape as Python writes a tuple: `()`, `(5,)`, `(2, 3)`.
pub fn shape_tuple(shape: &[i64]) -> String {
    ShapeTuple(shape).to_string()
}

/// Displays a shape as a Python tuple.
struct ShapeTuple<'a>(&'a [i64]);

impl fmt::Display for ShapeTuple<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("(")?;
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{d}")?;
        }
        if self.0.len() == 1 {
            f.write_str(",")?;
        }
        f.write_str(")")
    }
}

// ------------------------------------------------------------------------------------------------
// .npy

/// The byte order of a dtype descriptor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ByteOrder {
    Little,
    Big,
}

/// Parses a `.npy` file held in memory.
pub fn read_npy(bytes: &[u8]) -> Result<NDArray, NpyError> {
    if bytes.len() < MAGIC.len() || &bytes[..MAGIC.len()] != MAGIC {
        let shown = &bytes[..bytes.len().min(MAGIC.len())];
        return Err(NpyError::BadMagic {
            found: shown.escape_ascii().to_string(),
        });
    }
    let (major, minor) = match bytes.get(6..8) {
        Some(&[major, minor]) => (major, minor),
        _ => return Err(truncated("the format version", 8, bytes.len())),
    };
    // Version 1.0 has a 2-byte header length; 2.0 and 3.0 (UTF-8 header) a 4-byte one.
    let (len_end, header_len) = match (major, minor) {
        (1, 0) => match bytes.get(8..10) {
            Some(&[a, b]) => (10, u16::from_le_bytes([a, b]) as usize),
            _ => return Err(truncated("the header length", 10, bytes.len())),
        },
        (2, 0) | (3, 0) => match bytes.get(8..12) {
            Some(&[a, b, c, d]) => (12, u32::from_le_bytes([a, b, c, d]) as usize),
            _ => return Err(truncated("the header length", 12, bytes.len())),
        },
        _ => return Err(NpyError::UnsupportedVersion { major, minor }),
    };
    let header_end = len_end + header_len;
    let Some(header) = bytes.get(len_end..header_end) else {
        return Err(truncated("the header", header_end as u64, bytes.len()));
    };
    let header = std::str::from_utf8(header)
        .map_err(|_| NpyError::BadHeader("the header is not valid UTF-8 text".into()))?;
    let header = parse_header(header)?;
    let data = &bytes[header_end..];

    let expected = NDArray::byte_len(header.dtype, &header.shape)?;
    if data.len() != expected {
        return Err(NpyError::DataLength {
            shape: shape_tuple(&header.shape),
            dtype: header.dtype,
            expected: expected as u64,
            actual: data.len() as u64,
        });
    }
    let mut array = NDArray::zeros(header.dtype, &header.shape)?;
    let size = header.dtype.size_bytes();
    if header.fortran_order && header.shape.len() > 1 {
        fortran_to_c(data, &header.shape, size, array.as_bytes_mut());
    } else {
        array.as_bytes_mut().copy_from_slice(data);
    }
    let native = if cfg!(target_endian = "little") {
        ByteOrder::Little
    } else {
        ByteOrder::Big
    };
    if header.order != native && size > 1 {
        for element in array.as_bytes_mut().chunks_exact_mut(size) {
            element.reverse();
        }
    }
    Ok(array)
}

/// The error for bytes that end before `needed`.
fn truncated(what: &'static str, needed: u64, available: usize) -> NpyError {
    NpyError::Truncated {
        what,
        needed,
        available: available as u64,
    }
}

/// Copies column-major element data `src` of `shape` into row-major `dst`.
fn fortran_to_c(src: &[u8], shape: &[i64], size: usize, dst: &mut [u8]) {
    let dims: Vec<usize> = shape.iter().map(|&d| d as usize).collect();
    let mut c_strides = vec![1usize; dims.len()];
    for i in (0..dims.len().saturating_sub(1)).rev() {
        c_strides[i] = c_strides[i + 1] * dims[i + 1];
    }
    // Walk the source in its own (Fortran) order, first index fastest, keeping the multi-index.
    let mut index = vec![0usize; dims.len()];
    for element in src.chunks_exact(size) {
        let at: usize = index.iter().zip(&c_strides).map(|(i, s)| i * s).sum();
        dst[at * size..(at + 1) * size].copy_from_slice(element);
        for (i, d) in index.iter_mut().zip(&dims) {
            *i += 1;
            if *i < *d {
                break;
            }
            *i = 0;
        }
    }
}

/// What a `.npy` header says.
#[derive(Debug)]
struct Header {
    dtype: DType,
    order: ByteOrder,
    fortran_order: bool,
    shape: Vec<i64>,
}

/// A Python literal in a header dict.
#[derive(Debug)]
enum Literal {
    Str(String),
    Bool(bool),
    Int(i64),
    Tuple(Vec<Literal>),
    List,
    Other(String),
}

impl Literal {
    /// How the literal is described in error messages.
    fn describe(&self) -> String {
        match self {
            Literal::Str(s) => format!("the string {s:?}"),
            Literal::Bool(b) => format!("`{}`", if *b { "True" } else { "False" }),
            Literal::Int(i) => format!("the integer {i}"),
            Literal::Tuple(_) => "a tuple".into(),
            Literal::List => "a list".into(),
            Literal::Other(s) => format!("`{s}`"),
        }
    }
}

/// Parses the header dict: exactly the keys `descr`, `fortran_order` and `shape`.
fn parse_header(text: &str) -> Result<Header, NpyError> {
    let mut p = LiteralParser { text, pos: 0 };
    p.skip_space();
    if !p.eat('{') {
        return Err(NpyError::BadHeader(format!(
            "expected a dict such as {{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }}, \
             got {:?}",
            truncate_text(text)
        )));
    }
    let (mut descr, mut fortran_order, mut shape) = (None, None, None);
    loop {
        p.skip_space();
        if p.eat('}') {
            break;
        }
        let key = match p.literal(0)? {
            Literal::Str(key) => key,
            other => {
                return Err(NpyError::BadHeader(format!(
                    "expected a string key, got {}",
                    other.describe()
                )));
            }
        };
        p.skip_space();
        if !p.eat(':') {
            return Err(p.error("expected `:` after a key"));
        }
        let value = p.literal(0)?;
        let slot = match key.as_str() {
            "descr" => &mut descr,
            "fortran_order" => &mut fortran_order,
            "shape" => &mut shape,
            _ => {
                return Err(NpyError::BadHeader(format!(
                    "unexpected key '{key}'; expected 'descr', 'fortran_order' and 'shape'"
                )));
            }
        };
        if slot.replace(value).is_some() {
            return Err(NpyError::BadHeader(format!("key '{key}' appears twice")));
        }
        p.skip_space();
        if p.eat('}') {
            break;
        }
        if !p.eat(',') {
            return Err(p.error("expected `,` or `}` after a value"));
        }
    }
    p.skip_space();
    if p.pos != text.len() {
        return Err(p.error("unexpected text after the dict"));
    }

    let missing = |key: &str| NpyError::BadHeader(format!("missing key '{key}'"));
    let (dtype, order) = match descr.ok_or_else(|| missing("descr"))? {
        Literal::Str(d) => parse_descr(&d)?,
        Literal::List => {
            return Err(NpyError::UnsupportedDType(
                "structured dtype (a list of fields)".into(),
            ));
        }
        other => {
            return Err(NpyError::BadHeader(format!(
                "'descr' must be a string, got {}",
                other.describe()
            )));
        }
    };
    let fortran_order = match fortran_order.ok_or_else(|| missing("fortran_order"))? {
        Literal::Bool(b) => b,
        other => {
            return Err(NpyError::BadHeader(format!(
                "'fortran_order' must be True or False, got {}",
                other.describe()
            )));
        }
    };
    let shape = match shape.ok_or_else(|| missing("shape"))? {
        Literal::Tuple(dims) => dims
            .into_iter()
            .map(|d| match d {
                Literal::Int(d) if d >= 0 => Ok(d),
                other => Err(NpyError::BadHeader(format!(
                    "'shape' must hold non-negative integers, got {}",
                    other.describe()
                ))),
            })
            .collect::<Result<Vec<i64>, NpyError>>()?,
        other => {
            return Err(NpyError::BadHeader(format!(
                "'shape' must be a tuple, got {}",
                other.describe()
            )));
        }
    };
    Ok(Header {
        dtype,
        order,
        fortran_order,
        shape,
    })
}

/// At most the first 80 characters of `text`, for error messages.
fn truncate_text(text: &str) -> &str {
    match text.char_indices().nth(80) {
        Some((at, _)) => &text[..at],
        None => text,
    }
}

/// Parses a dtype descriptor such as `<f4`, `|b1`, `>i8`.
fn parse_descr(descr: &str) -> Result<(DType, ByteOrder), NpyError> {
    let unsupported = || NpyError::UnsupportedDType(descr.to_string());
    let native = if cfg!(target_endian = "little") {
        ByteOrder::Little
    } else {
        ByteOrder::Big
    };
    let (order, rest) = match descr.as_bytes().first() {
        Some(b'<') => (ByteOrder::Little, &descr[1..]),
        Some(b'>') => (ByteOrder::Big, &descr[1..]),
        Some(b'=' | b'|') => (native, &descr[1..]),
        _ => (native, descr),
    };
    let dtype = match rest {
        "b1" | "?" => DType::BOOL,
        "i1" | "b" => DType::I8,
        "i2" => DType::I16,
        "i4" => DType::I32,
        "i8" => DType::I64,
        "u1" | "B" => DType::U8,
        "u2" => DType::U16,
        "u4" => DType::U32,
        "u8" => DType::U64,
        "f2" | "e" => DType::F16,
        "f4" => DType::F32,
        "f8" => DType::F64,
        // Raw elements (how numpy saves ml_dtypes' bfloat16 and float8 arrays): their bits,
        // as unsigned integers of their width, which a parameter of such a type takes.
        "V1" => DType::U8,
        "V2" => DType::U16,
        _ => return Err(unsupported()),
    };
    Ok((dtype, order))
}

/// A recursive-descent parser for the Python literals numpy writes in headers.
struct LiteralParser<'a> {
    text: &'a str,
    pos: usize,
}

/// Deeper tuple nesting than this is rejected, so malformed headers cannot exhaust the stack.
const MAX_LITERAL_DEPTH: usize = 32;

impl LiteralParser<'_> {
    fn peek(&self) -> Option<char> {
        self.text[self.pos..].chars().next()
    }

    fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(c) {
            self.pos += c.len_utf8();
            true
        } else {
            false
        }
    }

    fn skip_space(&mut self) {
        while let Some(c) = self.peek().filter(|c| c.is_whitespace()) {
            self.pos += c.len_utf8();
        }
    }

    fn error(&self, message: &str) -> NpyError {
        NpyError::BadHeader(format!(
            "{message} at offset {} of {:?}",
            self.pos,
            truncate_text(self.text)
        ))
    }

    /// Parses one literal: a quoted string, `True`/`False`, an integer (with an optional `L`
    /// suffix, as Python 2 wrote them), a tuple or a list (recognised only to be rejected).
    fn literal(&mut self, depth: usize) -> Result<Literal, NpyError> {
        self.skip_space();
        if depth > MAX_LITERAL_DEPTH {
            return Err(self.error("nested too deeply"));
        }
        match self.peek() {
            Some(q @ ('\'' | '"')) => {
                self.pos += 1;
                let rest = &self.text[self.pos..];
                let Some(end) = rest.find(q) else {
                    return Err(self.error("unterminated string"));
                };
                self.pos += end + 1;
                Ok(Literal::Str(rest[..end].to_string()))
            }
            Some('(' | '[') => {
                let list = self.eat('[');
                if !list {
                    self.pos += 1;
                }
                let close = if list { ']' } else { ')' };
                let mut items = Vec::new();
                loop {
                    self.skip_space();
                    if self.eat(close) {
                        break;
                    }
                    items.push(self.literal(depth + 1)?);
                    self.skip_space();
                    if self.eat(close) {
                        break;
                    }
                    if !self.eat(',') {
                        return Err(self.error(&format!("expected `,` or `{close}`")));
                    }
                }
                Ok(if list {
                    Literal::List
                } else {
                    Literal::Tuple(items)
                })
            }
            Some(c) if c.is_ascii_digit() || c == '-' || c == '+' => {
                let start = self.pos;
                self.pos += 1;
                while self.peek().is_some_and(|c| c.is_ascii_digit()) {
                    self.pos += 1;
                }
                let digits = &self.text[start..self.pos];
                self.eat('L');
                digits.parse::<i64>().map(Literal::Int).map_err(|_| {
                    NpyError::BadHeader(format!("invalid or too large integer `{digits}`"))
                })
            }
            Some(c) if c.is_alphabetic() => {
                let start = self.pos;
                while self.peek().is_some_and(|c| c.is_alphanumeric() || c == '_') {
                    self.pos += self.peek().map_or(1, char::len_utf8);
                }
                match &self.text[start..self.pos] {
                    "True" => Ok(Literal::Bool(true)),
                    "False" => Ok(Literal::Bool(false)),
                    word => Ok(Literal::Other(word.to_string())),
                }
            }
            Some(_) => Err(self.error("expected a Python literal")),
            None => Err(self.error("the header ends early")),
        }
    }
}

/// The numpy descriptor of a dtype, little-endian. Types numpy has no name for (`bfloat16`,
/// vector types, odd bit widths, `handle`) are written as raw bytes (`|V<size>`).
fn descr_of(dtype: DType) -> String {
    let name = match (dtype.code, dtype.bits, dtype.lanes) {
        (DTypeCode::Bool, 8, 1) => "|b1",
        (DTypeCode::Int, 8, 1) => "|i1",
        (DTypeCode::Int, 16, 1) => "<i2",
        (DTypeCode::Int, 32, 1) => "<i4",
        (DTypeCode::Int, 64, 1) => "<i8",
        (DTypeCode::UInt, 8, 1) => "|u1",
        (DTypeCode::UInt, 16, 1) => "<u2",
        (DTypeCode::UInt, 32, 1) => "<u4",
        (DTypeCode::UInt, 64, 1) => "<u8",
        (DTypeCode::Float, 16, 1) => "<f2",
        (DTypeCode::Float, 32, 1) => "<f4",
        (DTypeCode::Float, 64, 1) => "<f8",
        _ => return format!("|V{}", dtype.size_bytes()),
    };
    name.to_string()
}

/// Writes `array` as a `.npy` file: format version 1.0 (2.0 if the header is too long for 1.0),
/// little-endian, C order.
pub fn write_npy(array: &NDArray) -> Vec<u8> {
    let descr = descr_of(array.dtype());
    let mut header = format!(
        "{{'descr': '{descr}', 'fortran_order': False, 'shape': {}, }}",
        ShapeTuple(array.shape())
    );
    // The dict, padded with spaces and ended by a newline, fills the header to a multiple of 64.
    let version_1 =
        (10 + header.len() + 1).next_multiple_of(HEADER_ALIGN) - 10 <= usize::from(u16::MAX);
    let prefix = if version_1 { 10 } else { 12 };
    let total = (prefix + header.len() + 1).next_multiple_of(HEADER_ALIGN);
    header.extend(std::iter::repeat_n(' ', total - prefix - header.len() - 1));
    header.push('\n');

    let data = array.as_bytes();
    let mut out = Vec::with_capacity(total + data.len());
    out.extend_from_slice(MAGIC);
    if version_1 {
        out.extend_from_slice(&[1, 0]);
        out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    } else {
        out.extend_from_slice(&[2, 0]);
        out.extend_from_slice(&(header.len() as u32).to_le_bytes());
    }
    out.extend_from_slice(header.as_bytes());
    let size = array.dtype().size_bytes();
    if cfg!(target_endian = "little") || size == 1 || descr.starts_with("|V") {
        out.extend_from_slice(data);
    } else {
        for element in data.chunks_exact(size) {
            out.extend(element.iter().rev());
        }
    }
    out
}

/// Reads a `.npy` file; errors name the file.
pub fn read_npy_file(path: &Path) -> Result<NDArray, NpyError> {
    let bytes = read_file(path)?;
    read_npy(&bytes).map_err(|e| e.in_file(path))
}

/// Writes a `.npy` file; errors name the file.
pub fn write_npy_file(path: &Path, array: &NDArray) -> Result<(), NpyError> {
    write_file(path, &write_npy(array))
}

/// Reads a `.npz` file; errors name the file.
pub fn read_npz_file(path: &Path) -> Result<Vec<(String, NDArray)>, NpyError> {
    let bytes = read_file(path)?;
    read_npz(&bytes).map_err(|e| e.in_file(path))
}

/// Writes a `.npz` file of stored entries ([`write_npz`]); errors name the file.
pub fn write_npz_file(path: &Path, entries: &[(String, &NDArray)]) -> Result<(), NpyError> {
    write_file(path, &write_npz(entries))
}

/// Writes a `.npz` file of deflated entries ([`write_npz_compressed`]); errors name the file.
pub fn write_npz_compressed_file(
    path: &Path,
    entries: &[(String, &NDArray)],
) -> Result<(), NpyError> {
    write_file(path, &write_npz_compressed(entries))
}

fn read_file(path: &Path) -> Result<Vec<u8>, NpyError> {
    std::fs::read(path).map_err(|source| NpyError::Io {
        action: "read",
        path: path.to_path_buf(),
        source,
    })
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<(), NpyError> {
    std::fs::write(path, bytes).map_err(|source| NpyError::Io {
        action: "write",
        path: path.to_path_buf(),
        source,
    })
}

// ------------------------------------------------------------------------------------------------
// .npz (zip)

/// The CRC-32 of `data` (IEEE 802.3, the reflected polynomial `0xEDB88320`), as zip records
/// it. Computed by `crc32fast`, which uses the CPU's carry-less multiply instructions where it
/// has them.
fn crc32(data: &[u8]) -> u32 {
    crc32fast::hash(data)
}

const LOCAL_HEADER_SIG: u32 = 0x0403_4b50;
const CENTRAL_HEADER_SIG: u32 = 0x0201_4b50;
const EOCD_SIG: u32 = 0x0605_4b50;
const ZIP64_EOCD_SIG: u32 = 0x0606_4b50;
const ZIP64_LOCATOR_SIG: u32 = 0x0706_4b50;
/// The zip64 "extended information" extra field.
const ZIP64_EXTRA_ID: u16 = 0x0001;
const EOCD_LEN: usize = 22;
const ZIP64_LOCATOR_LEN: usize = 20;
const ZIP64_EOCD_LEN: usize = 56;
const CENTRAL_HEADER_LEN: usize = 46;
const LOCAL_HEADER_LEN: usize = 30;
/// A modification date of 1980-01-01 in MS-DOS format (the earliest zip can hold).
const DOS_DATE_1980: u16 = (1 << 5) | 1;

/// Little-endian reads from a byte slice, each checked against its end.
struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    what: &'static str,
}

impl<'a> Reader<'a> {
    fn at(bytes: &'a [u8], pos: usize, what: &'static str) -> Reader<'a> {
        Reader { bytes, pos, what }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], NpyError> {
        let end = self.pos.checked_add(n);
        match end.and_then(|end| self.bytes.get(self.pos..end)) {
            Some(s) => {
                self.pos += n;
                Ok(s)
            }
            None => Err(NpyError::BadZip(format!(
                "{} at offset {} runs past the end of the archive ({} bytes)",
                self.what,
                self.pos,
                self.bytes.len()
            ))),
        }
    }

    fn u16(&mut self) -> Result<u16, NpyError> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    fn u32(&mut self) -> Result<u32, NpyError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self) -> Result<u64, NpyError> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }
}

/// Where the central directory is and how many entries it has.
struct Directory {
    entries: u64,
    offset: u64,
    size: u64,
}

/// Finds the end-of-central-directory record (and the zip64 one, if the archive has it).
fn find_directory(bytes: &[u8]) -> Result<Directory, NpyError> {
    // The record is 22 bytes plus a comment of up to 65535 bytes at the very end of the archive.
    let lowest = bytes.len().saturating_sub(EOCD_LEN + usize::from(u16::MAX));
    let eocd = (lowest..=bytes.len().saturating_sub(EOCD_LEN))
        .rev()
        .find(|&at| bytes.len() >= EOCD_LEN && bytes[at..at + 4] == EOCD_SIG.to_le_bytes())
        .ok_or_else(|| {
            NpyError::BadZip("no end-of-central-directory record: not a zip archive".into())
        })?;
    let mut r = Reader::at(bytes, eocd + 4, "the end-of-central-directory record");
    let disk = r.u16()?;
    let cd_disk = r.u16()?;
    let _entries_on_disk = r.u16()?;
    let entries = r.u16()?;
    let size = r.u32()?;
    let offset = r.u32()?;
    if disk != 0 || cd_disk != 0 {
        return Err(NpyError::BadZip(
            "multi-disk (split) archives are not supported".into(),
        ));
    }
    let needs_zip64 = entries == u16::MAX || size == u32::MAX || offset == u32::MAX;
    let locator_at = eocd.checked_sub(ZIP64_LOCATOR_LEN);
    let locator = locator_at.filter(|&at| bytes[at..at + 4] == ZIP64_LOCATOR_SIG.to_le_bytes());
    let Some(locator) = locator else {
        if needs_zip64 {
            return Err(NpyError::BadZip(
                "the end-of-central-directory record needs zip64 values, but the zip64 \
                 locator is missing"
                    .into(),
            ));
        }
        return Ok(Directory {
            entries: u64::from(entries),
            offset: u64::from(offset),
            size: u64::from(size),
        });
    };
    let mut r = Reader::at(
        bytes,
        locator + 8,
        "the zip64 end-of-central-directory locator",
    );
    let record = usize::try_from(r.u64()?).unwrap_or(usize::MAX);
    let mut r = Reader::at(bytes, record, "the zip64 end-of-central-directory record");
    if r.u32()? != ZIP64_EOCD_SIG {
        return Err(NpyError::BadZip(format!(
            "no zip64 end-of-central-directory record at offset {record}"
        )));
    }
    r.take(ZIP64_EOCD_LEN - 4 - 32)?;
    let _entries_on_disk = r.u64()?;
    let entries = r.u64()?;
    let size = r.u64()?;
    let offset = r.u64()?;
    Ok(Directory {
        entries,
        offset,
        size,
    })
}

/// Reads every `.npy` entry of a `.npz` archive held in memory, in archive order, with the
/// `.npy` suffix removed from their names. Stored and deflated entries are supported.
pub fn read_npz(bytes: &[u8]) -> Result<Vec<(String, NDArray)>, NpyError> {
    let dir = find_directory(bytes)?;
    let start = usize::try_from(dir.offset).unwrap_or(usize::MAX);
    let cd_len = usize::try_from(dir.size).unwrap_or(usize::MAX);
    if start
        .checked_add(cd_len)
        .is_none_or(|end| end > bytes.len())
    {
        return Err(NpyError::BadZip(format!(
            "the central directory ({} bytes at offset {}) runs past the end of the archive \
             ({} bytes)",
            dir.size,
            dir.offset,
            bytes.len()
        )));
    }
    // Every entry takes at least 46 bytes, so a count larger than that is a lie; check it before
    // reserving anything.
    if dir.entries > (cd_len / CENTRAL_HEADER_LEN) as u64 {
        return Err(NpyError::BadZip(format!(
            "the archive claims {} entries but its central directory has room for at most {}",
            dir.entries,
            cd_len / CENTRAL_HEADER_LEN
        )));
    }
    let mut out = Vec::with_capacity(dir.entries as usize);
    let mut r = Reader::at(bytes, start, "a central directory entry");
    // The entries' data, added up, must fit in the archive: entries sharing their data (a zip
    // bomb) could otherwise inflate the same bytes again and again.
    let mut data_total = 0u64;
    for _ in 0..dir.entries {
        let entry = central_entry(&mut r)?;
        data_total = data_total.saturating_add(entry.compressed);
        if data_total > bytes.len() as u64 {
            return Err(NpyError::BadZip(format!(
                "the entries' data adds up to more than the archive's {} bytes: entries overlap \
                 or run past the end",
                bytes.len()
            )));
        }
        let array = read_entry(bytes, &entry).map_err(|e| e.in_entry(&entry.name))?;
        let name = match entry.name.strip_suffix(".npy") {
            Some(name) => name.to_string(),
            None => {
                return Err(NpyError::BadZip(format!(
                    "entry `{}` is not a .npy file (its name does not end in `.npy`)",
                    entry.name
                )));
            }
        };
        out.push((name, array));
    }
    Ok(out)
}

/// What the central directory says about one entry.
struct CentralEntry {
    name: String,
    flags: u16,
    method: u16,
    crc: u32,
    compressed: u64,
    uncompressed: u64,
    local_offset: u64,
}

/// Reads one central directory entry, applying its zip64 extra field if it has one.
fn central_entry(r: &mut Reader<'_>) -> Result<CentralEntry, NpyError> {
    let at = r.pos;
    if r.u32()? != CENTRAL_HEADER_SIG {
        return Err(NpyError::BadZip(format!(
            "no central directory entry signature at offset {at}"
        )));
    }
    let _made_by = r.u16()?;
    let _needed = r.u16()?;
    let flags = r.u16()?;
    let method = r.u16()?;
    let _time = r.u16()?;
    let _date = r.u16()?;
    let crc = r.u32()?;
    let compressed = r.u32()?;
    let uncompressed = r.u32()?;
    let name_len = r.u16()?;
    let extra_len = r.u16()?;
    let comment_len = r.u16()?;
    let _disk = r.u16()?;
    let _internal = r.u16()?;
    let _external = r.u32()?;
    let local_offset = r.u32()?;
    let name = String::from_utf8_lossy(r.take(usize::from(name_len))?).into_owned();
    let extra = r.take(usize::from(extra_len))?;
    r.take(usize::from(comment_len))?;

    let mut entry = CentralEntry {
        name,
        flags,
        method,
        crc,
        compressed: u64::from(compressed),
        uncompressed: u64::from(uncompressed),
        local_offset: u64::from(local_offset),
    };
    // The zip64 field holds, in this order, exactly those of the three values that are
    // 0xFFFFFFFF in the fixed part.
    let mut e = Reader::at(extra, 0, "an extra field");
    while e.pos + 4 <= extra.len() {
        let id = e.u16()?;
        let len = e.u16()?;
        let body = e.take(usize::from(len))?;
        if id != ZIP64_EXTRA_ID {
            continue;
        }
        let mut z = Reader::at(body, 0, "the zip64 extra field");
        if uncompressed == u32::MAX {
            entry.uncompressed = z.u64()?;
        }
        if compressed == u32::MAX {
            entry.compressed = z.u64()?;
        }
        if local_offset == u32::MAX {
            entry.local_offset = z.u64()?;
        }
    }
    Ok(entry)
}

/// Extracts and parses one entry.
fn read_entry(bytes: &[u8], entry: &CentralEntry) -> Result<NDArray, NpyError> {
    if entry.flags & 1 != 0 {
        return Err(NpyError::BadZip(
            "encrypted entries are not supported".into(),
        ));
    }
    let local = usize::try_from(entry.local_offset).unwrap_or(usize::MAX);
    let mut r = Reader::at(bytes, local, "a local file header");
    if r.u32()? != LOCAL_HEADER_SIG {
        return Err(NpyError::BadZip(format!(
            "no local file header signature at offset {local}"
        )));
    }
    r.take(LOCAL_HEADER_LEN - 4 - 4)?;
    let name_len = r.u16()?;
    let extra_len = r.u16()?;
    r.take(usize::from(name_len) + usize::from(extra_len))?;
    let compressed = usize::try_from(entry.compressed).unwrap_or(usize::MAX);
    let data = r.take(compressed)?;
    let npy = match entry.method {
        0 => {
            if entry.compressed != entry.uncompressed {
                return Err(NpyError::BadZip(format!(
                    "stored entry has compressed size {} but uncompressed size {}",
                    entry.compressed, entry.uncompressed
                )));
            }
            std::borrow::Cow::Borrowed(data)
        }
        8 => {
            // The limit stops a corrupt stream from inflating past the declared size.
            let limit = usize::try_from(entry.uncompressed).unwrap_or(usize::MAX);
            let inflated = miniz_oxide::inflate::decompress_to_vec_with_limit(data, limit)
                .map_err(|e| NpyError::BadZip(format!("corrupt deflate data: {e}")))?;
            if inflated.len() as u64 != entry.uncompressed {
                return Err(NpyError::BadZip(format!(
                    "deflated entry inflates to {} bytes, the directory says {}",
                    inflated.len(),
                    entry.uncompressed
                )));
            }
            std::borrow::Cow::Owned(inflated)
        }
        method => {
            return Err(NpyError::BadZip(format!(
                "unsupported compression method {method}; only stored (0) and deflated (8) \
                 entries are supported"
            )));
        }
    };
    let crc = crc32(&npy);
    if crc != entry.crc {
        return Err(NpyError::BadZip(format!(
            "CRC-32 mismatch: the data has {crc:08x}, the directory says {:08x}",
            entry.crc
        )));
    }
    read_npy(&npy)
}

/// Writes a `.npz` archive of stored (uncompressed) entries, as `np.savez` does: entry `name`
/// holds `name.npy`.
pub fn write_npz(entries: &[(String, &NDArray)]) -> Vec<u8> {
    write_zip(entries, Method::Stored, u64::from(u32::MAX))
}

/// Writes a `.npz` archive of deflated entries, as `np.savez_compressed` does: entry `name`
/// holds `name.npy`, compressed at zlib's default level (6).
pub fn write_npz_compressed(entries: &[(String, &NDArray)]) -> Vec<u8> {
    write_zip(entries, Method::Deflated, u64::from(u32::MAX))
}

/// How a zip entry's data is stored: the compression methods [`read_npz`] reads and the
/// writers write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Method {
    /// Method 0: the bytes as they are.
    Stored,
    /// Method 8: a raw deflate stream (RFC 1951).
    Deflated,
}

impl Method {
    /// The compression method field of the zip headers.
    fn code(self) -> u16 {
        match self {
            Method::Stored => 0,
            Method::Deflated => 8,
        }
    }
}

/// zlib's default compression level, the one Python's `zipfile` (and so numpy) deflates at.
const DEFLATE_LEVEL: u8 = 6;

/// Writes the archive with every entry stored by `method`, switching a value to its zip64 form
/// when it is `zip64_at` or more (the zip limit `0xFFFFFFFF`; tests pass a small value to
/// exercise the zip64 records). As Python's `zipfile` does, an entry whose compressed or
/// uncompressed size is large records both in its zip64 fields.
fn write_zip(entries: &[(String, &NDArray)], method: Method, zip64_at: u64) -> Vec<u8> {
    let mut out = Vec::new();
    let mut central = Vec::new();
    for (name, array) in entries {
        let npy = write_npy(array);
        let crc = crc32(&npy);
        let uncompressed = npy.len() as u64;
        let data = match method {
            Method::Stored => npy,
            Method::Deflated => miniz_oxide::deflate::compress_to_vec(&npy, DEFLATE_LEVEL),
        };
        let compressed = data.len() as u64;
        let name = format!("{name}.npy");
        let name = &name.as_bytes()[..name.len().min(usize::from(u16::MAX))];
        let offset = out.len() as u64;
        let big_size = uncompressed >= zip64_at || compressed >= zip64_at;
        let big_offset = offset >= zip64_at;
        // The zip version needed to extract the entry: 4.5 for zip64 records, else 2.0 (which
        // covers deflate).
        let needed: u16 = if big_size || big_offset { 45 } else { 20 };
        let size32 = |size: u64| if big_size { u32::MAX } else { size as u32 };
        let offset32 = if big_offset { u32::MAX } else { offset as u32 };

        let mut local_extra = Vec::new();
        if big_size {
            push16(&mut local_extra, ZIP64_EXTRA_ID);
            push16(&mut local_extra, 16);
            push64(&mut local_extra, uncompressed);
            push64(&mut local_extra, compressed);
        }
        push32(&mut out, LOCAL_HEADER_SIG);
        push16(&mut out, needed);
        push16(&mut out, 0); // Flags.
        push16(&mut out, method.code());
        push16(&mut out, 0); // Time: midnight.
        push16(&mut out, DOS_DATE_1980);
        push32(&mut out, crc);
        push32(&mut out, size32(compressed));
        push32(&mut out, size32(uncompressed));
        push16(&mut out, name.len() as u16);
        push16(&mut out, local_extra.len() as u16);
        out.extend_from_slice(name);
        out.extend_from_slice(&local_extra);
        out.extend_from_slice(&data);

        let mut central_extra = Vec::new();
        if big_size || big_offset {
            push16(&mut central_extra, ZIP64_EXTRA_ID);
            push16(
                &mut central_extra,
                if big_size { 16 } else { 0 } + if big_offset { 8 } else { 0 },
            );
            if big_size {
                push64(&mut central_extra, uncompressed);
                push64(&mut central_extra, compressed);
            }
            if big_offset {
                push64(&mut central_extra, offset);
            }
        }
        push32(&mut central, CENTRAL_HEADER_SIG);
        push16(&mut central, (3 << 8) | needed); // Made by Unix, same zip version.
        push16(&mut central, needed);
        push16(&mut central, 0); // Flags.
        push16(&mut central, method.code());
        push16(&mut central, 0); // Time.
        push16(&mut central, DOS_DATE_1980);
        push32(&mut central, crc);
        push32(&mut central, size32(compressed));
        push32(&mut central, size32(uncompressed));
        push16(&mut central, name.len() as u16);
        push16(&mut central, central_extra.len() as u16);
        push16(&mut central, 0); // Comment length.
        push16(&mut central, 0); // Disk.
        push16(&mut central, 0); // Internal attributes.
        push32(&mut central, 0o100644 << 16); // External attributes: a regular file, rw-r--r--.
        push32(&mut central, offset32);
        central.extend_from_slice(name);
        central.extend_from_slice(&central_extra);
    }

    let cd_offset = out.len() as u64;
    let cd_size = central.len() as u64;
    let count = entries.len() as u64;
    out.extend_from_slice(&central);
    let zip64 = count >= u64::from(u16::MAX).min(zip64_at) || cd_offset >= zip64_at;
    let zip64 = zip64 || cd_size >= zip64_at;
    if zip64 {
        let record = out.len() as u64;
        push32(&mut out, ZIP64_EOCD_SIG);
        push64(&mut out, (ZIP64_EOCD_LEN - 12) as u64);
        push16(&mut out, (3 << 8) | 45);
        push16(&mut out, 45);
        push32(&mut out, 0); // This disk.
        push32(&mut out, 0); // The disk with the central directory.
        push64(&mut out, count);
        push64(&mut out, count);
        push64(&mut out, cd_size);
        push64(&mut out, cd_offset);
        push32(&mut out, ZIP64_LOCATOR_SIG);
        push32(&mut out, 0); // The disk with the zip64 record.
        push64(&mut out, record);
        push32(&mut out, 1); // Total disks.
    }
    let clamp16 = |v: u64| if zip64 { u16::MAX } else { v as u16 };
    let clamp32 = |v: u64| if zip64 { u32::MAX } else { v as u32 };
    push32(&mut out, EOCD_SIG);
    push16(&mut out, 0);
    push16(&mut out, 0);
    push16(&mut out, clamp16(count));
    push16(&mut out, clamp16(count));
    push32(&mut out, clamp32(cd_size));
    push32(&mut out, clamp32(cd_offset));
    push16(&mut out, 0); // Comment length.
    out
}

fn push16(out: &mut Vec<u8>, v: u16) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn push32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn push64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32_of_known_strings() {
        assert_eq!(crc32(b""), 0);
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(
            crc32(b"The quick brown fox jumps over the lazy dog"),
            0x414F_A339
        );
    }

    #[test]
    fn header_is_aligned_and_numpy_shaped() {
        let a = NDArray::zeros(DType::F32, &[2, 3]).unwrap();
        let bytes = write_npy(&a);
        let len = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
        assert_eq!((10 + len) % 64, 0);
        let header = std::str::from_utf8(&bytes[10..10 + len]).unwrap();
        assert!(
            header.starts_with("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"),
            "{header}"
        );
        assert!(header.ends_with('\n'));
        assert_eq!(bytes.len(), 10 + len + 24);
    }

    #[test]
    fn zip64_records_round_trip() {
        let a = NDArray::from_f64_slice(DType::F32, &[3], &[1.0, 2.0, 3.0]).unwrap();
        let b = NDArray::from_bool_slice(&[2], &[true, false]).unwrap();
        let entries = [("a".to_string(), &a), ("b".to_string(), &b)];
        // Every size and offset is "large" at a limit of 1; at 100 and 200 only some are (the
        // second entry's offset, the directory, the stored sizes).
        for method in [Method::Stored, Method::Deflated] {
            for limit in [1, 100, 200] {
                let zip = write_zip(&entries, method, limit);
                let back = read_npz(&zip).unwrap();
                assert_eq!(back.len(), 2);
                assert_eq!(back[0].0, "a");
                assert_eq!(back[0].1, a);
                assert_eq!(back[1].0, "b");
                assert_eq!(back[1].1, b);
            }
        }
    }

    #[test]
    fn header_literals() {
        let h = parse_header("{'descr': '>i2', 'fortran_order': True, 'shape': (4L, 5), }  \n")
            .unwrap();
        assert_eq!(h.dtype, DType::I16);
        assert_eq!(h.order, ByteOrder::Big);
        assert!(h.fortran_order);
        assert_eq!(h.shape, vec![4, 5]);
        let h =
            parse_header("{\"shape\": (), \"fortran_order\": False, \"descr\": \"|b1\"}").unwrap();
        assert_eq!(h.shape, Vec::<i64>::new());
        assert_eq!(h.dtype, DType::BOOL);
        for bad in [
            "",
            "[1, 2]",
            "{'descr': '<f4', 'fortran_order': False}",
            "{'descr': '<f4', 'fortran_order': 0, 'shape': ()}",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}",
            "{'descr': '<f4', 'fortran_order': False, 'shape': [2]}",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} junk",
            "{'descr': '<f4 , 'fortran_order': False, 'shape': (2,)}",
            &format!("{{'shape': {}", "(".repeat(10_000)),
        ] {
            assert!(
                matches!(parse_header(bad), Err(NpyError::BadHeader(_))),
                "{bad:?}"
            );
        }
    }
}
