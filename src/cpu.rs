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
