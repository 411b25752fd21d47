//! The drill's verdicts as a terminal table, a JSON document and a self-contained HTML report
//! (a timeline of requests by outcome per scenario, the figures against their budgets).

use super::verdict::Verdict;
use std::fmt::Write;

/// The terminal table.
pub fn table(verdicts: &[Verdict]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<30} {:>5} {:>8} {:>7} {:>9} {:>9} {:>6} {:>9}  verdict",
        "scenario", "reqs", "success", "ampl.", "p50 ms", "p99 ms", "late", "recovery"
    );
    for v in verdicts {
        let f = &v.figures;
        let _ = writeln!(
            out,
            "{:<30} {:>5} {:>7.1}% {:>6.2}x {:>9.0} {:>9.0} {:>6} {:>9}  {}",
            v.scenario.name,
            f.requests,
            f.success_ratio * 100.0,
            f.fault_amplification,
            f.p50_ms,
            f.p99_ms,
            f.after_deadline,
            f.recovery_s.map_or("never".into(), |s| format!("{s:.1}s")),
            if v.held {
                "held".to_string()
            } else {
                failed(v)
            }
        );
    }
    out.push_str("\nUpstream attempts per request, by phase (steady / fault / recovery), and what was spent:\n");
    for v in verdicts {
        let [s, f, r] = v.figures.phase_amplification;
        let spent = v.figures.spent;
        let _ = writeln!(
            out,
            "  {}: {s:.2} / {f:.2} / {r:.2}; {} tokens, ${:.4}",
            v.scenario.name, spent.tokens, spent.usd
        );
    }
    out.push_str("\nWhat the metrics showed (the counters that moved, a few per scenario):\n");
    for v in verdicts {
        let shown: Vec<String> = (v.signals.iter().take(4))
            .map(|(series, d)| format!("{series} +{d}"))
            .collect();
        let more = v.signals.len().saturating_sub(shown.len());
        let tail = if more > 0 {
            format!(" (+{more} more)")
        } else {
            String::new()
        };
        let _ = writeln!(out, "  {}: {}{tail}", v.scenario.name, shown.join(", "));
    }
    if verdicts.iter().any(|v| !v.findings.is_empty()) {
        out.push_str("\nWhat to change (the likely cause of a budget that did not hold):\n");
        for v in verdicts {
            for f in &v.findings {
                let _ = writeln!(out, "  {}: {f}", v.scenario.name);
            }
        }
    }
    if verdicts.iter().any(|v| !v.logged.is_empty()) {
        out.push_str("\nWhat the logs said (operational messages that fired):\n");
        for v in verdicts.iter().filter(|v| !v.logged.is_empty()) {
            let said: Vec<String> = v.logged.iter().map(logged_line).collect();
            let _ = writeln!(out, "  {}: {}", v.scenario.name, said.join("; "));
        }
    }
    out
}

/// `warn breaker opened x1 (openai)`.
fn logged_line(l: &super::signals::Logged) -> String {
    let who = if l.subjects.is_empty() {
        String::new()
    } else {
        format!(" ({})", l.subjects.join(", "))
    };
    format!("{} {} x{}{who}", l.level, l.msg, l.count)
}

fn failed(v: &Verdict) -> String {
    let broken: Vec<String> = v
        .checks
        .iter()
        .filter(|c| !c.held)
        .map(|c| format!("{} {} (budget {})", c.figure, c.value, c.budget))
        .collect();
    format!("FAILED: {}", broken.join("; "))
}

/// Progress on stderr (stdout carries the table), as a drill takes minutes: a scenario's start
/// (`done` none; returns the time it began), then how it ended.
pub fn progress(
    (n, of): (usize, usize),
    s: &super::plan::Scenario,
    done: Option<(bool, std::time::Instant)>,
) -> std::time::Instant {
    let name = &s.name;
    match done {
        None => {
            let phases: f64 = s.phases_s.iter().sum();
            eprintln!("drill: [{n}/{of}] {name} ({phases:.0} s or more) ...");
        }
        Some((held, began)) => {
            let verdict = if held { "held" } else { "FAILED" };
            let took = began.elapsed().as_secs_f64();
            eprintln!("drill: [{n}/{of}] {name} {verdict} in {took:.0} s");
        }
    }
    std::time::Instant::now()
}

