//! The JSON layout of the vectors file: sorted keys, short objects on one
//! line, so that diffs of the committed file stay readable.

use serde_json::Value;

/// JSON with sorted keys (whatever map `serde_json` keeps): an object whose
/// values are all scalars or arrays of scalars on one line, other objects
/// one key per line, arrays of objects or arrays one element per line.
pub(super) fn write_value(out: &mut String, v: &Value, indent: usize) {
    let pad = |n: usize| "  ".repeat(n);
    let nested = |v: &Value| match v {
        Value::Object(_) => true,
        Value::Array(items) => items.iter().any(|i| i.is_object() || i.is_array()),
        _ => false,
    };
    match v {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let flat = !map.values().any(nested);
            out.push('{');
            for (i, k) in keys.iter().enumerate() {
                if flat {
                    out.push_str(if i == 0 { "" } else { ", " });
                } else {
                    out.push_str(if i == 0 { "\n" } else { ",\n" });
                    out.push_str(&pad(indent + 1));
                }
                out.push_str(&Value::String((*k).clone()).to_string());
                out.push_str(": ");
                write_value(out, &map[*k], indent + 1);
            }
            if !flat {
                out.push('\n');
                out.push_str(&pad(indent));
            }
            out.push('}');
        }
        Value::Array(items) if nested(v) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                out.push_str(if i == 0 { "\n" } else { ",\n" });
                out.push_str(&pad(indent + 1));
                write_value(out, item, indent + 1);
            }
            out.push('\n');
            out.push_str(&pad(indent));
            out.push(']');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                out.push_str(if i == 0 { "" } else { ", " });
                write_value(out, item, indent + 1);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}
