//! One request through the front: read from the client (an HTTP/2 stream, or an HTTP/1.1
//! request over TLS), sent to the simulator's own listener as HTTP/1.1, and its answer sent
//! back as it comes (an event stream event by event). An answer the simulator cuts is cut for
//! the client too: the stream reset, the connection closed.

use super::Front;
use crate::http::head::{Framing, parse_response};
use crate::http::io::read_more;
use crate::http::server_tls::ServerTls;
use crate::http::{Head, HeadLimits};
use crate::upstream::h2::request::connection_specific;
use bytes::{Bytes, BytesMut};
use monoio::io::AsyncWriteRentExt;
use monoio::net::TcpStream;
use monoio_http::h2::{Reason, RecvStream, server::SendResponse};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

const LIMITS: HeadLimits = HeadLimits {
    max_head_bytes: 64 * 1024,
    max_headers: 200,
};

/// Serve HTTP/2 on `tls`, with the front's faults.
pub async fn serve_h2(front: Arc<Front>, tls: ServerTls) {
    let f = &front.opts.faults;
    let mut b = monoio_http::h2::server::Builder::new();
    b.max_concurrent_streams(front.opts.max_streams);
    let Ok(mut conn) = b.handshake::<ServerTls, Bytes>(tls).await else {
        return;
    };
    let st = &front.stats;
    let mut on_conn = 0u64;
    while let Some(accepted) = conn.accept().await {
        let Ok((req, respond)) = accepted else {
            break;
        };
        on_conn += 1;
        let n = st.streams.fetch_add(1, Ordering::Relaxed) + 1;
        if st.drops(f, on_conn) {
            // Dropped with every stream on it.
            return;
        }
        if st.blackholes(f, on_conn) {
            // Silent: the connection (and its socket) is held but never driven again.
            monoio::time::sleep(Duration::from_secs(120)).await;
            return;
        }
        if f.goaway_after > 0 && on_conn == f.goaway_after {
            st.goaways.fetch_add(1, Ordering::Relaxed);
            conn.graceful_shutdown();
        }
        if f.http1_required > 0 && n.is_multiple_of(f.http1_required) {
            st.refused.fetch_add(1, Ordering::Relaxed);
            let mut respond = respond;
            respond.send_reset(Reason::HTTP_1_1_REQUIRED);
            continue;
        }
        if f.refuse_every > 0 && n.is_multiple_of(f.refuse_every) {
            st.refused.fetch_add(1, Ordering::Relaxed);
            let mut respond = respond;
            respond.send_reset(Reason::REFUSED_STREAM);
            continue;
        }
        let lies = f.short_length_every > 0 && n.is_multiple_of(f.short_length_every);
        monoio::spawn(stream(front.clone(), req, respond, lies));
    }
}

/// One HTTP/2 stream relayed; `lies`: its answer's `content-length` says half its body.
async fn stream(
    front: Arc<Front>,
    req: http::Request<RecvStream>,
    mut respond: SendResponse<Bytes>,
    lies: bool,
) {
    let st = &front.stats;
    let open = st.open_streams.fetch_add(1, Ordering::Relaxed) + 1;
    st.peak_streams.fetch_max(open, Ordering::Relaxed);
    let (parts, body) = req.into_parts();
    let slow = front.opts.faults.slow_window as usize;
    let outcome = match read_h2_body(body, slow).await {
        Some(body) => relay_h2(&front, (&parts, lies), body, &mut respond).await,
        None => Err(()),
    };
    if outcome.is_err() {
        respond.send_reset(Reason::INTERNAL_ERROR);
    }
    st.open_streams.fetch_sub(1, Ordering::Relaxed);
}

/// The request's body; `slow` > 0: its window is given back that many bytes at a time, 20 ms
/// apart (a body larger than the window waits on each WINDOW_UPDATE).
async fn read_h2_body(mut body: RecvStream, slow: usize) -> Option<Bytes> {
    let mut out = BytesMut::new();
    while let Some(chunk) = body.data().await {
        let c = chunk.ok()?;
        let mut owed = c.len();
        while slow > 0 && owed > 0 {
            monoio::time::sleep(Duration::from_millis(20)).await;
            let n = owed.min(slow);
            let _ = body.flow_control().release_capacity(n);
            owed -= n;
        }
        let _ = body.flow_control().release_capacity(owed);
        out.extend_from_slice(&c);
    }
    Some(out.freeze())
}

