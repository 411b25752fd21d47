//! Ringside: a resilience proxy for LLM APIs.
//!
//! Layout follows the architecture: `http` frames bytes, `dialect` understands requests and
//! errors, `route` picks candidates, `upstream` connects, `proxy` runs the request state machine,
//! `runtime` owns the cores, `admin` serves operators, `simulate` is the fault-injecting upstream.

pub mod admin;
pub mod cli;
pub mod clients;
pub mod clock;
pub mod config;
pub mod cpu;
pub mod demo;
pub mod dialect;
pub mod flow;
pub mod http;
pub mod log;
pub mod memory;
pub mod metrics;
pub mod proxy;
pub mod resilience;
pub mod route;
pub mod runtime;
pub mod simulate;
pub mod sse;
pub mod store;
pub mod upstream;
