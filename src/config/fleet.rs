//! `[fleet]`: where the fleet's Redis is and how this instance is named in it.

use super::problems::Problems;
use super::schema::FleetSection;
use super::{EnvLookup, Secret, ServerSettings};

/// What a capped connection admits while Redis is away.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FleetUnavailable {
    /// The cap divided by the instances last seen (at least 1).
    LocalShare,
    /// Nothing: requests queue, then fail as the connection's saturation policy says.
    Reject,
}

impl FleetUnavailable {
    /// As written in the config.
    pub fn as_str(self) -> &'static str {
        match self {
            FleetUnavailable::LocalShare => "local_share",
            FleetUnavailable::Reject => "reject",
        }
    }
}

/// Fleet mode, resolved.
#[derive(Clone, Debug)]
pub struct FleetSettings {
    /// The Redis address, as written (it holds no password).
    pub redis_url: String,
    pub username: Option<String>,
    pub password: Option<Secret>,
    /// What every message and entry of the fleet is signed with (`secret_env`).
    pub secret: Secret,
    pub instance_id: String,
    pub key_prefix: String,
    pub timeout_ms: u64,
    pub when_unavailable: FleetUnavailable,
}

impl FleetSettings {
    /// The name of a key or channel of this fleet. The prefix is a hash tag, so that every
    /// key one script touches lands on one Redis Cluster slot.
    pub fn key(&self, name: &str) -> String {
        format!("{{{}}}:{name}", self.key_prefix)
    }
}

pub(super) fn resolve(
    p: &mut Problems,
    f: &FleetSection,
    server: &ServerSettings,
    env: EnvLookup,
) -> Option<FleetSettings> {
    if f.redis_url.is_empty() {
        return None;
    }
    let url = &f.redis_url;
    let Some((scheme, rest)) = url.split_once("://") else {
        p.add(
            "fleet.redis_url",
            format!("`{url}` is not a redis:// or rediss:// URL"),
        );
        return None;
    };
    if !matches!(scheme, "redis" | "rediss") {
        p.add(
            "fleet.redis_url",
            format!("`{scheme}://` is not redis:// or rediss:// (TLS)"),
        );
    }
    check_url_extras(p, rest);
    let password = f
        .password_env
        .as_ref()
        .and_then(|var| p.secret_env("fleet.password_env", var, env));
    let secret = fleet_secret(p, f, env);
    let instance_id = f
        .instance_id
        .clone()
        .unwrap_or_else(|| format!("{}:{}", host_name(), server.listen.port()));
    if !crate::names::valid_id(&instance_id.replace(':', "_")) {
        p.add(
            "fleet.instance_id",
            format!("`{instance_id}` is not 1-64 letters, digits, `_`, `-`, `.` or `:`"),
        );
    }
    if !crate::names::valid_id(&f.key_prefix) {
        p.add("fleet.key_prefix", "1-64 letters, digits, `_`, `-` or `.`");
    }
    let timeout_ms = p.clamped("fleet.timeout_ms", f.timeout_ms, 10, 60_000);
    let when_unavailable = match f.when_unavailable.as_str() {
        "local_share" => FleetUnavailable::LocalShare,
        "reject" => FleetUnavailable::Reject,
        other => {
            p.add(
                "fleet.when_unavailable",
                format!("`{other}` is not one of local_share, reject"),
            );
            FleetUnavailable::LocalShare
        }
    };
    Some(FleetSettings {
        redis_url: url.clone(),
        username: f.username.clone(),
        password,
        secret: secret.unwrap_or_else(|| Secret::new("")),
        instance_id,
        key_prefix: f.key_prefix.clone(),
        timeout_ms,
        when_unavailable,
    })
}

/// The shortest fleet secret accepted: it is all that stands between a Redis writer and the
/// fleet's trust.
pub const MIN_SECRET_CHARS: usize = 32;

/// `secret_env`: required, and long enough to resist guessing.
fn fleet_secret(p: &mut Problems, f: &FleetSection, env: EnvLookup) -> Option<Secret> {
    let Some(var) = &f.secret_env else {
        p.add(
            "fleet.secret_env",
            format!(
                "required: name the variable that holds the fleet's shared secret (at least {MIN_SECRET_CHARS} characters, the same on every instance; `openssl rand -hex 32` makes one). Members sign what they write to Redis with it and ignore what is not signed with it"
            ),
        );
        return None;
    };
    let secret = p.secret_env("fleet.secret_env", var, env)?;
    let n = secret.expose().chars().count();
    if n < MIN_SECRET_CHARS {
        p.add(
            "fleet.secret_env",
            format!(
                "the fleet secret in {} is {n} characters: at least {MIN_SECRET_CHARS} are required",
                super::problems::shown_name(var)
            ),
        );
        return None;
    }
    Some(secret)
}

