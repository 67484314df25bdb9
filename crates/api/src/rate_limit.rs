//! In-memory fixed-window rate limits (SPEC 8.1, 8.4, 8.5): per API key by tier, per endpoint
//! per key, and in aggregate per organization. Windows are aligned to Unix time (the minute,
//! hour and UTC day), so `X-RateLimit-Reset` is the window's end. A request is counted only when
//! every bucket it touches admits it, so a refused request does not eat other quotas.
//!
//! Counts live in this process: several API nodes behind one database each count their own
//! traffic (documented in docs/api.md).

use plantd_model::tier::RequestLimits;
use std::collections::HashMap;
use std::sync::Mutex;

/// One window of one bucket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    pub limit: u64,
    pub window_secs: i64,
}

/// What the headers of a response say about the binding window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowState {
    /// `None`: nothing limits this caller.
    pub limit: Option<u64>,
    pub remaining: Option<u64>,
    /// Unix seconds at which the window resets.
    pub reset: i64,
    pub window_secs: i64,
}

#[derive(Debug)]
pub enum Decision {
    Allowed(WindowState),
    Refused {
        state: WindowState,
        retry_after: u64,
        scope: String,
    },
}

/// The windows of `RequestLimits` that are finite.
pub fn windows(limits: RequestLimits) -> Vec<Window> {
    [
        (limits.per_minute, 60),
        (limits.per_hour, 3_600),
        (limits.per_day, 86_400),
    ]
    .into_iter()
    .filter_map(|(l, w)| {
        l.map(|limit| Window {
            limit,
            window_secs: w,
        })
    })
    .collect()
}

/// A named bucket and its windows, e.g. (`key:ID`, per-key tier limits).
pub struct Bucket<'a> {
    pub name: String,
    /// Shown in the refusal message: "API key", "organization", "endpoint".
    pub label: &'a str,
    pub windows: Vec<Window>,
}

#[derive(Default)]
pub struct RateLimiter {
    /// (bucket name, window length) -> (window start, count)
    counters: Mutex<HashMap<(String, i64), (i64, u64)>>,
}

impl RateLimiter {
    pub fn new() -> Self {
        Self::default()
    }

