//! When a streamed answer's events are joined into fuller segments (`stream.coalesce_events`,
//! or a client key's own `coalesce_events`): the relay then sends its middle writes with
//! `MSG_MORE`, and the kernel holds each until the next joins it (up to about 200 ms). Fewer
//! segments cost the kernel, which does most of a held stream's work, less per event.

use serde::de::{self, Deserializer, Visitor};

/// Whether to join a stream's events.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Coalesce {
    /// Every event goes out when it comes (`false`).
    Never,
    /// Join only while this core is busy (`"auto"`, the default): a core that keeps up sends
    /// every event at once; one whose loop runs late (`core_load`) joins them, trading a
    /// little latency that queueing already costs for the CPU that lets it catch up.
    #[default]
    WhenBusy,
    /// Always join (`true`): for traffic nobody watches arrive token by token.
    Always,
}

impl Coalesce {
    /// Whether a write going out now may wait for the next one.
    pub fn joins_now(self) -> bool {
        match self {
            Coalesce::Never => false,
            Coalesce::WhenBusy => crate::core_load::busy(),
            Coalesce::Always => true,
        }
    }

    /// As the configuration and the admin API write it: `true`, `false` or `"auto"`.
    pub fn as_json(self) -> serde_json::Value {
        match self {
            Coalesce::Never => false.into(),
            Coalesce::WhenBusy => "auto".into(),
            Coalesce::Always => true.into(),
        }
    }

    /// Read from JSON (a managed client key); `None` for anything but the three spellings.
    /// The same reading as the configuration's (`Deserialize` below).
    pub fn from_json(v: &serde_json::Value) -> Option<Coalesce> {
        serde::Deserialize::deserialize(v).ok()
    }
}

/// What to say when a value is none of the three.
pub const SPELLINGS: &str = "true, false or \"auto\"";

impl<'de> serde::Deserialize<'de> for Coalesce {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(CoalesceVisitor)
    }
}

struct CoalesceVisitor;

impl Visitor<'_> for CoalesceVisitor {
    type Value = Coalesce;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str(SPELLINGS)
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Coalesce, E> {
        Ok(if v { Coalesce::Always } else { Coalesce::Never })
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Coalesce, E> {
        match v {
            "auto" => Ok(Coalesce::WhenBusy),
            _ => Err(E::invalid_value(de::Unexpected::Str(v), &self)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_three_spellings_and_nothing_else() {
        for (v, c) in [
            (json!(true), Coalesce::Always),
            (json!(false), Coalesce::Never),
            (json!("auto"), Coalesce::WhenBusy),
        ] {
            assert_eq!(Coalesce::from_json(&v), Some(c));
            assert_eq!(c.as_json(), v);
            assert_eq!(serde_json::from_value::<Coalesce>(v).ok(), Some(c));
        }
        for v in [json!("yes"), json!(1), json!(null), json!("Auto")] {
            assert_eq!(Coalesce::from_json(&v), None, "{v}");
            let e = serde_json::from_value::<Coalesce>(v).unwrap_err();
            assert!(e.to_string().contains(SPELLINGS), "{e}");
        }
    }

    #[test]
    fn only_auto_asks_the_core() {
        std::thread::spawn(|| {
            assert!(
                !Coalesce::WhenBusy.joins_now(),
                "a quiet core sends at once"
            );
            assert!(Coalesce::Always.joins_now());
            assert!(!Coalesce::Never.joins_now());
            use crate::core_load::{BUSY_COUNT, Marks, late_tick, observe};
            for _ in 0..BUSY_COUNT {
                observe(
                    late_tick(std::time::Duration::from_millis(10)),
                    Marks::SHIPPED,
                );
            }
            assert!(Coalesce::WhenBusy.joins_now(), "a busy core joins");
            assert!(!Coalesce::Never.joins_now());
        })
        .join()
        .unwrap();
    }
}
