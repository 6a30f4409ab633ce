//! ONNX tensors (`TensorProto`) as arrays: element types, the typed data fields, raw
//! little-endian bytes, and external data in a side file.

use std::path::Path;

use relay_runtime::{DType, DTypeCode, NDArray};

use crate::error::ImportError;
use crate::proto::{EXTERNAL, TensorProto, data_type as dt};

/// The dtype of ONNX element type `t`, if Relay has it.
pub fn dtype(t: i32) -> Option<DType> {
    Some(match t {
        dt::FLOAT => DType::F32,
        dt::DOUBLE => DType::F64,
        dt::FLOAT16 => DType::F16,
        dt::INT8 => DType::I8,
        dt::INT16 => DType::I16,
        dt::INT32 => DType::I32,
        dt::INT64 => DType::I64,
        dt::UINT8 => DType::U8,
        dt::UINT16 => DType::U16,
        dt::UINT32 => DType::U32,
        dt::UINT64 => DType::U64,
        dt::BOOL => DType::BOOL,
        dt::BFLOAT16 => DType::scalar(DTypeCode::BFloat, 16),
        dt::FLOAT8E4M3FN => DType::scalar(DTypeCode::Float8E4M3FN, 8),
        dt::FLOAT8E4M3FNUZ => DType::scalar(DTypeCode::Float8E4M3FNUZ, 8),
        dt::FLOAT8E5M2 => DType::scalar(DTypeCode::Float8E5M2, 8),
        dt::FLOAT8E5M2FNUZ => DType::scalar(DTypeCode::Float8E5M2FNUZ, 8),
        _ => return None,
    })
}

/// The array `t` holds; `base` is the directory external data is relative to.
pub fn array(t: &TensorProto, base: Option<&Path>) -> Result<NDArray, ImportError> {
    let bad = |m: String| ImportError::Model(format!("tensor `{}`: {m}", t.name));
    let d = dtype(t.data_type)
        .ok_or_else(|| bad(format!("element type {} is not supported", t.data_type)))?;
    if t.dims.iter().any(|&n| n < 0) {
        return Err(bad(format!("negative dimension in {:?}", t.dims)));
    }
    let count = t
        .dims
        .iter()
        .try_fold(1usize, |acc, &n| acc.checked_mul(n as usize))
        .ok_or_else(|| bad("too many elements".into()))?;
    let width = usize::from(d.bits.div_ceil(8)) * usize::from(d.lanes.max(1));
    let size = count
        .checked_mul(width)
        .ok_or_else(|| bad("too many elements".into()))?;
    let owned;
    let bytes: &[u8] = if t.data_location == EXTERNAL {
        owned = external(t, base, size).map_err(bad)?;
        &owned
    } else if !t.raw_data.is_empty() {
        &t.raw_data
    } else {
        owned = typed(t, d).map_err(bad)?;
        &owned
    };
    if bytes.len() != size {
        return Err(bad(format!(
            "{} bytes of data for {count} elements of {d}",
            bytes.len()
        )));
    }
    NDArray::from_le_bytes(d, &t.dims, bytes).map_err(|e| bad(e.to_string()))
}

/// The little-endian bytes of `t`'s typed data field, elements of `d`.
fn typed(t: &TensorProto, d: DType) -> Result<Vec<u8>, String> {
    // Sized by the data, not by the declared dimensions (which may be absurd).
    let mut out = Vec::new();
    match t.data_type {
        dt::FLOAT => t
            .float_data
            .iter()
            .for_each(|v| out.extend(v.to_le_bytes())),
        dt::DOUBLE => t
            .double_data
            .iter()
            .for_each(|v| out.extend(v.to_le_bytes())),
        dt::INT64 => t
            .int64_data
            .iter()
            .for_each(|v| out.extend(v.to_le_bytes())),
        dt::UINT32 | dt::UINT64 => {
            let w = usize::from(d.bits / 8);
            t.uint64_data
                .iter()
                .for_each(|v| out.extend(&v.to_le_bytes()[..w]));
        }
        // int32_data holds every element type of 32 bits or fewer, the narrow floats as their
        // bits.
        _ => {
            let w = usize::from(d.bits.div_ceil(8));
            t.int32_data
                .iter()
                .for_each(|v| out.extend(&v.to_le_bytes()[..w]));
        }
    }
    Ok(out)
}

/// The bytes of an external-data tensor: `length` bytes (or all to the end) from `offset` of
/// the file `location`, relative to `base`.
fn external(t: &TensorProto, base: Option<&Path>, expected: usize) -> Result<Vec<u8>, String> {
    let entry = |k: &str| {
        t.external_data
            .iter()
            .find(|e| e.key == k)
            .map(|e| e.value.as_str())
    };
    let location = entry("location").ok_or("external data without a location")?;
    let parse = |k: &str| -> Result<Option<u64>, String> {
        entry(k)
            .map(|v| {
                v.parse::<u64>()
                    .map_err(|_| format!("external data {k} `{v}`"))
            })
            .transpose()
    };
    let (offset, length) = (parse("offset")?.unwrap_or(0), parse("length")?);
    let rel = Path::new(location);
    if rel.is_absolute()
        || rel
            .components()
            .any(|c| matches!(c, std::path::Component::ParentDir))
    {
        return Err(format!(
            "external data location `{location}` leaves the model's directory"
        ));
    }
    let path = base.map_or_else(|| rel.to_path_buf(), |b| b.join(rel));
    let data =
        std::fs::read(&path).map_err(|e| format!("external data {}: {e}", path.display()))?;
    let start = usize::try_from(offset).map_err(|_| "offset too large".to_string())?;
    let len = length.map_or(expected, |l| l as usize);
    data.get(start..start.saturating_add(len))
        .map(<[u8]>::to_vec)
        .ok_or_else(|| {
            format!(
                "external data {} holds {} bytes, not {start}..{}",
                path.display(),
                data.len(),
                start.saturating_add(len)
            )
        })
}
