//! JSON read as `serde_json::Value` reads it, except that an object with a key twice is an
//! error. serde_json keeps the last of two values; a proxy in front of us may have checked the
//! first. Reading the value and checking it in one pass is what lets a call be parsed once.

use serde::de::{Deserialize, Deserializer, Error, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// The message of the error a repeated key gives (serde_json adds the line and column).
#[doc(hidden)]
pub const DUPLICATE_KEY: &str = "a key appears twice in one object";

/// Whether `error` is the one a repeated key gave.
#[doc(hidden)]
pub fn is_duplicate_key(error: &serde_json::Error) -> bool {
    error.to_string().starts_with(DUPLICATE_KEY)
}

/// A JSON value in which no object has a key twice, at any depth.
#[doc(hidden)]
pub struct Unique(pub Value);

impl<'de> Deserialize<'de> for Unique {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(Read).map(Unique)
    }
}

struct Read;

impl<'de> Visitor<'de> for Read {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, b: bool) -> Result<Value, E> {
        Ok(Value::Bool(b))
    }
    fn visit_i64<E>(self, n: i64) -> Result<Value, E> {
        Ok(Value::Number(n.into()))
    }
    fn visit_u64<E>(self, n: u64) -> Result<Value, E> {
        Ok(Value::Number(n.into()))
    }
    fn visit_f64<E>(self, n: f64) -> Result<Value, E> {
        // JSON has no NaN or infinity; serde_json's own reader maps them the same way.
        Ok(Number::from_f64(n).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, s: &str) -> Result<Value, E> {
        Ok(Value::String(s.to_owned()))
    }
    fn visit_string<E>(self, s: String) -> Result<Value, E> {
        Ok(Value::String(s))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        Unique::deserialize(deserializer).map(|Unique(value)| value)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut items: A) -> Result<Value, A::Error> {
        let mut values = Vec::with_capacity(items.size_hint().unwrap_or(0).min(64));
        while let Some(Unique(value)) = items.next_element()? {
            values.push(value);
        }
        Ok(Value::Array(values))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut entries: A) -> Result<Value, A::Error> {
        let mut fields = Map::new();
        while let Some(key) = entries.next_key::<String>()? {
            let Unique(value) = entries.next_value()?;
            if fields.insert(key, value).is_some() {
                return Err(A::Error::custom(DUPLICATE_KEY));
            }
        }
        Ok(Value::Object(fields))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Result<Value, serde_json::Error> {
        serde_json::from_str::<Unique>(text).map(|Unique(value)| value)
    }

    #[test]
    fn reads_what_serde_json_reads() {
        for text in [
            r#"{"a": [1, -2, 3.5, 1e300, "x\u00e9", null, true, {"b": {}}], "c": 18446744073709551615}"#,
            "[]",
            "null",
            r#""just a string""#,
        ] {
            assert_eq!(
                read(text).unwrap(),
                serde_json::from_str::<Value>(text).unwrap(),
                "{text}"
            );
        }
    }

    #[test]
    fn a_key_twice_at_any_depth_is_an_error() {
        for text in [
            r#"{"a": 1, "a": 2}"#,
            r#"{"a": {"b": 1, "c": 2, "b": 1}}"#,
            r#"[{"x": 1}, [{"y": 1, "y": 1}]]"#,
            r#"{"\u0061": 1, "a": 2}"#,
        ] {
            let error = read(text).unwrap_err();
            assert!(is_duplicate_key(&error), "{text}: {error}");
        }
        assert!(!is_duplicate_key(&read(r#"{"a": 1,"#).unwrap_err()));
    }
}
