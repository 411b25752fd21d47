//! One setting read from a config file without resolving the rest (no provider key, no other
//! variable needed): what the control commands and `ringside probe` need to find the server.

use super::schema::ServerSection;
use super::{EnvLookup, FileConfig, Problem, parse};

/// The data directory a config file names (`RINGSIDE_DATA_DIR` wins): the control commands
/// need nothing else from the file, and none of its variables.
pub fn data_dir_of(path: &str, env: EnvLookup) -> Result<String, String> {
    server_setting(path, env, crate::env_vars::DATA_DIR, |s| s.data_dir)
}

/// The admin address a config file names (`RINGSIDE_ADMIN_LISTEN` wins): `ringside probe`
/// needs nothing else.
pub fn admin_listen_of(path: &str, env: EnvLookup) -> Result<String, String> {
    server_setting(path, env, crate::env_vars::ADMIN_LISTEN, |s| s.admin_listen)
}

/// A `[server]` setting: the variable `var` when set, else the file's (parsed, not resolved).
fn server_setting(
    path: &str,
    env: EnvLookup,
    var: &str,
    pick: fn(ServerSection) -> String,
) -> Result<String, String> {
    if let Some(v) = env(var) {
        return Ok(v);
    }
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read config file {path}: {e}"))?;
    let file: FileConfig = parse::file_config(&text, path).map_err(|ps| {
        let lines: Vec<String> = ps.iter().map(Problem::to_string).collect();
        lines.join("; ")
    })?;
    Ok(pick(file.server))
}
