//! Named fault points, so tests can crash or fail the pipeline at each step and
//! prove that a retry loses and doubles nothing.
//!
//! Set from the environment as `FLOE_FAULT=<point>[:crash|:error][@<n>]`: the
//! n-th time (default 1st) the point is reached, the process aborts (`crash`,
//! the default, as a Lambda timeout or OOM would) or the step returns an error.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::ConfigError;

/// A step of the pipeline where a fault can be injected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FaultPoint {
    /// Writer: data files are durable in storage, the commit request is not yet enqueued.
    AfterUpload,
    /// Writer: the commit request is enqueued, the source batch is not yet acknowledged.
    AfterEnqueue,
    /// Catalog: the new metadata file is written, the catalog pointer is not yet swapped.
    CatalogSwap,
    /// Catalog: the pointer was swapped but the caller sees an error (a lost answer).
    CatalogAmbiguous,
    /// Committer: the catalog holds the commit, the queue messages are not yet deleted.
    AfterCommit,
}

impl FaultPoint {
    /// Every point, in pipeline order.
    pub const ALL: [FaultPoint; 5] = [
        FaultPoint::AfterUpload,
        FaultPoint::AfterEnqueue,
        FaultPoint::CatalogSwap,
        FaultPoint::CatalogAmbiguous,
        FaultPoint::AfterCommit,
    ];

    /// The name used in `FLOE_FAULT`.
    pub fn name(self) -> &'static str {
        match self {
            FaultPoint::AfterUpload => "after_upload",
            FaultPoint::AfterEnqueue => "after_enqueue",
            FaultPoint::CatalogSwap => "catalog_swap",
            FaultPoint::CatalogAmbiguous => "catalog_ambiguous",
            FaultPoint::AfterCommit => "after_commit",
        }
    }
}

impl fmt::Display for FaultPoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for FaultPoint {
    type Err = ConfigError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        FaultPoint::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| spec_error(format!("unknown fault point `{s}`")))
    }
}

/// What happens when an armed point is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultMode {
    /// Abort the process on the spot.
    Crash,
    /// Return [`InjectedFault`] from the step.
    Error,
}

/// A `FLOE_FAULT` value that cannot be parsed, for `detail`.
fn spec_error(detail: String) -> ConfigError {
    ConfigError::Env {
        var: "FLOE_FAULT".into(),
        message: format!(
            "{detail} (expected <point>[:crash|:error][@<n>], points: after_upload, after_enqueue, catalog_swap, catalog_ambiguous, after_commit)"
        ),
    }
}

/// The error a step returns when an `Error`-mode fault fires.
#[derive(Debug, Clone, thiserror::Error)]
#[error("injected fault at {0}")]
pub struct InjectedFault(pub FaultPoint);

#[derive(Debug)]
struct Armed {
    point: FaultPoint,
    mode: FaultMode,
    nth: u64,
    hits: AtomicU64,
}

/// The fault injector shared by every step of one process; inert unless armed.
#[derive(Debug, Clone, Default)]
pub struct Faults(Option<Arc<Armed>>);

impl Faults {
    /// No faults.
    pub fn none() -> Self {
        Self(None)
    }

    /// Fires `mode` the `nth` time (1-based) `point` is reached.
    pub fn at(point: FaultPoint, mode: FaultMode, nth: u64) -> Self {
        Self(Some(Arc::new(Armed {
            point,
            mode,
            nth: nth.max(1),
            hits: AtomicU64::new(0),
        })))
    }

    /// True when a point is armed (a process that may fail on purpose).
    pub fn is_armed(&self) -> bool {
        self.0.is_some()
    }

    /// Reads `FLOE_FAULT`; unset or empty means no faults.
    pub fn from_env() -> Result<Self, ConfigError> {
        match std::env::var("FLOE_FAULT") {
            Ok(spec) if !spec.trim().is_empty() => spec.parse(),
            _ => Ok(Self::none()),
        }
    }

    /// Marks that `point` was reached: crashes or errors when armed for this hit.
    pub fn hit(&self, point: FaultPoint) -> Result<(), InjectedFault> {
        let Some(armed) = &self.0 else { return Ok(()) };
        if armed.point != point {
            return Ok(());
        }
        let n = armed.hits.fetch_add(1, Ordering::SeqCst) + 1;
        if n != armed.nth {
            return Ok(());
        }
        match armed.mode {
            FaultMode::Crash => {
                tracing::error!(fault = %point, "injected crash");
                eprintln!("floe: injected crash at {point}");
                std::process::abort()
            }
            FaultMode::Error => Err(InjectedFault(point)),
        }
    }
}

impl FromStr for Faults {
    type Err = ConfigError;

    fn from_str(spec: &str) -> Result<Self, Self::Err> {
        let (rest, nth) = match spec.split_once('@') {
            Some((rest, n)) => (
                rest,
                n.parse::<u64>()
                    .map_err(|_| spec_error(format!("`{n}` is not a count")))?,
            ),
            None => (spec, 1),
        };
        let (point, mode) = match rest.split_once(':') {
            Some((p, "crash")) => (p, FaultMode::Crash),
            Some((p, "error")) => (p, FaultMode::Error),
            Some((_, m)) => return Err(spec_error(format!("unknown mode `{m}`"))),
            None => (rest, FaultMode::Crash),
        };
        Ok(Faults::at(point.parse()?, mode, nth))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_spec_and_fires_on_the_nth_hit_only() {
        let faults: Faults = "after_enqueue:error@2".parse().unwrap();
        assert!(faults.hit(FaultPoint::AfterUpload).is_ok());
        assert!(faults.hit(FaultPoint::AfterEnqueue).is_ok());
        let err = faults.hit(FaultPoint::AfterEnqueue).unwrap_err();
        assert_eq!(err.0, FaultPoint::AfterEnqueue);
        assert!(faults.hit(FaultPoint::AfterEnqueue).is_ok());
    }

    #[test]
    fn rejects_unknown_points_and_modes() {
        assert!("nowhere".parse::<Faults>().is_err());
        assert!("after_upload:maybe".parse::<Faults>().is_err());
        assert!("after_upload@x".parse::<Faults>().is_err());
    }
}
