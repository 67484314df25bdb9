//! An edge agent's regional settings (SPEC 4.14) and its failover rule (issue 34): which
//! regional cloud it forwards to, and when it moves to the next one and back.

use crate::region::RegionId;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// SPEC 4.14's edge regional settings.
#[derive(Clone, Debug, PartialEq)]
pub struct EdgeRegions {
    /// `PLANTD_REGION`: the agent's region; unset, it is detected.
    pub region: Option<RegionId>,
    /// `PLANTD_API_URL`: the agent's region's root address (else the enrollment's `--cloud`).
    pub api_url: Option<String>,
    /// `[edge.region_detection]`.
    pub detection: RegionDetection,
    /// `[edge.regions] primary`: wins over the detected region.
    pub primary: Option<RegionId>,
    /// `[edge.regions] failover`: the regions to move to, in order; empty: the cloud's other
    /// served regions in the SPEC's order (by latency with `prefer_low_latency`).
    pub failover: Vec<RegionId>,
    pub health_check_interval: Duration,
    pub failover_threshold: u32,
}

impl Default for EdgeRegions {
    fn default() -> Self {
        Self {
            region: None,
            api_url: None,
            detection: RegionDetection::default(),
            primary: None,
            failover: Vec::new(),
            health_check_interval: Duration::from_secs(60),
            failover_threshold: 3,
        }
    }
}

/// `region_detection`: with `enabled`, the agent's region is the one its cloud answers from at
/// enrollment (`current` in `GET /api/v1/regions`), else `fallback_region`; with
/// `prefer_low_latency`, a failover list not given is ordered by the probed latency.
#[derive(Clone, Debug, PartialEq)]
pub struct RegionDetection {
    pub enabled: bool,
    pub fallback_region: Option<RegionId>,
    pub prefer_low_latency: bool,
}

impl Default for RegionDetection {
    fn default() -> Self {
        Self {
            enabled: true,
            fallback_region: None,
            prefer_low_latency: false,
        }
    }
}

/// A regional cloud the agent can forward to: its API root and MQTT address.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RegionalCloud {
    pub region: String,
    /// Root address (`https://host`), as `--cloud` takes it.
    pub api: String,
    /// `mqtt://host:port`; null when that region's cloud has no MQTT channel.
    pub mqtt: Option<String>,
    /// Round trip of the probe at enrollment, when measured.
    #[serde(default)]
    pub latency_ms: Option<f64>,
}

/// A cloud's root address as the agent keeps it: without a trailing `/` or `/v1` (the API
/// address a region list gives, or one a person typed).
pub fn api_root(url: &str) -> String {
    url.trim_end_matches('/')
        .trim_end_matches("/v1")
        .to_string()
}

impl EdgeRegions {
    /// The order the agent tries its regional clouds in: the primary first, then the failover
    /// list. `known` is what the cloud said of its served regions (its `current` region named
    /// by `detected`); `enrolled` is the `--cloud` root, the primary's address when
    /// `PLANTD_API_URL` does not name one.
    pub fn order(
        &self,
        known: &[RegionalCloud],
        detected: Option<&str>,
        enrolled: &str,
        mqtt_url: Option<&str>,
    ) -> Vec<RegionalCloud> {
        let detected = if self.detection.enabled {
            detected
                .and_then(|d| d.parse::<RegionId>().ok())
                .or(self.detection.fallback_region)
        } else {
            self.detection.fallback_region
        };
        let primary = self.primary.or(self.region).or(detected);
        let find = |r: RegionId| known.iter().find(|k| k.region == r.as_str()).cloned();
        let primary_cloud = RegionalCloud {
            region: primary
                .map(|r| r.as_str().to_string())
                .unwrap_or_else(|| "unknown".into()),
            api: self.api_url.clone().unwrap_or_else(|| enrolled.to_string()),
            mqtt: mqtt_url
                .map(str::to_string)
                .or_else(|| primary.and_then(find).and_then(|k| k.mqtt))
                .or_else(|| {
                    known
                        .iter()
                        .find(|k| k.api == enrolled)
                        .and_then(|k| k.mqtt.clone())
                }),
            latency_ms: primary.and_then(find).and_then(|k| k.latency_ms),
        };
        let mut order = vec![primary_cloud];
        if self.failover.is_empty() {
            let mut others: Vec<RegionalCloud> = known
                .iter()
                .filter(|k| Some(k.region.as_str()) != primary.map(RegionId::as_str))
                .filter(|k| k.api != order[0].api)
                .cloned()
                .collect();
            if self.detection.prefer_low_latency {
                others.sort_by(|a, b| {
                    let l = |c: &RegionalCloud| c.latency_ms.unwrap_or(f64::MAX);
                    l(a).total_cmp(&l(b))
                });
            }
            order.extend(others);
        } else {
            for r in &self.failover {
                if Some(*r) != primary
                    && let Some(k) = find(*r)
                {
                    order.push(k);
                }
            }
        }
        order
    }
}

/// The failover rule. Each health check round says whether the current region answered and,
/// while the agent is away from its primary, whether the primary did. After `threshold`
/// consecutive failed checks of the current region the agent moves to the next region of its
/// order (after the last comes the primary again); while away, after `threshold` consecutive
/// successful checks of the primary it moves back (so a primary that flaps does not pull it
/// back and forth).
#[derive(Clone, Debug, PartialEq)]
pub struct Failover {
    regions: usize,
    current: usize,
    failures: u32,
    primary_successes: u32,
    threshold: u32,
}

