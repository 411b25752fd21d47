//! `ringside_build_info` and the process metrics every Prometheus exporter has (CPU, memory,
//! descriptors, start time), read from `/proc` on a scrape.

use super::CoreMetrics;
use std::fmt::Write;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

pub(super) fn render(out: &mut String, cores: &[Arc<CoreMetrics>]) {
    let driver = match cores.first().map(|c| c.uring.load(Relaxed)) {
        Some(1) => "io_uring",
        Some(0) => "epoll",
        _ => "starting",
    };
    let _ = writeln!(
        out,
        "# HELP ringside_build_info The build: version, commit, whether it was profile-guided, the I/O driver in use.\n# TYPE ringside_build_info gauge\nringside_build_info{{version=\"{}\",commit=\"{}\",pgo=\"{}\",driver=\"{driver}\"}} 1",
        env!("CARGO_PKG_VERSION"),
        env!("RINGSIDE_COMMIT"),
        env!("RINGSIDE_PGO"),
    );
    let Some(p) = Process::read() else {
        return;
    };
    let families: [(&str, &str, &str, f64); 5] = [
        (
            "process_cpu_seconds_total",
            "counter",
            "User and system CPU time spent, in seconds.",
            p.cpu_s,
        ),
        (
            "process_resident_memory_bytes",
            "gauge",
            "Resident memory size in bytes.",
            p.rss_bytes,
        ),
        (
            "process_open_fds",
            "gauge",
            "Number of open file descriptors.",
            p.open_fds,
        ),
        (
            "process_max_fds",
            "gauge",
            "Maximum number of open file descriptors (the soft limit).",
            p.max_fds,
        ),
        (
            "process_start_time_seconds",
            "gauge",
            "Start time of the process since the Unix epoch, in seconds.",
            p.start_s,
        ),
    ];
    for (name, kind, help, v) in families {
        let _ = writeln!(
            out,
            "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {v}"
        );
    }
}

/// User and system CPU time of the whole process (every thread), to the microsecond.
fn cpu_seconds() -> Option<f64> {
    // SAFETY: `rusage` is plain integers, for which all zeroes is a valid value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes into the struct it is given.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return None;
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Some(secs(usage.ru_utime) + secs(usage.ru_stime))
}

struct Process {
    cpu_s: f64,
    rss_bytes: f64,
    open_fds: f64,
    max_fds: f64,
    start_s: f64,
}

impl Process {
    fn read() -> Option<Process> {
        // SAFETY: sysconf has no preconditions.
        let (tick, page) = unsafe {
            (
                libc::sysconf(libc::_SC_CLK_TCK) as f64,
                libc::sysconf(libc::_SC_PAGESIZE) as f64,
            )
        };
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        // The fields after the command name (which may hold spaces), from field 3 on.
        let rest = stat.rsplit_once(')')?.1;
        let f: Vec<&str> = rest.split_whitespace().collect();
        let num = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok());
        // (Not utime and stime from this file: they count in 10 ms ticks, and a process that
        // has served a few requests can read 0.)
        let cpu_s = cpu_seconds()?;
        let rss_bytes = num(21)? * page; // rss (field 24)
        let started_ticks = num(19)?; // starttime (field 22), since boot
        let boot_s = std::fs::read_to_string("/proc/stat")
            .ok()?
            .lines()
            .find_map(|l| l.strip_prefix("btime ")?.trim().parse::<f64>().ok())?;
        let open_fds = std::fs::read_dir("/proc/self/fd").ok()?.count() as f64;
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes into the struct it is given.
        let max_fds = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0 {
            lim.rlim_cur as f64
        } else {
            0.0
        };
        Some(Process {
            cpu_s,
            rss_bytes,
            open_fds,
            max_fds,
            start_s: boot_s + started_ticks / tick,
        })
    }
}
