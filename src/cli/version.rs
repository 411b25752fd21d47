//! `ringside --version`: the version, the commit it was built from, how it was built and which
//! I/O drivers this host offers.

/// `ringside 0.1.0`.
pub const SHORT: &str = env!("CARGO_PKG_VERSION");

/// What was fixed when the binary was built.
const BUILT: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    "\ncommit: ",
    env!("RINGSIDE_COMMIT"),
    "\nprofile: ",
    env!("RINGSIDE_PROFILE"),
    "\npgo: ",
    env!("RINGSIDE_PGO"),
);

/// `--version` in full (clap prints it after the name): the build, then the I/O drivers this
/// host offers now (io_uring can be missing from the kernel or blocked by a seccomp profile).
pub fn long() -> String {
    let uring = if monoio::utils::detect_uring() {
        "io_uring (available here), epoll"
    } else {
        "epoll (io_uring is not available here: an old kernel or a seccomp profile that blocks it)"
    };
    format!("{BUILT}\ndrivers: {uring}")
}
