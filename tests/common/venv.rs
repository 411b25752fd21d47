//! A Python virtual environment under the target directory with pinned requirements, made on
//! first use and reused while the requirements file is unchanged.
//!
//! Tests on both drivers (threads of one test binary) and several test binaries ask for the
//! same environment at once, so it is made under an exclusive file lock: the first caller
//! builds it, the others wait and reuse it rather than racing `python3 -m venv` into one folder.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The environment's python for `requirements` (relative to the repository), in `name`.
pub fn python(name: &str, requirements: &str) -> Result<PathBuf, String> {
    let reqs = Path::new(env!("CARGO_MANIFEST_DIR")).join(requirements);
    let wanted = std::fs::read_to_string(&reqs).map_err(|e| format!("{}: {e}", reqs.display()))?;
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _held = lock(name)?;
    let python = dir.join("bin/python");
    let stamp = dir.join("installed.txt");
    if std::fs::read_to_string(&stamp).is_ok_and(|s| s == wanted) && python.exists() {
        return Ok(python);
    }
    let _ = std::fs::remove_dir_all(&dir);
    run(Command::new("python3").args(["-m", "venv"]).arg(&dir))?;
    run(Command::new(&python)
        .args([
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            "-r",
        ])
        .arg(&reqs))?;
    std::fs::write(&stamp, wanted).map_err(|e| e.to_string())?;
    Ok(python)
}

/// An exclusive lock on `<name>.lock` beside the environment, held until the file is dropped.
pub fn lock(name: &str) -> Result<std::fs::File, String> {
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}.lock"));
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    file.lock()
        .map_err(|e| format!("lock {}: {e}", path.display()))?;
    Ok(file)
}

/// Run a command; its stderr when it fails.
pub fn run(cmd: &mut Command) -> Result<(), String> {
    let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{cmd:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}
