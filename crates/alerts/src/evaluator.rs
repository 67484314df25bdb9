//! Alert rule evaluation in event time: [`Evaluator`] (the rules are in the crate's page).

use plantd_model::alert::Operator;
use std::collections::HashMap;

/// What an evaluator needs of a rule.
#[derive(Clone, Debug, PartialEq)]
pub struct RuleSpec {
    pub operator: Operator,
    pub threshold: f64,
    /// How long the condition must hold (and, for auto-resolve, be broken), in ms.
    pub duration_ms: i64,
    /// A longer silence between two points ends a streak, in ms.
    pub max_gap_ms: i64,
    pub auto_resolve: bool,
}

/// What a point changed.
#[derive(Clone, Debug, PartialEq)]
pub enum Transition {
    /// The condition has held for the duration: open an alert (value and time of this point).
    Fire { value: f64, at_ms: i64 },
    /// The condition has been broken for the duration: resolve the open alert.
    Resolve { value: f64, at_ms: i64 },
}

#[derive(Clone, Debug, Default, PartialEq)]
struct SeriesState {
    last_ms: Option<i64>,
    /// Start of the current run of points meeting the condition.
    held_since: Option<i64>,
    /// Start of the current run of points breaking it (while an alert is open).
    broken_since: Option<i64>,
    open: bool,
    /// Resolved by hand while the condition held: wait for it to break once.
    rearm: bool,
}

/// Evaluation state of many (rule, asset) pairs.
#[derive(Debug, Default)]
pub struct Evaluator {
    series: HashMap<(String, String), SeriesState>,
}

impl Evaluator {
    pub fn new() -> Self {
        Self::default()
    }

    /// Tells the evaluator whether an alert is open for `rule_id`/`asset_id` (from storage, at
    /// start, or after a user resolved one).
    pub fn set_open(&mut self, rule_id: &str, asset_id: &str, open: bool) {
        let s = self
            .series
            .entry((rule_id.to_string(), asset_id.to_string()))
            .or_default();
        if s.open && !open {
            s.rearm = s.held_since.is_some();
            s.held_since = None;
        }
        s.open = open;
        s.broken_since = None;
    }

    /// Forgets a rule (deleted, disabled or changed).
    pub fn forget_rule(&mut self, rule_id: &str) {
        self.series.retain(|(r, _), _| r != rule_id);
    }

