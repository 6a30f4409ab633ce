//! relayc as a library (SPEC §6).
