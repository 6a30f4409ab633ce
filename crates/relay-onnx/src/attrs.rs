//! A node's attributes, read by name and type, and axis normalization.

use crate::error::ConvertError;
use crate::proto::{AttributeProto, attribute_type as at};

/// A node's attributes.
pub(crate) struct Attrs<'a>(pub &'a [AttributeProto]);

impl Attrs<'_> {
    fn get(&self, name: &str, kind: i32) -> Result<Option<&AttributeProto>, ConvertError> {
        match self.0.iter().find(|a| a.name == name) {
            None => Ok(None),
            Some(a) if a.r#type == kind || a.r#type == 0 => Ok(Some(a)),
            Some(a) => Err(format!("attribute `{name}` has type {}, not {kind}", a.r#type).into()),
        }
    }

    /// An `INT` attribute, or `default`.
    pub(crate) fn int(&self, name: &str, default: i64) -> Result<i64, ConvertError> {
        Ok(self.get(name, at::INT)?.map_or(default, |a| a.i))
    }

    /// A `FLOAT` attribute, or `default`.
    pub(crate) fn float(&self, name: &str, default: f32) -> Result<f32, ConvertError> {
        Ok(self.get(name, at::FLOAT)?.map_or(default, |a| a.f))
    }

    /// An `INTS` attribute, if present.
    pub(crate) fn ints(&self, name: &str) -> Result<Option<Vec<i64>>, ConvertError> {
        Ok(self.get(name, at::INTS)?.map(|a| a.ints.clone()))
    }

    /// A `STRING` attribute, or `default`.
    pub(crate) fn string(&self, name: &str, default: &str) -> Result<String, ConvertError> {
        Ok(self.get(name, at::STRING)?.map_or_else(
            || default.to_string(),
            |a| String::from_utf8_lossy(&a.s).into_owned(),
        ))
    }

    /// A `TENSOR` attribute, if present.
    pub(crate) fn tensor(
        &self,
        name: &str,
    ) -> Result<Option<&crate::proto::TensorProto>, ConvertError> {
        Ok(self.get(name, at::TENSOR)?.and_then(|a| a.t.as_ref()))
    }
}

/// `axis` (negative: from the end) as an index into `rank` dimensions (a scalar has none).
pub(crate) fn axis(axis: i64, rank: usize) -> Result<usize, ConvertError> {
    let r = rank as i64;
    let a = if axis < 0 {
        axis.saturating_add(r)
    } else {
        axis
    };
    if (0..r).contains(&a) {
        Ok(a as usize)
    } else {
        Err(format!("axis {axis} is out of range for rank {rank}").into())
    }
}
