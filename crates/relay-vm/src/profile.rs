//! `--profile`: what the VM records when profiling is on: per kernel (calls, total, min and
//! max time, argument shapes) and per instruction kind (count, time), printed as tables or
//! written as JSON, and the timeline when asked for ([`crate::trace`]).

use std::fmt;
use std::time::{Duration, Instant};

use serde_json::{Value as Json, json};

use crate::allocator::AllocStats;
use crate::bytecode::Instruction;
use crate::trace::{SpanKind, Trace};

/// The record of one kernel.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KernelStats {
    /// The kernel's name.
    pub name: String,
    /// How many times it was called.
    pub calls: u64,
    /// The time spent in it.
    pub total: Duration,
    /// The fastest call.
    pub min: Duration,
    /// The slowest call.
    pub max: Duration,
    /// The shapes of its arguments (inputs then outputs) at the first call, e.g.
    /// `[1, 784], [784, 512] -> [1, 512]`.
    pub arg_shapes: String,
}

impl KernelStats {
    /// The mean time per call.
    pub fn mean(&self) -> Duration {
        if self.calls == 0 {
            Duration::ZERO
        } else {
            self.total / u32::try_from(self.calls).unwrap_or(u32::MAX)
        }
    }
}

/// The record of one instruction kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InstructionStats {
    /// How many were executed.
    pub count: u64,
    /// The time spent executing them (kernel calls include the kernel's time).
    pub time: Duration,
}

/// A profile of one or more runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Profile {
    /// Per kernel, by kernel index of the executable.
    pub kernels: Vec<KernelStats>,
    /// Per instruction kind, by [`Instruction::kind`].
    pub instructions: [InstructionStats; Instruction::KINDS.len()],
    /// The wall time of the runs.
    pub run_time: Duration,
    /// The timeline, when the VM records one ([`crate::VmOptions::trace`]).
    pub trace: Option<Trace>,
}

impl Profile {
    /// An empty profile for an executable with these kernels.
    pub fn new(kernel_names: impl IntoIterator<Item = String>) -> Profile {
        Profile {
            kernels: kernel_names
                .into_iter()
                .map(|name| KernelStats {
                    name,
                    ..KernelStats::default()
                })
                .collect(),
            instructions: [InstructionStats::default(); Instruction::KINDS.len()],
            run_time: Duration::ZERO,
            trace: None,
        }
    }

    /// Records one call of kernel `kernel` that started at `started` and ends now; `shapes`
    /// is asked for only on the first call.
    pub fn record_kernel(
        &mut self,
        kernel: usize,
        started: Instant,
        shapes: impl FnOnce() -> String,
    ) {
        let now = Instant::now();
        let elapsed = now.saturating_duration_since(started);
        if let Some(t) = &mut self.trace {
            t.record(SpanKind::Kernel(kernel as u32), 0, started, now);
        }
        let Some(k) = self.kernels.get_mut(kernel) else {
            return;
        };
        if k.calls == 0 {
            k.arg_shapes = shapes();
            k.min = elapsed;
            k.max = elapsed;
        } else {
            k.min = k.min.min(elapsed);
            k.max = k.max.max(elapsed);
        }
        k.calls += 1;
        k.total += elapsed;
    }

    /// Records one instruction of kind `kind` that took `elapsed`.
    pub fn record_instruction(&mut self, kind: usize, elapsed: Duration) {
        if let Some(i) = self.instructions.get_mut(kind) {
            i.count += 1;
            i.time += elapsed;
        }
    }
}

impl Profile {
    /// `d` as a percentage of the run time (0 before any run).
    fn share(&self, d: Duration) -> f64 {
        let run = self.run_time.as_secs_f64();
        if run > 0.0 {
            100.0 * d.as_secs_f64() / run
        } else {
            0.0
        }
    }

    /// The kernels that were called, by total time (then name).
    fn kernels_by_time(&self) -> Vec<&KernelStats> {
        let mut kernels: Vec<&KernelStats> = self.kernels.iter().filter(|k| k.calls > 0).collect();
        kernels.sort_by(|a, b| b.total.cmp(&a.total).then_with(|| a.name.cmp(&b.name)));
        kernels
    }

