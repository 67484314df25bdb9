//! In-memory fixed-window rate limits (SPEC 8.1, 8.3, 8.4, 8.5): per API key by tier, per
//! endpoint per key, in aggregate per organization, per client address without credentials,
//! and telemetry points per organization. Windows are aligned to Unix time (the minute, hour and
//! UTC day), so a window's reset is its end. A request is counted only when every bucket it
//! touches admits it, so a refused request does not eat other quotas.
//!
//! A limit the tier leaves open ("custom", unlimited by default) is a window of
//! [`UNLIMITED`]: counted like the others, so headers and usage are always integers.
//!
//! Counts live in this process. The nodes of a region with NATS share them (`node_events.rs`):
//! each node sends what it counted every quarter second and adds what the others counted, so a
//! limit holds across the region's nodes within what the others admitted in the last quarter
//! second (docs/api.md, "Rate limits").

use plantd_model::tier::{RequestLimits, TelemetryLimits, UNLIMITED};
use std::collections::HashMap;
use std::sync::Mutex;

/// One window of one bucket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    pub limit: u64,
    pub window_secs: i64,
}

/// What the rate-limit headers of a response say: the window that binds (the least remaining).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowState {
    pub limit: u64,
    pub remaining: u64,
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
        /// Which limit refused: "API key limit of 60 per minute".
        scope: String,
    },
}

fn window(limit: Option<u64>, window_secs: i64) -> Window {
    Window {
        limit: limit.unwrap_or(UNLIMITED),
        window_secs,
    }
}

/// The minute, hour and day windows of request limits (SPEC 8.1).
pub fn request_windows(limits: RequestLimits) -> Vec<Window> {
    vec![
        window(limits.per_minute, 60),
        window(limits.per_hour, 3_600),
        window(limits.per_day, 86_400),
    ]
}

/// The minute and hour windows of telemetry ingestion limits (SPEC 8.3), counted in points.
pub fn point_windows(limits: TelemetryLimits) -> Vec<Window> {
    vec![
        window(limits.points_per_minute, 60),
        window(limits.points_per_hour, 3_600),
    ]
}

/// A named bucket and its windows, e.g. (`key:ID`, per-key tier limits).
pub struct Bucket<'a> {
    pub name: String,
    /// Shown in the refusal message: "API key", "organization", "endpoint".
    pub label: &'a str,
    pub windows: Vec<Window>,
}

/// One window's counter: (window length, window start, count).
type Counter = (i64, i64, u64);

#[derive(Default)]
pub struct RateLimiter {
    state: Mutex<State>,
}

/// The counters and what is still to tell other nodes, behind one lock: a request takes it
/// once.
#[derive(Default)]
struct State {
    /// bucket name -> its windows' counters
    counters: HashMap<String, Vec<Counter>>,
    /// While shared with other nodes: what this node counted since it last told them, by
    /// (bucket, window length, window start).
    unshared: Option<HashMap<WindowKey, u64>>,
}

/// A window of a bucket: (bucket, window length, window start).
type WindowKey = (String, i64, i64);

/// Units counted in one window of one bucket: (bucket, window length, window start, count).
pub type CountedUnits = (String, i64, i64, u64);

/// The count in the current window of a bucket (0 when none).
fn used(
    counters: &HashMap<String, Vec<Counter>>,
    name: &str,
    window_secs: i64,
    now_secs: i64,
) -> u64 {
    let start = start_of(now_secs, window_secs);
    counters
        .get(name)
        .and_then(|c| {
            c.iter()
                .find(|(len, s, _)| *len == window_secs && *s == start)
        })
        .map_or(0, |(_, _, count)| *count)
}

