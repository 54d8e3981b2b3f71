//! The queue engine: where jobs are stored and moved between states, behind one store
//! interface with two backends (SQLite embedded, PostgreSQL for many nodes).
//! It knows nothing of HTTP, pages or agents; the server and the UI call into it.

mod database;

pub use database::{Database, DatabaseError};
