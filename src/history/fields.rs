//! The payload fields a history is read from, parsed straight into one value on the
//! caller's stack. A million events go through here per large triage: building the
//! struct in place instead of returning it through serde's layers saves copying it each
//! time.
//!
//! The rules are serde's derived ones, field for field (the tests hold the two side by
//! side): every known field is optional and may be `null`, unknown fields are skipped,
//! a field given twice or of the wrong type makes the whole payload unreadable, and
//! the reading never guesses. Every key is one the writers in `model::payload` write
//! (a test holds the two together).

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use std::borrow::Cow;
use std::fmt;

/// The fields a history is read from, borrowed from the stored text where it can be.
#[derive(Debug, Default, PartialEq)]
#[cfg_attr(test, derive(Deserialize))]
pub struct Fields<'a> {
    #[cfg_attr(test, serde(borrow, default))]
    pub channel: Option<Cow<'a, str>>,
    #[cfg_attr(test, serde(default))]
    pub cycle: Option<i64>,
    #[cfg_attr(test, serde(default))]
    pub attempt: Option<i64>,
    #[cfg_attr(test, serde(borrow, default))]
    pub lease_token: Option<Cow<'a, str>>,
    #[cfg_attr(test, serde(default))]
    pub success: Option<bool>,
    #[cfg_attr(test, serde(borrow, default))]
    pub message_id: Option<Cow<'a, str>>,
    #[cfg_attr(test, serde(borrow, default))]
    pub error: Option<Cow<'a, str>>,
    #[cfg_attr(test, serde(borrow, default))]
    pub metadata: Option<Metadata<'a>>,
    /// REPLAYED: the channels of the new cycle.
    #[cfg_attr(test, serde(borrow, default))]
    pub channels: Option<Vec<Cow<'a, str>>>,
    /// REPLAYED and DLQ_RESOLVED: what the operator checked out of band.
    #[cfg_attr(test, serde(borrow, default))]
    pub attestation: Option<Cow<'a, str>>,
    /// VERIFIED: the attempt numbers the answer covers.
    #[cfg_attr(test, serde(default))]
    pub attempts: Option<Vec<i64>>,
    /// VERIFIED: DELIVERED or NOT_DELIVERED.
    #[cfg_attr(test, serde(borrow, default))]
    pub outcome: Option<Cow<'a, str>>,
    /// ATTEMPT_STARTED: when the lease it took runs out.
    #[cfg_attr(test, serde(default))]
    pub lease_until: Option<f64>,
    /// CHANNEL_ATTEMPT_STARTED (EMAIL): the envelope sender the message went out under.
    #[cfg_attr(test, serde(borrow, default))]
    pub smtp_from: Option<Cow<'a, str>>,
    /// VERIFIED: whose records answered.
    #[cfg_attr(test, serde(borrow, default))]
    pub source: Option<Cow<'a, str>>,
    /// An audit's operator, as the writer recorded it.
    #[cfg_attr(test, serde(borrow, default))]
    pub operator: Option<Cow<'a, str>>,
    /// An audit's operator as the client named them, where that differs.
    #[cfg_attr(test, serde(borrow, default))]
    pub claimed_operator: Option<Cow<'a, str>>,
    /// An audit's reason.
    #[cfg_attr(test, serde(borrow, default))]
    pub reason: Option<Cow<'a, str>>,
    /// DLQ_RESOLVED: the channels given up on purpose.
    #[cfg_attr(test, serde(borrow, default))]
    pub given_up: Option<Vec<Cow<'a, str>>>,
}

#[derive(Debug, Default, PartialEq, Deserialize)]
pub struct Metadata<'a> {
    #[serde(borrow, default, deserialize_with = "text")]
    pub provider_outcome: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "text")]
    pub message_id: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "text")]
    pub idempotency_key: Option<Cow<'a, str>>,
    /// The SMTP reply code, when the relay gave one; anything but a number is no code.
    #[serde(default, deserialize_with = "code")]
    pub smtp_code: Option<i64>,
    /// The HTTP status, when the provider answered; anything but a number is no status.
    #[serde(default, deserialize_with = "code")]
    pub http_status: Option<i64>,
    /// EMAIL: the name the relay's greeting gave.
    #[serde(borrow, default, deserialize_with = "text")]
    pub smtp_greeting: Option<Cow<'a, str>>,
}

