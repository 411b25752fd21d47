//! A fixed-bucket histogram of durations for Prometheus, in seconds. One is written by one core
//! (relaxed atomics, no contention) or, for a flow gate, by whichever core waited; the admin
//! port sums them on a scrape. The buckets resolve both Ringside's own sub-millisecond overhead
//! and minute-long streams.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// Upper bounds of the buckets, in microseconds (100 µs … 10 min), and as Prometheus writes them.
pub const BOUNDS_US: [u64; 21] = [
    100,
    250,
    500,
    1_000,
    2_500,
    5_000,
    10_000,
    25_000,
    50_000,
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    30_000_000,
    60_000_000,
    120_000_000,
    300_000_000,
    600_000_000,
];
const LE: [&str; 21] = [
    "0.0001", "0.00025", "0.0005", "0.001", "0.0025", "0.005", "0.01", "0.025", "0.05", "0.1",
    "0.25", "0.5", "1", "2.5", "5", "10", "30", "60", "120", "300", "600",
];

/// Counts per bucket (the last: above every bound) and the sum in microseconds.
#[derive(Debug, Default)]
pub struct Histogram {
    counts: [AtomicU64; BOUNDS_US.len() + 1],
    sum_us: AtomicU64,
}

impl Histogram {
    pub fn observe(&self, d: Duration) {
        self.observe_us(d.as_micros().min(u64::MAX as u128) as u64);
    }

    pub fn observe_us(&self, us: u64) {
        let i = BOUNDS_US.partition_point(|&b| b < us);
        self.counts[i].fetch_add(1, Relaxed);
        self.sum_us.fetch_add(us, Relaxed);
    }

    /// Start again from zero (a slot handed to a new connection by a reload).
    pub fn clear(&self) {
        for c in &self.counts {
            c.store(0, Relaxed);
        }
        self.sum_us.store(0, Relaxed);
    }

    pub fn count(&self) -> u64 {
        self.counts.iter().map(|c| c.load(Relaxed)).sum()
    }
}

/// The sum of several histograms (one per core), ready to be written.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Merged {
    pub counts: [u64; BOUNDS_US.len() + 1],
    pub sum_us: u64,
}

impl Merged {
    pub fn of<'a>(parts: impl IntoIterator<Item = &'a Histogram>) -> Merged {
        let mut m = Merged::default();
        for h in parts {
            for (i, c) in h.counts.iter().enumerate() {
                m.counts[i] += c.load(Relaxed);
            }
            m.sum_us += h.sum_us.load(Relaxed);
        }
        m
    }

    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Observations of at most `bound_us` (a bucket bound: exact; between bounds, rounded
    /// down to the bound below).
    pub fn at_most(&self, bound_us: u64) -> u64 {
        let buckets = BOUNDS_US.partition_point(|&b| b <= bound_us);
        self.counts[..buckets].iter().sum()
    }

    /// The quantile `q` (0..1) by linear interpolation inside its bucket (as Prometheus's
    /// `histogram_quantile` does), in seconds; `None` without observations.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        let total = self.count();
        if total == 0 {
            return None;
        }
        let rank = q.clamp(0.0, 1.0) * total as f64;
        let mut seen = 0u64;
        for (i, &c) in self.counts.iter().enumerate() {
            if c > 0 && (seen + c) as f64 >= rank {
                let lo = if i == 0 { 0 } else { BOUNDS_US[i - 1] };
                let Some(&hi) = BOUNDS_US.get(i) else {
                    return Some(lo as f64 / 1e6); // above every bound: its lower edge
                };
                let within = (rank - seen as f64) / c as f64;
                return Some((lo as f64 + (hi - lo) as f64 * within) / 1e6);
            }
            seen += c;
        }
        None
    }

    /// Write the `_bucket`, `_sum` and `_count` lines of `name` with `labels` (already
    /// escaped, without braces; may be empty).
    pub fn write(&self, out: &mut String, name: &str, labels: &str) {
        let sep = if labels.is_empty() { "" } else { "," };
        let mut cumulative = 0;
        for (i, le) in LE.iter().enumerate() {
            cumulative += self.counts[i];
            let _ = writeln!(
                out,
                "{name}_bucket{{{labels}{sep}le=\"{le}\"}} {cumulative}"
            );
        }
        cumulative += self.counts[BOUNDS_US.len()];
        let _ = writeln!(
            out,
            "{name}_bucket{{{labels}{sep}le=\"+Inf\"}} {cumulative}"
        );
        let braces = |s: &str| {
            if s.is_empty() {
                String::new()
            } else {
                format!("{{{s}}}")
            }
        };
        let _ = writeln!(
            out,
            "{name}_sum{} {}",
            braces(labels),
            self.sum_us as f64 / 1e6
        );
        let _ = writeln!(out, "{name}_count{} {cumulative}", braces(labels));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_cumulative_and_the_sum_is_in_seconds() {
        let h = Histogram::default();
        for us in [50, 100, 101, 2_000_000, 700_000_000] {
            h.observe_us(us);
        }
        let m = Merged::of([&h]);
        assert_eq!(m.count(), 5);
        let mut out = String::new();
        m.write(&mut out, "x_seconds", "route=\"a\"");
        assert!(
            out.contains("x_seconds_bucket{route=\"a\",le=\"0.0001\"} 2\n"),
            "{out}"
        );
        assert!(out.contains("x_seconds_bucket{route=\"a\",le=\"0.00025\"} 3\n"));
        assert!(out.contains("x_seconds_bucket{route=\"a\",le=\"600\"} 4\n"));
        assert!(out.contains("x_seconds_bucket{route=\"a\",le=\"+Inf\"} 5\n"));
        assert!(out.contains("x_seconds_count{route=\"a\"} 5\n"));
        assert!(
            out.contains("x_seconds_sum{route=\"a\"} 702.000251\n"),
            "{out}"
        );
    }

    #[test]
    fn quantiles_interpolate_inside_the_bucket() {
        let h = Histogram::default();
        for _ in 0..100 {
            h.observe(Duration::from_millis(3)); // (2.5 ms, 5 ms]
        }
        let m = Merged::of([&h]);
        let p50 = m.quantile(0.5).unwrap_or(0.0);
        assert!((0.0025..=0.005).contains(&p50), "{p50}");
        assert_eq!(Merged::default().quantile(0.5), None);
        assert_eq!(m.at_most(2_500), 0);
        assert_eq!(m.at_most(5_000), 100);
        let mut out = String::new();
        Merged::default().write(&mut out, "y", "");
        assert!(
            out.contains("y_bucket{le=\"+Inf\"} 0\ny_sum 0\ny_count 0\n"),
            "{out}"
        );
    }
}
