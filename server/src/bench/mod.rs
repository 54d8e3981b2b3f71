//! `stepwise bench`: figures for the queue and the worker, printed, never asserted. Built
//! only with the `bench` feature, so the release binary does not carry it.

pub mod queue;
pub mod worker;
