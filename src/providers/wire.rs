//! Small readers of provider JSON shared by the adapters' pure protocol modules: fields
//! that may be missing or of the wrong type (untrusted input never panics), and clipping
//! of provider text for one-line notices.

use serde_json::{Map, Value};

pub fn str_at<'a>(map: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    map.get(key).and_then(Value::as_str)
}

/// A non-negative integer field (a float with no fraction counts).
pub fn u64_at(map: &Map<String, Value>, key: &str) -> Option<u64> {
    let value = map.get(key)?;
    value.as_u64().or_else(|| {
        value
            .as_f64()
            .filter(|f| *f >= 0.0 && f.fract() == 0.0 && *f < u64::MAX as f64)
            .map(|f| f as u64)
    })
}

pub fn f64_at(map: &Map<String, Value>, key: &str) -> Option<f64> {
    map.get(key).and_then(Value::as_f64)
}

/// `s` cut to at most `max` characters, with `…` when cut; control characters become
/// spaces so a clipped quote stays on one line.
pub fn clip(s: &str, max: usize) -> String {
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i == max {
            out.push('…');
            break;
        }
        out.push(if c.is_control() { ' ' } else { c });
    }
    out
}
