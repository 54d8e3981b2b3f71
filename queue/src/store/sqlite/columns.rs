//! Binding and decoding on rusqlite: the store's [`Arg`]s bound to `$N` placeholders, and
//! columns read with sqlx's types, so the decoders of `store/mod.rs` run unchanged on a
//! rusqlite row.

use chrono::DateTime;
use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{Statement, ToSql};
use serde::de::DeserializeOwned;
use sqlx::types::Json;

use crate::store::{Arg, Id, Ts, decode_err};

/// Binds `args` to a statement written with sqlx's `$N` placeholders: SQLite numbers named
/// parameters by first appearance, so `$N` is looked up by name, as sqlx does, rather than
/// trusted to be the N-th parameter. The SQL text is then the same for both drivers.
pub(crate) fn bind(stmt: &mut Statement<'_>, args: &[Arg<'_>]) -> rusqlite::Result<()> {
    for index in 1..=stmt.parameter_count() {
        let n = stmt
            .parameter_name(index)
            .and_then(|name| name.strip_prefix('$'))
            .and_then(|n| n.parse::<usize>().ok())
            .filter(|n| (1..=args.len()).contains(n))
            .ok_or(rusqlite::Error::InvalidParameterCount(index, args.len()))?;
        stmt.raw_bind_parameter(index, &args[n - 1])?;
    }
    Ok(())
}

impl ToSql for Arg<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match self {
            Arg::Id(id) => ToSqlOutput::from(id.hyphenated().to_string()),
            Arg::Text(text) => text.to_sql()?,
            Arg::Int(n) => ToSqlOutput::from(*n),
            Arg::BigInt(n) => ToSqlOutput::from(*n),
            Arg::Ts(at) => match at {
                Some(at) => ToSqlOutput::from(at.timestamp_millis()),
                None => ToSqlOutput::from(rusqlite::types::Null),
            },
            Arg::Json(value) => ToSqlOutput::from(value.to_string()),
            Arg::JsonOpt(value) => match value {
                Some(value) => ToSqlOutput::from(value.to_string()),
                None => ToSqlOutput::from(rusqlite::types::Null),
            },
            Arg::TextList(list) => match list {
                Some(list) => ToSqlOutput::from(json_text(list)?),
                None => ToSqlOutput::from(rusqlite::types::Null),
            },
        })
    }
}

/// JSON text for a TEXT column checked with `json_valid`.
pub(crate) fn json_text<T: serde::Serialize + ?Sized>(value: &T) -> rusqlite::Result<String> {
    serde_json::to_string(value).map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))
}

/// A column value decoded the way the sqlx side decodes it, so the row decoders of
/// `store/mod.rs` run unchanged on a rusqlite row.
pub(crate) trait FromColumn: Sized {
    fn from_column(value: ValueRef<'_>) -> Result<Self, sqlx::Error>;
}

fn mismatch(expected: &str, value: ValueRef<'_>) -> sqlx::Error {
    decode_err(std::io::Error::other(format!(
        "expected {expected}, found {}",
        value.data_type()
    )))
}

impl FromColumn for String {
    fn from_column(value: ValueRef<'_>) -> Result<Self, sqlx::Error> {
        match value {
            ValueRef::Text(bytes) => String::from_utf8(bytes.to_vec()).map_err(decode_err),
            other => Err(mismatch("TEXT", other)),
        }
    }
}

impl FromColumn for i64 {
    fn from_column(value: ValueRef<'_>) -> Result<Self, sqlx::Error> {
        match value {
            ValueRef::Integer(n) => Ok(n),
            other => Err(mismatch("INTEGER", other)),
        }
    }
}

impl FromColumn for i32 {
    fn from_column(value: ValueRef<'_>) -> Result<Self, sqlx::Error> {
        i32::try_from(i64::from_column(value)?).map_err(decode_err)
    }
}

impl FromColumn for Id {
    fn from_column(value: ValueRef<'_>) -> Result<Self, sqlx::Error> {
        match value {
            ValueRef::Text(bytes) => uuid::Uuid::try_parse_ascii(bytes)
                .map(Id)
                .map_err(decode_err),
            other => Err(mismatch("a UUID as TEXT", other)),
        }
    }
}

impl FromColumn for Ts {
    fn from_column(value: ValueRef<'_>) -> Result<Self, sqlx::Error> {
        let millis = i64::from_column(value)?;
        DateTime::from_timestamp_millis(millis)
            .map(Ts)
            .ok_or_else(|| {
                decode_err(std::io::Error::other(format!(
                    "timestamp {millis} ms is out of range"
                )))
            })
    }
}

impl<T: DeserializeOwned> FromColumn for Json<T> {
    fn from_column(value: ValueRef<'_>) -> Result<Self, sqlx::Error> {
        match value {
            ValueRef::Text(bytes) => serde_json::from_slice(bytes).map(Json).map_err(decode_err),
            other => Err(mismatch("JSON TEXT", other)),
        }
    }
}

impl<T: FromColumn> FromColumn for Option<T> {
    fn from_column(value: ValueRef<'_>) -> Result<Self, sqlx::Error> {
        match value {
            ValueRef::Null => Ok(None),
            other => T::from_column(other).map(Some),
        }
    }
}

/// `try_get` by column name on a rusqlite row, with sqlx's signature and errors.
pub(crate) trait RowExt {
    fn try_get<T: FromColumn, I: AsRef<str>>(&self, name: I) -> Result<T, sqlx::Error>;
}

impl RowExt for rusqlite::Row<'_> {
    fn try_get<T: FromColumn, I: AsRef<str>>(&self, name: I) -> Result<T, sqlx::Error> {
        let name = name.as_ref();
        let value = self
            .get_ref(name)
            .map_err(|_| sqlx::Error::ColumnNotFound(name.to_string()))?;
        T::from_column(value)
    }
}
