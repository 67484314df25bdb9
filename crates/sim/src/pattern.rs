//! Value patterns of SPEC 2.17, as functions of the simulation time (seconds since start) and a
//! random source: the same seed and the same times give the same values.

use rand::Rng;
use serde::Deserialize;
use std::path::PathBuf;

/// A pattern as configured (`simulation:` of a custom variable).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Pattern {
    /// Always `value`.
    Constant { value: f64 },
    /// Uniform in `[min, max]`, the band moving by `drift` per minute.
    Random {
        min: f64,
        max: f64,
        #[serde(default)]
        drift: f64,
    },
    /// `offset + amplitude * sin(2 pi t / period_seconds)`.
    Sine {
        amplitude: f64,
        period_seconds: f64,
        #[serde(default)]
        offset: f64,
    },
    /// From `start` to `end` over `duration` seconds, then holds `end`.
    Ramp { start: f64, end: f64, duration: f64 },
    /// Each of `values` for `interval` seconds, in turn, repeating.
    Step { values: Vec<f64>, interval: f64 },
    /// Normally distributed around `mean`.
    Noise { mean: f64, stddev: f64 },
    /// Values of a CSV file, played at the pace of its timestamps.
    Replay {
        file: PathBuf,
        #[serde(default, rename = "loop")]
        looped: bool,
        timestamp_column: String,
        value_column: String,
    },
}

/// A pattern ready to play (a replay's samples loaded).
#[derive(Clone, Debug, PartialEq)]
pub enum Player {
    Formula(Pattern),
    /// Samples as (seconds after the first, value), ascending.
    Samples {
        samples: Vec<(f64, f64)>,
        looped: bool,
    },
}

impl Pattern {
    /// Checks the parameters, naming the bad one.
    pub fn check(&self) -> Result<(), String> {
        let finite = |name: &str, v: f64| {
            if v.is_finite() {
                Ok(())
            } else {
                Err(format!("{name} must be a finite number"))
            }
        };
        match self {
            Pattern::Constant { value } => finite("value", *value),
            Pattern::Random { min, max, drift } => {
                finite("min", *min)?;
                finite("max", *max)?;
                finite("drift", *drift)?;
                if min > max {
                    return Err("min must not be greater than max".into());
                }
                Ok(())
            }
            Pattern::Sine {
                amplitude,
                period_seconds,
                offset,
            } => {
                finite("amplitude", *amplitude)?;
                finite("offset", *offset)?;
                if !(period_seconds.is_finite() && *period_seconds > 0.0) {
                    return Err("period_seconds must be a positive number".into());
                }
                Ok(())
            }
            Pattern::Ramp {
                start,
                end,
                duration,
            } => {
                finite("start", *start)?;
                finite("end", *end)?;
                if !(duration.is_finite() && *duration > 0.0) {
                    return Err("duration must be a positive number of seconds".into());
                }
                Ok(())
            }
            Pattern::Step { values, interval } => {
                if values.is_empty() {
                    return Err("values must hold at least one number".into());
                }
                for v in values {
                    finite("values", *v)?;
                }
                if !(interval.is_finite() && *interval > 0.0) {
                    return Err("interval must be a positive number of seconds".into());
                }
                Ok(())
            }
            Pattern::Noise { mean, stddev } => {
                finite("mean", *mean)?;
                if !(stddev.is_finite() && *stddev >= 0.0) {
                    return Err("stddev must be a number >= 0".into());
                }
                Ok(())
            }
            Pattern::Replay { .. } => Ok(()),
        }
    }

    /// Loads what the pattern needs (a replay's file, relative to `base`).
    pub fn player(&self, base: &std::path::Path) -> Result<Player, String> {
        self.check()?;
        match self {
            Pattern::Replay {
                file,
                looped,
                timestamp_column,
                value_column,
            } => {
                let path = base.join(file);
                let samples = read_replay(&path, timestamp_column, value_column)?;
                Ok(Player::Samples {
                    samples,
                    looped: *looped,
                })
            }
            other => Ok(Player::Formula(other.clone())),
        }
    }
}

/// Reads (timestamp, value) columns of a CSV file with a header row. Timestamps are RFC 3339
/// or numbers of seconds; they must not go backwards.
fn read_replay(
    path: &std::path::Path,
    ts_col: &str,
    value_col: &str,
) -> Result<Vec<(f64, f64)>, String> {
    let shown = path.display();
    let mut reader =
        csv::Reader::from_path(path).map_err(|e| format!("cannot read {shown}: {e}"))?;
    let headers = reader
        .headers()
        .map_err(|e| format!("{shown}: {e}"))?
        .clone();
    let column = |name: &str| {
        headers
            .iter()
            .position(|h| h.trim() == name)
            .ok_or_else(|| format!("{shown} has no column {name:?}"))
    };
    let (ti, vi) = (column(ts_col)?, column(value_col)?);
    let mut out: Vec<(f64, f64)> = Vec::new();
    for (n, record) in reader.records().enumerate() {
        let line = n + 2;
        let record = record.map_err(|e| format!("{shown} line {line}: {e}"))?;
        let field = |i: usize| record.get(i).unwrap_or("").trim();
        let t = parse_time(field(ti))
            .ok_or_else(|| format!("{shown} line {line}: {ts_col} is not a timestamp"))?;
        let v: f64 = field(vi)
            .parse()
            .ok()
            .filter(|v: &f64| v.is_finite())
            .ok_or_else(|| format!("{shown} line {line}: {value_col} is not a number"))?;
        if let Some((last, _)) = out.last()
            && t < *last
        {
            return Err(format!(
                "{shown} line {line}: timestamps must not go backwards"
            ));
        }
        out.push((t, v));
    }
    let Some(&(first, _)) = out.first() else {
        return Err(format!("{shown} has no rows"));
    };
    Ok(out.into_iter().map(|(t, v)| (t - first, v)).collect())
}