/// What a Redis URL may not carry besides the address and database: credentials (they belong
/// in `username` and `password_env`, and a URL is shown by `GET /admin/fleet`), query settings
/// (`?password=`) and fragments (`#insecure` turns certificate checks off). Never echoed.
fn check_url_extras(p: &mut Problems, rest: &str) {
    if rest.split('/').next().unwrap_or("").contains('@') {
        p.add(
            "fleet.redis_url",
            "the URL holds credentials: put the password in the variable `password_env` names",
        );
    }
    if rest.contains('?') {
        p.add(
            "fleet.redis_url",
            "the URL holds query settings (`?…`): credentials go in `username` and `password_env`, and nothing else is read from there",
        );
    }
    if rest.contains('#') {
        p.add(
            "fleet.redis_url",
            "the URL holds a fragment (`#…`; `#insecure` would turn certificate checks off): remove it",
        );
    }
}

/// This machine's host name (`localhost` if it has none that is usable).
fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most `buf.len()` bytes into the buffer we own.
    let ok = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } == 0;
    let end = buf.iter().position(|&b| b == 0).unwrap_or(0);
    let name = String::from_utf8_lossy(&buf[..end]).to_string();
    if ok && crate::names::valid_id(&name) {
        name
    } else {
        "localhost".into()
    }
}

#[cfg(test)]
mod tests {
    use crate::config::load_str;

    fn load(fleet: &str) -> Result<crate::config::Config, Vec<crate::config::Problem>> {
        let text = format!(
            "[server]\nlisten = \"127.0.0.1:7100\"\n[fleet]\n{fleet}\n[[providers]]\nid = \"p\"\ndialect = \"openai\"\nbase_url = \"http://127.0.0.1:1/v1\"\n[[providers.connections]]\nid = \"a\"\nkey_env = \"K\"\n"
        );
        let env = |n: &str| match n {
            "K" => Some("sk-x".to_string()),
            "REDIS_PW" => Some("hunter2".to_string()),
            "FLEET_SECRET" => Some("0123456789abcdef0123456789abcdef".to_string()),
            "SHORT_SECRET" => Some("too-short".to_string()),
            _ => None,
        };
        load_str(&text, "t", &env)
    }

    #[test]
    fn fleet_mode_is_off_without_a_url_and_named_by_host_and_port_with_one() {
        assert!(load("").expect("valid").fleet.is_none());
        let f = load("redis_url = \"redis://127.0.0.1:6379\"\npassword_env = \"REDIS_PW\"\nsecret_env = \"FLEET_SECRET\"")
            .expect("valid")
            .fleet
            .expect("on");
        assert!(f.instance_id.ends_with(":7100"), "{}", f.instance_id);
        assert_eq!(f.password.as_ref().map(|s| s.expose()), Some("hunter2"));
        assert_eq!(f.key("health"), "{ringside}:health");
    }

    #[test]
    fn a_password_in_the_url_or_a_missing_variable_is_a_problem_that_shows_no_secret() {
        let ps = load("redis_url = \"redis://:hunter2@127.0.0.1:6379\"").expect_err("refused");
        let text = format!("{ps:?}");
        assert!(text.contains("password_env"), "{text}");
        assert!(!text.contains("hunter2"), "{text}");
        let ps = load("redis_url = \"redis://h:1\"\npassword_env = \"NOPE\"").expect_err("refused");
        assert!(format!("{ps:?}").contains("NOPE"));
        let ps = load("redis_url = \"http://h:1\"").expect_err("refused");
        assert!(format!("{ps:?}").contains("rediss://"));
    }

    #[test]
    fn a_fleet_needs_a_long_secret_and_a_url_without_settings_or_fragments() {
        let ps = load("redis_url = \"redis://h:1\"").expect_err("no secret");
        assert!(format!("{ps:?}").contains("fleet.secret_env"), "{ps:?}");
        let ps =
            load("redis_url = \"redis://h:1\"\nsecret_env = \"SHORT_SECRET\"").expect_err("short");
        let text = format!("{ps:?}");
        assert!(text.contains("at least 32"), "{text}");
        assert!(!text.contains("too-short"), "{text}");
        for url in [
            "redis://h:1/0?password=hunter2",
            "rediss://h:1/#insecure",
            "redis://h:1?protocol=resp3",
        ] {
            let ps = load(&format!(
                "redis_url = \"{url}\"\nsecret_env = \"FLEET_SECRET\""
            ))
            .expect_err(url);
            let text = format!("{ps:?}");
            assert!(text.contains("fleet.redis_url"), "{text}");
            assert!(!text.contains("hunter2"), "{text}");
        }
        let f = load("redis_url = \"rediss://h:1/2\"\nsecret_env = \"FLEET_SECRET\"")
            .expect("valid")
            .fleet
            .expect("on");
        assert_eq!(f.secret.expose().len(), 32);
    }
}
