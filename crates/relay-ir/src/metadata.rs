//! The `#[metadata]` section: TVM's JSON object graph holding `relay.Constant` tensors as
//! base64 NDArray blobs.
//!
//! The section TVM's printer writes (and [`encode_constants`] reproduces) is a node list whose
//! `root` is a `Map` from type keys to `Array` nodes; each array lists the nodes that
//! `meta[TYPE_KEY][i]` refers to. A `relay.Constant` node's `data` attribute is an index into
//! `b64ndarrays`, whose entries are base64-encoded tensors in TVM's NDArray save format
//! ([`encode_ndarray`]). [`decode`] reads such a section back into a [`MetaTable`]; only
//! constants are understood, every other kind becomes [`MetaEntry::Unsupported`].
//!
//! Decoding never panics and never allocates more than a small multiple of its input, whatever
//! the input claims: every length is checked against the bytes actually present first.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use relay_runtime::{DType, DTypeCode, NDArray};
use serde_json::Value;

/// The magic number that starts a serialized NDArray (`kTVMNDArrayMagic`).
pub const NDARRAY_MAGIC: u64 = 0xDD5E_40F0_96B4_A13F;

/// The TVM version written into the metadata section's `attrs`.
pub const TVM_VERSION: &str = "0.20.dev0";

/// The type key of constant tensors.
pub const CONSTANT_KEY: &str = "relay.Constant";

/// The JSON TVM's printer writes after `#[metadata]` for constants referenced as
/// `meta[relay.Constant][0]`, `meta[relay.Constant][1]`, ... (in slice order).
pub fn encode_constants(constants: &[&NDArray]) -> String {
    // Nodes: 0 is the null node, 1 the root map, 2 the array, 3.. the constants.
    let mut out = String::from("{\n  \"root\": 1,\n  \"nodes\": [\n    {\"type_key\": \"\"},\n");
    out.push_str("    {\"type_key\": \"Map\", \"keys\": [\"relay.Constant\"], \"data\": [2]},\n");
    out.push_str("    {\"type_key\": \"Array\", \"data\": [");
    for i in 0..constants.len() {
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str(&(i + 3).to_string());
    }
    out.push_str("]}");
    for i in 0..constants.len() {
        out.push_str(",\n    {\"type_key\": \"relay.Constant\", \"attrs\": {\"data\": \"");
        out.push_str(&i.to_string());
        out.push_str(
            "\", \"span\": \"0\", \"virtual_device_\": \"0\", \"_checked_type_\": \"0\"}}",
        );
    }
    out.push_str("\n  ],\n  \"b64ndarrays\": [");
    for (i, c) in constants.iter().enumerate() {
        out.push_str(if i > 0 { ",\n    \"" } else { "\n    \"" });
        out.push_str(&base64_encode(&encode_ndarray(c)));
        out.push('"');
    }
    if !constants.is_empty() {
        out.push_str("\n  ");
    }
    out.push_str("],\n  \"attrs\": {\"tvm_version\": \"");
    out.push_str(TVM_VERSION);
    out.push_str("\"}\n}");
    out
}

/// The objects of a metadata section, by type key, in `meta[KEY][i]` order.
#[derive(Clone, Debug, Default)]
pub struct MetaTable {
    entries: HashMap<String, Vec<MetaEntry>>,
}

/// One object of the metadata section.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MetaEntry {
    /// A `relay.Constant` tensor. A node referenced twice yields the same `Arc`.
    Constant(Arc<NDArray>),
    /// Any other kind of object (`tir.SizeVar`, `VirtualDevice`, attribute objects, ...).
    Unsupported {
        /// Its TVM type key (empty for the null node).
        type_key: String,
    },
}

impl MetaTable {
    /// `meta[type_key][index]`, if present.
    pub fn get(&self, type_key: &str, index: usize) -> Option<&MetaEntry> {
        self.entries.get(type_key)?.get(index)
    }

    /// How many objects are listed under `type_key`.
    pub fn len(&self, type_key: &str) -> usize {
        self.entries.get(type_key).map_or(0, Vec::len)
    }

    /// Whether the table lists no objects at all.
    pub fn is_empty(&self) -> bool {
        self.entries.values().all(Vec::is_empty)
    }

    /// The type keys present.
    pub fn type_keys(&self) -> impl Iterator<Item = &str> {
        self.entries.keys().map(String::as_str)
    }
}

