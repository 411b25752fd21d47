//! The SSE scanner's floor: best of 31 short timed passes over 200 events of each shape, in ns per event
//! and MB/s. On a shared, noisy machine the best pass says what the code costs; criterion's mean
//! (hot_paths) says what a busy machine gives. `cargo bench --bench sse_floor`

use std::time::Instant;

fn run(name: &str, ev: &dyn Fn(usize) -> String) {
    run_framed(name, ev, false);
}

/// `chunked`: each event is one HTTP chunk, read back through the chunk tracker (as the relay
/// does for a chunked upstream body).
fn run_framed(name: &str, ev: &dyn Fn(usize) -> String, chunked: bool) {
    // Only `name` when set (e.g. to count instructions per event under valgrind).
    if let Ok(only) = std::env::var("SSE_FLOOR_ONLY")
        && !name.starts_with(&only)
    {
        return;
    }
    let events: Vec<u8> = (0..200).flat_map(|i| ev(i).into_bytes()).collect();
    let stream: Vec<u8> = if chunked {
        let mut out = Vec::new();
        for i in 0..200 {
            let e = ev(i);
            out.extend_from_slice(format!("{:x}\r\n{e}\r\n", e.len()).as_bytes());
        }
        out.extend_from_slice(b"0\r\n\r\n");
        out
    } else {
        events.clone()
    };
    let (rounds, passes) = match std::env::var("SSE_FLOOR_PASSES") {
        Ok(p) => (1, p.parse().unwrap_or(1)),
        Err(_) => (31, 500),
    };
    let mut best = f64::MAX;
    for _ in 0..rounds {
        let t = Instant::now();
        let mut events = 0u64;
        for _ in 0..passes {
            let mut s = ringside::sse::Scanner::default();
            let mut t = ringside::http::chunk::ChunkTracker::new();
            for part in std::hint::black_box(&stream).chunks(1460) {
                if chunked {
                    let _ = t.feed(part, |p| s.feed(p, |_| {}));
                } else {
                    s.feed(part, |_| {});
                }
            }
            events += s.totals.events;
        }
        std::hint::black_box(events);
        best = best.min(t.elapsed().as_nanos() as f64 / (200 * passes) as f64);
    }
    // Payload bytes (the events), also when they came chunked.
    let per_event = events.len() as f64 / 200.0;
    println!(
        "{name:30} {best:6.0} ns/event  {per_event:4.0} bytes/event  {:6.0} MB/s",
        per_event / best * 1000.0
    );
}

fn main() {
    run("openai chat chunk, trimmed", &|i| {
        format!(
            "data: {{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"gpt-4o\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"tok{i} \"}},\"finish_reason\":null}}]}}\n\n"
        )
    });
    run_framed(
        "chunked: openai chat chunk, trimmed",
        &|i| {
            format!(
                "data: {{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"gpt-4o\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"tok{i} \"}},\"finish_reason\":null}}]}}\n\n"
            )
        },
        true,
    );
    // As recorded from api.openai.com (ids and fingerprints vary; the shape does not).
    run("openai chat chunk, recorded", &|i| {
        format!(
            "data: {{\"id\":\"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT\",\"object\":\"chat.completion.chunk\",\"created\":1741570283,\"model\":\"gpt-4o-2024-08-06\",\"service_tier\":\"default\",\"system_fingerprint\":\"fp_f9f4fb6dbf\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\" tok{i}\"}},\"logprobs\":null,\"finish_reason\":null}}],\"obfuscation\":\"mGq1\"}}\n\n"
        )
    });
    // Code being written: most deltas of a coding model hold `\n`, `\"` or `\t`.
    run("openai chat chunk, code", &|i| {
        format!(
            "data: {{\"id\":\"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT\",\"object\":\"chat.completion.chunk\",\"created\":1741570283,\"model\":\"gpt-4o-2024-08-06\",\"service_tier\":\"default\",\"system_fingerprint\":\"fp_f9f4fb6dbf\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"\\n    println!(\\\"tok{i}\\\");\"}},\"logprobs\":null,\"finish_reason\":null}}],\"obfuscation\":\"mGq1\"}}\n\n"
        )
    });
    run("anthropic text delta, code", &|i| {
        format!(
            "event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"text_delta\",\"text\":\"\\n\\tlet x = \\\"tok{i}\\\";\"}}}}\n\n"
        )
    });
    run("anthropic text delta", &|i| {
        format!(
            "event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"text_delta\",\"text\":\" tok{i}\"}}}}\n\n"
        )
    });
    run("responses text delta", &|i| {
        format!(
            "event: response.output_text.delta\ndata: {{\"type\":\"response.output_text.delta\",\"sequence_number\":{i},\"item_id\":\"msg_67c9fdcecf488190bdd9a0409de3a1ec07b8b0ad4e5eb654\",\"output_index\":0,\"content_index\":0,\"delta\":\" tok{i}\"}}\n\n"
        )
    });
}
