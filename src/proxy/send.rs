//! Send the request and await the answer's head, within the first-byte timeout, racing the
//! client (a client that leaves aborts the wait). Says whether anything was received, which
//! decides whether a pooled connection that died may be tried again.

use super::watch::{ClientWatch, Raced};
use crate::audit::AttemptOutcome;
use crate::http::head::parse_response;
use crate::http::io::read_more;
use crate::http::{Head, HeadLimits};
use crate::timer;
use crate::upstream::UpConn;
use std::time::Duration;

pub(super) enum HeadFail {
    ClientGone,
    /// The provider's TLS refused Ringside's client certificate, with its first read
    /// (`upstream::tls::refusal`): the request never reached it.
    TlsRefused(String),
    Failed {
        timeout: bool,
        kind: AttemptOutcome,
        detail: String,
        nothing_received: bool,
    },
}

/// `stream`: the client asked for an event stream. Its time to the first byte can be long
/// (the model thinks), so the wait holds no read buffer (`UpStream::read_when_ready`); a plain
/// answer is read straight away (one I/O operation fewer on the common path).
pub(super) async fn send_and_await_head(
    up: &mut UpConn,
    out: &super::outbound::Outbound,
    first_byte: Duration,
    stream: bool,
    watch: &mut ClientWatch<'_>,
) -> Result<Head, HeadFail> {
    let fail = |timeout: bool, detail: String, nothing_received| HeadFail::Failed {
        timeout,
        kind: if timeout {
            AttemptOutcome::Timeout
        } else {
            AttemptOutcome::Reset
        },
        detail,
        nothing_received,
    };
    let sent = watch
        .race(std::pin::pin!(super::outbound::send(&mut up.stream, out)))
        .await;
    match sent {
        Raced::ClientGone => return Err(HeadFail::ClientGone),
        Raced::Done(Err(e)) => return Err(fail(false, format!("send failed: {e}"), true)),
        Raced::Done(Ok(_)) => {}
    }
    let deadline = crate::clock::instant() + first_byte;
    if let Some(h2) = up.stream.h2_mut() {
        // Its head comes whole and parsed: nothing of it is read as bytes.
        let head = within_wait(std::pin::pin!(h2.head()), deadline, watch).await?;
        return match head {
            Ok(Some(head)) => {
                h2.read_received(&mut up.buf);
                // Found malformed with its head: failed here, as a bad head is, while the
                // client has nothing of it (what was read of it goes with the attempt).
                match h2.failed_with_head() {
                    Some(e) => {
                        up.buf.clear();
                        fail_read(e)
                    }
                    None => Ok(head),
                }
            }
            Ok(None) => fail_closed(),
            Err(e) => fail_read(e),
        }
        .map_err(|f| received_nothing(f, true));
    }
    let limits = HeadLimits {
        max_head_bytes: 64 * 1024,
        max_headers: crate::http::head::MAX_HEADERS_HARD,
    };
    loop {
        match parse_response(&up.buf, limits, false) {
            Ok(Some((head, used))) => {
                let _ = up.buf.split_to(used);
                if (100..200).contains(&head.status) {
                    continue; // interim response: wait for the real one
                }
                return Ok(head);
            }
            Ok(None) => {}
            Err(e) => {
                return Err(HeadFail::Failed {
                    timeout: false,
                    kind: AttemptOutcome::ProtocolError,
                    detail: format!("bad response head: {}", e.reason()),
                    nothing_received: false,
                });
            }
        }
        let received = !up.buf.is_empty();
        if let Err(f) = read_head_bytes(up, stream, deadline, watch).await {
            return Err(received_nothing(f, !received));
        }
    }
}

/// `f`, saying whether nothing of the answer was received before it.
fn received_nothing(f: HeadFail, nothing: bool) -> HeadFail {
    match f {
        HeadFail::Failed {
            timeout,
            kind,
            detail,
            ..
        } => HeadFail::Failed {
            timeout,
            kind,
            detail,
            nothing_received: nothing,
        },
        gone => gone,
    }
}

fn fail_closed<T>() -> Result<T, HeadFail> {
    Err(HeadFail::Failed {
        timeout: false,
        kind: AttemptOutcome::Reset,
        detail: "connection closed before the response head".to_string(),
        nothing_received: false,
    })
}

fn fail_read<T>(e: std::io::Error) -> Result<T, HeadFail> {
    if let Some(refusal) = crate::upstream::tls::refusal(&e) {
        return Err(HeadFail::TlsRefused(refusal));
    }
    Err(HeadFail::Failed {
        timeout: false,
        kind: AttemptOutcome::Reset,
        detail: format!("connection failed: {e}"),
        nothing_received: false,
    })
}

/// Read more of the head, until `deadline`, racing the client and the drain's grace (its end
/// answers the request, `shutdown`, instead of losing it). `nothing_received` is for the
/// caller to set.
async fn read_head_bytes(
    up: &mut UpConn,
    stream: bool,
    deadline: std::time::Instant,
    watch: &mut ClientWatch<'_>,
) -> Result<(), HeadFail> {
    // Pinned here and borrowed by the race below: moved into it, the read would be stored
    // twice in this future (and so in every connection's task).
    let read = std::pin::pin!(async {
        if stream {
            up.stream.read_when_ready(&mut up.buf).await
        } else {
            read_more(&mut up.stream, &mut up.buf).await
        }
    });
    match within_wait(read, deadline, watch).await? {
        Err(e) => fail_read(e),
        Ok(0) => fail_closed(),
        Ok(_) => Ok(()),
    }
}

/// `read`'s result, if it comes before `deadline`, the client leaving and the end of the
/// drain's grace. `nothing_received` is for the caller to set.
async fn within_wait<T>(
    read: std::pin::Pin<&mut impl std::future::Future<Output = std::io::Result<T>>>,
    deadline: std::time::Instant,
    watch: &mut ClientWatch<'_>,
) -> Result<std::io::Result<T>, HeadFail> {
    let fail = |timeout: bool, kind, detail: &str| {
        Err(HeadFail::Failed {
            timeout,
            kind,
            detail: detail.to_string(),
            nothing_received: false,
        })
    };
    let read = std::pin::pin!(timer::timeout_at(deadline, read));
    let read = async {
        let cut = crate::state::drain::until_cut();
        monoio::select! {
            r = read => Some(r),
            _ = cut => None,
        }
    };
    match watch.race(std::pin::pin!(read)).await {
        Raced::ClientGone => Err(HeadFail::ClientGone),
        Raced::Done(None) => fail(
            false,
            AttemptOutcome::Shutdown,
            "the drain's grace ended before the response head",
        ),
        Raced::Done(Some(Err(_))) => {
            fail(true, AttemptOutcome::Timeout, "no response head in time")
        }
        Raced::Done(Some(Ok(r))) => Ok(r),
    }
}