/// What is wrong with a metadata section.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MetadataError {
    /// The text is not JSON.
    Json {
        /// serde_json's description of the problem.
        message: String,
        /// 1-based line within the section.
        line: usize,
        /// 1-based column.
        column: usize,
    },
    /// A field is missing or has the wrong JSON type.
    Field {
        /// Where: `"the section"` or `"node 3"`.
        at: String,
        /// The field name.
        field: &'static str,
        /// What it should be, e.g. `"an array of node indices"`.
        expected: &'static str,
    },
    /// A node index that does not name a node.
    NodeIndex {
        /// Where the index was found.
        at: String,
        /// The index.
        index: u64,
        /// How many nodes there are.
        nodes: usize,
    },
    /// The root node is not a `Map`.
    RootNotMap {
        /// The root's type key.
        type_key: String,
    },
    /// A map value is not an `Array` node.
    NotArray {
        /// The map key.
        key: String,
        /// The value's type key.
        type_key: String,
    },
    /// The root map's keys and values do not pair up.
    MapArity {
        /// Number of keys.
        keys: usize,
        /// Number of values.
        values: usize,
    },
    /// A constant's `data` attribute does not name a `b64ndarrays` entry.
    NdarrayIndex {
        /// The constant's node.
        node: usize,
        /// The attribute text.
        index: String,
        /// How many blobs there are.
        count: usize,
    },
    /// A `b64ndarrays` entry is not valid base64.
    Base64 {
        /// The entry.
        blob: usize,
        /// The problem.
        error: Base64Error,
    },
    /// A `b64ndarrays` entry is not a valid NDArray blob.
    Blob {
        /// The entry.
        blob: usize,
        /// The problem.
        error: BlobError,
    },
}

impl fmt::Display for MetadataError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MetadataError::Json { message, .. } => write!(f, "invalid metadata JSON: {message}"),
            MetadataError::Field {
                at,
                field,
                expected,
            } => {
                write!(
                    f,
                    "metadata: {at} needs a field \"{field}\" holding {expected}"
                )
            }
            MetadataError::NodeIndex { at, index, nodes } => write!(
                f,
                "metadata: {at} refers to node {index}, but there are only {nodes} nodes"
            ),
            MetadataError::RootNotMap { type_key } => {
                write!(
                    f,
                    "metadata: the root node must be a Map, found \"{type_key}\""
                )
            }
            MetadataError::NotArray { key, type_key } => write!(
                f,
                "metadata: the entry for \"{key}\" must be an Array node, found \"{type_key}\""
            ),
            MetadataError::MapArity { keys, values } => write!(
                f,
                "metadata: the root map has {keys} keys but {values} values"
            ),
            MetadataError::NdarrayIndex { node, index, count } => write!(
                f,
                "metadata: constant node {node} refers to tensor \"{index}\", but there are \
                 {count} tensors in \"b64ndarrays\""
            ),
            MetadataError::Base64 { blob, error } => {
                write!(f, "metadata: tensor {blob} is not valid base64: {error}")
            }
            MetadataError::Blob { blob, error } => {
                write!(f, "metadata: tensor {blob} is malformed: {error}")
            }
        }
    }
}

impl std::error::Error for MetadataError {}

/// What is wrong with a base64 text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Base64Error {
    /// A character outside the standard alphabet.
    InvalidByte {
        /// Its byte offset.
        offset: usize,
        /// The byte.
        byte: u8,
    },
    /// A length that no encoding produces (one character in the last group).
    InvalidLength {
        /// The text length.
        len: usize,
    },
    /// `=` padding other than one or two at the very end, or non-zero padding bits.
    InvalidPadding {
        /// Byte offset of the problem.
        offset: usize,
    },
}

impl fmt::Display for Base64Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Base64Error::InvalidByte { offset, byte } => {
                write!(
                    f,
                    "invalid character {:?} at offset {offset}",
                    char::from(*byte)
                )
            }
            Base64Error::InvalidLength { len } => write!(f, "impossible length {len}"),
            Base64Error::InvalidPadding { offset } => write!(f, "bad padding at offset {offset}"),
        }
    }
}

impl std::error::Error for Base64Error {}

/// What is wrong with a serialized NDArray.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BlobError {
    /// The blob ends before a part it declares.
    Truncated {
        /// The part being read, e.g. `"the shape"`.
        part: &'static str,
        /// Bytes the part needs from its start.
        needed: u64,
        /// Bytes left at its start.
        available: usize,
    },
    /// The first eight bytes are not [`NDARRAY_MAGIC`].
    BadMagic {
        /// What they were.
        found: u64,
    },
    /// A negative rank.
    BadNdim {
        /// The rank read.
        ndim: i32,
    },
    /// A data type this implementation does not know.
    BadDType {
        /// DLPack type code.
        code: u8,
        /// Bits per lane.
        bits: u8,
        /// Lanes.
        lanes: u16,
    },
    /// A negative dimension, or a shape too large to allocate.
    BadShape {
        /// The shape.
        shape: Vec<i64>,
    },
    /// The declared data size disagrees with the shape and data type.
    ByteSize {
        /// The size written in the blob.
        declared: i64,
        /// The size the shape and dtype require.
        expected: usize,
    },
    /// Bytes after the tensor data.
    TrailingBytes {
        /// How many.
        extra: usize,
    },
}

