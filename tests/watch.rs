//! What an operator watches: `/metrics` read by the reference Prometheus text parser (Python's
//! prometheus_client, pinned in tests/watch/requirements.txt, installed into a virtual
//! environment under the target directory on first use) after a scripted mix, and the access
//! log's fields and W3C trace context, on both drivers. (The status page: tests/status_page.rs.)

mod common;
use common::*;
use ringside::simulate::{SimOptions, parse_fault_arg};
use serde_json::Value;
use std::collections::HashMap;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

both_drivers!(
    metrics_parse_and_count_the_mix,
    the_access_log_joins_the_trace_and_names_the_client,
    a_held_stream_s_log_line_names_its_client
);

/// The families the reference parser read, by name.
fn parse(text: &str) -> HashMap<String, Value> {
    let python = common::venv::python("watch-venv", "tests/watch/requirements.txt")
        .unwrap_or_else(|e| panic!("python environment: {e}"));
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/watch/parse_metrics.py");
    let mut child = Command::new(python)
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run the parser");
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(text.as_bytes()).expect("feed the parser");
    }
    let out = child.wait_with_output().expect("parser output");
    assert!(
        out.status.success(),
        "the Prometheus parser refused the exposition: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let families: Vec<Value> = serde_json::from_slice(&out.stdout).expect("parser JSON");
    // A family named twice (a gauge `x` beside a counter `x_total`, or one family written in two
    // places) is split or merged by scrapers: each name once.
    let mut names: Vec<&str> = families.iter().filter_map(|f| f["name"].as_str()).collect();
    names.sort_unstable();
    let twice: Vec<&&str> = names
        .windows(2)
        .filter(|w| w[0] == w[1])
        .map(|w| &w[0])
        .collect();
    assert!(twice.is_empty(), "families named twice: {twice:?}");
    families
        .into_iter()
        .map(|f| (f["name"].as_str().unwrap_or_default().to_string(), f))
        .collect()
}

/// The value of the sample `name` whose labels include every pair of `labels`, summed.
fn value(fams: &HashMap<String, Value>, name: &str, labels: &[(&str, &str)]) -> f64 {
    fams.values()
        .flat_map(|f| f["samples"].as_array().cloned().unwrap_or_default())
        .filter(|s| s["name"] == name)
        .filter(|s| labels.iter().all(|(k, v)| s["labels"][*k] == *v))
        .map(|s| s["value"].as_f64().unwrap_or(0.0))
        .sum()
}

/// Every histogram's buckets rise with `le` and end at `+Inf` equal to its count.
fn histograms_are_well_formed(fams: &HashMap<String, Value>) {
    for (name, f) in fams.iter().filter(|(_, f)| f["type"] == "histogram") {
        let samples = f["samples"].as_array().cloned().unwrap_or_default();
        let mut series: HashMap<String, Vec<(f64, f64)>> = HashMap::new();
        let mut counts: HashMap<String, f64> = HashMap::new();
        for s in &samples {
            let mut labels = s["labels"].as_object().cloned().unwrap_or_default();
            let le = labels.remove("le");
            let key = serde_json::to_string(&labels).unwrap_or_default();
            let v = s["value"].as_f64().unwrap_or(0.0);
            match (s["name"].as_str(), le) {
                (Some(n), Some(le)) if n.ends_with("_bucket") => {
                    let le = le.as_str().unwrap_or_default();
                    let bound = if le == "+Inf" {
                        f64::INFINITY
                    } else {
                        le.parse().unwrap_or(f64::NAN)
                    };
                    series.entry(key).or_default().push((bound, v));
                }
                (Some(n), _) if n.ends_with("_count") => {
                    counts.insert(key, v);
                }
                _ => {}
            }
        }
        for (key, buckets) in series {
            for w in buckets.windows(2) {
                assert!(w[0].0 < w[1].0, "{name} {key}: bounds out of order");
                assert!(w[0].1 <= w[1].1, "{name} {key}: buckets fall");
            }
            let last = buckets.last().copied().unwrap_or_default();
            assert!(last.0.is_infinite(), "{name} {key}: no +Inf bucket");
            assert_eq!(
                Some(&last.1),
                counts.get(&key),
                "{name} {key}: +Inf != count"
            );
        }
    }
}

