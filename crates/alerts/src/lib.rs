//! Alert rule evaluation in event time (no storage or API here), and the channels alerts are
//! sent through (email, Slack) with the process's TLS provider.
//!
//! An [`Evaluator`] follows, per rule and asset, whether the rule's condition has held
//! continuously by the points' own timestamps:
//! - a point that meets the condition starts (or continues) a streak; once the streak has lasted
//!   `duration` (0: at once) and no alert is open, the rule fires;
//! - a point that breaks the condition ends the streak; a gap between two points longer than
//!   `max_gap` ends it too (nothing is known about the time in between);
//! - with `auto_resolve`, an open alert resolves once the condition has been broken
//!   continuously for `duration` (0: at the first breaking point);
//! - points older than the last one evaluated for the series arrive late and are not evaluated
//!   (their order in event time can no longer be honoured);
//! - after an alert is resolved by hand while the condition still holds, the rule fires again
//!   only after the condition has been broken once (no immediate re-alert).

pub mod channels;
mod evaluator;
pub mod tls;

pub use evaluator::{Evaluator, RuleSpec, Transition};