    /// The instruction kinds that ran, by time (then name).
    fn kinds_by_time(&self) -> Vec<(&'static str, &InstructionStats)> {
        let mut kinds: Vec<(&str, &InstructionStats)> = Instruction::KINDS
            .iter()
            .zip(&self.instructions)
            .filter(|(_, s)| s.count > 0)
            .map(|(n, s)| (*n, s))
            .collect();
        kinds.sort_by(|a, b| b.1.time.cmp(&a.1.time).then_with(|| a.0.cmp(b.0)));
        kinds
    }

    /// Every row of the tables ([`Profile`]'s `Display`) and of the allocator's statistics, as
    /// JSON: `run_time_us`, `kernels` (by total time: name, calls, total/mean/min/max µs,
    /// share of the run time in percent, arguments), `instructions` (by time: kind, count,
    /// time µs, share) and `allocator`.
    pub fn to_json(&self, allocator: &AllocStats) -> Json {
        let us = |d: Duration| d.as_secs_f64() * 1e6;
        let share = |d: Duration| self.share(d);
        let kernels = self.kernels_by_time();
        let kernels: Vec<Json> = kernels
            .iter()
            .map(|k| {
                json!({
                    "name": k.name, "calls": k.calls, "total_us": us(k.total),
                    "mean_us": us(k.mean()), "min_us": us(k.min), "max_us": us(k.max),
                    "share": share(k.total), "arguments": k.arg_shapes,
                })
            })
            .collect();
        let kinds = self.kinds_by_time();
        let instructions: Vec<Json> = kinds
            .iter()
            .map(|(kind, s)| {
                json!({ "kind": kind, "count": s.count, "time_us": us(s.time), "share": share(s.time) })
            })
            .collect();
        let a = allocator;
        json!({
            "run_time_us": us(self.run_time),
            "kernels": kernels,
            "instructions": instructions,
            "allocator": {
                "requests": a.requests, "pool_hits": a.pool_hits, "fresh": a.fresh,
                "failures": a.failures, "recycles": a.recycles,
                "still_referenced": a.still_referenced, "returned": a.returned, "evicted": a.evicted,
                "evicted_bytes": a.evicted_bytes, "cached_buffers": a.cached_buffers,
                "cached_bytes": a.cached_bytes, "live_bytes": a.live_bytes,
                "peak_live_bytes": a.peak_live_bytes,
            },
        })
    }
}

/// Microseconds with two decimals.
fn us(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1e6)
}

impl fmt::Display for Profile {
    /// Two tables: kernels by total time (calls, total / mean / min / max µs, share of the run
    /// time, argument shapes), then instruction kinds by time (count, time µs).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let share = |d: Duration| self.share(d);
        let kernels = self.kernels_by_time();
        let width = kernels
            .iter()
            .map(|k| k.name.len())
            .max()
            .unwrap_or(0)
            .max("kernel".len());
        writeln!(
            f,
            "{:<width$}  {:>8}  {:>12}  {:>10}  {:>10}  {:>10}  {:>6}  arguments",
            "kernel", "calls", "total µs", "mean µs", "min µs", "max µs", "share"
        )?;
        for k in &kernels {
            writeln!(
                f,
                "{:<width$}  {:>8}  {:>12}  {:>10}  {:>10}  {:>10}  {:>5.1}%  {}",
                k.name,
                k.calls,
                us(k.total),
                us(k.mean()),
                us(k.min),
                us(k.max),
                share(k.total),
                k.arg_shapes
            )?;
        }
        let kernel_total: Duration = kernels.iter().map(|k| k.total).sum();
        writeln!(
            f,
            "{:<width$}  {:>8}  {:>12}  {:>10}  {:>10}  {:>10}  {:>5.1}%",
            "all kernels",
            kernels.iter().map(|k| k.calls).sum::<u64>(),
            us(kernel_total),
            "",
            "",
            "",
            share(kernel_total)
        )?;
        writeln!(f)?;
        let kinds = self.kinds_by_time();
        writeln!(
            f,
            "{:<20}  {:>12}  {:>12}  {:>6}",
            "instruction", "count", "time µs", "share"
        )?;
        for (name, s) in kinds {
            writeln!(
                f,
                "{:<20}  {:>12}  {:>12}  {:>5.1}%",
                name,
                s.count,
                us(s.time),
                share(s.time)
            )?;
        }
        writeln!(f, "run time {} µs", us(self.run_time))
    }
}