/// A reply code: a whole number, or nothing (whatever else the value is).
fn code<'de, D: de::Deserializer<'de>>(deserializer: D) -> Result<Option<i64>, D::Error> {
    struct Code;
    impl<'de> Visitor<'de> for Code {
        type Value = Option<i64>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a reply code")
        }
        fn visit_i64<E: de::Error>(self, n: i64) -> Result<Self::Value, E> {
            Ok(Some(n))
        }
        fn visit_u64<E: de::Error>(self, n: u64) -> Result<Self::Value, E> {
            Ok(i64::try_from(n).ok())
        }
        fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_some<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_any(Code)
        }
        fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            Ok(None)
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            Ok(None)
        }
    }
    deserializer.deserialize_any(Code)
}

/// An optional string, borrowed where it can be.
fn text<'de: 'a, 'a, D: de::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Cow<'a, str>>, D::Error> {
    Option::<Text<'a>>::deserialize(deserializer).map(|t| t.map(|t| t.0))
}

/// Reads `payload` into `fields` (which starts empty); why not, in words that do not
/// depend on where in the text the fault is.
pub fn parse<'a>(payload: &'a str, fields: &mut Fields<'a>) -> Result<(), String> {
    if !payload.trim_start().starts_with('{') {
        return Err("payload is not a JSON object".to_string());
    }
    let mut deserializer = serde_json::Deserializer::from_str(payload);
    Into(fields)
        .deserialize(&mut deserializer)
        .and_then(|()| deserializer.end())
        .map_err(|err| format!("payload: {}", crate::model::without_position(&err)))
}

/// The names the reading knows; any other is skipped.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Key {
    Channel,
    Cycle,
    Attempt,
    LeaseToken,
    Success,
    MessageId,
    Error,
    Metadata,
    Channels,
    Attestation,
    Attempts,
    Outcome,
    LeaseUntil,
    SmtpFrom,
    Source,
    Operator,
    ClaimedOperator,
    Reason,
    GivenUp,
    Other,
}

impl Key {
    fn of(name: &str) -> Key {
        match name {
            "channel" => Key::Channel,
            "cycle" => Key::Cycle,
            "attempt" => Key::Attempt,
            "lease_token" => Key::LeaseToken,
            "success" => Key::Success,
            "message_id" => Key::MessageId,
            "error" => Key::Error,
            "metadata" => Key::Metadata,
            "channels" => Key::Channels,
            "attestation" => Key::Attestation,
            "attempts" => Key::Attempts,
            "outcome" => Key::Outcome,
            "lease_until" => Key::LeaseUntil,
            "smtp_from" => Key::SmtpFrom,
            "source" => Key::Source,
            "operator" => Key::Operator,
            "claimed_operator" => Key::ClaimedOperator,
            "reason" => Key::Reason,
            "given_up" => Key::GivenUp,
            _ => Key::Other,
        }
    }

    pub(super) fn name(self) -> &'static str {
        match self {
            Key::Channel => "channel",
            Key::Cycle => "cycle",
            Key::Attempt => "attempt",
            Key::LeaseToken => "lease_token",
            Key::Success => "success",
            Key::MessageId => "message_id",
            Key::Error => "error",
            Key::Metadata => "metadata",
            Key::Channels => "channels",
            Key::Attestation => "attestation",
            Key::Attempts => "attempts",
            Key::Outcome => "outcome",
            Key::LeaseUntil => "lease_until",
            Key::SmtpFrom => "smtp_from",
            Key::Source => "source",
            Key::Operator => "operator",
            Key::ClaimedOperator => "claimed_operator",
            Key::Reason => "reason",
            Key::GivenUp => "given_up",
            Key::Other => "",
        }
    }

    /// Every key read, by name.
    #[cfg(test)]
    pub(super) const ALL: [Key; 19] = [
        Key::Channel,
        Key::Cycle,
        Key::Attempt,
        Key::LeaseToken,
        Key::Success,
        Key::MessageId,
        Key::Error,
        Key::Metadata,
        Key::Channels,
        Key::Attestation,
        Key::Attempts,
        Key::Outcome,
        Key::LeaseUntil,
        Key::SmtpFrom,
        Key::Source,
        Key::Operator,
        Key::ClaimedOperator,
        Key::Reason,
        Key::GivenUp,
    ];

    fn bit(self) -> u32 {
        1 << (self as u32)
    }
}

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Names;
        impl Visitor<'_> for Names {
            type Value = Key;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("field identifier")
            }
            fn visit_str<E: de::Error>(self, name: &str) -> Result<Key, E> {
                Ok(Key::of(name))
            }
        }
        deserializer.deserialize_identifier(Names)
    }
}

