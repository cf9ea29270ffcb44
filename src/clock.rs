//! Time as the runtime sees it: unix seconds as `f64`, injectable so tests can move it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// `2025-10-23T04:00:00.1Z` for unix seconds, to the millisecond.
pub fn rfc3339(seconds: f64) -> String {
    use time::OffsetDateTime;
    use time::format_description::well_known::Rfc3339;
    let nanos = (seconds * 1e9).round() as i128;
    OffsetDateTime::from_unix_timestamp_nanos(nanos)
        .ok()
        .map(|t| {
            t.replace_nanosecond((t.nanosecond() / 1_000_000) * 1_000_000)
                .unwrap_or(t)
        })
        .and_then(|t| t.format(&Rfc3339).ok())
        .unwrap_or_else(|| format!("{seconds}"))
}

/// A source of the current time in unix seconds.
pub trait Clock: Send + Sync {
    fn now(&self) -> f64;
}

/// The wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> f64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|elapsed| elapsed.as_secs_f64())
            .unwrap_or(0.0)
    }
}

/// A clock that only moves when told to; clones share the same time.
#[derive(Debug, Clone)]
pub struct ManualClock {
    bits: Arc<AtomicU64>,
}

impl ManualClock {
    pub fn new(start: f64) -> Self {
        Self {
            bits: Arc::new(AtomicU64::new(start.to_bits())),
        }
    }

    pub fn set(&self, now: f64) {
        self.bits.store(now.to_bits(), Ordering::SeqCst);
    }

    pub fn advance(&self, seconds: f64) {
        let mut current = self.bits.load(Ordering::SeqCst);
        loop {
            let next = (f64::from_bits(current) + seconds).to_bits();
            match self
                .bits
                .compare_exchange(current, next, Ordering::SeqCst, Ordering::SeqCst)
            {
                Ok(_) => return,
                Err(actual) => current = actual,
            }
        }
    }
}

impl Clock for ManualClock {
    fn now(&self) -> f64 {
        f64::from_bits(self.bits.load(Ordering::SeqCst))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_unix_seconds() {
        assert_eq!(rfc3339(1761192000.1), "2025-10-23T04:00:00.1Z");
    }

    #[test]
    fn manual_clock_clones_share_time() {
        let clock = ManualClock::new(100.0);
        let other = clock.clone();
        clock.advance(1.5);
        assert_eq!(other.now(), 101.5);
        other.set(7.0);
        assert_eq!(clock.now(), 7.0);
    }
}