async fn relay_h2(
    front: &Front,
    (parts, lies): (&http::request::Parts, bool),
    body: Bytes,
    respond: &mut SendResponse<Bytes>,
) -> Result<(), ()> {
    let mut h = Vec::with_capacity(1024);
    h.extend_from_slice(parts.method.as_str().as_bytes());
    h.push(b' ');
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    h.extend_from_slice(path.as_bytes());
    h.extend_from_slice(b" HTTP/1.1\r\nhost: ");
    h.extend_from_slice(
        parts
            .uri
            .authority()
            .map_or("sim", |a| a.as_str())
            .as_bytes(),
    );
    h.extend_from_slice(b"\r\n");
    for (name, value) in &parts.headers {
        if connection_specific(name.as_str().as_bytes()) || name == "content-length" {
            continue;
        }
        push_header(&mut h, name.as_str(), value.as_bytes());
    }
    let (mut core, head, mut buf) = ask_core(front, h, body).await?;
    let mut resp = http::Response::builder().status(head.status);
    for (name, value) in head.iter() {
        if connection_specific(name.as_bytes()) {
            continue;
        }
        match (
            &head.framing,
            lies && name.eq_ignore_ascii_case("content-length"),
        ) {
            (Framing::Length(n), true) => resp = resp.header(name, n / 2),
            _ => resp = resp.header(name, value),
        }
    }
    let resp = resp.body(()).map_err(drop)?;
    let empty = head.framing == Framing::Empty;
    let mut tx = respond.send_response(resp, empty).map_err(drop)?;
    if empty {
        give_back(core, &head);
        return Ok(());
    }
    let mut body = Body::new(head.framing);
    loop {
        let (data, done) = body.take(&mut buf)?;
        if !data.is_empty() {
            tx.send_data(data, false).map_err(drop)?;
        }
        if done {
            give_back(core, &head);
            return tx.send_data(Bytes::new(), true).map_err(drop);
        }
        if read_more(&mut core, &mut buf).await.map_err(drop)? == 0 {
            return body.at_close(&mut tx);
        }
    }
}

fn push_header(h: &mut Vec<u8>, name: &str, value: &[u8]) {
    h.extend_from_slice(name.as_bytes());
    h.extend_from_slice(b": ");
    h.extend_from_slice(value);
    h.extend_from_slice(b"\r\n");
}