/// The JSON document.
pub fn json(verdicts: &[Verdict]) -> serde_json::Value {
    serde_json::json!({
        "held": verdicts.iter().all(|v| v.held),
        "scenarios": verdicts,
    })
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

/// What the metrics, the findings and the logs said, and a few decision records.
fn notes(out: &mut String, v: &Verdict) {
    if !v.signals.is_empty() {
        out.push_str("<p>What the metrics showed:</p><ul>");
        for (series, d) in &v.signals {
            let _ = write!(out, "<li><code>{}</code> +{d}</li>", esc(series));
        }
        out.push_str("</ul>");
    }
    if !v.findings.is_empty() {
        out.push_str("<p>What to change:</p><ul>");
        for f in &v.findings {
            let _ = write!(out, "<li>{}</li>", esc(f));
        }
        out.push_str("</ul>");
    }
    if !v.logged.is_empty() {
        out.push_str("<p>What the logs said:</p><ul>");
        for l in &v.logged {
            let _ = write!(out, "<li>{}</li>", esc(&logged_line(l)));
        }
        out.push_str("</ul>");
    }
    if !v.samples.is_empty() {
        out.push_str("<details><summary>sample decision records</summary>");
        for r in &v.samples {
            let text = serde_json::to_string_pretty(r).unwrap_or_default();
            let _ = write!(out, "<pre>{}</pre>", esc(&text));
        }
        out.push_str("</details>");
    }
}

/// Requests per second by outcome as stacked bars (ok, 429, other failures).
fn timeline_svg(v: &Verdict) -> String {
    let t = &v.figures.timeline;
    let secs = t.iter().map(|(s, _, _)| *s).max().map_or(1, |m| m + 1);
    let mut per = vec![[0u32; 3]; secs as usize];
    for &(s, status, n) in t {
        let k = match status {
            200..=299 => 0,
            429 => 1,
            _ => 2,
        };
        per[s as usize][k] += n;
    }
    let max = per
        .iter()
        .map(|p| p.iter().sum::<u32>())
        .max()
        .unwrap_or(1)
        .max(1);
    let (w, h) = (600.0, 120.0);
    let bw = w / f64::from(secs);
    let mut svg = format!(r#"<svg viewBox="0 0 {w} {h}" width="600" height="120" role="img">"#);
    let [a, b, c] = v.scenario.phases_s;
    for (x, label) in [(a, "fault"), (a + b, "recovery")] {
        let px = x / (a + b + c) * w;
        let _ = write!(
            svg,
            r##"<line x1="{px:.1}" x2="{px:.1}" y1="0" y2="{h}" stroke="#888" stroke-dasharray="3"/><text x="{:.1}" y="10" font-size="10">{label}</text>"##,
            px + 2.0
        );
    }
    for (i, p) in per.iter().enumerate() {
        let mut y = h;
        for (k, color) in ["#12805c", "#b54708", "#b42318"].iter().enumerate() {
            let bh = f64::from(p[k]) / f64::from(max) * (h - 14.0);
            y -= bh;
            let _ = write!(
                svg,
                r#"<rect x="{:.1}" y="{y:.1}" width="{:.1}" height="{bh:.1}" fill="{color}"/>"#,
                i as f64 * bw,
                (bw - 1.0).max(1.0)
            );
        }
    }
    svg.push_str("</svg>");
    svg
}

/// Under the bars, per second: connections not active (a model locked, cooling, banned, …; the states in the
/// cell's title) and requests queued; then the queues that were used, against their caps.
fn states_strip(v: &Verdict) -> String {
    let s = &v.figures.states;
    if s.is_empty() {
        return String::new();
    }
    let mut out = String::from("<table class=\"states\"><tr><th>second</th>");
    for x in s {
        let _ = write!(out, "<td>{}</td>", x.second);
    }
    out.push_str("</tr><tr><th>connections not active</th>");
    for x in s {
        let down: u32 = (x.states.iter())
            .filter(|(k, _)| k.as_str() != "active")
            .map(|(_, n)| n)
            .sum();
        let all: Vec<String> = x.states.iter().map(|(k, n)| format!("{n} {k}")).collect();
        let _ = write!(
            out,
            "<td title=\"{}\" class=\"{}\">{down}</td>",
            esc(&all.join(", ")),
            if down > 0 { "failed" } else { "held" }
        );
    }
    out.push_str("</tr><tr><th>requests queued</th>");
    for x in s {
        let _ = write!(out, "<td>{}</td>", x.queued);
    }
    out.push_str("</tr></table>");
    for q in &v.figures.queues {
        let _ = write!(
            out,
            "<p>Queue <code>{}</code>: deepest {} (cap {}), {} waited {} ms on average (cap {} ms), {} refused.</p>",
            esc(&q.connection),
            q.peak_queued,
            if q.depth_cap == 0 {
                "none".to_string()
            } else {
                q.depth_cap.to_string()
            },
            q.waited,
            q.mean_wait_ms,
            q.max_wait_ms,
            q.refused
        );
    }
    out
}

/// The HTML report: one section per scenario.
pub fn html(verdicts: &[Verdict], config: &str) -> String {
    let held = verdicts.iter().all(|v| v.held);
    let mut out = String::from(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Ringside drill</title><style>body{font:14px system-ui,sans-serif;margin:2rem;color:#1d2330}table{border-collapse:collapse}td,th{padding:.2rem .6rem;border-bottom:1px solid #e4e7ec;text-align:left}.held{color:#12805c}.failed{color:#b42318}section{margin:1.5rem 0}.states td,.states th{padding:0 .3rem;font-size:11px}</style></head><body>",
    );
    let _ = write!(
        out,
        "<h1>Ringside drill: <span class=\"{}\">{}</span></h1><p>Config: <code>{}</code>. Bars: requests started per second, ok (green), 429 (amber), other failures (red).</p>",
        if held { "held" } else { "failed" },
        if held {
            "every budget held"
        } else {
            "a budget failed"
        },
        esc(config)
    );
    for v in verdicts {
        let f = &v.figures;
        let _ = write!(
            out,
            "<section class=\"scenario\" data-name=\"{}\"><h2>{} <span class=\"{}\">{}</span></h2><p>{} (fault <code>{}</code>)</p>{}{}<table><tr><th>figure</th><th>value</th><th>budget</th><th></th></tr>",
            esc(&v.scenario.name),
            esc(&v.scenario.name),
            if v.held { "held" } else { "failed" },
            if v.held { "held" } else { "failed" },
            esc(&v.scenario.what),
            esc(&v.scenario.fault),
            timeline_svg(v),
            states_strip(v)
        );
        for c in &v.checks {
            let _ = write!(
                out,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td class=\"{}\">{}</td></tr>",
                esc(c.figure),
                esc(&c.value),
                esc(&c.budget),
                if c.held { "held" } else { "failed" },
                if c.held { "held" } else { "failed" }
            );
        }
        let _ = write!(
            out,
            "</table><p>{} requests, {} sent by clients (retries included), {} upstream attempts (per request: steady {:.2}, fault {:.2}, recovery {:.2}); p50 {:.0} ms, p99 {:.0} ms.</p></section>",
            f.requests,
            f.client_sends,
            f.upstream_attempts,
            f.phase_amplification[0],
            f.phase_amplification[1],
            f.phase_amplification[2],
            f.p50_ms,
            f.p99_ms
        );
        notes(&mut out, v);
    }
    out.push_str("</body></html>\n");
    out
}
