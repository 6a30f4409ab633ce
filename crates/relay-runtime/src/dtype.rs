//! `DType`: a DLPack `DLDataType` (type code, bits, lanes) with TVM's string spelling.

use std::fmt;

use crate::minifloat::Minifloat;

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
    /// 8-bit float, 4 exponent and 3 mantissa bits, no infinities (`kDLFloat8_e4m3fn`).
    Float8E4M3FN = 10,
    /// As `Float8E4M3FN` with bias 8 and no negative zero (`kDLFloat8_e4m3fnuz`).
    Float8E4M3FNUZ = 11,
    /// 8-bit IEEE-like float, 5 exponent and 2 mantissa bits (`kDLFloat8_e5m2`).
    Float8E5M2 = 12,
    /// As `Float8E5M2` with bias 16, no infinities and no negative zero
    /// (`kDLFloat8_e5m2fnuz`).
    Float8E5M2FNUZ = 13,
}

/// The 8-bit float codes and TVM's names for them (`float8_e4m3fn`, ...).
const FLOAT8: [(DTypeCode, &str); 4] = [
    (DTypeCode::Float8E4M3FN, "float8_e4m3fn"),
    (DTypeCode::Float8E4M3FNUZ, "float8_e4m3fnuz"),
    (DTypeCode::Float8E5M2, "float8_e5m2"),
    (DTypeCode::Float8E5M2FNUZ, "float8_e5m2fnuz"),
];

impl DTypeCode {
    /// The code with DLPack's number `code`, if relayc has it.
    pub fn from_u8(code: u8) -> Option<DTypeCode> {
        use DTypeCode::*;
        [
            Int,
            UInt,
            Float,
            Handle,
            BFloat,
            Bool,
            Float8E4M3FN,
            Float8E4M3FNUZ,
            Float8E5M2,
            Float8E5M2FNUZ,
        ]
        .into_iter()
        .find(|c| *c as u8 == code)
    }
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

    /// Whether this is a (scalar or vector) floating-point type, `bfloat16` and the 8-bit
    /// floats included.
    pub fn is_float(self) -> bool {
        self.code == DTypeCode::Float || self.minifloat().is_some()
    }

    /// Whether values of this type are computed in a wider float and rounded back: `float16`,
    /// `bfloat16` and the 8-bit floats.
    pub fn is_narrow_float(self) -> bool {
        self == DType::F16 || self.minifloat().is_some()
    }

    /// The format of a `bfloat16` or 8-bit float type, whose values are converted in software
    /// ([`Minifloat`]); `None` for the others.
    pub fn minifloat(self) -> Option<Minifloat> {
        Some(match self.code {
            DTypeCode::BFloat => Minifloat::BF16,
            DTypeCode::Float8E4M3FN => Minifloat::E4M3FN,
            DTypeCode::Float8E4M3FNUZ => Minifloat::E4M3FNUZ,
            DTypeCode::Float8E5M2 => Minifloat::E5M2,
            DTypeCode::Float8E5M2FNUZ => Minifloat::E5M2FNUZ,
            _ => return None,
        })
    }

    /// Whether this is a signed or unsigned integer type (not `bool`).
    pub fn is_int(self) -> bool {
        matches!(self.code, DTypeCode::Int | DTypeCode::UInt)
    }

    /// Parses TVM's spelling: `bool`, `int8`, `int` (= `int32`), `uint1x4`, `float16`,
    /// `bfloat16`, `float8_e4m3fn`, `handle`. Returns `None` for anything else.
    pub fn parse(text: &str) -> Option<DType> {
        let (base, lanes) = match text.split_once('x') {
            Some((base, lanes)) => (base, lanes.parse::<u16>().ok().filter(|&l| l > 0)?),
            None => (text, 1),
        };
        if let Some(&(code, _)) = FLOAT8.iter().find(|(_, name)| *name == base) {
            return Some(DType {
                code,
                bits: 8,
                lanes,
            });
        }
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
            _ => false,
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
            code => {
                let name = FLOAT8.iter().find(|(c, _)| *c == code).map(|(_, n)| *n);
                f.write_str(name.unwrap_or("float8"))?
            }
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
            "float8_e4m3fn",
            "float8_e4m3fnuz",
            "float8_e5m2",
            "float8_e5m2fnuz",
            "float8_e5m2x4",
            "handle",
        ] {
            let d = DType::parse(s).unwrap_or_else(|| panic!("{s} should parse"));
            assert_eq!(d.to_string(), s);
        }
        assert_eq!(DType::parse("int"), Some(DType::I32));
        assert_eq!(DType::parse("float"), Some(DType::F32));
        for bad in [
            "",
            "int0",
            "int65",
            "float8",
            "floaty",
            "int8x0",
            "bool8",
            "Int32",
            "float8_e4m3",
            "float8_e5m2fnuzx0",
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
        assert_eq!(DType::parse("float8_e4m3fn").unwrap().size_bytes(), 1);
    }

    #[test]
    fn dlpack_codes_read_back() {
        for c in 0..=255u8 {
            if let Some(code) = DTypeCode::from_u8(c) {
                assert_eq!(code as u8, c);
            }
        }
        assert_eq!(DTypeCode::from_u8(10), Some(DTypeCode::Float8E4M3FN));
        assert_eq!(DTypeCode::from_u8(5), None);
    }
}
