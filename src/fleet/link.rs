//! A connection to the fleet's Redis: the address, credentials and timeouts of `[fleet]`, and
//! the jittered backoff between tries when it is away.

use crate::config::FleetSettings;
use std::time::Duration;

/// How to reach Redis.
#[derive(Clone)]
pub struct Link {
    client: redis::Client,
    pub timeout: Duration,
}

impl Link {
    pub fn new(s: &FleetSettings) -> Result<Link, String> {
        let info: redis::ConnectionInfo =
            redis::IntoConnectionInfo::into_connection_info(s.redis_url.as_str())
                .map_err(|e| format!("fleet.redis_url: {e}"))?;
        let mut settings = info.redis_settings().clone();
        if let Some(p) = &s.password {
            settings = settings.set_password(p.expose());
        }
        if let Some(u) = &s.username {
            settings = settings.set_username(u);
        }
        let info = info.set_redis_settings(settings);
        let client = redis::Client::open(info).map_err(|e| format!("fleet.redis_url: {e}"))?;
        Ok(Link {
            client,
            timeout: Duration::from_millis(s.timeout_ms),
        })
    }

    /// A new connection with this link's timeouts on connecting, reading and writing.
    pub fn connect(&self) -> redis::RedisResult<redis::Connection> {
        let c = self.client.get_connection_with_timeout(self.timeout)?;
        c.set_read_timeout(Some(self.timeout))?;
        c.set_write_timeout(Some(self.timeout))?;
        Ok(c)
    }
}

/// Waits between tries to reach Redis: doubling from 100 ms to 5 s, each ±25 %.
#[derive(Debug, Default)]
pub struct Backoff {
    tries: u32,
}

impl Backoff {
    pub fn next(&mut self) -> Duration {
        let base = 100u64 << self.tries.min(6);
        self.tries += 1;
        let ms = base.min(5_000);
        Duration::from_millis(crate::resilience::jitter::spread(ms, 25, rand::random()))
    }

    pub fn reset(&mut self) {
        self.tries = 0;
    }

    /// No try has failed since the last success.
    pub fn is_fresh(&self) -> bool {
        self.tries == 0
    }
}

/// What an error is worth saying in a log line (never the URL: it names the server only).
pub fn describe(e: &redis::RedisError) -> String {
    e.to_string()
}