impl fmt::Display for BlobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BlobError::Truncated {
                part,
                needed,
                available,
            } => write!(
                f,
                "the blob ends while reading {part}: {needed} bytes needed, {available} left"
            ),
            BlobError::BadMagic { found } => write!(
                f,
                "bad magic number {found:#018x} (expected {NDARRAY_MAGIC:#018x})"
            ),
            BlobError::BadNdim { ndim } => write!(f, "negative rank {ndim}"),
            BlobError::BadDType { code, bits, lanes } => write!(
                f,
                "unsupported data type (code {code}, {bits} bits, {lanes} lanes)"
            ),
            BlobError::BadShape { shape } => write!(f, "invalid shape {shape:?}"),
            BlobError::ByteSize { declared, expected } => write!(
                f,
                "data size {declared} does not match the shape and data type ({expected} bytes)"
            ),
            BlobError::TrailingBytes { extra } => {
                write!(f, "{extra} unexpected bytes after the tensor data")
            }
        }
    }
}

impl std::error::Error for BlobError {}

// ----- NDArray blobs -----

/// Serializes a tensor in TVM's NDArray save format (little-endian): magic, reserved `0`,
/// `DLDevice` (CPU, 0), `ndim`, `DLDataType` (code, bits, lanes), the shape, the data byte
/// size, then the data. `bool` is written as TVM writes it: code 1 (UInt), 1 bit.
pub fn encode_ndarray(array: &NDArray) -> Vec<u8> {
    let data = array.as_bytes();
    let mut out = Vec::with_capacity(40 + 8 * array.ndim() + data.len());
    out.extend_from_slice(&NDARRAY_MAGIC.to_le_bytes());
    out.extend_from_slice(&0u64.to_le_bytes());
    out.extend_from_slice(&1i32.to_le_bytes()); // kDLCPU
    out.extend_from_slice(&0i32.to_le_bytes());
    out.extend_from_slice(&(array.ndim() as i32).to_le_bytes());
    let dtype = array.dtype();
    let (code, bits) = match dtype.code {
        DTypeCode::Bool => (DTypeCode::UInt as u8, 1),
        code => (code as u8, dtype.bits),
    };
    out.push(code);
    out.push(bits);
    out.extend_from_slice(&dtype.lanes.to_le_bytes());
    for &d in array.shape() {
        out.extend_from_slice(&d.to_le_bytes());
    }
    out.extend_from_slice(&(data.len() as i64).to_le_bytes());
    array.write_le_bytes(&mut out);
    out
}

/// A cursor over a blob that checks every read against the bytes present.
struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: u64, part: &'static str) -> Result<&'a [u8], BlobError> {
        let available = self.bytes.len() - self.pos;
        if n > available as u64 {
            return Err(BlobError::Truncated {
                part,
                needed: n,
                available,
            });
        }
        let start = self.pos;
        self.pos += n as usize;
        Ok(&self.bytes[start..self.pos])
    }

    fn array<const N: usize>(&mut self, part: &'static str) -> Result<[u8; N], BlobError> {
        let bytes = self.take(N as u64, part)?;
        let mut out = [0u8; N];
        out.copy_from_slice(bytes);
        Ok(out)
    }
}

/// Reads one tensor in TVM's NDArray save format from the start of `blob`, returning it and
/// the number of bytes it occupied. Reading `code 1, bits 1` gives `bool`; other type codes
/// follow DLPack's numbering ([`DTypeCode`]).
pub fn decode_ndarray(blob: &[u8]) -> Result<(NDArray, usize), BlobError> {
    let mut r = Reader {
        bytes: blob,
        pos: 0,
    };
    let magic = u64::from_le_bytes(r.array("the magic number")?);
    if magic != NDARRAY_MAGIC {
        return Err(BlobError::BadMagic { found: magic });
    }
    r.take(8, "the reserved field")?;
    r.take(8, "the device")?;
    let ndim = i32::from_le_bytes(r.array("the rank")?);
    let [code, bits, lanes_lo, lanes_hi] = r.array("the data type")?;
    let lanes = u16::from_le_bytes([lanes_lo, lanes_hi]);
    let ndim_len = u64::try_from(ndim).map_err(|_| BlobError::BadNdim { ndim })?;
    let shape_bytes = r.take(ndim_len * 8, "the shape")?;
    let shape: Vec<i64> = shape_bytes
        .chunks_exact(8)
        .map(|c| {
            let mut b = [0u8; 8];
            b.copy_from_slice(c);
            i64::from_le_bytes(b)
        })
        .collect();
    let dtype = decode_dtype(code, bits, lanes).ok_or(BlobError::BadDType { code, bits, lanes })?;
    let expected = NDArray::byte_len(dtype, &shape).map_err(|_| BlobError::BadShape {
        shape: shape.clone(),
    })?;
    let declared = i64::from_le_bytes(r.array("the data size")?);
    if u64::try_from(declared).ok() != Some(expected as u64) {
        return Err(BlobError::ByteSize { declared, expected });
    }
    let data = r.take(expected as u64, "the data")?;
    let array = NDArray::from_le_bytes(dtype, &shape, data);
    // The size was checked above, so this cannot fail; report it as a size error if it does.
    let array = array.map_err(|_| BlobError::ByteSize { declared, expected })?;
    Ok((array, r.pos))
}

