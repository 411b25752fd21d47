//! `ringside reload`, `ringside drain` and `ringside status`: commands to a running server on
//! its local control socket (`admin::control`, `<data_dir>/control.sock`). The config file is
//! read only for its `data_dir`: no admin token and no provider key is needed, and nothing is
//! sent over the network.

use crate::admin::control::{Command, ask, socket_path};
use crate::config::{data_dir_of, real_env};

/// Where the server's socket is: `--socket`, else the config's `data_dir`.
fn socket(config: &str, socket: Option<&str>) -> Result<std::path::PathBuf, String> {
    match socket {
        Some(s) => Ok(s.into()),
        None => Ok(socket_path(&data_dir_of(config, &real_env)?)),
    }
}

/// Ask for a drain.
pub(super) fn drain(config: &str, sock: Option<&str>) -> Result<(), String> {
    let answer = ask(&socket(config, sock)?, Command::Drain)?;
    if answer["draining"] == true {
        println!("draining: {answer}");
        Ok(())
    } else {
        Err(format!("the server refused the drain: {answer}"))
    }
}

/// Ask for a reload: print the outcome; problems make it fail.
pub(super) fn reload(config: &str, sock: Option<&str>) -> Result<(), String> {
    let answer = ask(&socket(config, sock)?, Command::Reload)?;
    match answer["status"].as_str() {
        Some("applied") => {
            println!("{answer}");
            Ok(())
        }
        Some("rejected") => Err(format!(
            "the reload was rejected; the running config is unchanged:\n{answer}"
        )),
        _ => Err(format!("the server refused the reload: {answer}")),
    }
}

/// Print what the server says of itself.
pub(super) fn status(config: &str, sock: Option<&str>) -> Result<(), String> {
    let answer = ask(&socket(config, sock)?, Command::Status)?;
    if answer.get("error").is_some() {
        return Err(format!("the server refused: {answer}"));
    }
    println!("{answer}");
    Ok(())
}
