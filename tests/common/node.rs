//! Pinned npm packages under the target directory (`npm ci` from the repository's lock file),
//! installed on first use and reused while the lock file is unchanged.

use std::path::PathBuf;
use std::process::Command;

/// The directory holding `node_modules` for the `package.json` and `package-lock.json` in
/// `src` (relative to the repository), installed in `name` under the target directory.
pub fn install(name: &str, src: &str) -> Result<PathBuf, String> {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(src);
    let read = |file: &str| {
        std::fs::read_to_string(src.join(file))
            .map_err(|e| format!("{}: {e}", src.join(file).display()))
    };
    let (manifest, lock) = (read("package.json")?, read("package-lock.json")?);
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    // Made once however many tests ask at the same time (see `venv::lock`).
    let _held = super::venv::lock(name)?;
    let stamp = dir.join("installed.txt");
    if std::fs::read_to_string(&stamp).is_ok_and(|s| s == lock) && dir.join("node_modules").exists()
    {
        return Ok(dir);
    }
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    std::fs::write(dir.join("package.json"), &manifest).map_err(|e| e.to_string())?;
    std::fs::write(dir.join("package-lock.json"), &lock).map_err(|e| e.to_string())?;
    super::venv::run(
        Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
            .current_dir(&dir),
    )?;
    std::fs::write(&stamp, &lock).map_err(|e| e.to_string())?;
    Ok(dir)
}
