//! # weft-triggers
//!
//! What starts and continues Weft runs with nobody calling: cron schedules with
//! overlap and catch-up policies ([`scheduler`]), webhook signatures and delivery
//! deduplication ([`hooks`]), and waking runs whose `wait` came due ([`timers`]).
//!
//! It owns the decisions, not the storage or the doors: schedules, firings and hooks
//! live behind the store's [`weft_core::ports::TriggerStore`] (a firing is written
//! with its run, once, whichever process gets there first), and the HTTP routes, CLI
//! commands, MCP tools and page that manage them are in their own crates. It must not
//! depend on any store adapter, the server, or the command line.

pub mod counters;
pub mod cron;
pub mod hooks;
pub mod launch;
pub mod manage;
pub mod plan;
pub mod scheduler;
pub mod timers;

pub use counters::Counters;

pub use cron::CronTimes;
pub use launch::{LaunchError, Launcher};
pub use scheduler::run_schedules;
pub use timers::serve_timers;

/// Quotes what a request sent in an error message, bounded.
pub(crate) use weft_core::error::quoted;