/// The dtype a blob's `DLDataType` denotes, if it is one this implementation knows.
fn decode_dtype(code: u8, bits: u8, lanes: u16) -> Option<DType> {
    let dtype = match (code, bits) {
        // TVM's bool is UInt with 1 bit; DLPack's kDLBool is code 6 with 8 bits.
        (1, 1) | (6, 8) => {
            return (lanes >= 1).then_some(DType {
                code: DTypeCode::Bool,
                bits: 8,
                lanes,
            });
        }
        _ => DType {
            code: DTypeCode::from_u8(code)?,
            bits,
            lanes,
        },
    };
    // Accept exactly the dtypes that have a TVM spelling.
    (DType::parse(&dtype.to_string()) == Some(dtype)).then_some(dtype)
}

// ----- Base64 -----

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Base64 with the standard alphabet and `=` padding.
pub fn base64_encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Decodes standard base64. Padding is optional, but when present it must be correct.
pub fn base64_decode(text: &str) -> Result<Vec<u8>, Base64Error> {
    let bytes = text.as_bytes();
    let unpadded = bytes.len() - bytes.iter().rev().take_while(|&&b| b == b'=').count();
    let padding = bytes.len() - unpadded;
    if padding > 2 || (padding > 0 && !bytes.len().is_multiple_of(4)) {
        return Err(Base64Error::InvalidPadding { offset: unpadded });
    }
    let body = &bytes[..unpadded];
    if body.len() % 4 == 1 {
        return Err(Base64Error::InvalidLength { len: bytes.len() });
    }
    let mut out = Vec::with_capacity(body.len() / 4 * 3 + 2);
    for (group, chunk) in body.chunks(4).enumerate() {
        let mut n = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            let v = match c {
                b'A'..=b'Z' => c - b'A',
                b'a'..=b'z' => c - b'a' + 26,
                b'0'..=b'9' => c - b'0' + 52,
                b'+' => 62,
                b'/' => 63,
                _ => {
                    return Err(Base64Error::InvalidByte {
                        offset: group * 4 + i,
                        byte: c,
                    });
                }
            };
            n |= u32::from(v) << (18 - 6 * i);
        }
        let produced = chunk.len() - 1;
        let decoded = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        // Bits beyond the last produced byte must be zero (canonical encoding).
        if produced < 3 && n & (0x00ff_ffff >> (8 * produced)) != 0 {
            return Err(Base64Error::InvalidPadding {
                offset: group * 4 + chunk.len() - 1,
            });
        }
        out.extend_from_slice(&decoded[..produced]);
    }
    Ok(out)
}

// ----- Decoding the JSON -----

/// Parses a metadata section (the JSON after `#[metadata]`).
pub fn decode(json: &str) -> Result<MetaTable, MetadataError> {
    let value: Value = serde_json::from_str(json).map_err(|e| {
        // The position is kept separately (relative to the section); drop serde_json's
        // "at line L column C" suffix from the message so it is not read as a file position.
        let full = e.to_string();
        let suffix = format!(" at line {} column {}", e.line(), e.column());
        let message = full.strip_suffix(&suffix).unwrap_or(&full).to_owned();
        MetadataError::Json {
            message,
            line: e.line(),
            column: e.column(),
        }
    })?;
    let section = "the section".to_owned();
    let top = value.as_object().ok_or(MetadataError::Field {
        at: section.clone(),
        field: "root",
        expected: "a node index (the section must be a JSON object)",
    })?;
    let nodes = top
        .get("nodes")
        .and_then(Value::as_array)
        .ok_or(MetadataError::Field {
            at: section.clone(),
            field: "nodes",
            expected: "an array of nodes",
        })?;
    let blobs: &[Value] = match top.get("b64ndarrays") {
        None => &[],
        Some(v) => v
            .as_array()
            .map(Vec::as_slice)
            .ok_or(MetadataError::Field {
                at: section.clone(),
                field: "b64ndarrays",
                expected: "an array of base64 strings",
            })?,
    };
    let root = top
        .get("root")
        .and_then(Value::as_u64)
        .ok_or(MetadataError::Field {
            at: section.clone(),
            field: "root",
            expected: "a node index",
        })?;
    let mut decoder = Decoder {
        nodes,
        blobs,
        cache: HashMap::new(),
    };
    let root = decoder.node(root, &section)?;
    let root_key = decoder.type_key(root)?;
    if root_key != "Map" && root_key != "StrMap" {
        return Err(MetadataError::RootNotMap {
            type_key: root_key.to_owned(),
        });
    }
    let mut table = MetaTable::default();
    for (key, array) in decoder.map_entries(root)? {
        let array_key = decoder.type_key(array)?;
        if array_key != "Array" {
            return Err(MetadataError::NotArray {
                key,
                type_key: array_key.to_owned(),
            });
        }
        let mut entries = Vec::new();
        for index in decoder.indices(array, "data", true)? {
            let at = format!("node {array}");
            let node = decoder.node(index, &at)?;
            entries.push(decoder.entry(node)?);
        }
        table.entries.insert(key, entries);
    }
    Ok(table)
}

