//! Every environment variable Ringside reads, in one table. The code reads the names from
//! here and `--help` is made from the table, so help can never name a variable the code does
//! not read (it once promised `RINGSIDE_MAX_WAIT_MS`, which nothing read). Values that cannot
//! be used are warned about at start (`cli::env_check`), never silently replaced by a default.

pub const CONFIG: &str = "RINGSIDE_CONFIG";
pub const LISTEN: &str = "RINGSIDE_LISTEN";
pub const ADMIN_LISTEN: &str = "RINGSIDE_ADMIN_LISTEN";
pub const WORKERS: &str = "RINGSIDE_WORKERS";
pub const DRIVER: &str = "RINGSIDE_DRIVER";
pub const DATA_DIR: &str = "RINGSIDE_DATA_DIR";
pub const LOG: &str = "RINGSIDE_LOG";
pub const RATE_LIMIT_MAX_WAIT_MS: &str = "RINGSIDE_RATE_LIMIT_MAX_WAIT_MS";
pub const RATE_LIMIT_EXECUTION_MAX_WAIT_MS: &str = "RINGSIDE_RATE_LIMIT_EXECUTION_MAX_WAIT_MS";
pub const RATE_LIMIT_MAX_QUEUE_DEPTH: &str = "RINGSIDE_RATE_LIMIT_MAX_QUEUE_DEPTH";
/// The breaker overrides: a prefix, then `FAILURE_THRESHOLD`, `FAILURE_WINDOW_MS` or
/// `COOLDOWN_MS`.
pub const BREAKER_OAUTH: &str = "RINGSIDE_PROVIDER_BREAKER_OAUTH_";
pub const BREAKER_API_KEY: &str = "RINGSIDE_PROVIDER_BREAKER_API_KEY_";
pub const BREAKER_SUFFIXES: [&str; 3] = ["FAILURE_THRESHOLD", "FAILURE_WINDOW_MS", "COOLDOWN_MS"];
/// The throughput watchdog's overrides (the seed's names).
pub const WATCHDOG_ENABLED: &str = "STREAM_THROUGHPUT_WATCHDOG_ENABLED";
pub const WATCHDOG_WARMUP_MS: &str = "STREAM_THROUGHPUT_WATCHDOG_WARMUP_MS";
pub const WATCHDOG_WINDOW_MS: &str = "STREAM_THROUGHPUT_WATCHDOG_WINDOW_MS";
pub const WATCHDOG_MIN_BYTES_PER_SECOND: &str = "STREAM_THROUGHPUT_WATCHDOG_MIN_BYTES_PER_SECOND";
pub const WATCHDOG_MIN_USEFUL_BYTES: &str = "STREAM_THROUGHPUT_WATCHDOG_MIN_USEFUL_BYTES";

/// One variable (or family of them) and what it does.
pub struct EnvVar {
    pub name: &'static str,
    pub what: &'static str,
}

pub const VARS: &[EnvVar] = &[
    EnvVar {
        name: CONFIG,
        what: "the config file (--config wins; default ./ringside.toml)",
    },
    EnvVar {
        name: LISTEN,
        what: "overrides server.listen",
    },
    EnvVar {
        name: ADMIN_LISTEN,
        what: "overrides server.admin_listen",
    },
    EnvVar {
        name: WORKERS,
        what: "overrides server.workers (0: one per CPU)",
    },
    EnvVar {
        name: DRIVER,
        what: "overrides server.driver (auto, io_uring, epoll)",
    },
    EnvVar {
        name: DATA_DIR,
        what: "overrides server.data_dir",
    },
    EnvVar {
        name: LOG,
        what: "log level: error, warn, info (default), debug or off (RUST_LOG if unset)",
    },
    EnvVar {
        name: RATE_LIMIT_MAX_WAIT_MS,
        what: "default queue wait budget, ms (or MAX_WAIT_MS)",
    },
    EnvVar {
        name: RATE_LIMIT_EXECUTION_MAX_WAIT_MS,
        what: "default budget for a request's whole wait, ms (or EXECUTION_MAX_WAIT_MS)",
    },
    EnvVar {
        name: RATE_LIMIT_MAX_QUEUE_DEPTH,
        what: "default queue depth, 0: unbounded (or MAX_QUEUE_DEPTH)",
    },
    EnvVar {
        name: "RINGSIDE_PROVIDER_BREAKER_{OAUTH,API_KEY}_{FAILURE_THRESHOLD,FAILURE_WINDOW_MS,COOLDOWN_MS}",
        what: "override a profile's breaker (numbers >= 0)",
    },
    EnvVar {
        name: WATCHDOG_ENABLED,
        what: "overrides stream.watchdog (true/1/on/yes, else off)",
    },
    EnvVar {
        name: "STREAM_THROUGHPUT_WATCHDOG_{WARMUP_MS,WINDOW_MS,MIN_BYTES_PER_SECOND,MIN_USEFUL_BYTES}",
        what: "override the stream watchdog's settings (numbers >= 0)",
    },
];

/// The help text's environment section, from the table.
pub fn help() -> String {
    let mut out = String::from("Environment:\n");
    for v in VARS {
        out.push_str(&format!("  {}\n      {}\n", v.name, v.what));
    }
    out.push_str(
        "Each provider key comes from the variable its connection's key_env names \
         (see docs/reference/config.md).",
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn help_names_what_the_code_reads() {
        let h = help();
        for name in [
            CONFIG,
            LISTEN,
            ADMIN_LISTEN,
            WORKERS,
            DRIVER,
            DATA_DIR,
            LOG,
            RATE_LIMIT_MAX_WAIT_MS,
        ] {
            assert!(h.contains(name), "{name}");
        }
        assert!(!h.contains("RINGSIDE_MAX_WAIT_MS"), "{h}");
    }
}
