//! Which optional x86_64 instructions this CPU has, checked once: the JSON scanners of request
//! bodies (`dialect::json_strings`) and of event streams (`sse::json_blocks`) are compiled a
//! second time for AVX2 with BMI, POPCNT and carry-less multiply, and pick that copy here.

/// AVX2, BMI1/2, POPCNT and PCLMULQDQ are all present (every x86_64 server CPU since 2013).
#[cfg(target_arch = "x86_64")]
pub fn fast() -> bool {
    use std::sync::atomic::{AtomicU8, Ordering};
    // 0: not checked yet, 1: no, 2: yes. One load per call after the first.
    static FAST: AtomicU8 = AtomicU8::new(0);
    match FAST.load(Ordering::Relaxed) {
        0 => {
            let yes = std::is_x86_feature_detected!("avx2")
                && std::is_x86_feature_detected!("bmi1")
                && std::is_x86_feature_detected!("bmi2")
                && std::is_x86_feature_detected!("popcnt")
                && std::is_x86_feature_detected!("pclmulqdq");
            FAST.store(1 + u8::from(yes), Ordering::Relaxed);
            yes
        }
        v => v == 2,
    }
}

/// The CPUs this process may run on (its affinity mask, as taskset, cpusets and container
/// limits set it), in order. Empty when the system will not say.
pub fn allowed() -> Vec<usize> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_getaffinity fills the one we own.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: sched_getaffinity writes at most `size` bytes into the set we own.
    if unsafe { libc::sched_getaffinity(0, size, &mut set) } != 0 {
        return Vec::new();
    }
    (0..libc::CPU_SETSIZE as usize)
        // SAFETY: CPU_ISSET reads the set we own, within CPU_SETSIZE.
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect()
}

/// Where worker `id` of `workers` is pinned, if anywhere: the `id`-th CPU of the allowed set,
/// and only when that set has a CPU to spare beyond the workers (for the log writer, the store
/// writer and whatever else the host runs). Pinning every allowed CPU measured twice the CPU
/// per streamed event on a 2-core host: a pinned worker cannot move off a core its helpers
/// are busy on.
pub fn pin_target(allowed: &[usize], id: usize, workers: usize) -> Option<usize> {
    (workers < allowed.len())
        .then(|| allowed.get(id).copied())
        .flatten()
}

#[cfg(test)]
mod tests {
    #[test]
    fn workers_are_pinned_inside_the_allowed_set_with_a_cpu_to_spare() {
        let allowed = [2, 3, 6, 7];
        assert_eq!(super::pin_target(&allowed, 0, 3), Some(2));
        assert_eq!(super::pin_target(&allowed, 2, 3), Some(6));
        // No CPU to spare: nobody is pinned.
        assert_eq!(super::pin_target(&allowed, 0, 4), None);
        assert_eq!(super::pin_target(&[], 0, 1), None);
        assert!(!super::allowed().is_empty());
    }
}
