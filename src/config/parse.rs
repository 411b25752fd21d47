//! Reading the config text: toml's own error for a file that is not TOML (line, column and the
//! line itself), and every unknown key in one run, each with a "did you mean" when a known key
//! is close. serde stops at the first unknown key; so the key's line is commented out and the
//! text read again, until none is left (a key whose value spans lines ends the search there).

use super::Problem;
use super::schema::FileConfig;

/// The most unknown keys reported in one run.
const MAX_UNKNOWN: usize = 64;

/// Parse `text` into the file's schema, or say everything wrong with it.
pub(super) fn file_config(text: &str, origin: &str) -> Result<FileConfig, Vec<Problem>> {
    if let Err(e) = text.parse::<toml::Table>() {
        return Err(vec![located(text, origin, &e)]);
    }
    let mut unknown = Vec::new();
    let mut current = text.to_string();
    loop {
        let e = match toml::from_str::<FileConfig>(&current) {
            Ok(file) if unknown.is_empty() => return Ok(file),
            Ok(_) => return Err(unknown),
            Err(e) => e,
        };
        let Some((key, expected)) = unknown_key(e.message()) else {
            unknown.push(located(&current, origin, &e));
            return Err(unknown);
        };
        let line = e.span().map_or(0, |s| line_of(&current, s.start));
        unknown.push(Problem {
            at: format!("{origin}:{}", line + 1),
            message: format!("unknown key `{key}`{}", suggestion(&key, &expected)),
        });
        // Look for the next one without this line; stop if that breaks the file (a value that
        // spans lines) or after enough of them.
        let next = comment_out(&current, line);
        if unknown.len() >= MAX_UNKNOWN || next.parse::<toml::Table>().is_err() {
            return Err(unknown);
        }
        current = next;
    }
}

/// A problem at toml's span: `file:line:column`, the message, then the line and a caret.
fn located(text: &str, origin: &str, e: &toml::de::Error) -> Problem {
    let message = e.message().trim_end().to_string();
    let Some(span) = e.span() else {
        return Problem {
            at: origin.to_string(),
            message,
        };
    };
    let start = span.start.min(text.len());
    let line = line_of(text, start);
    let line_start = text[..start].rfind('\n').map_or(0, |i| i + 1);
    let column = text[line_start..start].chars().count() + 1;
    let source = text[line_start..].lines().next().unwrap_or("");
    Problem {
        at: format!("{origin}:{}:{column}", line + 1),
        message: format!(
            "{message}\n    | {source}\n    | {}^",
            " ".repeat(column - 1)
        ),
    }
}

/// The 0-based line of byte `at`.
fn line_of(text: &str, at: usize) -> usize {
    text[..at.min(text.len())].matches('\n').count()
}

/// serde's "unknown field `x`, expected one of `a`, `b`": the key and the known ones.
fn unknown_key(message: &str) -> Option<(String, Vec<String>)> {
    let rest = message.strip_prefix("unknown field `")?;
    let (key, rest) = rest.split_once('`')?;
    let expected = rest
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect();
    Some((key.to_string(), expected))
}

/// ", did you mean `listen`?" when a known key is close; else the keys that are known.
fn suggestion(key: &str, expected: &[String]) -> String {
    let best = expected
        .iter()
        .map(|k| (strsim::jaro_winkler(key, k), k))
        .max_by(|a, b| a.0.total_cmp(&b.0));
    match best {
        Some((score, k)) if score >= 0.8 => format!(", did you mean `{k}`?"),
        _ if expected.is_empty() => String::new(),
        _ => format!(" (known here: {})", expected.join(", ")),
    }
}

/// `text` with line `line` (0-based) commented out.
fn comment_out(text: &str, line: usize) -> String {
    let mut out = String::with_capacity(text.len() + 1);
    for (i, l) in text.split_inclusive('\n').enumerate() {
        if i == line {
            out.push('#');
        }
        out.push_str(l);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_unknown_key_is_named_in_one_run_with_a_suggestion() {
        let text = "[server]\nlisen = \"x\"\nworkrs = 2\n[limits]\nmax_head_byte = 1\nzzz = 1\n";
        let problems = file_config(text, "a.toml").err().unwrap_or_default();
        let shown: Vec<String> = problems.iter().map(|p| p.to_string()).collect();
        assert_eq!(problems.len(), 4, "{shown:#?}");
        assert!(shown[0].contains("a.toml:2") && shown[0].contains("did you mean `listen`"));
        assert!(shown[1].contains("a.toml:3") && shown[1].contains("did you mean `workers`"));
        assert!(
            shown[2].contains("did you mean `max_head_bytes`"),
            "{shown:#?}"
        );
        assert!(shown[3].contains("`zzz`") && shown[3].contains("known here"));
    }

    #[test]
    fn a_file_that_is_not_toml_gets_line_column_and_the_line() {
        let text = "[server]\nlisten = \"127.0.0.1:1\n";
        let problems = file_config(text, "b.toml").err().unwrap_or_default();
        assert_eq!(problems.len(), 1);
        let shown = problems[0].to_string();
        assert!(shown.starts_with("b.toml:2:"), "{shown}");
        assert!(shown.contains("| listen = \"127.0.0.1:1"), "{shown}");
        assert!(shown.contains('^'), "{shown}");
    }

    #[test]
    fn a_wrong_type_after_unknown_keys_is_reported_too() {
        let text = "[server]\nlisen = 1\nworkers = \"two\"\n";
        let problems = file_config(text, "c.toml").err().unwrap_or_default();
        let shown: Vec<String> = problems.iter().map(|p| p.to_string()).collect();
        assert_eq!(problems.len(), 2, "{shown:#?}");
        assert!(shown[1].starts_with("c.toml:3:"), "{shown:#?}");
    }
}
