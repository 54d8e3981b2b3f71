pub mod login;
pub mod not_found;
pub mod queue;