impl Failover {
    pub fn new(regions: usize, threshold: u32) -> Self {
        Self {
            regions: regions.max(1),
            current: 0,
            failures: 0,
            primary_successes: 0,
            threshold: threshold.max(1),
        }
    }

    /// The index of the current region in the order.
    pub fn current(&self) -> usize {
        self.current
    }

    /// Whether the agent is away from its primary.
    pub fn away(&self) -> bool {
        self.current != 0
    }

    /// One round of checks; the index of the region to move to, if the agent moves.
    pub fn observe(&mut self, current_ok: bool, primary_ok: Option<bool>) -> Option<usize> {
        if self.away() {
            if primary_ok == Some(true) {
                self.primary_successes += 1;
                if self.primary_successes >= self.threshold {
                    return Some(self.move_to(0));
                }
            } else {
                self.primary_successes = 0;
            }
        }
        if current_ok {
            self.failures = 0;
            return None;
        }
        self.failures += 1;
        if self.failures >= self.threshold && self.regions > 1 {
            return Some(self.move_to((self.current + 1) % self.regions));
        }
        None
    }

    fn move_to(&mut self, to: usize) -> usize {
        self.current = to;
        self.failures = 0;
        self.primary_successes = 0;
        to
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cloud(region: &str, api: &str) -> RegionalCloud {
        RegionalCloud {
            region: region.into(),
            api: api.into(),
            mqtt: Some(format!("mqtt://{region}:1883")),
            latency_ms: None,
        }
    }

    #[test]
    fn three_failed_checks_move_on_and_three_good_ones_of_the_primary_move_back() {
        let mut f = Failover::new(3, 3);
        assert_eq!(f.observe(false, None), None);
        assert_eq!(f.observe(false, None), None);
        // A success in between starts the count again.
        assert_eq!(f.observe(true, None), None);
        assert_eq!(f.observe(false, None), None);
        assert_eq!(f.observe(false, None), None);
        assert_eq!(f.observe(false, None), Some(1));
        assert!(f.away());
        // The primary answers twice, fails once, then three times: back.
        assert_eq!(f.observe(true, Some(true)), None);
        assert_eq!(f.observe(true, Some(true)), None);
        assert_eq!(f.observe(true, Some(false)), None);
        assert_eq!(f.observe(true, Some(true)), None);
        assert_eq!(f.observe(true, Some(true)), None);
        assert_eq!(f.observe(true, Some(true)), Some(0));
        // Every region failing: round the list, the primary again after the last.
        for expected in [1, 2, 0] {
            for _ in 0..2 {
                assert_eq!(f.observe(false, Some(false)), None);
            }
            assert_eq!(f.observe(false, Some(false)), Some(expected));
        }
        // One region only: nowhere to go.
        let mut alone = Failover::new(1, 3);
        for _ in 0..10 {
            assert_eq!(alone.observe(false, None), None);
        }
    }

    #[test]
    fn the_order_is_the_primary_then_the_failover_list() {
        let known = vec![
            cloud("us-east", "http://east"),
            cloud("eu-west", "http://west"),
            cloud("eu-central", "http://central"),
        ];
        let s = EdgeRegions::default();
        // Detected: the enrollment cloud's region; the others follow in the cloud's order.
        let o = s.order(&known, Some("us-east"), "http://east", None);
        let names: Vec<_> = o.iter().map(|c| c.region.as_str()).collect();
        assert_eq!(names, ["us-east", "eu-west", "eu-central"]);
        assert_eq!(o[0].mqtt.as_deref(), Some("mqtt://us-east:1883"));
        // Configured: the primary and the failover list; PLANTD_MQTT_URL and PLANTD_API_URL
        // name the primary's addresses.
        let s = EdgeRegions {
            primary: Some(RegionId::EuWest),
            failover: vec![RegionId::EuCentral, RegionId::EuWest],
            api_url: Some("http://lb-west".into()),
            ..Default::default()
        };
        let o = s.order(&known, Some("us-east"), "http://east", Some("mqtt://m:1"));
        let names: Vec<_> = o
            .iter()
            .map(|c| (c.region.as_str(), c.api.as_str()))
            .collect();
        assert_eq!(
            names,
            [
                ("eu-west", "http://lb-west"),
                ("eu-central", "http://central")
            ]
        );
        assert_eq!(o[0].mqtt.as_deref(), Some("mqtt://m:1"));
        // Detection off without a fallback: the region is unknown, its address the enrollment's.
        let s = EdgeRegions {
            detection: RegionDetection {
                enabled: false,
                fallback_region: None,
                prefer_low_latency: false,
            },
            ..Default::default()
        };
        let o = s.order(&[], Some("us-east"), "http://east", None);
        assert_eq!((o[0].region.as_str(), o.len()), ("unknown", 1));
        // Low latency first.
        let mut known = known;
        known[1].latency_ms = Some(80.0);
        known[2].latency_ms = Some(20.0);
        let s = EdgeRegions {
            detection: RegionDetection {
                prefer_low_latency: true,
                ..Default::default()
            },
            ..Default::default()
        };
        let o = s.order(&known, Some("us-east"), "http://east", None);
        assert_eq!(o[1].region, "eu-central");
        // The primary keeps its measured round trip too.
        known[0].latency_ms = Some(3.0);
        let o = s.order(&known, Some("us-east"), "http://east", None);
        assert_eq!(o[0].latency_ms, Some(3.0));
        assert_eq!(
            api_root("https://cloud.example/v1/"),
            "https://cloud.example"
        );
        assert_eq!(api_root("https://cloud.example"), "https://cloud.example");
    }
}
