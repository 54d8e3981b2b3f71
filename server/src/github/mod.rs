//! GitHub as a source of work: a delivery to `POST /api/integrations/github` that a rule
//! of `--github-rules` is about (an issue labeled, a comment that mentions stepwise)
//! becomes a job (`intake.rs`, by `rules.rs`), and the server answers on the issue
//! (`replies.rs`). `api.rs` is GitHub's REST API as the server calls it, pull request
//! feedback included.

pub mod api;
pub mod intake;
pub mod replies;
pub mod rules;