fn parse_time(text: &str) -> Option<f64> {
    if let Ok(secs) = text.parse::<f64>() {
        return secs.is_finite().then_some(secs);
    }
    plantd_model::Timestamp::parse(text)
        .ok()
        .map(|t| t.millis() as f64 / 1000.0)
}

impl Player {
    /// The value at `t` seconds after the simulation started.
    pub fn sample(&self, t: f64, rng: &mut impl Rng) -> f64 {
        match self {
            Player::Formula(p) => match p {
                Pattern::Constant { value } => *value,
                Pattern::Random { min, max, drift } => {
                    let base = if max > min {
                        rng.random_range(*min..=*max)
                    } else {
                        *min
                    };
                    base + drift * t / 60.0
                }
                Pattern::Sine {
                    amplitude,
                    period_seconds,
                    offset,
                } => offset + amplitude * (std::f64::consts::TAU * t / period_seconds).sin(),
                Pattern::Ramp {
                    start,
                    end,
                    duration,
                } => start + (end - start) * (t / duration).clamp(0.0, 1.0),
                Pattern::Step { values, interval } => {
                    let i = (t / interval).floor().max(0.0) as usize % values.len();
                    values[i]
                }
                Pattern::Noise { mean, stddev } => mean + stddev * gaussian(rng),
                // Loaded as samples by `player`.
                Pattern::Replay { .. } => 0.0,
            },
            Player::Samples { samples, looped } => {
                let span = samples.last().map_or(0.0, |(t, _)| *t);
                let at = if *looped && span > 0.0 { t % span } else { t };
                let i = samples.partition_point(|(st, _)| *st <= at);
                samples[i.saturating_sub(1)].1
            }
        }
    }
}

/// A standard normal sample (Box-Muller).
pub fn gaussian(rng: &mut impl Rng) -> f64 {
    let u1: f64 = rng.random_range(f64::EPSILON..1.0);
    let u2: f64 = rng.random();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn play(p: Pattern) -> Player {
        p.player(std::path::Path::new(".")).unwrap()
    }

    #[test]
    fn formulas() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        assert_eq!(
            play(Pattern::Constant { value: 3.0 }).sample(99.0, &mut rng),
            3.0
        );
        let sine = play(Pattern::Sine {
            amplitude: 2.0,
            period_seconds: 60.0,
            offset: 10.0,
        });
        assert!((sine.sample(15.0, &mut rng) - 12.0).abs() < 1e-9);
        assert!((sine.sample(45.0, &mut rng) - 8.0).abs() < 1e-9);
        let ramp = play(Pattern::Ramp {
            start: 0.0,
            end: 100.0,
            duration: 10.0,
        });
        assert_eq!(ramp.sample(5.0, &mut rng), 50.0);
        assert_eq!(ramp.sample(50.0, &mut rng), 100.0);
        let step = play(Pattern::Step {
            values: vec![1.0, 2.0, 3.0],
            interval: 10.0,
        });
        assert_eq!(
            [0.0, 10.0, 25.0, 31.0].map(|t| step.sample(t, &mut rng)),
            [1.0, 2.0, 3.0, 1.0]
        );
        let random = play(Pattern::Random {
            min: 1.0,
            max: 2.0,
            drift: 6.0,
        });
        for _ in 0..100 {
            let v = random.sample(60.0, &mut rng);
            assert!((7.0..=8.0).contains(&v), "{v}");
        }
        let noise = play(Pattern::Noise {
            mean: 5.0,
            stddev: 1.0,
        });
        let n = 20_000;
        let mean = (0..n).map(|_| noise.sample(0.0, &mut rng)).sum::<f64>() / n as f64;
        assert!((mean - 5.0).abs() < 0.05, "{mean}");
        assert!(
            Pattern::Random {
                min: 2.0,
                max: 1.0,
                drift: 0.0
            }
            .check()
            .unwrap_err()
            .contains("min")
        );
    }

    #[test]
    fn replay_plays_a_csv_at_its_pace() {
        let dir = std::env::temp_dir().join(format!("plantd-sim-replay-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("flow.csv"),
            "time,flow\n2026-01-01T00:00:00Z,1\n2026-01-01T00:00:10Z,2\n2026-01-01T00:00:20Z,3\n",
        )
        .unwrap();
        let p = Pattern::Replay {
            file: "flow.csv".into(),
            looped: true,
            timestamp_column: "time".into(),
            value_column: "flow".into(),
        };
        let player = p.player(&dir).unwrap();
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        assert_eq!(
            [0.0, 9.9, 10.0, 19.0, 21.0].map(|t| player.sample(t, &mut rng)),
            [1.0, 1.0, 2.0, 2.0, 1.0]
        );
        std::fs::write(dir.join("bad.csv"), "time,flow\n0,1\nx,2\n").unwrap();
        let bad = Pattern::Replay {
            file: "bad.csv".into(),
            looped: false,
            timestamp_column: "time".into(),
            value_column: "flow".into(),
        };
        assert!(bad.player(&dir).unwrap_err().contains("line 3"));
        let _ = std::fs::remove_dir_all(dir);
    }
}