/// Text borrowed from the payload unless it holds escapes, as serde's `borrow` does.
struct Text<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Strings;
        impl<'de> Visitor<'de> for Strings {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, text: &'de str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Borrowed(text)))
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(text.to_string())))
            }
            fn visit_string<E: de::Error>(self, text: String) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(text)))
            }
        }
        deserializer.deserialize_str(Strings)
    }
}

/// The seed that fills a [`Fields`] where it lies.
struct Into<'f, 'a>(&'f mut Fields<'a>);

impl<'de: 'a, 'a> DeserializeSeed<'de> for Into<'_, 'a> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de: 'a, 'a> Visitor<'de> for Into<'_, 'a> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("struct Fields")
    }

    fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<(), M::Error> {
        let fields = self.0;
        let mut seen = 0u32;
        while let Some(key) = map.next_key::<Key>()? {
            if !matches!(key, Key::Other) {
                if seen & key.bit() != 0 {
                    return Err(de::Error::duplicate_field(key.name()));
                }
                seen |= key.bit();
            }
            let text = |value: Option<Text<'a>>| value.map(|t| t.0);
            match key {
                Key::Channel => fields.channel = text(map.next_value()?),
                Key::Cycle => fields.cycle = map.next_value()?,
                Key::Attempt => fields.attempt = map.next_value()?,
                Key::LeaseToken => fields.lease_token = text(map.next_value()?),
                Key::Success => fields.success = map.next_value()?,
                Key::MessageId => fields.message_id = text(map.next_value()?),
                Key::Error => fields.error = text(map.next_value()?),
                Key::Metadata => fields.metadata = map.next_value()?,
                Key::Channels => fields.channels = map.next_value()?,
                Key::Attestation => fields.attestation = text(map.next_value()?),
                Key::Attempts => fields.attempts = map.next_value()?,
                Key::Outcome => fields.outcome = text(map.next_value()?),
                Key::LeaseUntil => fields.lease_until = map.next_value()?,
                Key::SmtpFrom => fields.smtp_from = text(map.next_value()?),
                Key::Source => fields.source = text(map.next_value()?),
                Key::Operator => fields.operator = text(map.next_value()?),
                Key::ClaimedOperator => fields.claimed_operator = text(map.next_value()?),
                Key::Reason => fields.reason = text(map.next_value()?),
                Key::GivenUp => fields.given_up = map.next_value()?,
                Key::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// serde's derived reading of the same struct: the rules to match.
    fn derived(payload: &str) -> Result<Fields<'_>, String> {
        if !payload.trim_start().starts_with('{') {
            return Err("payload is not a JSON object".to_string());
        }
        serde_json::from_str(payload)
            .map_err(|err| format!("payload: {}", crate::model::without_position(&err)))
    }

    fn in_place(payload: &str) -> Result<Fields<'_>, String> {
        let mut fields = Fields::default();
        parse(payload, &mut fields).map(|()| fields)
    }

    fn borrowed(fields: &Fields<'_>) -> Vec<bool> {
        [&fields.channel, &fields.lease_token, &fields.error]
            .iter()
            .map(|f| matches!(f, Some(Cow::Borrowed(_))))
            .collect()
    }

    /// What the engine writes (the model's payload types) is what triage reads: the same
    /// fields, under the same names, with the same values.
    #[test]
    fn reads_what_the_writers_write() {
        use crate::model::payload::{self, LeaseKeys};
        let lease = LeaseKeys {
            attempt: Some(2),
            cycle: Some(3),
            cycle_attempt: Some(1),
            lease_token: Some("t-1".into()),
        };
        let result = payload::to_text(&payload::ChannelAttemptResult {
            lease: lease.clone(),
            channel: Some("EMAIL".into()),
            success: Some(false),
            message_id: Some("<m@uns>".into()),
            error: Some("no reply".into()),
            metadata: Some(
                serde_json::json!({"provider_outcome": "UNKNOWN", "idempotency_key": "k"})
                    .as_object()
                    .cloned()
                    .unwrap_or_default(),
            ),
        });
        let fields = in_place(&result).expect("a result reads");
        assert_eq!(fields.channel.as_deref(), Some("EMAIL"));
        assert_eq!((fields.cycle, fields.attempt), (Some(3), Some(2)));
        assert_eq!(fields.lease_token.as_deref(), Some("t-1"));
        assert_eq!(fields.success, Some(false));
        assert_eq!(fields.message_id.as_deref(), Some("<m@uns>"));
        assert_eq!(fields.error.as_deref(), Some("no reply"));
        let metadata = fields.metadata.expect("metadata");
        assert_eq!(metadata.provider_outcome.as_deref(), Some("UNKNOWN"));
        assert_eq!(metadata.idempotency_key.as_deref(), Some("k"));
    }

    /// A replay's audit and new cycle, as the engine writes them.
    #[test]
    fn reads_a_replay_as_the_writers_write_it() {
        use crate::model::payload::{self, Claim};
        let audit = payload::Audit {
            via: None,
            operator: "alice".into(),
            reason: None,
            ticket: None,
            attestation: Some("checked the relay log".into()),
            verified: Some(Claim::NotDelivered),
            forced: false,
            overridden: Vec::new(),
            triage: serde_json::Value::Null,
            claimed_operator: None,
            given_up: Vec::new(),
        };
        let replayed = payload::to_text(&payload::Replayed {
            audit,
            cycle: payload::NewCycle {
                cycle: Some(4),
                previous_cycle: Some(3),
                cycle_attempt: Some(0),
                channels: Some(vec!["SLACK".into(), "EMAIL".into()]),
            },
            due_at: Some(1_761_192_060.0),
            pace: Some("200/s".into()),
        });
        let fields = in_place(&replayed).expect("a replay reads");
        assert_eq!(fields.cycle, Some(4));
        assert_eq!(fields.attestation.as_deref(), Some("checked the relay log"));
        let names: Vec<&str> = fields
            .channels
            .iter()
            .flatten()
            .map(|c| c.as_ref())
            .collect();
        assert_eq!(names, ["SLACK", "EMAIL"]);
    }

    /// A verification, and the sorted keys every writer's text has.
    #[test]
    fn reads_a_verification_as_the_writers_write_it() {
        use crate::model::payload::{self, Claim, LeaseKeys};
        use crate::model::{Channel, ChannelSet};
        let lease = LeaseKeys {
            attempt: Some(2),
            cycle: Some(3),
            cycle_attempt: Some(1),
            lease_token: Some("t-1".into()),
        };
        let verified = payload::to_text(&payload::Verified {
            via: None,
            channel: Channel::Slack,
            cycle: 2,
            attempts: vec![1, 2],
            outcome: Claim::Delivered,
            source: "slack".into(),
            evidence: "ts 1.2".into(),
            operator: "bob".into(),
            reason: None,
            ticket: None,
            triage: serde_json::Value::Null,
            claimed_operator: Some("carol".into()),
            read_on_client: true,
        });
        let fields = in_place(&verified).expect("a verification reads");
        assert_eq!(fields.channel.as_deref(), Some("SLACK"));
        assert_eq!(fields.attempts, Some(vec![1, 2]));
        assert_eq!(fields.outcome.as_deref(), Some("DELIVERED"));
        // The sorted keys every writer's text has, whatever the field order.
        let started = payload::to_text(&payload::RetryScheduled {
            lease,
            next_attempt_at: 5.0,
            channels: ChannelSet::from_iter([Channel::Email]),
        });
        assert_eq!(
            started,
            r#"{"attempt":2,"channels":["EMAIL"],"cycle":3,"cycle_attempt":1,"lease_token":"t-1","next_attempt_at":5.0}"#
        );
    }

    #[test]
    fn reads_as_the_derived_struct_does() {
        let cases = [
            r#"{"channel":"EMAIL","cycle":1,"attempt":2,"lease_token":"t","success":true,"message_id":"<m>","error":null,"metadata":{"provider_outcome":"ACCEPTED","retryable":true},"extra":[1,{"a":2}]}"#,
            r#"{"channels":["SLACK","Email"],"attestation":"checked","attempts":[1,2],"outcome":"DELIVERED"}"#,
            r#"{"error":"said \"no\"\n","channel":"SL\u0041CK"}"#,
            r#"  {}  "#,
            r#"{"channel":null,"channel":"EMAIL"}"#,
            r#"{"cycle":"1"}"#,
            r#"{"cycle":1.5}"#,
            r#"{"success":"yes"}"#,
            r#"{"channel":7}"#,
            r#"{"metadata":[]}"#,
            r#"{"metadata":{"message_id":3}}"#,
            r#"{"channels":"EMAIL"}"#,
            r#"{"attempts":[1,"2"]}"#,
            r#"{"channel":"EMAIL"} x"#,
            r#"{"channel":"EMAIL""#,
            r#"{"ch\u0061nnel":"EMAIL"}"#,
            r#"[1,2]"#,
            r#""text""#,
            r#"{"cycle":99999999999999999999}"#,
            r#"{"lease_until":1.5,"smtp_from":"a@b","source":"relay-log","operator":"o","claimed_operator":"c","reason":"r"}"#,
            r#"{"lease_until":"soon"}"#,
            r#"{"operator":5}"#,
            r#"{"metadata":{"smtp_greeting":"mx"}}"#,
        ];
        for case in cases {
            assert_eq!(in_place(case), derived(case), "{case}");
        }
    }

    #[test]
    fn every_key_is_found_by_its_name_and_no_other() {
        for key in Key::ALL {
            assert!(Key::of(key.name()) == key, "{}", key.name());
            assert!(Key::of(&key.name().to_uppercase()) == Key::Other);
        }
        assert!(Key::of("") == Key::Other);
    }

    #[test]
    fn text_without_escapes_is_borrowed_not_copied() {
        let plain = in_place(r#"{"channel":"EMAIL","lease_token":"t","error":"e"}"#);
        assert_eq!(plain.as_ref().map(borrowed), Ok(vec![true, true, true]));
        let escaped = in_place(r#"{"channel":"EM\u0041IL","lease_token":"t","error":"a\"b"}"#);
        assert_eq!(escaped.as_ref().map(borrowed), Ok(vec![false, true, false]));
    }

    fn value() -> impl Strategy<Value = serde_json::Value> {
        use serde_json::json;
        prop_oneof![
            Just(json!(null)),
            any::<bool>().prop_map(|b| json!(b)),
            any::<i64>().prop_map(|n| json!(n)),
            any::<f64>().prop_map(|x| json!(x)),
            "[a-zA-Z\"\\\\\n é]{0,8}".prop_map(|s| json!(s)),
            prop::collection::vec(any::<i64>(), 0..3).prop_map(|v| json!(v)),
            prop::collection::vec("[A-Z]{0,5}", 0..3).prop_map(|v| json!(v)),
            Just(json!({"provider_outcome": "UNKNOWN", "message_id": "<m>"})),
            Just(json!({"smtp_greeting": "relay.example", "smtp_code": 250})),
        ]
    }

    proptest! {
        #[test]
        fn any_object_reads_as_the_derived_struct_does(
            pairs in prop::collection::vec(
                (prop::sample::select(vec![
                    "channel", "cycle", "attempt", "lease_token", "success", "message_id",
                    "error", "metadata", "channels", "attestation", "attempts", "outcome",
                    "lease_until", "smtp_from", "source", "operator", "claimed_operator",
                    "reason", "other",
                ]), value()),
                0..6,
            )
        ) {
            // Written by hand so that a key may repeat, as a hostile store's may.
            let body: Vec<String> = pairs
                .iter()
                .map(|(key, value)| format!("{key:?}:{value}"))
                .collect();
            let text = format!("{{{}}}", body.join(","));
            prop_assert_eq!(in_place(&text), derived(&text));
        }
    }
}
