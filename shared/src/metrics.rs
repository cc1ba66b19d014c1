//! Metrics in CloudWatch Embedded Metric Format: one JSON line on stdout per
//! record, which CloudWatch Logs turns into metrics with no API call and no
//! extra latency. Namespace `agentic-chat`; every record carries the
//! `function` dimension, and error counts also the `code`.

use serde_json::{json, Map, Value};

pub const NAMESPACE: &str = "agentic-chat";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Milliseconds,
    Count,
}

impl Unit {
    fn as_str(self) -> &'static str {
        match self {
            Unit::Milliseconds => "Milliseconds",
            Unit::Count => "Count",
        }
    }
}

/// One EMF record: dimensions, metric values, and extra properties (searchable
/// in Logs Insights, not metrics).
#[derive(Debug, Clone, Default)]
pub struct Record {
    dimensions: Vec<(String, String)>,
    metrics: Vec<(String, f64, Unit)>,
    properties: Map<String, Value>,
}

impl Record {
    pub fn new(function: &str) -> Record {
        Record { dimensions: vec![("function".into(), function.into())], ..Default::default() }
    }

    pub fn dimension(mut self, name: &str, value: &str) -> Record {
        self.dimensions.push((name.into(), value.into()));
        self
    }

    pub fn metric(mut self, name: &str, value: f64, unit: Unit) -> Record {
        self.metrics.push((name.into(), value, unit));
        self
    }

    pub fn property(mut self, name: &str, value: impl Into<Value>) -> Record {
        self.properties.insert(name.into(), value.into());
        self
    }

    /// The record as EMF JSON.
    pub fn to_json(&self, timestamp_ms: i64) -> Value {
        let mut root = self.properties.clone();
        for (k, v) in &self.dimensions {
            root.insert(k.clone(), Value::String(v.clone()));
        }
        for (name, value, _) in &self.metrics {
            root.insert(name.clone(), json!(value));
        }
        let dims: Vec<&str> = self.dimensions.iter().map(|(k, _)| k.as_str()).collect();
        let defs: Vec<Value> = self.metrics.iter().map(|(n, _, u)| json!({"Name": n, "Unit": u.as_str()})).collect();
        root.insert(
            "_aws".into(),
            json!({
                "Timestamp": timestamp_ms,
                "CloudWatchMetrics": [{"Namespace": NAMESPACE, "Dimensions": [dims], "Metrics": defs}]
            }),
        );
        Value::Object(root)
    }

    /// Writes the record as one line on stdout (where Lambda's logs go).
    pub fn emit(&self) {
        if self.metrics.is_empty() {
            return;
        }
        println!("{}", self.to_json(crate::now_ms()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_valid_emf() {
        let r = Record::new("stream")
            .metric("TimeToFirstToken", 123.0, Unit::Milliseconds)
            .metric("TokensIn", 40.0, Unit::Count)
            .property("turn_id", "t-1");
        let v = r.to_json(1_000);
        assert_eq!(v["function"], "stream");
        assert_eq!(v["TimeToFirstToken"], 123.0);
        assert_eq!(v["turn_id"], "t-1");
        let cw = &v["_aws"]["CloudWatchMetrics"][0];
        assert_eq!(cw["Namespace"], NAMESPACE);
        assert_eq!(cw["Dimensions"], json!([["function"]]));
        assert_eq!(cw["Metrics"][0], json!({"Name": "TimeToFirstToken", "Unit": "Milliseconds"}));
        assert_eq!(v["_aws"]["Timestamp"], 1_000);
        // Every metric named in the directive has a value at the root.
        for m in cw["Metrics"].as_array().unwrap() {
            assert!(v.get(m["Name"].as_str().unwrap()).is_some());
        }
    }

    #[test]
    fn error_records_carry_the_code_dimension() {
        let v = Record::new("stream").dimension("code", "llm_timeout").metric("Errors", 1.0, Unit::Count).to_json(0);
        assert_eq!(v["_aws"]["CloudWatchMetrics"][0]["Dimensions"], json!([["function", "code"]]));
        assert_eq!(v["code"], "llm_timeout");
    }
}
