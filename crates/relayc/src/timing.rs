//! `relayc run --warmup K --repeat N | --duration SECONDS`: runs a function K times untimed,
//! then N times (or for a time) timed, and summarizes the wall times per run as ONNX Runtime's
//! `onnxruntime_perf_test` and tvmc do: mean, standard deviation, percentiles, extremes.

use std::num::NonZeroUsize;
use std::time::{Duration, Instant};

use clap::Args;

/// How many runs `relayc run` times.
#[derive(Debug, Args)]
pub struct TimingArgs {
    /// Runs the entry function N times and prints the time per run on stderr (mean, standard
    /// deviation, p50, p90, p99, min, max) with the compile or load time; the result is
    /// printed once.
    #[arg(long, value_name = "N", conflicts_with = "duration")]
    pub repeat: Option<NonZeroUsize>,
    /// Runs the entry function again and again for this many seconds (at least once) and
    /// prints the times as `--repeat` does.
    #[arg(long, value_name = "SECONDS", value_parser = parse_seconds)]
    pub duration: Option<Duration>,
    /// Untimed runs before the timed ones (caches, kernel threads and storage pools warm).
    #[arg(long, value_name = "K", default_value_t = 0)]
    pub warmup: usize,
}

impl TimingArgs {
    /// Whether the runs are timed (`--repeat` or `--duration`).
    pub fn timed(&self) -> bool {
        self.repeat.is_some() || self.duration.is_some()
    }

    /// Calls `run`: `--warmup` times untimed, then `--repeat` times or for `--duration` (once
    /// when neither is given), stopping at the first error. Returns the last result and the
    /// wall time of each timed run; earlier results are dropped outside the timed region.
    pub fn run<T, E>(
        &self,
        mut run: impl FnMut() -> Result<T, E>,
    ) -> (Result<T, E>, Vec<Duration>) {
        for _ in 0..self.warmup {
            if let Err(error) = run() {
                return (Err(error), Vec::new());
            }
        }
        let count = self.repeat.map_or(usize::MAX, NonZeroUsize::get);
        let deadline = self.duration.map(|d| Instant::now() + d);
        let mut runs = Vec::with_capacity(count.min(1 << 16));
        let start = Instant::now();
        let mut last = run();
        runs.push(start.elapsed());
        let more = |runs: &Vec<Duration>| match deadline {
            Some(deadline) => Instant::now() < deadline,
            None => runs.len() < count && self.repeat.is_some(),
        };
        while last.is_ok() && more(&runs) {
            let start = Instant::now();
            let result = run();
            runs.push(start.elapsed());
            drop(std::mem::replace(&mut last, result));
        }
        (last, runs)
    }

    /// The line that summarizes `runs`, e.g. `run: 3 runs after 1 warm-up: mean 1.234 ms, std
    /// 0.012 ms, p50 1.230 ms, p90 1.250 ms, p99 1.250 ms, min 1.220 ms, max 1.250 ms`.
    pub fn summary(&self, runs: &[Duration]) -> String {
        let Some(stats) = Stats::of(runs) else {
            return String::new();
        };
        let n = runs.len();
        let warmup = match self.warmup {
            0 => String::new(),
            1 => " after 1 warm-up".to_owned(),
            k => format!(" after {k} warm-ups"),
        };
        format!(
            "run: {n} run{}{warmup}: mean {}, std {}, p50 {}, p90 {}, p99 {}, min {}, max {}\n",
            if n == 1 { "" } else { "s" },
            duration(stats.mean),
            duration(stats.std),
            duration(stats.p50),
            duration(stats.p90),
            duration(stats.p99),
            duration(stats.min),
            duration(stats.max),
        )
    }
}

/// The statistics of a set of run times.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stats {
    pub mean: Duration,
    /// The sample standard deviation (0 for one run).
    pub std: Duration,
    pub p50: Duration,
    pub p90: Duration,
    pub p99: Duration,
    pub min: Duration,
    pub max: Duration,
}

impl Stats {
    /// The statistics of `runs`, or `None` when there are none. Percentiles are nearest-rank:
    /// the smallest time that at least that share of the runs do not exceed.
    pub fn of(runs: &[Duration]) -> Option<Stats> {
        let mut sorted = runs.to_vec();
        sorted.sort_unstable();
        let (&min, &max) = (sorted.first()?, sorted.last()?);
        let n = sorted.len() as f64;
        let secs: Vec<f64> = sorted.iter().map(Duration::as_secs_f64).collect();
        let mean = secs.iter().sum::<f64>() / n;
        let var = if sorted.len() > 1 {
            secs.iter().map(|s| (s - mean) * (s - mean)).sum::<f64>() / (n - 1.0)
        } else {
            0.0
        };
        let rank = |p: f64| {
            let k = (p * n).ceil() as usize;
            sorted[k.clamp(1, sorted.len()) - 1]
        };
        Some(Stats {
            mean: Duration::from_secs_f64(mean),
            std: Duration::from_secs_f64(var.sqrt()),
            p50: rank(0.50),
            p90: rank(0.90),
            p99: rank(0.99),
            min,
            max,
        })
    }
}

