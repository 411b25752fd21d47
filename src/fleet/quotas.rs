//! Tenant quotas across the fleet: requests per minute, tokens per minute and requests at once
//! of a client key hold for the fleet as a whole. Each admission of a tenant with limits is one
//! script call in Redis (counted and checked at once, so the fleet never admits past a quota);
//! a request at once is a holder entry that expires if its instance dies. Redis away or slow:
//! the instance decides on its own count (each instance then holds the full quota).
//!
//! Tenants' token and dollar budgets (`[[tenants]]`) are shared the same way: a request's
//! estimate is reserved on the tenant's day and month counters in one script call while each
//! budget is under its limit, and its end corrects the counters by what it really spent.

use super::link::{Backoff, Link};
use crate::config::FleetSettings;
use crate::flow::tenant::{OverQuota, TenantAsk};
use crossbeam_channel::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::*};
use std::time::{Duration, Instant};

/// Check every limit, then count: {0} admitted, {1} at once, {2} per minute, {3} tokens.
const ADMIT: &str = r#"
local req, tok, run = KEYS[1], KEYS[2], KEYS[3]
local rpm, tpm, maxc = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local tokens, holder, hold, window = tonumber(ARGV[4]), ARGV[5], tonumber(ARGV[6]), tonumber(ARGV[7])
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
if maxc > 0 then
  redis.call('ZREMRANGEBYSCORE', run, '-inf', now)
  if redis.call('ZCARD', run) >= maxc then return 1 end
end
if rpm > 0 and tonumber(redis.call('GET', req) or '0') >= rpm then return 2 end
if tpm > 0 then
  local used = tonumber(redis.call('GET', tok) or '0')
  if used > 0 and used + tokens > tpm then return 3 end
end
redis.call('INCR', req)
redis.call('PEXPIRE', req, window)
redis.call('INCRBY', tok, tokens)
redis.call('PEXPIRE', tok, window)
if maxc > 0 then
  redis.call('ZADD', run, now + hold, holder)
  redis.call('PEXPIRE', run, hold)
end
return 0
"#;

/// Check every budgeted counter, then reserve on all four: {0} reserved, {i} the i-th spent.
const RESERVE: &str = r#"
for i = 1, 4 do
  local max = tonumber(ARGV[i])
  if max > 0 and tonumber(redis.call('GET', KEYS[i]) or '0') >= max then return i end
end
for i = 1, 4 do
  redis.call('INCRBY', KEYS[i], ARGV[4 + i])
  redis.call('PEXPIRE', KEYS[i], ARGV[9 + math.floor((i - 1) / 2)])
end
return 0
"#;

/// A day's counters outlive their day by one, a month's by five days.
const DAY_KEEP_MS: u64 = 2 * 86_400_000;
const MONTH_KEEP_MS: u64 = 36 * 86_400_000;

/// A request at once counts for at most this long if its instance dies before it ends.
const HOLD_MS: u64 = 600_000;

pub(super) struct Quotas {
    pub link: Link,
    pub stop: Arc<AtomicBool>,
    pub settings: FleetSettings,
    pub rx: Receiver<TenantAsk>,
}

pub(super) fn run(q: Quotas) {
    // The tenant of each request counted as running, until it ends.
    let mut running: std::collections::HashMap<u64, u64> = Default::default();
    let mut con: Option<redis::Connection> = None;
    let mut backoff = Backoff::default();
    let mut retry_at = Instant::now();
    loop {
        let ask = match q.rx.recv_timeout(Duration::from_millis(100)) {
            Ok(a) => a,
            Err(RecvTimeoutError::Timeout) if q.stop.load(Acquire) => return,
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) => return,
        };
        if con.is_none() && Instant::now() >= retry_at {
            match q.link.connect() {
                Ok(c) => {
                    con = Some(c);
                    backoff.reset();
                }
                Err(_) => retry_at = Instant::now() + backoff.next(),
            }
        }
        // Redis away: the asker's wait ends unanswered and its own count decides.
        let Some(c) = con.as_mut() else {
            continue;
        };
        if answer(&q, c, ask, &mut running).is_err() {
            con = None;
            retry_at = Instant::now() + backoff.next();
        }
    }
}

fn keys(q: &Quotas, tenant: u64) -> [String; 3] {
    let minute = crate::clock::unix_ms() / 60_000;
    let t = format!("{tenant:016x}");
    [
        q.settings.key(&format!("tenant:{t}:req:{minute}")),
        q.settings.key(&format!("tenant:{t}:tok:{minute}")),
        q.settings.key(&format!("tenant:{t}:run")),
    ]
}

