//! The `#[metadata]` section: TVM's JSON object graph holding `relay.Constant` tensors as
//! base64 NDArray blobs (placeholder signatures; implementation pending).