    /// Evaluates one point of the rule's tag for `asset_id`.
    pub fn observe(
        &mut self,
        rule_id: &str,
        rule: &RuleSpec,
        asset_id: &str,
        at_ms: i64,
        value: f64,
    ) -> Option<Transition> {
        let s = self
            .series
            .entry((rule_id.to_string(), asset_id.to_string()))
            .or_default();
        if let Some(last) = s.last_ms {
            if at_ms <= last {
                return None;
            }
            if at_ms - last > rule.max_gap_ms {
                s.held_since = None;
                s.broken_since = None;
            }
        }
        s.last_ms = Some(at_ms);
        if rule.operator.holds(value, rule.threshold) {
            s.broken_since = None;
            if s.rearm {
                return None;
            }
            let since = *s.held_since.get_or_insert(at_ms);
            if !s.open && at_ms - since >= rule.duration_ms {
                s.open = true;
                return Some(Transition::Fire { value, at_ms });
            }
            None
        } else {
            s.held_since = None;
            s.rearm = false;
            if !s.open || !rule.auto_resolve {
                return None;
            }
            let since = *s.broken_since.get_or_insert(at_ms);
            if at_ms - since >= rule.duration_ms {
                s.open = false;
                s.broken_since = None;
                return Some(Transition::Resolve { value, at_ms });
            }
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(duration_s: i64) -> RuleSpec {
        RuleSpec {
            operator: Operator::Gt,
            threshold: 7.0,
            duration_ms: duration_s * 1000,
            max_gap_ms: 60_000,
            auto_resolve: true,
        }
    }

    /// Feeds (seconds, value) points; returns the transitions with their point's index.
    fn feed(e: &mut Evaluator, r: &RuleSpec, points: &[(i64, f64)]) -> Vec<(usize, Transition)> {
        points
            .iter()
            .enumerate()
            .filter_map(|(i, &(t, v))| e.observe("r", r, "A", t * 1000, v).map(|x| (i, x)))
            .collect()
    }

    #[test]
    fn zero_duration_fires_on_the_first_matching_point_once() {
        let mut e = Evaluator::new();
        let got = feed(
            &mut e,
            &rule(0),
            &[(0, 1.0), (1, 8.0), (2, 9.0), (3, 1.0), (4, 8.5)],
        );
        assert_eq!(
            got,
            vec![
                (
                    1,
                    Transition::Fire {
                        value: 8.0,
                        at_ms: 1000
                    }
                ),
                (
                    3,
                    Transition::Resolve {
                        value: 1.0,
                        at_ms: 3000
                    }
                ),
                (
                    4,
                    Transition::Fire {
                        value: 8.5,
                        at_ms: 4000
                    }
                ),
            ]
        );
    }

    #[test]
    fn fires_after_holding_for_the_duration_by_event_time() {
        let mut e = Evaluator::new();
        // Holds from t=10; fires at the first point at or after t=40.
        let got = feed(
            &mut e,
            &rule(30),
            &[
                (0, 1.0),
                (10, 8.0),
                (20, 8.0),
                (35, 9.0),
                (40, 8.0),
                (50, 8.0),
            ],
        );
        assert_eq!(
            got,
            vec![(
                4,
                Transition::Fire {
                    value: 8.0,
                    at_ms: 40_000
                }
            )]
        );
    }

    #[test]
    fn a_breaking_point_or_a_gap_resets_the_timer() {
        let mut e = Evaluator::new();
        let got = feed(
            &mut e,
            &rule(30),
            &[(0, 8.0), (20, 8.0), (25, 1.0), (30, 8.0), (50, 8.0)],
        );
        assert!(got.is_empty(), "{got:?}");
        let mut e = Evaluator::new();
        // 100 s of silence (max gap 60 s) between 20 and 120: the streak restarts at 120.
        let got = feed(
            &mut e,
            &rule(30),
            &[(0, 8.0), (20, 8.0), (120, 8.0), (140, 8.0), (150, 8.0)],
        );
        assert_eq!(
            got,
            vec![(
                4,
                Transition::Fire {
                    value: 8.0,
                    at_ms: 150_000
                }
            )]
        );
    }

    #[test]
    fn auto_resolve_waits_for_the_duration_broken() {
        let mut e = Evaluator::new();
        let got = feed(
            &mut e,
            &rule(10),
            &[
                (0, 8.0),
                (10, 8.0),
                (20, 1.0),
                (25, 8.0),
                (26, 1.0),
                (30, 1.0),
                (36, 1.0),
            ],
        );
        assert_eq!(
            got,
            vec![
                (
                    1,
                    Transition::Fire {
                        value: 8.0,
                        at_ms: 10_000
                    }
                ),
                (
                    6,
                    Transition::Resolve {
                        value: 1.0,
                        at_ms: 36_000
                    }
                ),
            ]
        );
        let mut manual = rule(0);
        manual.auto_resolve = false;
        let mut e = Evaluator::new();
        let got = feed(&mut e, &manual, &[(0, 8.0), (1, 1.0), (2, 8.0)]);
        assert_eq!(
            got,
            vec![(
                0,
                Transition::Fire {
                    value: 8.0,
                    at_ms: 0
                }
            )],
            "one open alert at most"
        );
    }

    #[test]
    fn late_points_are_not_evaluated() {
        let mut e = Evaluator::new();
        let got = feed(
            &mut e,
            &rule(0),
            &[(10, 1.0), (5, 9.0), (10, 9.0), (11, 9.0)],
        );
        assert_eq!(
            got,
            vec![(
                3,
                Transition::Fire {
                    value: 9.0,
                    at_ms: 11_000
                }
            )]
        );
    }

    #[test]
    fn resolved_by_hand_rearms_only_after_the_condition_breaks() {
        let mut e = Evaluator::new();
        let r = rule(0);
        assert!(e.observe("r", &r, "A", 0, 9.0).is_some());
        e.set_open("r", "A", false);
        assert_eq!(e.observe("r", &r, "A", 1000, 9.0), None);
        assert_eq!(e.observe("r", &r, "A", 2000, 1.0), None);
        assert_eq!(
            e.observe("r", &r, "A", 3000, 9.0),
            Some(Transition::Fire {
                value: 9.0,
                at_ms: 3000
            })
        );
        // Assets and rules are separate series.
        assert!(e.observe("r", &r, "B", 3000, 9.0).is_some());
        e.forget_rule("r");
        assert!(
            e.observe("r", &r, "A", 4000, 9.0).is_some(),
            "a forgotten rule starts afresh"
        );
    }
}
