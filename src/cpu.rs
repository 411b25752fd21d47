//! Which optional x86_64 instructions this CPU has, checked once: the JSON scanners of request
//! bodies (`dialect::json_strings`) and of event streams (`sse::json_blocks`) are compiled a
//! second time for AVX2 with BMI, POPCNT and carry-less multiply (and the body check a third
//! time for AVX-512), and pick their copy here.

use std::sync::atomic::{AtomicU8, Ordering};

/// Answer `check` once and keep it: 0 not checked yet, 1 no, 2 yes. One load per call after
/// the first.
#[inline(always)]
fn once(cell: &AtomicU8, check: fn() -> bool) -> bool {
    match cell.load(Ordering::Relaxed) {
        0 => {
            let yes = check();
            cell.store(1 + u8::from(yes), Ordering::Relaxed);
            yes
        }
        v => v == 2,
    }
}

/// AVX2, BMI1/2, POPCNT and PCLMULQDQ are all present (every x86_64 server CPU since 2013).
#[cfg(target_arch = "x86_64")]
pub fn fast() -> bool {
    static FAST: AtomicU8 = AtomicU8::new(0);
    once(&FAST, || {
        std::is_x86_feature_detected!("avx2")
            && std::is_x86_feature_detected!("bmi1")
            && std::is_x86_feature_detected!("bmi2")
            && std::is_x86_feature_detected!("popcnt")
            && std::is_x86_feature_detected!("pclmulqdq")
    })
}

/// `fast()` and AVX-512 (F and BW) on a CPU whose 512-bit units run at full clock. VBMI2 marks
/// those (Intel since Ice Lake, AMD since Zen 4); the Skylake-SP family has AVX-512 without it
/// and slows the whole core for a while after 512-bit work, which a few microseconds of body
/// check per request would not pay back.
#[cfg(target_arch = "x86_64")]
pub fn wide() -> bool {
    static WIDE: AtomicU8 = AtomicU8::new(0);
    once(&WIDE, || {
        fast()
            && std::is_x86_feature_detected!("avx512f")
            && std::is_x86_feature_detected!("avx512bw")
            && std::is_x86_feature_detected!("avx512vbmi2")
    })
}