/// Parses `--duration`: a positive number of seconds.
fn parse_seconds(text: &str) -> Result<Duration, String> {
    match text.parse::<f64>() {
        Ok(s) if s > 0.0 && s.is_finite() && s <= 1e9 => Ok(Duration::from_secs_f64(s)),
        _ => Err(format!(
            "expected a positive number of seconds, got `{text}`"
        )),
    }
}

/// A duration with a unit that fits it: `850 ns`, `12.34 µs`, `1.234 ms`, `2.500 s`.
pub fn duration(d: Duration) -> String {
    let secs = d.as_secs_f64();
    if secs < 1e-6 {
        format!("{} ns", d.as_nanos())
    } else if secs < 1e-3 {
        format!("{:.2} µs", secs * 1e6)
    } else if secs < 1.0 {
        format!("{:.3} ms", secs * 1e3)
    } else {
        format!("{secs:.3} s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: &[u64]) -> Vec<Duration> {
        v.iter().map(|&m| Duration::from_millis(m)).collect()
    }

    #[test]
    fn statistics_of_run_times() {
        let runs = ms(&[5, 1, 4, 2, 3, 10, 6, 7, 8, 9]);
        let s = Stats::of(&runs).unwrap();
        assert_eq!(s.mean, Duration::from_micros(5500));
        assert_eq!(
            (s.min, s.max),
            (Duration::from_millis(1), Duration::from_millis(10))
        );
        assert_eq!(s.p50, Duration::from_millis(5));
        assert_eq!(s.p90, Duration::from_millis(9));
        assert_eq!(s.p99, Duration::from_millis(10));
        // The sample standard deviation of 1..=10 is sqrt(55/6).
        let expected = (55.0f64 / 6.0).sqrt() * 1e-3;
        assert!((s.std.as_secs_f64() - expected).abs() < 1e-9, "{:?}", s.std);
        let one = Stats::of(&ms(&[3])).unwrap();
        assert_eq!(
            (one.p50, one.p99, one.std),
            (
                Duration::from_millis(3),
                Duration::from_millis(3),
                Duration::ZERO
            )
        );
        assert!(Stats::of(&[]).is_none());
    }

    #[test]
    fn warmup_repeat_and_duration_count_runs() {
        let timing = |repeat: Option<usize>, duration: Option<Duration>, warmup| TimingArgs {
            repeat: repeat.and_then(NonZeroUsize::new),
            duration,
            warmup,
        };
        let mut calls = 0;
        let (last, runs) = timing(Some(3), None, 2).run(|| {
            calls += 1;
            Ok::<_, ()>(calls)
        });
        assert_eq!((last, runs.len(), calls), (Ok(5), 3, 5));
        let (_, runs) = timing(None, None, 0).run(|| Ok::<_, ()>(()));
        assert_eq!(runs.len(), 1);
        let (_, runs) = timing(None, Some(Duration::from_millis(20)), 0).run(|| {
            std::thread::sleep(Duration::from_millis(2));
            Ok::<_, ()>(())
        });
        assert!((2..=11).contains(&runs.len()), "{}", runs.len());
        // An error stops the runs, in the warm-up too.
        let mut calls = 0;
        let (last, runs) = timing(Some(5), None, 0).run(|| {
            calls += 1;
            if calls == 2 { Err("failed") } else { Ok(()) }
        });
        assert_eq!((last, runs.len()), (Err("failed"), 2));
        let (last, runs) = timing(Some(5), None, 3).run(|| Err::<(), _>("failed"));
        assert_eq!((last, runs.len()), (Err("failed"), 0));
    }

    #[test]
    fn the_summary_names_every_statistic() {
        let timing = TimingArgs {
            repeat: NonZeroUsize::new(2),
            duration: None,
            warmup: 1,
        };
        let line = timing.summary(&ms(&[2, 4]));
        assert_eq!(
            line,
            "run: 2 runs after 1 warm-up: mean 3.000 ms, std 1.414 ms, p50 2.000 ms, p90 4.000 ms, \
             p99 4.000 ms, min 2.000 ms, max 4.000 ms\n"
        );
    }
}
