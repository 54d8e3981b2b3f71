pub mod artifact;
pub mod job;
pub mod login;
pub mod new_task;
pub mod not_found;
pub mod queue;
pub mod schedules;
pub mod workers;
