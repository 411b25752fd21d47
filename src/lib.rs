//! Ringside: a resilience proxy for LLM APIs.
//!
//! The crate is built in layers. A module may use only modules of its own layer or a lower one,
//! and the modules form no cycle; `tests/layering.rs` reads the `// layer N` marks below and
//! fails naming the file, line and import that breaks the rule (a module without a mark fails
//! too). The layers, from the bottom:
//!
//! | layer | what | modules |
//! |---|---|---|
//! | 0 | base: time, CPU features, a core's load, logging, names, digests, panic containment | `clock`, `timer`, `cpu`, `core_load`, `log`, `memory`, `names`, `secret`, `contain` |
//! | 1 | wire formats, and translation between the APIs' dialects | `http`, `sse`, `dialect`, `translate` |
//! | 2 | state machines and stores, each owning its settings | `resilience`, `flow`, `clients`, `store`, `audit`, `metrics` |
//! | 3 | the config file turned into typed settings | `config` |
//! | 4 | routing: route tables, strategies, load | `route` |
//! | 5 | upstream I/O | `upstream` |
//! | 6 | the per-core world: what each core owns, what cores share | `state` |
//! | 7 | the request path | `proxy` |
//! | 8 | processes: the cores, the admin port | `runtime`, `admin` |
//! | 9 | tools: a whole server, the CLI, the demo, the simulator | `server`, `cli`, `demo`, `simulate` |
//!
//! The design behind it is in `docs/architecture.md`.

// Nothing a client, an upstream or a config file sends may panic the process: no `unwrap` or
// `expect` outside tests (clippy.toml allows them in tests), checked by `.ci/run`.
#![warn(clippy::unwrap_used, clippy::expect_used)]

pub mod admin; // layer 8
pub mod audit; // layer 2
pub mod cli; // layer 9
pub mod clients; // layer 2
pub mod clock; // layer 0
pub mod config; // layer 3
pub mod contain; // layer 0
pub mod core_load; // layer 0
pub mod cpu; // layer 0
pub mod demo; // layer 9
pub mod dialect; // layer 1
pub mod drill; // layer 9
pub mod env_vars; // layer 0
pub mod fd_limit; // layer 0
pub mod fleet; // layer 7
pub mod flow; // layer 2
pub mod histogram; // layer 0
pub mod http; // layer 1
pub mod ids; // layer 0
pub mod log; // layer 0
pub mod memory; // layer 0
pub mod metrics; // layer 2
pub mod names; // layer 0
pub mod notify; // layer 0
pub mod proxy; // layer 7
pub mod resilience; // layer 2
pub mod route; // layer 4
pub mod runtime; // layer 8
pub mod saved; // layer 7
pub mod secret; // layer 0
pub mod server; // layer 9
pub mod simulate; // layer 9
pub mod sse; // layer 1
pub mod state; // layer 6
pub mod store; // layer 2
pub mod telemetry; // layer 2
#[cfg(test)]
pub mod test_driver; // layer 0
#[cfg(test)]
pub mod test_rng; // layer 0
pub mod timer; // layer 0
pub mod translate; // layer 1
pub mod upstream; // layer 5
