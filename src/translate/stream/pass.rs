//! A Chat stream passed through event by event, as the provider wrote it, but for the final
//! usage chunk (`"choices":[]` with a `usage` object) that Ringside asked for on the client's
//! behalf: the client reads the stream it asked for, Ringside bills what the provider reported
//! (the stream guard read the provider's own bytes before this).

use super::Standing;
use super::frame::Frame;

/// Write one provider event for the client (or leave it out); how the stream stands after it.
pub(super) fn frame(f: Frame, out: &mut Vec<u8>) -> Standing {
    if f.data == b"[DONE]" {
        out.extend_from_slice(b"data: [DONE]\n\n");
        return Standing::Ended;
    }
    if usage_only(f.data) {
        return Standing::Open;
    }
    if !f.name.is_empty() {
        out.extend_from_slice(b"event: ");
        out.extend_from_slice(f.name.as_bytes());
        out.push(b'\n');
    }
    for line in f.data.split(|&b| b == b'\n') {
        out.extend_from_slice(b"data: ");
        out.extend_from_slice(line);
        out.push(b'\n');
    }
    out.push(b'\n');
    // An error object in the stream is the provider's last word: the client has it as sent.
    if f.data.starts_with(b"{\"error\"") {
        return Standing::Failed;
    }
    Standing::Open
}

/// The chunk that carries only the usage: no choices, a usage object.
fn usage_only(data: &[u8]) -> bool {
    let has = |n: &[u8]| memchr::memmem::find(data, n).is_some();
    (has(b"\"choices\":[]") || has(b"\"choices\": []")) && has(b"\"usage\"")
}

#[cfg(test)]
mod tests {
    use super::super::Translator;

    #[test]
    fn the_usage_chunk_is_left_out_and_everything_else_passes() {
        let upstream = "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}],\"usage\":null}\n\n\
                        data: {\"id\":\"c\",\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":8}}\n\n\
                        data: [DONE]\n\n";
        let mut t = Translator::without_usage("r");
        let mut out = Vec::new();
        // Split anywhere: the framing holds partial lines.
        let (a, b) = upstream.as_bytes().split_at(37);
        t.feed(a, &mut out);
        t.feed(b, &mut out);
        let text = String::from_utf8(out).expect("utf-8");
        assert_eq!(
            text,
            "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}],\"usage\":null}\n\n\
             data: [DONE]\n\n"
        );
        assert_eq!(t.standing(), super::Standing::Ended);
    }

    #[test]
    fn a_stream_cut_short_stays_open_and_an_error_ends_it() {
        let mut t = Translator::without_usage("r");
        let mut out = Vec::new();
        t.feed(b"data: {\"choices\":[{\"delta\":{}}]}\n\n", &mut out);
        assert_eq!(t.finish(&mut out), super::Standing::Open);
        let mut t = Translator::without_usage("r");
        t.feed(b"data: {\"error\":{\"message\":\"x\"}}\n\n", &mut out);
        assert_eq!(t.standing(), super::Standing::Failed);
    }
}
