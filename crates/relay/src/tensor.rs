//! `Tensor`: a cheap, shared handle on an [`NDArray`] that converts from and to Rust slices
//! and `.npy` files, and the [`Element`] trait naming the Rust types that are tensor elements.

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use relay_runtime::npy::{self, shape_tuple};
use relay_runtime::{DType, NDArray, Value};

use crate::{Error, Result};

/// A Rust type whose values are the elements of a tensor of one dtype: `bool`, `i8` to `i64`,
/// `u8` to `u64`, `f32` and `f64`.
pub trait Element: Copy + Send + Sync + 'static + sealed::Sealed {
    /// The tensor dtype of this type.
    const DTYPE: DType;

    /// Appends the element's native-endian bytes (one byte for `bool`) to `out`.
    fn write_bytes(self, out: &mut Vec<u8>);

    /// The element stored in `bytes` (exactly `DTYPE.size_bytes()` of them).
    fn read_bytes(bytes: &[u8]) -> Self;
}

mod sealed {
    /// Only the types this crate implements [`super::Element`] for are elements.
    pub trait Sealed {}
}

macro_rules! number_element {
    ($($t:ty => $dtype:expr),* $(,)?) => {$(
        impl sealed::Sealed for $t {}

        impl Element for $t {
            const DTYPE: DType = $dtype;

            fn write_bytes(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_ne_bytes());
            }

            fn read_bytes(bytes: &[u8]) -> Self {
                let mut raw = [0u8; std::mem::size_of::<$t>()];
                let n = raw.len().min(bytes.len());
                raw[..n].copy_from_slice(&bytes[..n]);
                <$t>::from_ne_bytes(raw)
            }
        }
    )*};
}

number_element! {
    i8 => DType::I8,
    i16 => DType::I16,
    i32 => DType::I32,
    i64 => DType::I64,
    u8 => DType::U8,
    u16 => DType::U16,
    u32 => DType::U32,
    u64 => DType::U64,
    f32 => DType::F32,
    f64 => DType::F64,
}

impl sealed::Sealed for bool {}

impl Element for bool {
    const DTYPE: DType = DType::BOOL;

    fn write_bytes(self, out: &mut Vec<u8>) {
        out.push(u8::from(self));
    }

    fn read_bytes(bytes: &[u8]) -> Self {
        bytes.first().is_some_and(|&b| b != 0)
    }
}

/// A tensor: dtype, shape and row-major elements, shared (cloning a `Tensor` copies a
/// pointer, never the data). It is what [`crate::Vm::invoke`] takes and returns as tensor
/// values.
#[derive(Clone, PartialEq, Eq)]
pub struct Tensor(Arc<NDArray>);

impl Tensor {
    /// A tensor of `shape` holding `data` in row-major order; its dtype is `T`'s (`f32` gives
    /// `float32`). An error if `data` does not have exactly the shape's element count or a
    /// dimension is negative.
    ///
    /// ```
    /// let t = relay::Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2])?;
    /// assert_eq!(t.shape(), &[2, 2]);
    /// assert_eq!(t.dtype(), relay::DType::F32);
    /// assert_eq!(t.to_vec::<f32>()?, vec![1.0, 2.0, 3.0, 4.0]);
    /// # Ok::<(), relay::Error>(())
    /// ```
    pub fn from_slice<T: Element>(data: &[T], shape: &[i64]) -> Result<Tensor> {
        let mut bytes = Vec::with_capacity(std::mem::size_of_val(data));
        for &x in data {
            x.write_bytes(&mut bytes);
        }
        Ok(Tensor::from_ndarray(NDArray::from_bytes(
            T::DTYPE,
            shape,
            &bytes,
        )?))
    }

    /// A rank-0 tensor holding `value`.
    pub fn scalar<T: Element>(value: T) -> Tensor {
        let mut bytes = Vec::new();
        value.write_bytes(&mut bytes);
        // A rank-0 tensor of a scalar dtype has one element, of exactly the bytes written.
        let array = NDArray::from_bytes(T::DTYPE, &[], &bytes)
            .expect("one element of a scalar dtype always makes a rank-0 tensor");
        Tensor::from_ndarray(array)
    }

    /// A zero-filled tensor of `dtype` and `shape`.
    pub fn zeros(dtype: DType, shape: &[i64]) -> Result<Tensor> {
        Ok(Tensor::from_ndarray(NDArray::zeros(dtype, shape)?))
    }