/// A tenant's spend counters, in the ledger's order: day tokens, day micro-dollars, month
/// tokens, month micro-dollars.
fn spend_keys(q: &Quotas, tenant: u64, (day, month): (u64, u64)) -> [String; 4] {
    let t = format!("{tenant:016x}");
    [
        q.settings.key(&format!("spend:{t}:day:{day}:tokens")),
        q.settings.key(&format!("spend:{t}:day:{day}:micro_usd")),
        q.settings.key(&format!("spend:{t}:month:{month}:tokens")),
        q.settings
            .key(&format!("spend:{t}:month:{month}:micro_usd")),
    ]
}

fn answer(
    q: &Quotas,
    con: &mut redis::Connection,
    ask: TenantAsk,
    running: &mut std::collections::HashMap<u64, u64>,
) -> redis::RedisResult<()> {
    match ask {
        TenantAsk::Admit {
            tenant,
            limits: l,
            tokens,
            holder,
            reply,
        } => {
            let [req, tok, run] = keys(q, tenant);
            let code: u8 = redis::cmd("EVAL")
                .arg(ADMIT)
                .arg(3)
                .arg(&req)
                .arg(&tok)
                .arg(&run)
                .arg(l.requests_per_minute)
                .arg(l.tokens_per_minute)
                .arg(l.max_concurrent)
                .arg(tokens)
                .arg(holder)
                .arg(HOLD_MS)
                .arg(120_000)
                .query(con)?;
            if code == 0 && l.max_concurrent > 0 {
                running.insert(holder, tenant);
            }
            let now = crate::clock::unix_ms();
            let retry_ms = (now / 60_000 + 1) * 60_000 - now;
            let _ = reply.send(match code {
                0 => None,
                1 => Some(OverQuota::Concurrent),
                2 => Some(OverQuota::RequestsPerMinute { retry_ms }),
                _ => Some(OverQuota::TokensPerMinute { retry_ms }),
            });
        }
        TenantAsk::Release { holder } => {
            if let Some(tenant) = running.remove(&holder) {
                let [_, _, run] = keys(q, tenant);
                redis::cmd("ZREM").arg(run).arg(holder).query::<()>(con)?;
            }
        }
        spend => answer_spend(q, con, spend)?,
    }
    Ok(())
}

/// The asks on a tenant's spend counters (budgets): reserve, settle, read, reset.
fn answer_spend(q: &Quotas, con: &mut redis::Connection, ask: TenantAsk) -> redis::RedisResult<()> {
    match ask {
        TenantAsk::Reserve {
            tenant,
            limits,
            ask,
            periods,
            reply,
        } => {
            let mut cmd = redis::cmd("EVAL");
            cmd.arg(RESERVE).arg(4);
            for k in spend_keys(q, tenant, periods) {
                cmd.arg(k);
            }
            cmd.arg(&limits[..])
                .arg(&ask[..])
                .arg(DAY_KEEP_MS)
                .arg(MONTH_KEEP_MS);
            let code: usize = cmd.query(con)?;
            let _ = reply.send(code.checked_sub(1));
        }
        TenantAsk::Settle {
            tenant,
            periods,
            delta,
        } => {
            let mut pipe = redis::pipe();
            for (k, d) in spend_keys(q, tenant, periods).iter().zip(delta) {
                if d != 0 {
                    pipe.cmd("INCRBY").arg(k).arg(d).ignore();
                }
            }
            pipe.query::<()>(con)?;
        }
        TenantAsk::Spent {
            tenant,
            periods,
            reply,
        } => {
            // (A settled counter may dip below zero between a give-back and its reservation.)
            let got: Vec<Option<i64>> = redis::cmd("MGET")
                .arg(&spend_keys(q, tenant, periods)[..])
                .query(con)?;
            let _ = reply.send(std::array::from_fn(|c| {
                got.get(c).copied().flatten().unwrap_or(0).max(0) as u64
            }));
        }
        TenantAsk::Reset { tenant, periods } => {
            redis::cmd("DEL")
                .arg(&spend_keys(q, tenant, periods)[..])
                .query::<()>(con)?;
        }
        TenantAsk::Admit { .. } | TenantAsk::Release { .. } => {}
    }
    Ok(())
}
