//! `--profile-format chrome`: a timeline of one or more runs, as the Chrome trace event format
//! (what `chrome://tracing` and Perfetto open) holds it: a span per VM function call (from its
//! frame's push to its pop; a tail call ends its caller's span and starts its own) and a span
//! per kernel call on the VM's thread, and a span per kernel thread taking part in each
//! parallel kernel call (`relay_kernel::Pool` tracing), each with the thread it ran on.

use std::time::{Duration, Instant};

use serde_json::{Value as Json, json};

/// The most events a trace keeps; later ones are counted in [`Trace::dropped`].
pub const MAX_EVENTS: usize = 4_000_000;

/// What a span is of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpanKind {
    /// A call of the VM function with this index.
    Function(u32),
    /// A call of the kernel with this index.
    Kernel(u32),
}

/// One span: what ran, on which thread (0: the VM's; 1 and up: kernel threads), from when
/// (since the trace began) for how long.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    /// What ran.
    pub kind: SpanKind,
    /// The thread.
    pub thread: u32,
    /// Its start, since the trace began.
    pub start: Duration,
    /// How long it took.
    pub duration: Duration,
}

/// The spans recorded so far.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Trace {
    /// When the trace began.
    origin: Instant,
    /// The spans that ended, in the order they ended.
    pub spans: Vec<Span>,
    /// The VM function calls still running, innermost last.
    open: Vec<(u32, Instant)>,
    /// Spans not kept because the trace held [`MAX_EVENTS`] already.
    pub dropped: u64,
}

impl Default for Trace {
    fn default() -> Trace {
        Trace::new()
    }
}

impl Trace {
    /// An empty trace beginning now.
    pub fn new() -> Trace {
        Trace {
            origin: Instant::now(),
            spans: Vec::new(),
            open: Vec::new(),
            dropped: 0,
        }
    }

    /// A span of `kind` on `thread` from `start` to `end`.
    pub fn record(&mut self, kind: SpanKind, thread: u32, start: Instant, end: Instant) {
        if self.spans.len() >= MAX_EVENTS {
            self.dropped += 1;
            return;
        }
        self.spans.push(Span {
            kind,
            thread,
            start: start.saturating_duration_since(self.origin),
            duration: end.saturating_duration_since(start),
        });
    }

    /// A frame of VM function `func` was pushed.
    pub fn enter(&mut self, func: u32) {
        self.open.push((func, Instant::now()));
    }

    /// The innermost frame was popped.
    pub fn exit(&mut self) {
        if let Some((func, start)) = self.open.pop() {
            self.record(SpanKind::Function(func), 0, start, Instant::now());
        }
    }

    /// Every frame still open ends now (a run that returned or failed).
    pub fn exit_all(&mut self) {
        while !self.open.is_empty() {
            self.exit();
        }
    }

    /// The trace in the Chrome trace event format: complete (`"X"`) events in microseconds
    /// with the function or kernel name (`functions`, `kernels`: names by index), and the
    /// threads named.
    pub fn chrome_json(&self, functions: &[&str], kernels: &[&str]) -> Json {
        let name = |kind: SpanKind| match kind {
            SpanKind::Function(i) => (
                functions.get(i as usize).map_or("?", |n| n).to_owned(),
                "function",
            ),
            SpanKind::Kernel(i) => (
                kernels.get(i as usize).map_or("?", |n| n).to_owned(),
                "kernel",
            ),
        };
        let us = |d: Duration| d.as_secs_f64() * 1e6;
        let mut events: Vec<Json> = self
            .spans
            .iter()
            .map(|s| {
                let (name, category) = name(s.kind);
                json!({
                    "name": name, "cat": category, "ph": "X", "pid": 1, "tid": s.thread,
                    "ts": us(s.start), "dur": us(s.duration),
                })
            })
            .collect();
        let mut threads: Vec<u32> = self.spans.iter().map(|s| s.thread).collect();
        threads.sort_unstable();
        threads.dedup();
        for t in threads {
            let thread = if t == 0 {
                "VM".to_owned()
            } else {
                format!("kernel thread {t}")
            };
            events.push(json!({
                "name": "thread_name", "ph": "M", "pid": 1, "tid": t,
                "args": { "name": thread },
            }));
        }
        json!({
            "traceEvents": events,
            "displayTimeUnit": "ms",
            "otherData": { "dropped_events": self.dropped },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_calls_and_kernels_become_complete_events() {
        let mut t = Trace::new();
        t.enter(0);
        t.enter(1);
        let start = Instant::now();
        t.record(
            SpanKind::Kernel(0),
            0,
            start,
            start + Duration::from_micros(5),
        );
        t.record(
            SpanKind::Kernel(0),
            2,
            start,
            start + Duration::from_micros(3),
        );
        t.exit();
        t.exit_all();
        let spans: Vec<SpanKind> = t.spans.iter().map(|s| s.kind).collect();
        assert_eq!(
            spans,
            [
                SpanKind::Kernel(0),
                SpanKind::Kernel(0),
                SpanKind::Function(1),
                SpanKind::Function(0)
            ]
        );
        // The outer call spans the inner one.
        let (inner, outer) = (t.spans[2], t.spans[3]);
        assert!(
            outer.start <= inner.start
                && inner.start + inner.duration <= outer.start + outer.duration
        );
        let json = t.chrome_json(&["main", "loop"], &["fused_add"]);
        let events = json["traceEvents"].as_array().unwrap();
        assert_eq!(events.len(), 4 + 2, "{json}");
        assert_eq!(events[0]["name"], "fused_add");
        assert_eq!(events[0]["dur"], 5.0);
        assert_eq!(events[1]["tid"], 2);
        assert_eq!(events[2]["name"], "loop");
        assert_eq!(events[3]["cat"], "function");
        assert_eq!(events[5]["args"]["name"], "kernel thread 2");
    }

    #[test]
    fn a_full_trace_counts_what_it_drops() {
        let mut t = Trace::new();
        t.spans = vec![
            Span {
                kind: SpanKind::Kernel(0),
                thread: 0,
                start: Duration::ZERO,
                duration: Duration::ZERO,
            };
            MAX_EVENTS
        ];
        let now = Instant::now();
        t.record(SpanKind::Kernel(0), 0, now, now);
        assert_eq!((t.spans.len(), t.dropped), (MAX_EVENTS, 1));
    }
}
