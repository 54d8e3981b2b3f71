//! Column types whose storage differs between the backends but whose Rust value does not,
//! so one `bind` or `try_get` serves both.
//!
//! - [`Id`]: PostgreSQL `uuid`; SQLite `TEXT` (hyphenated lowercase, so text order is
//!   UUIDv7 time order and operators can read it in the sqlite3 shell).
//! - [`Ts`]: PostgreSQL `timestamptz`; SQLite `INTEGER` Unix milliseconds. sqlx would store
//!   SQLite timestamps as RFC 3339 text of varying width, which does not compare in time
//!   order; integers do. The queue's clock is truncated to milliseconds, so both backends
//!   hold exactly the same instants.

use chrono::{DateTime, Utc};
use sqlx::encode::IsNull;
use sqlx::error::BoxDynError;
use sqlx::postgres::{PgArgumentBuffer, PgTypeInfo, PgValueRef};
use sqlx::sqlite::{SqliteArgumentValue, SqliteTypeInfo, SqliteValueRef};
use sqlx::{Decode, Encode, Postgres, Sqlite, Type};
use uuid::Uuid;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Id(pub Uuid);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ts(pub DateTime<Utc>);

impl Type<Sqlite> for Id {
    fn type_info() -> SqliteTypeInfo {
        <String as Type<Sqlite>>::type_info()
    }
    fn compatible(ty: &SqliteTypeInfo) -> bool {
        <String as Type<Sqlite>>::compatible(ty)
    }
}

impl<'q> Encode<'q, Sqlite> for Id {
    fn encode_by_ref(&self, buf: &mut Vec<SqliteArgumentValue<'q>>) -> Result<IsNull, BoxDynError> {
        <String as Encode<'q, Sqlite>>::encode(self.0.hyphenated().to_string(), buf)
    }
}

impl<'r> Decode<'r, Sqlite> for Id {
    fn decode(value: SqliteValueRef<'r>) -> Result<Self, BoxDynError> {
        let text = <&str as Decode<'r, Sqlite>>::decode(value)?;
        Ok(Id(Uuid::parse_str(text)?))
    }
}

impl Type<Postgres> for Id {
    fn type_info() -> PgTypeInfo {
        <Uuid as Type<Postgres>>::type_info()
    }
    fn compatible(ty: &PgTypeInfo) -> bool {
        <Uuid as Type<Postgres>>::compatible(ty)
    }
}

impl Encode<'_, Postgres> for Id {
    fn encode_by_ref(&self, buf: &mut PgArgumentBuffer) -> Result<IsNull, BoxDynError> {
        <Uuid as Encode<Postgres>>::encode_by_ref(&self.0, buf)
    }
}

impl<'r> Decode<'r, Postgres> for Id {
    fn decode(value: PgValueRef<'r>) -> Result<Self, BoxDynError> {
        Ok(Id(<Uuid as Decode<'r, Postgres>>::decode(value)?))
    }
}

impl Type<Sqlite> for Ts {
    fn type_info() -> SqliteTypeInfo {
        <i64 as Type<Sqlite>>::type_info()
    }
    fn compatible(ty: &SqliteTypeInfo) -> bool {
        <i64 as Type<Sqlite>>::compatible(ty)
    }
}

impl<'q> Encode<'q, Sqlite> for Ts {
    fn encode_by_ref(&self, buf: &mut Vec<SqliteArgumentValue<'q>>) -> Result<IsNull, BoxDynError> {
        <i64 as Encode<'q, Sqlite>>::encode(self.0.timestamp_millis(), buf)
    }
}

impl<'r> Decode<'r, Sqlite> for Ts {
    fn decode(value: SqliteValueRef<'r>) -> Result<Self, BoxDynError> {
        let millis = <i64 as Decode<'r, Sqlite>>::decode(value)?;
        DateTime::from_timestamp_millis(millis)
            .map(Ts)
            .ok_or_else(|| format!("timestamp {millis} ms is out of range").into())
    }
}

impl Type<Postgres> for Ts {
    fn type_info() -> PgTypeInfo {
        <DateTime<Utc> as Type<Postgres>>::type_info()
    }
    fn compatible(ty: &PgTypeInfo) -> bool {
        <DateTime<Utc> as Type<Postgres>>::compatible(ty)
    }
}

impl Encode<'_, Postgres> for Ts {
    fn encode_by_ref(&self, buf: &mut PgArgumentBuffer) -> Result<IsNull, BoxDynError> {
        <DateTime<Utc> as Encode<Postgres>>::encode_by_ref(&self.0, buf)
    }
}

impl<'r> Decode<'r, Postgres> for Ts {
    fn decode(value: PgValueRef<'r>) -> Result<Self, BoxDynError> {
        Ok(Ts(<DateTime<Utc> as Decode<'r, Postgres>>::decode(value)?))
    }
}

pub(crate) fn ts(at: Option<DateTime<Utc>>) -> Option<Ts> {
    at.map(Ts)
}