    /// Counts one request against every bucket, or refuses it if any window is full.
    pub fn check(&self, buckets: &[Bucket<'_>], now_secs: i64) -> Decision {
        self.check_n(buckets, 1, now_secs)
    }

    /// Counts `n` units (requests, telemetry points) against every bucket.
    pub fn check_n(&self, buckets: &[Bucket<'_>], n: u64, now_secs: i64) -> Decision {
        let mut counters = self.counters.lock().unwrap_or_else(|p| p.into_inner());
        let mut binding: Option<WindowState> = None;
        let mut refused: Option<(WindowState, u64, String)> = None;
        for b in buckets {
            for w in &b.windows {
                let start = now_secs.div_euclid(w.window_secs) * w.window_secs;
                let reset = start + w.window_secs;
                let used = match counters.get(&(b.name.clone(), w.window_secs)) {
                    Some(&(s, c)) if s == start => c,
                    _ => 0,
                };
                if used + n > w.limit {
                    let state = WindowState {
                        limit: Some(w.limit),
                        remaining: Some(0),
                        reset,
                        window_secs: w.window_secs,
                    };
                    let retry = (reset - now_secs).max(1) as u64;
                    if refused.as_ref().is_none_or(|(_, r, _)| retry > *r) {
                        let what = match w.window_secs {
                            60 => "minute",
                            3_600 => "hour",
                            _ => "day",
                        };
                        refused = Some((
                            state,
                            retry,
                            format!("{} limit of {} per {what}", b.label, w.limit),
                        ));
                    }
                    continue;
                }
                let remaining = w.limit - used - n;
                let state = WindowState {
                    limit: Some(w.limit),
                    remaining: Some(remaining),
                    reset,
                    window_secs: w.window_secs,
                };
                let tighter = match binding {
                    None => true,
                    Some(cur) => {
                        let cur_rem = cur.remaining.unwrap_or(u64::MAX);
                        remaining < cur_rem
                            || (remaining == cur_rem && w.window_secs < cur.window_secs)
                    }
                };
                if tighter {
                    binding = Some(state);
                }
            }
        }
        if let Some((state, retry_after, scope)) = refused {
            return Decision::Refused {
                state,
                retry_after,
                scope,
            };
        }
        for b in buckets {
            for w in &b.windows {
                let start = now_secs.div_euclid(w.window_secs) * w.window_secs;
                let entry = counters
                    .entry((b.name.clone(), w.window_secs))
                    .or_insert((start, 0));
                if entry.0 != start {
                    *entry = (start, 0);
                }
                entry.1 += n;
            }
        }
        Decision::Allowed(binding.unwrap_or(WindowState {
            limit: None,
            remaining: None,
            reset: now_secs.div_euclid(60) * 60 + 60,
            window_secs: 60,
        }))
    }

    /// The count in the current window of a bucket (0 when none), without counting.
    pub fn current(&self, bucket: &str, window_secs: i64, now_secs: i64) -> u64 {
        let start = now_secs.div_euclid(window_secs) * window_secs;
        let counters = self.counters.lock().unwrap_or_else(|p| p.into_inner());
        match counters.get(&(bucket.to_string(), window_secs)) {
            Some(&(s, c)) if s == start => c,
            _ => 0,
        }
    }

    /// Drops counters of windows that have ended, so memory follows active callers only.
    pub fn prune(&self, now_secs: i64) {
        let mut counters = self.counters.lock().unwrap_or_else(|p| p.into_inner());
        counters.retain(|(_, w), (start, _)| *start + *w > now_secs);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bucket(name: &str, per_minute: u64, per_hour: u64) -> Bucket<'static> {
        Bucket {
            name: name.into(),
            label: "API key",
            windows: windows(RequestLimits {
                per_minute: Some(per_minute),
                per_hour: Some(per_hour),
                per_day: None,
            }),
        }
    }

    #[test]
    fn refuses_past_the_limit_until_the_window_ends() {
        let rl = RateLimiter::new();
        let t = 1_000_040; // 20 s into a minute
        for i in 0..3 {
            match rl.check(&[bucket("k", 3, 100)], t) {
                Decision::Allowed(s) => assert_eq!(s.remaining, Some(2 - i)),
                d => panic!("{d:?}"),
            }
        }
        match rl.check(&[bucket("k", 3, 100)], t) {
            Decision::Refused {
                state,
                retry_after,
                scope,
            } => {
                assert_eq!(retry_after, 40);
                assert_eq!(state.reset, 1_000_040 - 20 + 60);
                assert!(scope.contains("3 per minute"));
            }
            d => panic!("{d:?}"),
        }
        assert!(matches!(
            rl.check(&[bucket("k", 3, 100)], t + 40),
            Decision::Allowed(_)
        ));
    }

    #[test]
    fn a_refusal_does_not_consume_other_buckets() {
        let rl = RateLimiter::new();
        let t = 600;
        let _ = rl.check(&[bucket("full", 1, 100)], t);
        let _ = rl.check(&[bucket("other", 10, 100), bucket("full", 1, 100)], t);
        assert_eq!(rl.current("other", 60, t), 0);
        assert_eq!(rl.current("full", 60, t), 1);
    }

    #[test]
    fn headers_follow_the_tightest_window_and_unlimited_has_none() {
        let rl = RateLimiter::new();
        match rl.check(&[bucket("a", 60, 1000), bucket("b", 5, 1000)], 0) {
            Decision::Allowed(s) => assert_eq!(
                (s.limit, s.remaining, s.window_secs),
                (Some(5), Some(4), 60)
            ),
            d => panic!("{d:?}"),
        }
        match rl.check(&[], 30) {
            Decision::Allowed(s) => assert_eq!((s.limit, s.reset), (None, 60)),
            d => panic!("{d:?}"),
        }
        rl.prune(100_000);
        assert_eq!(rl.current("a", 60, 0), 0);
    }
}
