//! JSON from a peer, read with one rule serde_json's own `Value` does not keep: an object
//! that names a key twice is refused. serde_json keeps the last of the two, and a reader
//! that keeps the first (or a proxy that merged two answers) sees another document, so a
//! body such as `{"more": true, "more": false}` says two things and is no answer at all.
//!
//! A leaf: it imports nothing of the crate, so the model and the engine can read with it.

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// `bytes` as one JSON document, every object in it naming each key once.
pub fn strict(bytes: &[u8]) -> Result<Value, serde_json::Error> {
    let mut reader = serde_json::Deserializer::from_slice(bytes);
    // serde_json's own limit on nesting stays: a deep document is an error, never a crash.
    let value = reader.deserialize_any(Strict)?;
    reader.end()?;
    Ok(value)
}

/// Builds a `Value` as serde_json does, refusing a repeated key.
struct Strict;

impl<'de> de::DeserializeSeed<'de> for Strict {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Strict {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, value: bool) -> Result<Value, E> {
        Ok(Value::Bool(value))
    }

    fn visit_i64<E>(self, value: i64) -> Result<Value, E> {
        Ok(Value::Number(value.into()))
    }

    fn visit_u64<E>(self, value: u64) -> Result<Value, E> {
        Ok(Value::Number(value.into()))
    }

    fn visit_f64<E>(self, value: f64) -> Result<Value, E> {
        Ok(Number::from_f64(value).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, value: &str) -> Result<Value, E> {
        Ok(Value::String(value.to_string()))
    }

    fn visit_string<E>(self, value: String) -> Result<Value, E> {
        Ok(Value::String(value))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(Strict)? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if object.contains_key(&key) {
                // Debug's quoting escapes every control character the key may hold.
                return Err(de::Error::custom(format!(
                    "the key {key:?} is given twice in one object"
                )));
            }
            let value = map.next_value_seed(Strict)?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_key_given_twice_is_refused_at_any_depth() {
        for body in [
            r#"{"more": true, "more": false}"#,
            r#"{"incidents": [{"id": "P1", "id": "P2"}], "more": false}"#,
            r#"{"messages": [], "has_more": false, "ok": false, "ok": true}"#,
            r#"[{"a": {"b": 1, "b": 1}}]"#,
        ] {
            let err = strict(body.as_bytes()).expect_err(body);
            assert!(err.to_string().contains("given twice"), "{body}: {err}");
        }
        // The key is named escaped: no byte of it reaches a terminal raw.
        let err = strict(br#"{"\u001b[2J": 1, "\u001b[2J": 2}"#).expect_err("twice");
        assert!(
            err.to_string()
                .contains(r#"the key "\u{1b}[2J" is given twice"#),
            "{err}"
        );
    }

    #[test]
    fn what_is_not_one_document_is_refused() {
        for body in ["", "{} {}", "{\"a\": 1", "[1,]", "nul"] {
            assert!(strict(body.as_bytes()).is_err(), "{body:?}");
        }
        let deep = "[".repeat(10_000) + &"]".repeat(10_000);
        assert!(
            strict(deep.as_bytes()).is_err(),
            "nesting past serde_json's limit"
        );
    }

    fn value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            ".{0,8}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 32, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::btree_map(".{0,6}", inner, 0..6)
                    .prop_map(|map| Value::Object(map.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(
            std::env::var("UNS_PROPTEST_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(256),
        ))]

        /// Any document with each key once reads as serde_json reads it.
        #[test]
        fn a_document_with_each_key_once_reads_as_serde_json_reads_it(value in value()) {
            let text = serde_json::to_vec(&value).unwrap();
            prop_assert_eq!(strict(&text).unwrap(), serde_json::from_slice::<Value>(&text).unwrap());
        }
    }
}
