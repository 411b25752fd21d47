//! Spacing and reservoirs across the fleet: a connection's `min_time_ms` and `reservoir` hold
//! for the fleet as a whole. Each start on such a connection reserves its turn in Redis (one
//! script call): the next start time moves on by the spacing, and the reservoir, refilled to
//! its amount every `reservoir_refresh_ms`, gives one token. The request then waits for its
//! turn as it would in its own gate. Redis away: the instance's own gate paces it alone.

use super::link::{Backoff, Link};
use super::wire::Names;
use crate::config::FleetSettings;
use crate::flow::PaceAsk;
use crate::ids::ConnId;
use crate::state::core::Shared;
use crossbeam_channel::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::*};
use std::time::{Duration, Instant};

/// {0, wait}: a start reserved `wait` ms from now; {1, refill}: the reservoir is empty for
/// another `refill` ms.
const RESERVE: &str = r#"
local next_key, tokens_key = KEYS[1], KEYS[2]
local spacing, amount, refresh = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
if amount > 0 then
  local left = redis.call('GET', tokens_key)
  if not left then
    left = amount
    if refresh > 0 then
      redis.call('SET', tokens_key, amount, 'PX', refresh)
    else
      redis.call('SET', tokens_key, amount)
    end
  end
  if tonumber(left) <= 0 then
    local ttl = redis.call('PTTL', tokens_key)
    if ttl < 0 then ttl = 1000 end
    return {1, ttl}
  end
  redis.call('DECR', tokens_key)
end
local wait = 0
if spacing > 0 then
  local at = math.max(now, tonumber(redis.call('GET', next_key) or '0'))
  redis.call('SET', next_key, at + spacing, 'PX', spacing + 60000)
  wait = at - now
end
return {0, wait}
"#;

pub(super) struct Pace {
    pub link: Link,
    pub shared: Arc<Shared>,
    pub stop: Arc<AtomicBool>,
    pub settings: FleetSettings,
    pub rx: Receiver<PaceAsk>,
}

pub(super) fn run(p: Pace) {
    let mut con: Option<redis::Connection> = None;
    let mut backoff = Backoff::default();
    let mut retry_at = Instant::now();
    let mut names = Names::default();
    loop {
        let ask = match p.rx.recv_timeout(Duration::from_millis(100)) {
            Ok(a) => a,
            Err(RecvTimeoutError::Timeout) if p.stop.load(Acquire) => return,
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) => return,
        };
        if p.shared.newest.load(Acquire) != names.generation {
            names = Names::of(&p.shared.staged());
        }
        if con.is_none() && Instant::now() >= retry_at {
            match p.link.connect() {
                Ok(c) => {
                    con = Some(c);
                    backoff.reset();
                }
                Err(_) => retry_at = Instant::now() + backoff.next(),
            }
        }
        // Redis away: the asker's wait ends unanswered and its own gate paces it.
        let Some(c) = con.as_mut() else {
            continue;
        };
        match reserve(&p, c, &names, ask.conn) {
            Ok(answer) => {
                let _ = ask.reply.send(answer);
            }
            Err(_) => {
                con = None;
                retry_at = Instant::now() + backoff.next();
            }
        }
    }
}

fn reserve(
    p: &Pace,
    con: &mut redis::Connection,
    names: &Names,
    conn: ConnId,
) -> redis::RedisResult<Result<u64, u64>> {
    let (Some(label), Some(gate)) = (
        names.label_with_key(conn),
        p.shared.flow.gates.get(conn.index()),
    ) else {
        return Ok(Ok(0));
    };
    let (code, ms): (u8, u64) = redis::cmd("EVAL")
        .arg(RESERVE)
        .arg(2)
        .arg(p.settings.key(&format!("pace:{label}:next")))
        .arg(p.settings.key(&format!("pace:{label}:tokens")))
        .arg(gate.min_time_ms.load(Relaxed))
        .arg(gate.reservoir_amount.load(Relaxed))
        .arg(gate.reservoir_refresh_ms.load(Relaxed))
        .query(con)?;
    Ok(if code == 0 { Ok(ms) } else { Err(ms) })
}
