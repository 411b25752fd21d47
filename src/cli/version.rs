//! `ringside --version`: the version, the commit it was built from, how it was built and which
//! I/O drivers this host offers.

/// `ringside 0.1.0`.
pub const SHORT: &str = env!("CARGO_PKG_VERSION");

/// `--version` in full (clap prints it after the name).
pub const LONG: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    "\ncommit: ",
    env!("RINGSIDE_COMMIT"),
    "\nprofile: ",
    env!("RINGSIDE_PROFILE"),
    "\npgo: ",
    env!("RINGSIDE_PGO"),
    "\ndrivers: io_uring (where the kernel allows it), epoll",
);
