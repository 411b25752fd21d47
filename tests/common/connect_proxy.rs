//! An egress proxy for tests: HTTP `CONNECT` on loopback, a thread per connection, that
//! records each request head, refuses (407, with a page) one without the expected
//! `Proxy-Authorization`, and relays bytes both ways once the tunnel is open. Targets are
//! reached on 127.0.0.1.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

pub struct ConnectProxy {
    pub addr: SocketAddr,
    /// Every request head it read, in order.
    pub heads: Arc<Mutex<Vec<String>>>,
}

impl ConnectProxy {
    /// `authorization`: the `Proxy-Authorization` value it requires (`None`: none).
    pub fn start(authorization: Option<String>) -> ConnectProxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let heads = Arc::new(Mutex::new(Vec::new()));
        let log = heads.clone();
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let (log, auth) = (log.clone(), authorization.clone());
                std::thread::spawn(move || tunnel(client, &log, auth.as_deref()));
            }
        });
        ConnectProxy { addr, heads }
    }
}

fn tunnel(mut client: TcpStream, log: &Mutex<Vec<String>>, auth: Option<&str>) {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    // Byte by byte: nothing past the head may be taken from the client.
    while !head.ends_with(b"\r\n\r\n") {
        match client.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return,
        }
    }
    let head = String::from_utf8_lossy(&head).to_string();
    log.lock().expect("log").push(head.clone());
    let authorized = auth.is_none_or(|want| {
        head.lines().any(|l| {
            l.split_once(':').is_some_and(|(k, v)| {
                k.eq_ignore_ascii_case("proxy-authorization") && v.trim() == want
            })
        })
    });
    if !authorized {
        // As squid and tinyproxy do: the refusal and its page in one write.
        let page = "<html><body>Proxy credentials required</body></html>";
        let _ = client.write_all(
            format!(
                "HTTP/1.1 407 Proxy Authentication Required\r\nproxy-authenticate: Basic realm=\"egress\"\r\ncontent-type: text/html\r\ncontent-length: {}\r\n\r\n{page}",
                page.len()
            )
            .as_bytes(),
        );
        return;
    }
    let target = head
        .strip_prefix("CONNECT ")
        .and_then(|r| r.split(' ').next())
        .and_then(|a| a.rsplit_once(':'))
        .and_then(|(_, port)| port.parse::<u16>().ok());
    let Some(Ok(upstream)) = target.map(|p| TcpStream::connect(("127.0.0.1", p))) else {
        let _ = client.write_all(b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\n\r\n");
        return;
    };
    if client
        .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
        .is_err()
    {
        return;
    }
    let (Ok(mut c2), Ok(mut u2)) = (client.try_clone(), upstream.try_clone()) else {
        return;
    };
    let mut upstream = upstream;
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut u2, &mut c2);
        let _ = c2.shutdown(std::net::Shutdown::Write);
    });
    let _ = std::io::copy(&mut client, &mut upstream);
    let _ = upstream.shutdown(std::net::Shutdown::Write);
}