    /// The elements in row-major order. An error if the tensor's dtype is not `T`'s.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        if self.dtype() != T::DTYPE {
            return Err(Error::DType {
                expected: T::DTYPE,
                got: self.dtype(),
            });
        }
        let size = T::DTYPE.size_bytes();
        Ok(self
            .0
            .as_bytes()
            .chunks_exact(size)
            .map(T::read_bytes)
            .collect())
    }

    /// The only element of a tensor with one element (any rank). An error if the dtype is not
    /// `T`'s or the tensor has another element count.
    pub fn to_scalar<T: Element>(&self) -> Result<T> {
        match self.to_vec::<T>()?.as_slice() {
            [x] => Ok(*x),
            _ => Err(Error::NotAScalar {
                shape: self.shape().to_vec(),
            }),
        }
    }

    /// Every element converted to `f64` (as numpy's `astype(float64)`), whatever the dtype.
    pub fn to_f64_vec(&self) -> Vec<f64> {
        self.0.to_f64_vec()
    }

    /// The shape.
    pub fn shape(&self) -> &[i64] {
        self.0.shape()
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.0.dtype()
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.0.num_elements()
    }

    /// Whether the tensor has no elements (a zero dimension).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Reads a `.npy` file.
    pub fn read_npy(path: impl AsRef<Path>) -> Result<Tensor> {
        Ok(Tensor::from_ndarray(npy::read_npy_file(path.as_ref())?))
    }

    /// Writes the tensor to a `.npy` file.
    pub fn write_npy(&self, path: impl AsRef<Path>) -> Result<()> {
        Ok(npy::write_npy_file(path.as_ref(), &self.0)?)
    }

    /// A tensor owning `array`.
    pub fn from_ndarray(array: NDArray) -> Tensor {
        Tensor(Arc::new(array))
    }

    /// The array behind the tensor.
    pub fn as_ndarray(&self) -> &NDArray {
        &self.0
    }

    /// The shared array behind the tensor (what [`Value::Tensor`] holds).
    pub fn as_arc(&self) -> &Arc<NDArray> {
        &self.0
    }

    /// The array, copied only if another handle shares it.
    pub fn into_ndarray(self) -> NDArray {
        Arc::unwrap_or_clone(self.0)
    }
}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl From<NDArray> for Tensor {
    fn from(array: NDArray) -> Tensor {
        Tensor::from_ndarray(array)
    }
}

impl From<Arc<NDArray>> for Tensor {
    fn from(array: Arc<NDArray>) -> Tensor {
        Tensor(array)
    }
}

impl From<Tensor> for Value {
    fn from(tensor: Tensor) -> Value {
        Value::Tensor(tensor.0)
    }
}

impl From<&Tensor> for Value {
    fn from(tensor: &Tensor) -> Value {
        Value::Tensor(tensor.0.clone())
    }
}

impl TryFrom<Value> for Tensor {
    type Error = Error;

    /// The tensor a value holds; an error naming what it is otherwise.
    fn try_from(value: Value) -> Result<Tensor> {
        match value {
            Value::Tensor(array) => Ok(Tensor(array)),
            other => Err(Error::NotATensor {
                got: other.kind_name(),
            }),
        }
    }
}

impl TryFrom<&Value> for Tensor {
    type Error = Error;

    /// The tensor a value holds; an error naming what it is otherwise.
    fn try_from(value: &Value) -> Result<Tensor> {
        Tensor::try_from(value.clone())
    }
}

/// "a float64 tensor of shape (8, 16)": a tensor as error messages describe it.
pub fn describe(array: &NDArray) -> String {
    format!(
        "a {} tensor of shape {}",
        array.dtype(),
        shape_tuple(array.shape())
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_every_element_type() {
        fn check<T: Element + PartialEq + fmt::Debug>(data: &[T]) {
            let t = Tensor::from_slice(data, &[data.len() as i64]).unwrap();
            assert_eq!(t.dtype(), T::DTYPE);
            assert_eq!(t.to_vec::<T>().unwrap(), data);
        }
        check(&[true, false, true]);
        check(&[-1i8, 2, i8::MIN]);
        check(&[-1i16, i16::MAX]);
        check(&[-1i32, i32::MIN]);
        check(&[-1i64, i64::MAX]);
        check(&[1u8, 255]);
        check(&[1u16, u16::MAX]);
        check(&[1u32, u32::MAX]);
        check(&[1u64, u64::MAX]);
        check(&[1.5f32, -0.0, f32::INFINITY]);
        check(&[1.5f64, f64::MIN_POSITIVE]);
    }

    #[test]
    fn wrong_length_negative_dims_and_dtype_are_errors() {
        let err = Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[2, 2]).unwrap_err();
        assert!(matches!(err, Error::Tensor(_)), "{err}");
        assert!(Tensor::from_slice::<f32>(&[], &[-1]).is_err());
        let t = Tensor::from_slice(&[1i32, 2], &[2]).unwrap();
        let err = t.to_vec::<f32>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "the tensor holds int32 elements, not float32"
        );
        assert_eq!(t.to_vec::<i32>().unwrap(), vec![1, 2]);
    }

    #[test]
    fn scalars_and_values() {
        let s = Tensor::scalar(7i64);
        assert!(s.shape().is_empty());
        assert_eq!(s.to_scalar::<i64>().unwrap(), 7);
        let v = Value::from(s.clone());
        assert_eq!(Tensor::try_from(v).unwrap(), s);
        let err = Tensor::try_from(Value::tuple(vec![])).unwrap_err();
        assert_eq!(err.to_string(), "expected a tensor, got a tuple");
        assert!(
            Tensor::from_slice(&[1u8, 2], &[2])
                .unwrap()
                .to_scalar::<u8>()
                .is_err()
        );
    }

    #[test]
    fn npy_round_trip() {
        let dir = std::env::temp_dir().join(format!("relay-tensor-npy-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.npy");
        let t = Tensor::from_slice(&[1.0f64, -2.0, 3.5, 4.0, 5.0, 6.0], &[2, 3]).unwrap();
        t.write_npy(&path).unwrap();
        assert_eq!(Tensor::read_npy(&path).unwrap(), t);
        let err = Tensor::read_npy(dir.join("missing.npy")).unwrap_err();
        assert!(err.to_string().contains("missing.npy"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