fn metrics_parse_and_count_the_mix(driver: &str) {
    let mut opts = SimOptions::default();
    for f in ["key:sk-sim-a=429;retry-after=30", "key:sk-sim-d=503"] {
        opts.faults.push(parse_fault_arg(f).expect("fault"));
    }
    let sim = start_sim(opts);
    let flaky = format!(
        "[[providers]]\nid = \"flaky\"\ndialect = \"openai\"\nbase_url = \"http://{}/v1\"\n  [providers.breaker]\n  open_at = 3\n  open_ms = 60000\n  [providers.cooldown]\n  base_ms = 0\n  [[providers.connections]]\n  id = \"d\"\n  key_env = \"SIM_KEY_D\"\n  models = [\"f\"]\n",
        sim.addr
    );
    let body = priority_keys(sim.addr, &["a", "b"], "") + &flaky;
    let proxy = Proxy::start(driver, 2, "", &body);
    let (text, fams) = scrape_after_the_mix(&proxy);
    counts_match_the_mix(&text, &fams);
    // The build and the process.
    let info = &fams["ringside_build_info"]["samples"][0]["labels"];
    assert_eq!(info["version"], env!("CARGO_PKG_VERSION"));
    assert!(["io_uring", "epoll"].contains(&info["driver"].as_str().unwrap_or_default()));
    assert!(value(&fams, "process_cpu_seconds_total", &[]) > 0.0);
    assert!(value(&fams, "process_resident_memory_bytes", &[]) > 1e6);
    assert!(value(&fams, "process_open_fds", &[]) > 0.0);
    // Queue waits in seconds (the old milliseconds family stays one release).
    assert!(fams.contains_key("ringside_queue_wait_seconds"));
    // Counters are counters to the parser (it strips `_total` from the family name).
    assert_eq!(fams["ringside_requests"]["type"], "counter");
    dashboard_names_exist(&text);
    // Durations say how the request ended: the breaker's 503s apart from the answers.
    let ok = [("route", "m"), ("outcome", "ok")];
    assert_eq!(
        value(&fams, "ringside_request_duration_seconds_count", &ok),
        10.0
    );
    let count = |outcome| {
        let labels = [("route", "f"), ("outcome", outcome)];
        value(&fams, "ringside_request_duration_seconds_count", &labels)
    };
    // (The breaker opened on the third; the fourth was refused without an attempt.)
    assert_eq!((count("failed"), count("rejected")), (3.0, 1.0));
    // A model asked for through its provider (`sim/m`) counts under the model: the route
    // label's values are the config's routes and models.
    let r = proxy.post("/v1/chat/completions", &[], &chat("sim/m", false));
    assert_eq!(r.status, 200, "{}", r.text());
    let reply =
        ringside::demo::client::request(proxy.admin, "GET", "/metrics", &[ADMIN_AUTH], b"", T)
            .expect("scrape");
    let fams = parse(&reply.text());
    let m = [("route", "m")];
    assert_eq!(value(&fams, "ringside_requests_total", &m), 11.0);
    let routes: std::collections::BTreeSet<String> = (fams.values())
        .flat_map(|f| f["samples"].as_array().cloned().unwrap_or_default())
        .filter_map(|s| s["labels"]["route"].as_str().map(String::from))
        .collect();
    let allowed = ["m", "f", "other"];
    assert!(
        routes.iter().all(|r| allowed.contains(&r.as_str())),
        "{routes:?}"
    );
}