/// The decision of counting `n` units against every bucket (nothing counted).
fn decide(
    counters: &HashMap<String, Vec<Counter>>,
    buckets: &[Bucket<'_>],
    n: u64,
    now_secs: i64,
) -> Decision {
    let mut binding: Option<WindowState> = None;
    let mut refused: Option<(WindowState, u64, String)> = None;
    for b in buckets {
        for w in &b.windows {
            let reset = start_of(now_secs, w.window_secs) + w.window_secs;
            let used = used(counters, &b.name, w.window_secs, now_secs);
            if used + n > w.limit {
                let state = WindowState {
                    limit: w.limit,
                    remaining: 0,
                    reset,
                    window_secs: w.window_secs,
                };
                let retry = (reset - now_secs).max(1) as u64;
                if refused.as_ref().is_none_or(|(_, r, _)| retry > *r) {
                    let what = period(w.window_secs);
                    let scope = format!("{} limit of {} per {what}", b.label, w.limit);
                    refused = Some((state, retry, scope));
                }
                continue;
            }
            let state = WindowState {
                limit: w.limit,
                remaining: w.limit - used - n,
                reset,
                window_secs: w.window_secs,
            };
            let tighter = binding.is_none_or(|cur| {
                state.remaining < cur.remaining
                    || (state.remaining == cur.remaining && w.window_secs < cur.window_secs)
            });
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
    Decision::Allowed(binding.unwrap_or(WindowState {
        limit: UNLIMITED,
        remaining: UNLIMITED,
        reset: start_of(now_secs, 60) + 60,
        window_secs: 60,
    }))
}

/// Adds `n` units to every window of every bucket (a window that has ended starts again).
fn count(
    counters: &mut HashMap<String, Vec<Counter>>,
    buckets: &[Bucket<'_>],
    n: u64,
    now_secs: i64,
) {
    for b in buckets {
        let entry = match counters.get_mut(&b.name) {
            Some(e) => e,
            None => counters.entry(b.name.clone()).or_default(),
        };
        for w in &b.windows {
            let start = start_of(now_secs, w.window_secs);
            match entry.iter_mut().find(|(len, _, _)| *len == w.window_secs) {
                Some(c) if c.1 == start => c.2 += n,
                Some(c) => *c = (w.window_secs, start, n),
                None => entry.push((w.window_secs, start, n)),
            }
        }
    }
}

fn start_of(now_secs: i64, window_secs: i64) -> i64 {
    now_secs.div_euclid(window_secs) * window_secs
}

fn period(window_secs: i64) -> &'static str {
    match window_secs {
        60 => "minute",
        3_600 => "hour",
        _ => "day",
    }
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
        let mut state = self.state();
        let decision = decide(&state.counters, buckets, n, now_secs);
        if matches!(decision, Decision::Allowed(_)) {
            count(&mut state.counters, buckets, n, now_secs);
            if let Some(unshared) = state.unshared.as_mut() {
                for b in buckets {
                    for w in &b.windows {
                        let key = (
                            b.name.clone(),
                            w.window_secs,
                            start_of(now_secs, w.window_secs),
                        );
                        *unshared.entry(key).or_default() += n;
                    }
                }
            }
        }
        decision
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts keeping what this node counts for the other nodes of its region.
    pub fn share(&self) {
        self.state().unshared.get_or_insert_with(HashMap::new);
    }

    /// What this node counted since the last call (empty unless shared).
    pub fn take_unshared(&self) -> Vec<CountedUnits> {
        match self.state().unshared.as_mut() {
            Some(map) => map
                .drain()
                .map(|((bucket, len, start), n)| (bucket, len, start, n))
                .collect(),
            None => Vec::new(),
        }
    }

    /// Adds what another node counted; a window that already ended here is ignored, a newer one
    /// starts the count.
    pub fn add_counted(&self, counted: &[CountedUnits]) {
        let counters = &mut self.state().counters;
        for (bucket, len, start, n) in counted {
            let entry = match counters.get_mut(bucket) {
                Some(e) => e,
                None => counters.entry(bucket.clone()).or_default(),
            };
            match entry.iter_mut().find(|(l, _, _)| l == len) {
                Some(c) if c.1 == *start => c.2 += n,
                Some(c) if c.1 < *start => *c = (*len, *start, *n),
                Some(_) => {}
                None => entry.push((*len, *start, *n)),
            }
        }
    }

    /// What counting one unit would answer, without counting it (a refusal decided before
    /// the work, such as a login after too many failures, which are counted only when they
    /// happen).
    pub fn peek(&self, buckets: &[Bucket<'_>], now_secs: i64) -> Decision {
        decide(&self.state().counters, buckets, 1, now_secs)
    }

    /// The count in the current window of a bucket (0 when none), without counting.
    pub fn current(&self, bucket: &str, window_secs: i64, now_secs: i64) -> u64 {
        used(&self.state().counters, bucket, window_secs, now_secs)
    }

    /// Drops counters of windows that have ended, so memory follows active callers only.
    pub fn prune(&self, now_secs: i64) {
        self.state().counters.retain(|_, windows| {
            windows.retain(|(len, start, _)| start + len > now_secs);
            !windows.is_empty()
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bucket(name: &str, per_minute: u64, per_hour: u64) -> Bucket<'static> {
        Bucket {
            name: name.into(),
            label: "API key",
            windows: vec![
                Window {
                    limit: per_minute,
                    window_secs: 60,
                },
                Window {
                    limit: per_hour,
                    window_secs: 3_600,
                },
            ],
        }
    }

    #[test]
    fn refuses_past_the_limit_until_the_window_ends() {
        let rl = RateLimiter::new();
        let t = 1_000_040; // 20 s into a minute
        for i in 0..3 {
            match rl.check(&[bucket("k", 3, 100)], t) {
                Decision::Allowed(s) => assert_eq!(s.remaining, 2 - i),
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
    fn headers_follow_the_tightest_window_and_open_limits_are_integers() {
        let rl = RateLimiter::new();
        match rl.check(&[bucket("a", 60, 1000), bucket("b", 5, 1000)], 0) {
            Decision::Allowed(s) => {
                assert_eq!((s.limit, s.remaining, s.window_secs), (5, 4, 60))
            }
            d => panic!("{d:?}"),
        }
        // A tier without limits still counts, in windows of UNLIMITED.
        let open = Bucket {
            name: "e".into(),
            label: "API key",
            windows: request_windows(RequestLimits::default()),
        };
        match rl.check(&[open], 30) {
            Decision::Allowed(s) => assert_eq!((s.limit, s.remaining), (UNLIMITED, UNLIMITED - 1)),
            d => panic!("{d:?}"),
        }
        assert_eq!(rl.current("e", 86_400, 30), 1);
        rl.prune(100_000);
        assert_eq!(rl.current("a", 60, 0), 0);
    }

    #[test]
    fn counts_shared_between_nodes_add_up() {
        let a = RateLimiter::new();
        let b = RateLimiter::new();
        a.share();
        let bucket = || {
            vec![Bucket {
                name: "key:k".into(),
                label: "API key",
                windows: vec![Window {
                    limit: 10,
                    window_secs: 60,
                }],
            }]
        };
        let now = 6_000;
        for _ in 0..6 {
            assert!(matches!(a.check(&bucket(), now), Decision::Allowed(_)));
        }
        b.add_counted(&a.take_unshared());
        assert!(a.take_unshared().is_empty());
        for _ in 0..4 {
            assert!(matches!(b.check(&bucket(), now), Decision::Allowed(_)));
        }
        assert!(matches!(b.check(&bucket(), now), Decision::Refused { .. }));
        // A count of a window that ended is not added; one of a newer window replaces it.
        b.add_counted(&[("key:k".into(), 60, 5_940, 100)]);
        assert_eq!(b.current("key:k", 60, now), 10);
        b.add_counted(&[("key:k".into(), 60, 6_060, 3)]);
        assert_eq!(b.current("key:k", 60, 6_060), 3);
    }
}
