//! The one collector of what is wrong with a config: every problem with where it is, so that
//! `ringside check` reports them all in one run, not just the first.

#[derive(Debug, Default)]
pub(super) struct Problems(pub(super) Vec<Problem>);

impl Problems {
    pub(super) fn add(&mut self, at: impl Into<String>, message: impl Into<String>) {
        self.0.push(Problem {
            at: at.into(),
            message: message.into(),
        });
    }

    /// Record a problem when `v` is outside `lo..=hi`.
    pub(super) fn in_range<T: PartialOrd + std::fmt::Display + Copy>(
        &mut self,
        at: &str,
        v: T,
        lo: T,
        hi: T,
    ) {
        if v < lo || v > hi {
            self.add(at, format!("{v} is out of range ({lo} to {hi})"));
        }
    }

    /// The same, returning `v` clamped into the range (so resolving can go on).
    pub(super) fn clamped(&mut self, at: &str, v: u64, lo: u64, hi: u64) -> u64 {
        self.in_range(at, v, lo, hi);
        v.clamp(lo, hi)
    }
}

impl Problems {
    /// A secret from the environment variable `name` (a `*_env` setting at `at`): set, not
    /// empty, without control characters (a stray line break would write lines of its own into
    /// a request head). A problem never shows the value, nor a `name` that looks like a secret
    /// pasted where a variable's name belongs.
    pub(super) fn secret_env(
        &mut self,
        at: &str,
        name: &str,
        env: super::EnvLookup,
    ) -> Option<super::Secret> {
        if !is_variable_name(name) {
            self.add(
                at,
                format!(
                    "must name an environment variable (letters, digits and `_`), not hold a value: {} (the secret goes into a variable, and `{}` names that variable)",
                    shown_name(name),
                    at.rsplit('.').next().unwrap_or(at)
                ),
            );
            return None;
        }
        let variable = shown_name(name);
        match env(name).filter(|v| !v.is_empty()) {
            Some(v) if v.bytes().any(|b| b < 0x20 || b == 0x7f) => {
                self.add(
                    at,
                    format!("{variable} holds a control character (a line break?)"),
                );
                None
            }
            Some(v) => Some(super::Secret::new(v)),
            None => {
                self.add(at, format!("{variable} is not set"));
                None
            }
        }
    }
}

/// Whether `name` can be an environment variable's name as shells write them.
fn is_variable_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && name.len() <= 128
}

/// How a problem names the variable `name`: in full when it reads like a variable's name
/// (`OPENAI_KEY_A`), else only by its length: a long run of mixed letters and digits, or
/// anything that cannot be a variable's name, may be the key itself.
pub(super) fn shown_name(name: &str) -> String {
    let upper_case_name = name
        .bytes()
        .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_');
    let looks_secret = !upper_case_name
        && name.len() >= 20
        && name.bytes().any(|b| b.is_ascii_digit())
        && name.bytes().any(|b| b.is_ascii_lowercase());
    if is_variable_name(name) && !looks_secret && name.len() <= 64 {
        format!("environment variable {name}")
    } else {
        format!(
            "the value given ({} characters, not shown: it looks like a secret)",
            name.chars().count()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "SET" => Some("sk-value".into()),
            "BROKEN" => Some("sk-\nvalue".into()),
            _ => None,
        }
    }

    #[test]
    fn a_secret_pasted_where_a_variable_name_belongs_is_never_shown() {
        for pasted in [
            "sk-proj-9fQ2xLw0aZ7",
            "sk-ant-api03-abcdef",
            "AIzaSyD3x4mpl3k3yv4lu3s0m3th1ng",
            "3f9a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a",
        ] {
            let mut p = Problems::default();
            assert!(
                p.secret_env("providers[0].connections[0].key_env", pasted, &env)
                    .is_none()
            );
            let said = format!("{:?}", p.0);
            assert!(!said.contains(pasted), "{said}");
            assert!(said.contains("not shown"), "{said}");
        }
        // A variable's name is named.
        let mut p = Problems::default();
        assert!(p.secret_env("x.key_env", "OPENAI_KEY_A", &env).is_none());
        assert!(format!("{:?}", p.0).contains("environment variable OPENAI_KEY_A is not set"));
        assert!(p.secret_env("x.key_env", "SET", &env).is_some());
        assert!(p.secret_env("x.key_env", "BROKEN", &env).is_none());
        assert!(format!("{:?}", p.0).contains("control character"));
    }
}

/// One problem found in a config, with where it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    pub at: String,
    pub message: String,
}

impl Problem {
    /// What the problem says without the file's own text: where it is, and the message's
    /// first line with every quoted value left out. A reload's problems go to the log and the
    /// admin API, which others may read, and the offending line may hold a secret pasted
    /// where it does not belong; `ringside check` shows the line to whoever runs it.
    pub fn without_source(&self) -> String {
        let first = self.message.lines().next().unwrap_or("");
        let mut out = String::with_capacity(first.len());
        let mut quoted = false;
        for c in first.chars() {
            if c == '"' {
                if !quoted {
                    out.push_str("\"…");
                }
                quoted = !quoted;
            } else if !quoted {
                out.push(c);
            }
        }
        format!("{}: {out}", self.at)
    }
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.at, self.message)
    }
}
