//! `DType`: a DLPack `DLDataType` (type code, bits, lanes) with TVM's string spelling.

use std::fmt;

/// The kind of a scalar, numbered as DLPack's `DLDataTypeCode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DTypeCode {
    /// Signed two's-complement integer (`kDLInt`).
    Int = 0,
    /// Unsigned integer (`kDLUInt`).
    UInt = 1,
    /// IEEE floating point (`kDLFloat`).
    Float = 2,
    /// Opaque pointer (`kDLOpaqueHandle`), TVM's `handle`.
    Handle = 3,
    /// Brain floating point (`kDLBfloat`).
    BFloat = 4,
    /// Boolean (`kDLBool`); stored one byte per element.
    Bool = 6,
}

/// A scalar or vector element type: DLPack's `DLDataType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DType {
    /// The scalar kind.
    pub code: DTypeCode,
    /// Bits per lane (8 for `bool`).
    pub bits: u8,
    /// Vector lanes; 1 for scalars.
    pub lanes: u16,
}

impl DType {
    /// `bool`.
    pub const BOOL: DType = DType::scalar(DTypeCode::Bool, 8);
    /// `int8`.
    pub const I8: DType = DType::scalar(DTypeCode::Int, 8);
    /// `int16`.
    pub const I16: DType = DType::scalar(DTypeCode::Int, 16);
    /// `int32`.
    pub const I32: DType = DType::scalar(DTypeCode::Int, 32);
    /// `int64`.
    pub const I64: DType = DType::scalar(DTypeCode::Int, 64);
    /// `uint8`.
    pub const U8: DType = DType::scalar(DTypeCode::UInt, 8);
    /// `uint16`.
    pub const U16: DType = DType::scalar(DTypeCode::UInt, 16);
    /// `uint32`.
    pub const U32: DType = DType::scalar(DTypeCode::UInt, 32);
    /// `uint64`.
    pub const U64: DType = DType::scalar(DTypeCode::UInt, 64);
    /// `float16`.
    pub const F16: DType = DType::scalar(DTypeCode::Float, 16);
    /// `float32`.
    pub const F32: DType = DType::scalar(DTypeCode::Float, 32);
    /// `float64`.
    pub const F64: DType = DType::scalar(DTypeCode::Float, 64);

    /// A one-lane type.
    pub const fn scalar(code: DTypeCode, bits: u8) -> DType {
        DType {
            code,
            bits,
            lanes: 1,
        }
    }

    /// Bytes one element occupies in an `NDArray`: `ceil(bits / 8) * lanes`.
    pub fn size_bytes(self) -> usize {
        (self.bits as usize).div_ceil(8) * self.lanes as usize
    }

    /// Whether this is a (scalar or vector) floating-point type, `bfloat16` included.
    pub fn is_float(self) -> bool {
        matches!(self.code, DTypeCode::Float | DTypeCode::BFloat)
    }

    /// Whether this is a signed or unsigned integer type (not `bool`).
    pub fn is_int(self) -> bool {
        matches!(self.code, DTypeCode::Int | DTypeCode::UInt)
    }

    /// Parses TVM's spelling: `bool`, `int8`, `int` (= `int32`), `uint1x4`, `float16`,
    /// `bfloat16`, `handle`. Returns `None` for anything else.
    pub fn parse(text: &str) -> Option<DType> {
        let (base, lanes) = match text.split_once('x') {
            Some((base, lanes)) => (base, lanes.parse::<u16>().ok().filter(|&l| l > 0)?),
            None => (text, 1),
        };
        let (code, digits, default_bits) = if base == "bool" {
            (DTypeCode::Bool, "", 8)
        } else if base == "handle" {
            (DTypeCode::Handle, "", 64)
        } else if let Some(d) = base.strip_prefix("bfloat") {
            (DTypeCode::BFloat, d, 16)
        } else if let Some(d) = base.strip_prefix("uint") {
            (DTypeCode::UInt, d, 32)
        } else if let Some(d) = base.strip_prefix("int") {
            (DTypeCode::Int, d, 32)
        } else if let Some(d) = base.strip_prefix("float") {
            (DTypeCode::Float, d, 32)
        } else {
            return None;
        };
        let bits = if digits.is_empty() {
            default_bits
        } else {
            if !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            digits.parse::<u8>().ok()?
        };
        let valid = match code {
            DTypeCode::Bool | DTypeCode::Handle => digits.is_empty(),
            DTypeCode::Int | DTypeCode::UInt => (1..=64).contains(&bits),
            DTypeCode::Float => matches!(bits, 16 | 32 | 64),
            DTypeCode::BFloat => bits == 16,
        };
        valid.then_some(DType { code, bits, lanes })
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.code {
            DTypeCode::Bool => f.write_str("bool")?,
            DTypeCode::Handle => f.write_str("handle")?,
            DTypeCode::Int => write!(f, "int{}", self.bits)?,
            DTypeCode::UInt => write!(f, "uint{}", self.bits)?,
            DTypeCode::Float => write!(f, "float{}", self.bits)?,
            DTypeCode::BFloat => write!(f, "bfloat{}", self.bits)?,
        }
        if self.lanes != 1 {
            write!(f, "x{}", self.lanes)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints_tvm_spellings() {
        for s in [
            "bool",
            "int8",
            "int16",
            "int32",
            "int64",
            "uint8",
            "uint16",
            "uint32",
            "uint64",
            "float16",
            "float32",
            "float64",
            "int8x4",
            "uint1x4",
            "float16x4",
            "bfloat16",
            "handle",
        ] {
            let d = DType::parse(s).unwrap_or_else(|| panic!("{s} should parse"));
            assert_eq!(d.to_string(), s);
        }
        assert_eq!(DType::parse("int"), Some(DType::I32));
        assert_eq!(DType::parse("float"), Some(DType::F32));
        for bad in [
            "", "int0", "int65", "float8", "floaty", "int8x0", "bool8", "Int32",
        ] {
            assert_eq!(DType::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn sizes() {
        assert_eq!(DType::BOOL.size_bytes(), 1);
        assert_eq!(DType::F16.size_bytes(), 2);
        assert_eq!(DType::parse("uint1x4").unwrap().size_bytes(), 4);
        assert_eq!(DType::parse("float32x4").unwrap().size_bytes(), 16);
    }
}
