//! `stepwise bench`: figures for the queue, the worker and how costs grow with the work,
//! printed, never asserted. Built only with the `bench` feature, so the release binary does
//! not carry it.

mod concurrent;
mod peer;
pub mod queue;
pub mod scale;
mod watchers;
pub mod worker;