std::thread_local! {
    /// Idle connections to the simulator's listener, kept alive between relayed requests (a
    /// new one per request churned through ports and the listen queue at thousands a second).
    static IDLE: std::cell::RefCell<Vec<TcpStream>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A connection whose answer was read to its end goes back for the next request.
fn give_back(core: TcpStream, head: &Head) {
    if head.keep_alive {
        IDLE.with_borrow_mut(|idle| idle.push(core));
    }
}

/// Send `head` (without its end) and `body` to the simulator's listener, on an idle
/// connection or a new one; its answer's head, and what of its body came with it.
async fn ask_core(
    front: &Front,
    mut head: Vec<u8>,
    body: Bytes,
) -> Result<(TcpStream, Head, BytesMut), ()> {
    head.extend_from_slice(b"content-length: ");
    head.extend_from_slice(body.len().to_string().as_bytes());
    head.extend_from_slice(b"\r\n\r\n");
    head.extend_from_slice(&body);
    // An idle connection the simulator closed meanwhile fails before any answer: once more on
    // a new one.
    if let Some(core) = IDLE.with_borrow_mut(Vec::pop)
        && let Ok(answer) = exchange(core, head.clone()).await
    {
        return Ok(answer);
    }
    let core = TcpStream::connect(front.core).await.map_err(drop)?;
    let _ = core.set_nodelay(true);
    exchange(core, head).await
}

async fn exchange(
    mut core: TcpStream,
    request: Vec<u8>,
) -> Result<(TcpStream, Head, BytesMut), ()> {
    core.write_all(request).await.0.map_err(drop)?;
    let mut buf = BytesMut::with_capacity(16 * 1024);
    loop {
        if let Some((head, used)) = parse_response(&buf, LIMITS, false).map_err(drop)? {
            let _ = buf.split_to(used);
            return Ok((core, head, buf));
        }
        if read_more(&mut core, &mut buf).await.map_err(drop)? == 0 {
            return Err(());
        }
    }
}

/// An answer's body as it arrives, by its framing: the payload out of what was read.
struct Body {
    framing: Framing,
    left: u64,
    chunks: crate::http::chunk::ChunkTracker,
}

impl Body {
    fn new(framing: Framing) -> Body {
        let left = match framing {
            Framing::Length(n) => n,
            _ => 0,
        };
        Body {
            framing,
            left,
            chunks: crate::http::chunk::ChunkTracker::new(),
        }
    }

    /// The payload in `buf` (taken from it), and whether the body is whole.
    fn take(&mut self, buf: &mut BytesMut) -> Result<(Bytes, bool), ()> {
        match self.framing {
            Framing::Empty => Ok((Bytes::new(), true)),
            Framing::Close => Ok((buf.split().freeze(), false)),
            Framing::Length(_) => {
                let n = (buf.len() as u64).min(self.left) as usize;
                self.left -= n as u64;
                Ok((buf.split_to(n).freeze(), self.left == 0))
            }
            Framing::Chunked => {
                let mut out = BytesMut::new();
                let used = self
                    .chunks
                    .feed(buf, |p| out.extend_from_slice(p))
                    .map_err(drop)?;
                let _ = buf.split_to(used);
                Ok((out.freeze(), self.chunks.is_done()))
            }
        }
    }

    /// The simulator closed the connection: the body's end only when it is read to close.
    fn at_close(&self, tx: &mut monoio_http::h2::SendStream<Bytes>) -> Result<(), ()> {
        if self.framing == Framing::Close {
            return tx.send_data(Bytes::new(), true).map_err(drop);
        }
        Err(())
    }
}

/// HTTP/1.1 over TLS: each request relayed in turn (no pipelining), its answer sent back
/// chunked (or with its length) as it comes.
pub async fn pipe_http1(front: &Front, mut tls: ServerTls) {
    let mut buf = BytesMut::with_capacity(16 * 1024);
    loop {
        let limits = super::super::LIMITS;
        let Ok((head, body)) = read_request(&mut tls, &mut buf, &limits).await else {
            return;
        };
        let mut h = Vec::with_capacity(1024);
        h.extend_from_slice(head.method().as_bytes());
        h.push(b' ');
        h.extend_from_slice(head.target().as_bytes());
        h.extend_from_slice(b" HTTP/1.1\r\n");
        for (name, value) in head.iter() {
            let passed = !connection_specific(name.as_bytes()) || name.eq_ignore_ascii_case("host");
            if passed && !name.eq_ignore_ascii_case("content-length") {
                push_header(&mut h, name, value);
            }
        }
        if answer_http1(front, &mut tls, h, body).await.is_err() {
            return;
        }
    }
}

async fn read_request(
    tls: &mut ServerTls,
    buf: &mut BytesMut,
    limits: &crate::http::server::Limits,
) -> Result<(Head, Bytes), ()> {
    let head =
        crate::http::io::read_request_head(tls, buf, limits.head, limits.idle, limits.head_timeout)
            .await
            .map_err(drop)?;
    let body =
        crate::http::io::read_body(tls, buf, head.framing, limits.max_body, limits.body_timeout)
            .await
            .map_err(drop)?;
    Ok((head, body))
}

async fn answer_http1(
    front: &Front,
    tls: &mut ServerTls,
    h: Vec<u8>,
    body: Bytes,
) -> Result<(), ()> {
    let (mut core, head, mut buf) = ask_core(front, h, body).await?;
    let mut out = Vec::with_capacity(1024);
    out.extend_from_slice(format!("HTTP/1.1 {} \r\n", head.status).as_bytes());
    for (name, value) in head.iter() {
        if !connection_specific(name.as_bytes()) && !name.eq_ignore_ascii_case("content-length") {
            push_header(&mut out, name, value);
        }
    }
    let chunked = !matches!(head.framing, Framing::Length(_) | Framing::Empty);
    match head.framing {
        Framing::Length(n) => push_header(&mut out, "content-length", n.to_string().as_bytes()),
        Framing::Empty => push_header(&mut out, "content-length", b"0"),
        _ => push_header(&mut out, "transfer-encoding", b"chunked"),
    }
    out.extend_from_slice(b"\r\n");
    tls.write_all(out).await.0.map_err(drop)?;
    let mut body = Body::new(head.framing);
    loop {
        let (data, done) = body.take(&mut buf)?;
        if !data.is_empty() {
            let mut piece = Vec::with_capacity(data.len() + 16);
            if chunked {
                piece.extend_from_slice(format!("{:x}\r\n", data.len()).as_bytes());
            }
            piece.extend_from_slice(&data);
            if chunked {
                piece.extend_from_slice(b"\r\n");
            }
            tls.write_all(piece).await.0.map_err(drop)?;
        }
        let closed = !done && read_more(&mut core, &mut buf).await.map_err(drop)? == 0;
        if done || (closed && head.framing == Framing::Close) {
            if done && !closed {
                give_back(core, &head);
            }
            if chunked {
                tls.write_all(b"0\r\n\r\n".to_vec()).await.0.map_err(drop)?;
            }
            return Ok(());
        }
        if closed {
            // Cut by the simulator: cut here too.
            return Err(());
        }
    }
}
