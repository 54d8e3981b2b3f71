//! `stepwise token …`: token management on the server's machine, straight on the database
//! (like `migrate`), so that an admin can always get in, even with no token left.

use clap::{Args, Subcommand};
use queue::{Role, TokenKind, TokenRecord};

use super::db::{DbArgs, QueueSettings, open_queue};
use super::error::CliError;
use crate::http::auth::{self, Scope};

#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Create a token and print its secret, once.
    Create(CreateArgs),
    /// List tokens (never their secrets).
    List(DbArgs),
    /// Revoke a token by id; it stops working at once.
    Revoke {
        /// The id `token list` shows.
        id: String,
        #[command(flatten)]
        db: DbArgs,
    },
}

#[derive(Debug, Args)]
pub struct CreateArgs {
    /// Who or what holds it; a worker token's name is also the worker's id.
    #[arg(long)]
    name: String,
    /// `user` (people: UI, REST, CLI, MCP) or `worker`.
    #[arg(long, default_value = "user")]
    kind: String,
    /// For user tokens: admin, operator (submit and cancel) or viewer (read only).
    #[arg(long, default_value = "operator")]
    role: String,
    /// For worker tokens: a capability it may claim with (repeat); default any.
    #[arg(long = "capability")]
    capabilities: Vec<String>,
    /// For worker tokens: a repository it may run (repeat); default any.
    #[arg(long = "repository")]
    repositories: Vec<String>,
    /// For worker tokens: a job type it may claim (repeat); default any.
    #[arg(long = "job-type")]
    job_types: Vec<String>,
    #[command(flatten)]
    db: DbArgs,
}

fn some_if_any(list: Vec<String>) -> Option<Vec<String>> {
    (!list.is_empty()).then_some(list)
}

impl TokenCommand {
    pub async fn run(self) -> Result<(), CliError> {
        match self {
            TokenCommand::Create(args) => create(args).await,
            TokenCommand::List(db) => {
                let queue = open_queue(&db, QueueSettings::default()).await?;
                let tokens = queue.list_tokens().await?;
                if tokens.is_empty() {
                    println!("no tokens; `stepwise serve` creates the first admin token");
                }
                for token in tokens {
                    println!("{}", describe(&token));
                }
                Ok(())
            }
            TokenCommand::Revoke { id, db } => {
                let queue = open_queue(&db, QueueSettings::default()).await?;
                let token = queue.revoke_token(&id).await?;
                println!("revoked {}", describe(&token));
                Ok(())
            }
        }
    }
}

async fn create(args: CreateArgs) -> Result<(), CliError> {
    let kind: TokenKind = args
        .kind
        .parse()
        .map_err(|e| CliError::Usage(format!("--kind: {e}; use user or worker")))?;
    let scope = match kind {
        TokenKind::User => {
            if !(args.capabilities.is_empty()
                && args.repositories.is_empty()
                && args.job_types.is_empty())
            {
                return Err(CliError::Usage(
                    "--capability, --repository and --job-type scope worker tokens; add --kind worker".into(),
                ));
            }
            let role: Role = args.role.parse().map_err(|e| {
                CliError::Usage(format!("--role: {e}; use admin, operator or viewer"))
            })?;
            Scope {
                role: Some(role),
                capabilities: None,
                allowed_repositories: None,
                allowed_job_types: None,
            }
        }
        TokenKind::Worker => Scope {
            role: None,
            capabilities: some_if_any(args.capabilities),
            allowed_repositories: some_if_any(args.repositories),
            allowed_job_types: some_if_any(args.job_types),
        },
    };
    let queue = open_queue(&args.db, QueueSettings::default()).await?;
    let minted = auth::mint(&args.name, kind, scope).map_err(CliError::Bootstrap)?;
    let token = queue.create_token(minted.record).await?;
    println!("created {}", describe(&token));
    println!("secret (shown only now): {}", minted.secret);
    Ok(())
}

fn describe(t: &TokenRecord) -> String {
    let scope = match t.kind {
        TokenKind::User => t.role.map(Role::as_str).unwrap_or("?").to_string(),
        TokenKind::Worker => {
            let list = |l: &Option<Vec<String>>| {
                l.as_ref()
                    .map(|v| v.join(","))
                    .unwrap_or_else(|| "any".into())
            };
            format!(
                "capabilities={} repositories={} job-types={}",
                list(&t.capabilities),
                list(&t.allowed_repositories),
                list(&t.allowed_job_types)
            )
        }
    };
    let state = if t.revoked_at.is_some() {
        " REVOKED"
    } else {
        ""
    };
    format!(
        "{}  {} {}  {}…  {}{}",
        t.id,
        t.kind.as_str(),
        t.name,
        t.token_prefix,
        scope,
        state
    )
}
