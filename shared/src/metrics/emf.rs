//! CloudWatch Embedded Metric Format: one JSON line on stdout per invocation,
//! which CloudWatch Logs turns into metrics without any API call (a Lambda
//! function's stdout goes to its log group), so metrics cost no latency.
//! The CLI points them at a file or stderr instead ([`set_sink`]).

use std::io::Write;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

use serde_json::{Map, Value, json};

/// Where EMF lines go. Lambda reads stdout (the default); the CLI, whose
/// stdout is a person's terminal, sends them elsewhere or nowhere.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sink {
    /// One line each on stdout: the function's log group.
    Stdout,
    /// One line each on stderr.
    Stderr,
    /// Appended to this file.
    File(PathBuf),
    /// Dropped.
    Off,
}

static SINK: OnceLock<Mutex<Sink>> = OnceLock::new();

/// Sends every later [`Emf::emit`] of this process to `sink`.
pub fn set_sink(sink: Sink) {
    let cell = SINK.get_or_init(|| Mutex::new(Sink::Stdout));
    if let Ok(mut current) = cell.lock() {
        *current = sink;
    }
}

fn write_line(line: &str) {
    let sink = SINK
        .get()
        .and_then(|s| s.lock().ok().map(|s| s.clone()))
        .unwrap_or(Sink::Stdout);
    // Metrics are best effort: a full disk or a closed pipe must not fail
    // the write they describe.
    let _ = match sink {
        Sink::Stdout => writeln!(std::io::stdout(), "{line}"),
        Sink::Stderr => writeln!(std::io::stderr(), "{line}"),
        Sink::File(path) => std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .and_then(|mut f| writeln!(f, "{line}")),
        Sink::Off => Ok(()),
    };
}

/// The CloudWatch namespace floe's metrics go to.
pub const NAMESPACE: &str = "floe";

/// The unit of a metric, as CloudWatch names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// A count.
    Count,
    /// Bytes.
    Bytes,
    /// Milliseconds.
    Milliseconds,
}

impl Unit {
    fn name(self) -> &'static str {
        match self {
            Unit::Count => "Count",
            Unit::Bytes => "Bytes",
            Unit::Milliseconds => "Milliseconds",
        }
    }
}

/// One EMF record: metrics sharing one set of dimensions.
#[derive(Debug, Clone, Default)]
pub struct Emf {
    dimensions: Vec<(String, String)>,
    metrics: Vec<(String, Unit, f64)>,
    properties: Vec<(String, Value)>,
}

impl Emf {
    /// A record carrying the `function_name` dimension when running on Lambda
    /// (`AWS_LAMBDA_FUNCTION_NAME`), so two deployments in one account and
    /// region keep their metrics, and alarms, apart.
    pub fn new() -> Self {
        static NAME: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
        let name = NAME.get_or_init(|| std::env::var("AWS_LAMBDA_FUNCTION_NAME").ok());
        match name {
            Some(n) => Self::default().dimension("function_name", n),
            None => Self::default(),
        }
    }

    /// Adds a dimension (e.g. `function`, `table`): metrics are aggregated per value.
    pub fn dimension(mut self, name: &str, value: &str) -> Self {
        self.dimensions.push((name.to_string(), value.to_string()));
        self
    }

    /// Adds a metric value.
    pub fn metric(mut self, name: &str, unit: Unit, value: f64) -> Self {
        self.metrics.push((name.to_string(), unit, value));
        self
    }

    /// Adds a searchable property that is not a metric (e.g. the batch id).
    pub fn property(mut self, name: &str, value: impl Into<Value>) -> Self {
        self.properties.push((name.to_string(), value.into()));
        self
    }

    /// The record as an EMF JSON object, stamped `timestamp_ms`.
    pub fn to_json(&self, timestamp_ms: i64) -> Value {
        let mut root = Map::new();
        let dims: Vec<&str> = self.dimensions.iter().map(|(k, _)| k.as_str()).collect();
        let defs: Vec<Value> = self
            .metrics
            .iter()
            .map(|(name, unit, _)| json!({"Name": name, "Unit": unit.name()}))
            .collect();
        root.insert(
            "_aws".into(),
            json!({
                "Timestamp": timestamp_ms,
                "CloudWatchMetrics": [{
                    "Namespace": NAMESPACE,
                    "Dimensions": [dims],
                    "Metrics": defs,
                }],
            }),
        );
        for (k, v) in &self.properties {
            root.insert(k.clone(), v.clone());
        }
        for (k, v) in &self.dimensions {
            root.insert(k.clone(), Value::String(v.clone()));
        }
        for (k, _, v) in &self.metrics {
            root.insert(k.clone(), json!(v));
        }
        Value::Object(root)
    }

    /// Writes the record as one line to the process's [`Sink`] (stdout,
    /// where Lambda's log agent picks it up, unless [`set_sink`] said otherwise).
    pub fn emit(&self) {
        write_line(&self.to_json(crate::clock::now_ms()).to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_declares_every_metric_and_carries_the_values() {
        let v = Emf::new()
            .dimension("function", "writer")
            .metric("records", Unit::Count, 3.0)
            .metric("bytes", Unit::Bytes, 1024.0)
            .property("batch_id", "abc")
            .to_json(42);
        let cw = &v["_aws"]["CloudWatchMetrics"][0];
        assert_eq!(v["_aws"]["Timestamp"], 42);
        assert_eq!(cw["Namespace"], "floe");
        assert_eq!(cw["Dimensions"], json!([["function"]]));
        assert_eq!(cw["Metrics"][1], json!({"Name": "bytes", "Unit": "Bytes"}));
        assert_eq!(v["function"], "writer");
        assert_eq!(v["records"], 3.0);
        assert_eq!(v["batch_id"], "abc");
    }
}