/// Walks the node list, decoding each constant once.
struct Decoder<'a> {
    nodes: &'a [Value],
    blobs: &'a [Value],
    cache: HashMap<usize, Arc<NDArray>>,
}

impl Decoder<'_> {
    /// Checks a node index.
    fn node(&self, index: u64, at: &str) -> Result<usize, MetadataError> {
        match usize::try_from(index) {
            Ok(i) if i < self.nodes.len() => Ok(i),
            _ => Err(MetadataError::NodeIndex {
                at: at.to_owned(),
                index,
                nodes: self.nodes.len(),
            }),
        }
    }

    fn field(&self, node: usize, field: &'static str) -> Option<&Value> {
        self.nodes[node].as_object()?.get(field)
    }

    fn type_key(&self, node: usize) -> Result<&str, MetadataError> {
        self.field(node, "type_key")
            .and_then(Value::as_str)
            .ok_or(MetadataError::Field {
                at: format!("node {node}"),
                field: "type_key",
                expected: "a string",
            })
    }

    /// The node indices in `field` of `node` (an absent field is empty when `optional`).
    fn indices(
        &self,
        node: usize,
        field: &'static str,
        optional: bool,
    ) -> Result<Vec<u64>, MetadataError> {
        let bad = || MetadataError::Field {
            at: format!("node {node}"),
            field,
            expected: "an array of node indices",
        };
        match self.field(node, field) {
            None if optional => Ok(Vec::new()),
            None => Err(bad()),
            Some(v) => v
                .as_array()
                .ok_or_else(bad)?
                .iter()
                .map(|x| x.as_u64().ok_or_else(bad))
                .collect(),
        }
    }

    /// The `(key, value node)` pairs of a map: `"keys"` strings with `"data"` values, or
    /// (older TVM) `"data"` alternating key nodes (`runtime.String`) and value nodes.
    fn map_entries(&self, map: usize) -> Result<Vec<(String, usize)>, MetadataError> {
        let at = format!("node {map}");
        let data = self.indices(map, "data", true)?;
        let mut out = Vec::new();
        match self.field(map, "keys") {
            Some(keys) => {
                let bad = || MetadataError::Field {
                    at: at.clone(),
                    field: "keys",
                    expected: "an array of strings",
                };
                let keys = keys.as_array().ok_or_else(bad)?;
                if keys.len() != data.len() {
                    return Err(MetadataError::MapArity {
                        keys: keys.len(),
                        values: data.len(),
                    });
                }
                for (k, &v) in keys.iter().zip(&data) {
                    out.push((k.as_str().ok_or_else(bad)?.to_owned(), self.node(v, &at)?));
                }
            }
            None => {
                if data.len() % 2 != 0 {
                    return Err(MetadataError::MapArity {
                        keys: data.len().div_ceil(2),
                        values: data.len() / 2,
                    });
                }
                for pair in data.chunks_exact(2) {
                    let key_node = self.node(pair[0], &at)?;
                    let key = self
                        .field(key_node, "repr_str")
                        .and_then(Value::as_str)
                        .ok_or(MetadataError::Field {
                            at: format!("node {key_node}"),
                            field: "repr_str",
                            expected: "the map key string",
                        })?;
                    out.push((key.to_owned(), self.node(pair[1], &at)?));
                }
            }
        }
        Ok(out)
    }

    fn entry(&mut self, node: usize) -> Result<MetaEntry, MetadataError> {
        let type_key = self.type_key(node)?;
        if type_key != CONSTANT_KEY {
            return Ok(MetaEntry::Unsupported {
                type_key: type_key.to_owned(),
            });
        }
        if let Some(c) = self.cache.get(&node) {
            return Ok(MetaEntry::Constant(c.clone()));
        }
        let index_text = self
            .field(node, "attrs")
            .and_then(Value::as_object)
            .and_then(|attrs| attrs.get("data"))
            .and_then(Value::as_str)
            .ok_or(MetadataError::Field {
                at: format!("node {node}"),
                field: "attrs",
                expected: "an object whose \"data\" is a tensor index string",
            })?;
        let bad_index = || MetadataError::NdarrayIndex {
            node,
            index: index_text.to_owned(),
            count: self.blobs.len(),
        };
        let blob = index_text
            .trim()
            .parse::<usize>()
            .map_err(|_| bad_index())?;
        let text =
            self.blobs
                .get(blob)
                .ok_or_else(bad_index)?
                .as_str()
                .ok_or(MetadataError::Field {
                    at: "the section".to_owned(),
                    field: "b64ndarrays",
                    expected: "an array of base64 strings",
                })?;
        let bytes = base64_decode(text).map_err(|error| MetadataError::Base64 { blob, error })?;
        let (array, used) =
            decode_ndarray(&bytes).map_err(|error| MetadataError::Blob { blob, error })?;
        if used != bytes.len() {
            let error = BlobError::TrailingBytes {
                extra: bytes.len() - used,
            };
            return Err(MetadataError::Blob { blob, error });
        }
        let array = Arc::new(array);
        self.cache.insert(node, array.clone());
        Ok(MetaEntry::Constant(array))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_dtypes() -> Vec<DType> {
        vec![
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
        ]
    }

    /// A tensor whose bytes count up, so every byte position is distinguishable.
    fn sample(dtype: DType, shape: &[i64]) -> NDArray {
        let mut a = NDArray::zeros(dtype, shape).unwrap();
        let is_bool = dtype.code == DTypeCode::Bool;
        for (i, b) in a.as_bytes_mut().iter_mut().enumerate() {
            *b = if is_bool {
                (i % 2) as u8
            } else {
                (i * 37 + 11) as u8
            };
        }
        a
    }

    #[test]
    fn base64_round_trips() {
        for len in 0..70 {
            let bytes: Vec<u8> = (0..len).map(|i| (i * 97 + 5) as u8).collect();
            let text = base64_encode(&bytes);
            assert_eq!(text.len() % 4, 0);
            assert_eq!(base64_decode(&text), Ok(bytes.clone()));
            assert_eq!(base64_decode(text.trim_end_matches('=')), Ok(bytes));
        }
        assert_eq!(base64_encode(b"Man"), "TWFu");
        assert_eq!(base64_encode(b"Ma"), "TWE=");
        assert_eq!(base64_encode(b"M"), "TQ==");
        assert_eq!(base64_encode(&[0xfb, 0xff]), "+/8=");
    }

    #[test]
    fn base64_errors() {
        assert_eq!(
            base64_decode("TW!u"),
            Err(Base64Error::InvalidByte {
                offset: 2,
                byte: b'!'
            })
        );
        assert_eq!(
            base64_decode("TWFuT"),
            Err(Base64Error::InvalidLength { len: 5 })
        );
        assert_eq!(
            base64_decode("TQ==="),
            Err(Base64Error::InvalidPadding { offset: 2 })
        );
        assert_eq!(
            base64_decode("TQ=A"),
            Err(Base64Error::InvalidByte {
                offset: 2,
                byte: b'='
            })
        );
        assert_eq!(
            base64_decode("TR=="),
            Err(Base64Error::InvalidPadding { offset: 1 })
        );
        assert_eq!(base64_decode("TWE"), Ok(b"Ma".to_vec()));
    }

    #[test]
    fn blobs_round_trip_for_every_dtype() {
        for dtype in all_dtypes() {
            for shape in [&[][..], &[0], &[3], &[2, 3], &[2, 0, 4], &[1, 1, 1, 5]] {
                let a = sample(dtype, shape);
                let blob = encode_ndarray(&a);
                let (b, used) = decode_ndarray(&blob).unwrap();
                assert_eq!(used, blob.len());
                assert_eq!(a, b, "{dtype} {shape:?}");
                let text = base64_encode(&blob);
                assert_eq!(base64_decode(&text).unwrap(), blob);
            }
        }
    }

    #[test]
    fn blob_layout_matches_tvm() {
        let a = NDArray::from_bytes(DType::F32, &[2], &[0, 0, 0x80, 0x3f, 0, 0, 0, 0x40]).unwrap();
        let blob = encode_ndarray(&a);
        let mut expected = Vec::new();
        expected.extend_from_slice(&NDARRAY_MAGIC.to_le_bytes());
        expected.extend_from_slice(&[0; 8]);
        expected.extend_from_slice(&[1, 0, 0, 0, 0, 0, 0, 0]);
        expected.extend_from_slice(&[1, 0, 0, 0]);
        expected.extend_from_slice(&[2, 32, 1, 0]);
        expected.extend_from_slice(&2i64.to_le_bytes());
        expected.extend_from_slice(&8i64.to_le_bytes());
        expected.extend_from_slice(&[0, 0, 0x80, 0x3f, 0, 0, 0, 0x40]);
        assert_eq!(blob, expected);
        // TVM writes bool as UInt, 1 bit.
        let t = sample(DType::BOOL, &[2]);
        assert_eq!(&encode_ndarray(&t)[28..32], &[1, 1, 1, 0]);
    }

    #[test]
    fn tvm_blob_decodes() {
        // A float32 [1, 2, 3, 4] tensor as TVM's printer wrote it.
        let text = "P6G0lvBAXt0AAAAAAAAAAAEAAAAAAAAAAQAAAAIgAQAEAAAAAAAAABAAAAAAAAAAAACAPwAAAEAAAEBAAACAQA==";
        let (a, _) = decode_ndarray(&base64_decode(text).unwrap()).unwrap();
        assert_eq!(a.dtype(), DType::F32);
        assert_eq!(a.shape(), &[4]);
        let values: Vec<f32> = a
            .as_bytes()
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        assert_eq!(values, vec![1.0, 2.0, 3.0, 4.0]);
    }

    #[test]
    fn blob_errors() {
        let good = encode_ndarray(&sample(DType::I32, &[2, 2]));
        for cut in 0..good.len() {
            assert!(
                matches!(
                    decode_ndarray(&good[..cut]),
                    Err(BlobError::Truncated { .. })
                ),
                "cut at {cut}"
            );
        }
        let mut bad = good.clone();
        bad[0] ^= 1;
        assert!(matches!(
            decode_ndarray(&bad),
            Err(BlobError::BadMagic { .. })
        ));

        // A huge rank: refused for lack of bytes, before any allocation.
        let mut huge = good[..24].to_vec();
        huge.extend_from_slice(&i32::MAX.to_le_bytes());
        huge.extend_from_slice(&[0, 32, 1, 0]);
        assert!(matches!(
            decode_ndarray(&huge),
            Err(BlobError::Truncated {
                part: "the shape",
                ..
            })
        ));
        let mut negative = good[..24].to_vec();
        negative.extend_from_slice(&(-1i32).to_le_bytes());
        negative.extend_from_slice(&[0, 32, 1, 0]);
        assert_eq!(
            decode_ndarray(&negative).map(|_| ()),
            Err(BlobError::BadNdim { ndim: -1 })
        );

        // A huge shape whose byte size does not fit: refused without allocating.
        let mut big = good[..24].to_vec();
        big.extend_from_slice(&2i32.to_le_bytes());
        big.extend_from_slice(&[0, 32, 1, 0]);
        big.extend_from_slice(&i64::MAX.to_le_bytes());
        big.extend_from_slice(&i64::MAX.to_le_bytes());
        big.extend_from_slice(&16i64.to_le_bytes());
        assert!(matches!(
            decode_ndarray(&big),
            Err(BlobError::BadShape { .. })
        ));

        // A plausible but large shape that the data does not back: a size mismatch or a
        // truncation, never an allocation of the declared size.
        let mut large = good[..24].to_vec();
        large.extend_from_slice(&1i32.to_le_bytes());
        large.extend_from_slice(&[0, 32, 1, 0]);
        large.extend_from_slice(&(1i64 << 40).to_le_bytes());
        large.extend_from_slice(&(1i64 << 42).to_le_bytes());
        assert!(matches!(
            decode_ndarray(&large),
            Err(BlobError::Truncated {
                part: "the data",
                ..
            })
        ));
        let mut wrong_size = large.clone();
        let at = wrong_size.len() - 8;
        wrong_size[at..].copy_from_slice(&7i64.to_le_bytes());
        assert!(matches!(
            decode_ndarray(&wrong_size),
            Err(BlobError::ByteSize { .. })
        ));

        let mut dtype = good.clone();
        dtype[28] = 9;
        assert!(matches!(
            decode_ndarray(&dtype),
            Err(BlobError::BadDType { code: 9, .. })
        ));
        dtype[28] = 2;
        dtype[29] = 8;
        assert!(matches!(
            decode_ndarray(&dtype),
            Err(BlobError::BadDType { .. })
        ));
    }

    #[test]
    fn section_round_trips() {
        let arrays: Vec<NDArray> = all_dtypes()
            .into_iter()
            .enumerate()
            .map(|(i, d)| sample(d, &[i as i64 % 3, 2]))
            .collect();
        let refs: Vec<&NDArray> = arrays.iter().collect();
        let json = encode_constants(&refs);
        let table = decode(&json).unwrap();
        assert_eq!(table.len(CONSTANT_KEY), arrays.len());
        for (i, a) in arrays.iter().enumerate() {
            match table.get(CONSTANT_KEY, i) {
                Some(MetaEntry::Constant(c)) => assert_eq!(**c, *a),
                other => panic!("entry {i}: {other:?}"),
            }
        }
        assert_eq!(table.get(CONSTANT_KEY, arrays.len()), None);
        assert_eq!(table.len("tir.SizeVar"), 0);
        let empty = decode(&encode_constants(&[])).unwrap();
        assert_eq!(empty.len(CONSTANT_KEY), 0);
        assert!(empty.is_empty());
    }

    #[test]
    fn tvm_section_with_other_kinds() {
        // The shape of a section TVM printed (older Map encoding, with a VirtualDevice and a
        // SizeVar alongside the constant; nodes in a different order).
        let json = r#"{
          "root": 4,
          "nodes": [
            {"type_key": ""},
            {"type_key": "relay.Constant", "attrs": {"_checked_type_": "0", "data": "0", "span": "0", "virtual_device_": "2"}},
            {"type_key": "VirtualDevice", "attrs": {"device_type_int": "1"}},
            {"type_key": "Array", "data": [1, 1]},
            {"type_key": "Map", "data": [5, 3, 6, 7]},
            {"type_key": "runtime.String", "repr_str": "relay.Constant"},
            {"type_key": "runtime.String", "repr_str": "VirtualDevice"},
            {"type_key": "Array", "data": [2]}
          ],
          "b64ndarrays": ["P6G0lvBAXt0AAAAAAAAAAAEAAAAAAAAAAQAAAAIgAQAEAAAAAAAAABAAAAAAAAAAAACAPwAAAEAAAEBAAACAQA=="],
          "attrs": {"tvm_version": "0.8.dev0"}
        }"#;
        let table = decode(json).unwrap();
        assert_eq!(table.len("relay.Constant"), 2);
        let (Some(MetaEntry::Constant(a)), Some(MetaEntry::Constant(b))) = (
            table.get("relay.Constant", 0),
            table.get("relay.Constant", 1),
        ) else {
            panic!("constants expected: {table:?}");
        };
        assert!(Arc::ptr_eq(a, b), "one node decodes to one tensor");
        assert_eq!(
            table.get("VirtualDevice", 0),
            Some(&MetaEntry::Unsupported {
                type_key: "VirtualDevice".into()
            })
        );
    }

    #[test]
    fn section_errors() {
        let err = decode("{\"root\": 1,\n \"nodes\": [}").unwrap_err();
        assert!(matches!(err, MetadataError::Json { line: 2, .. }), "{err}");
        let not_map =
            r#"{"root": 1, "nodes": [{"type_key": ""}, {"type_key": "Array", "data": []}]}"#;
        assert_eq!(
            decode(not_map).unwrap_err(),
            MetadataError::RootNotMap {
                type_key: "Array".into()
            }
        );
        let bad_root = r#"{"root": 7, "nodes": [{"type_key": ""}]}"#;
        assert!(matches!(
            decode(bad_root),
            Err(MetadataError::NodeIndex { index: 7, .. })
        ));
        let no_nodes = r#"{"root": 1}"#;
        assert!(matches!(
            decode(no_nodes),
            Err(MetadataError::Field { field: "nodes", .. })
        ));
        let not_array = r#"{"root": 1, "nodes": [{"type_key": ""}, {"type_key": "Map", "keys": ["k"], "data": [0]}]}"#;
        assert!(matches!(
            decode(not_array),
            Err(MetadataError::NotArray { .. })
        ));
        let arity = r#"{"root": 1, "nodes": [{"type_key": ""}, {"type_key": "Map", "keys": ["k", "j"], "data": [0]}]}"#;
        assert_eq!(
            decode(arity).unwrap_err(),
            MetadataError::MapArity { keys: 2, values: 1 }
        );

        let good = encode_constants(&[&sample(DType::F32, &[2])]);
        let blob = base64_encode(&encode_ndarray(&sample(DType::F32, &[2])));
        let bad64 = good.replace(&blob, "P6G0!vBA");
        assert!(matches!(
            decode(&bad64),
            Err(MetadataError::Base64 {
                blob: 0,
                error: Base64Error::InvalidByte { offset: 4, .. }
            })
        ));
        let short = good.replace(
            &blob,
            &base64_encode(&encode_ndarray(&sample(DType::F32, &[2]))[..30]),
        );
        assert!(matches!(
            decode(&short),
            Err(MetadataError::Blob {
                blob: 0,
                error: BlobError::Truncated { .. }
            })
        ));
        let mut long_blob = encode_ndarray(&sample(DType::F32, &[2]));
        long_blob.push(0);
        let long = good.replace(&blob, &base64_encode(&long_blob));
        assert!(matches!(
            decode(&long),
            Err(MetadataError::Blob {
                error: BlobError::TrailingBytes { extra: 1 },
                ..
            })
        ));
        let bad_index = good.replace("\"data\": \"0\"", "\"data\": \"5\"");
        assert!(matches!(
            decode(&bad_index),
            Err(MetadataError::NdarrayIndex { count: 1, .. })
        ));
        // Messages are lowercase sentences without a final period.
        let msg = decode(&bad_index).unwrap_err().to_string();
        assert!(
            msg.starts_with("metadata: constant node 3 refers to tensor \"5\""),
            "{msg}"
        );
    }
}
