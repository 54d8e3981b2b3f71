//! Behaviour tests of the task contract, one binary (fast to link on small machines).

mod capabilities;
mod checklist;
mod common;
mod completion;
mod defaults;
mod envelope;
mod payload;
mod prompt;
mod properties;
mod resolution;
mod seed_example;
mod steps;