/// Every metric the Grafana dashboard (tuning/grafana-dashboard.json) queries is exported.
fn dashboard_names_exist(text: &str) {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tuning/grafana-dashboard.json");
    let dash = std::fs::read_to_string(path).expect("dashboard");
    let mut names = std::collections::BTreeSet::new();
    for start in ["ringside_", "process_"] {
        for (i, _) in dash.match_indices(start) {
            let name: String = dash[i..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            names.insert(name);
        }
    }
    assert!(names.len() > 10, "{names:?}");
    for name in names {
        assert!(
            text.lines()
                .any(|l| l.starts_with(&format!("{name}{{")) || l.starts_with(&format!("{name} "))),
            "the dashboard queries {name}, which /metrics does not export"
        );
    }
}

/// Run the mix, scrape, check the exposition's form; the text and the parsed families.
fn scrape_after_the_mix(proxy: &Proxy) -> (String, HashMap<String, Value>) {
    // The mix: 6 JSON answers (the first fails over from the limited key a), 4 streams, and 4
    // requests to a provider that fails until its breaker opens.
    for _ in 0..6 {
        let r = proxy.post("/v1/chat/completions", &[], &chat("m", false));
        assert_eq!(r.status, 200, "{}", r.text());
    }
    for _ in 0..4 {
        let r = proxy.post("/v1/chat/completions", &[], &chat("m", true));
        assert_eq!(r.status, 200);
    }
    for _ in 0..4 {
        let r = proxy.post("/v1/chat/completions", &[], &chat("f", false));
        assert_eq!(r.status, 503, "{}", r.text());
    }
    let reply =
        ringside::demo::client::request(proxy.admin, "GET", "/metrics", &[ADMIN_AUTH], b"", T)
            .expect("scrape");
    let ctype = reply.header("content-type").unwrap_or_default().to_string();
    assert!(
        ctype.starts_with("text/plain; version=0.0.4") && ctype.contains("charset=utf-8"),
        "{ctype}"
    );
    let text = reply.text();
    for line in text.lines().filter(|l| l.starts_with("# TYPE ")) {
        let name = line.split_whitespace().nth(2).unwrap_or_default();
        assert!(
            text.contains(&format!("# HELP {name} ")),
            "no HELP for {name}"
        );
    }
    let fams = parse(&text);
    histograms_are_well_formed(&fams);
    (text, fams)
}

fn counts_match_the_mix(text: &str, fams: &HashMap<String, Value>) {
    let fams = fams.clone();
    let m = [("route", "m")];
    let b = [("provider", "sim"), ("connection", "b")];
    // Requests, and the seconds they took.
    assert_eq!(
        value(
            &fams,
            "ringside_requests_total",
            &[("route", "m"), ("status", "200")]
        ),
        10.0
    );
    assert_eq!(
        value(&fams, "ringside_request_duration_seconds_count", &m),
        10.0
    );
    assert_eq!(value(&fams, "ringside_overhead_seconds_count", &m), 10.0);
    let overhead = value(&fams, "ringside_overhead_seconds_sum", &m);
    let duration = value(&fams, "ringside_request_duration_seconds_sum", &m);
    assert!(
        overhead > 0.0 && overhead <= duration,
        "{overhead} of {duration}"
    );
    assert_eq!(
        value(&fams, "ringside_time_to_first_token_seconds_count", &m),
        4.0
    );
    assert_eq!(
        value(&fams, "ringside_upstream_head_seconds_count", &b),
        10.0
    );
    // Attempts: 10 on route m plus one fail-over, 3 on the flaky provider, none once its
    // breaker is open; every attempt was timed.
    let attempts = value(&fams, "ringside_upstream_attempts_total", &[]);
    assert_eq!(attempts, 14.0, "{text}");
    assert_eq!(
        value(&fams, "ringside_upstream_attempts_per_request_sum", &[]),
        attempts
    );
    assert_eq!(
        value(&fams, "ringside_upstream_attempts_per_request_count", &[]),
        14.0
    );
    assert_eq!(
        value(
            &fams,
            "ringside_upstream_attempt_duration_seconds_count",
            &[]
        ),
        attempts
    );
    // Tokens from the JSON answers' usage.
    assert!(
        value(
            &fams,
            "ringside_tokens_total",
            &[("connection", "b"), ("kind", "prompt")]
        ) > 0.0
    );
    assert!(
        value(
            &fams,
            "ringside_tokens_total",
            &[("connection", "b"), ("kind", "completion")]
        ) > 0.0
    );
    // Transitions, which the state gauges alone could miss between two scrapes.
    let to = |c: &str, t: &str| {
        value(
            &fams,
            "ringside_connection_transitions_total",
            &[("connection", c), ("to", t)],
        )
    };
    assert_eq!(to("a", "cooling"), 1.0, "{text}");
    assert_eq!(to("b", "cooling"), 0.0);
    assert_eq!(
        value(
            &fams,
            "ringside_breaker_transitions_total",
            &[("provider", "flaky"), ("to", "open")]
        ),
        1.0
    );
}

const USAGE_ANSWER: &str = r#"{"id":"c1","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10,"prompt_tokens_details":{"cached_tokens":2}}}"#;
const LIMITED: &str =
    r#"{"error":{"message":"slow down","type":"rate_limit_error","code":"rate_limit_exceeded"}}"#;
const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// The upstream's first answer is a 429 (key a cools), every later one a JSON answer with usage.
fn limited_then_usage() -> RawUpstream {
    let n = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    scripted_upstream(move |s| {
        let first = n.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0;
        let (status, body) = if first {
            ("429 Too Many Requests\r\nretry-after: 30", LIMITED)
        } else {
            ("200 OK", USAGE_ANSWER)
        };
        let answer = format!(
            "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        s.write_all(answer.as_bytes()).is_ok()
    })
}

/// The access-log line of `id`, once the writer has written it.
fn log_line(proxy: &Proxy, id: &str) -> Value {
    let path = proxy.dir.0.join("access.log");
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        if let Some(line) = text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|l| l["request_id"] == id)
        {
            return line;
        }
        assert!(
            Instant::now() < until,
            "no access-log line for {id}: {text}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `traceparent` as an upstream received it: (trace id, parent id).
fn upstream_trace(head: &str) -> (String, String) {
    let v = head
        .lines()
        .find_map(|l| l.strip_prefix("traceparent: "))
        .unwrap_or_else(|| panic!("no traceparent upstream: {head}"));
    let parts: Vec<&str> = v.trim().split('-').collect();
    assert_eq!(parts.len(), 4, "{v}");
    (parts[1].to_string(), parts[2].to_string())
}

fn the_access_log_joins_the_trace_and_names_the_client(driver: &str) {
    let up = limited_then_usage();
    let extra = "trusted_proxies = [\"127.0.0.0/8\"]\n# access log to file\n";
    let proxy = Proxy::start(driver, 1, extra, &priority_keys(up.addr, &["a", "b"], ""));
    let headers = [
        ("traceparent", TRACEPARENT),
        ("user-agent", "watch-test/1.0 \"quoted\""),
        ("x-forwarded-for", "203.0.113.9, 10.0.0.1"),
    ];
    let r = proxy.post("/v1/chat/completions", &headers, &chat("m", false));
    assert_eq!(r.status, 200, "{}", r.text());
    let id = r.header("x-request-id").unwrap_or_default().to_string();
    // Upstream: the client's trace id, a new parent id per attempt, never the client's.
    let heads = up.heads.lock().unwrap_or_else(|e| e.into_inner()).clone();
    assert_eq!(heads.len(), 2, "a 429, then the answer");
    let (t1, p1) = upstream_trace(&heads[0]);
    let (t2, p2) = upstream_trace(&heads[1]);
    assert_eq!(
        (t1.as_str(), t2.as_str()),
        (
            "4bf92f3577b34da6a3ce929d0e0e4736",
            "4bf92f3577b34da6a3ce929d0e0e4736"
        )
    );
    assert_ne!(p1, p2);
    assert!(p1 != "00f067aa0ba902b7" && p2 != "00f067aa0ba902b7");
    let line = log_line(&proxy, &id);
    assert_eq!(line["kind"], "access");
    let time = line["time"].as_str().unwrap_or_default();
    assert!(
        time.len() == 24
            && time.ends_with('Z')
            && time.as_bytes()[10] == b'T'
            && time.as_bytes()[19] == b'.',
        "RFC 3339 with milliseconds: {time}"
    );
    assert_eq!(line["client"], "127.0.0.1");
    assert_eq!(line["forwarded_for"], "203.0.113.9");
    assert_eq!(line["user_agent"], "watch-test/1.0 \"quoted\"");
    assert_eq!(line["trace_id"], "4bf92f3577b34da6a3ce929d0e0e4736");
    assert_eq!(line["span_id"], p2.as_str(), "the delivered attempt's span");
    assert_eq!(line["tokens"]["prompt"], 7);
    assert_eq!(line["tokens"]["completion"], 3);
    assert_eq!(line["tokens"]["cached"], 2);
    let total = line["total_us"].as_u64().expect("total_us");
    let upstream = line["upstream_us"].as_u64().expect("upstream_us");
    assert!(upstream <= total, "{line}");
    assert_eq!(line["attempts"].as_array().map(Vec::len), Some(2));
    // No traceparent: Ringside starts the trace, and the upstream and the log share it.
    let r = proxy.post("/v1/chat/completions", &[], &chat("m", false));
    let id = r.header("x-request-id").unwrap_or_default().to_string();
    let heads = up.heads.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let (t3, _) = upstream_trace(&heads[2]);
    assert!(t3.len() == 32 && t3 != "00000000000000000000000000000000");
    let line = log_line(&proxy, &id);
    assert_eq!(line["trace_id"], t3.as_str());
    assert!(line.get("forwarded_for").is_none() || line["forwarded_for"].is_null());
}

/// A committed event stream lets go of its request head but what the access log reads: the
/// line still names the client's agent and forwarded address, after an SDK-sized head.
fn a_held_stream_s_log_line_names_its_client(driver: &str) {
    let sim = start_sim(SimOptions {
        events: 4,
        ..Default::default()
    });
    let extra = "trusted_proxies = [\"127.0.0.0/8\"]\n# access log to file\n";
    let proxy = Proxy::start(driver, 1, extra, &priority_keys(sim.addr, &["a"], ""));
    let padding = "x".repeat(40);
    let mut headers = vec![
        ("x-forwarded-for", "203.0.113.7"),
        ("user-agent", "OpenAI/Python 1.99.9"),
    ];
    let names = [
        "x-stainless-lang",
        "x-stainless-package-version",
        "x-stainless-os",
        "x-stainless-arch",
        "x-stainless-runtime",
        "x-stainless-runtime-version",
        "x-stainless-async",
        "x-stainless-read-timeout",
        "x-stainless-retry-count",
        "openai-organization",
    ];
    headers.extend(names.iter().map(|n| (*n, padding.as_str())));
    let r = proxy.post("/v1/chat/completions", &headers, &chat("m", true));
    assert_eq!(r.status, 200);
    let text = r.text();
    assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
    let id = r.header("x-request-id").unwrap_or_default().to_string();
    let line = log_line(&proxy, &id);
    assert_eq!(line["user_agent"], "OpenAI/Python 1.99.9", "{line}");
    assert_eq!(line["forwarded_for"], "203.0.113.7", "{line}");
    assert_eq!(line["method"], "POST", "{line}");
    assert_eq!(line["path"], "/v1/chat/completions", "{line}");
}
