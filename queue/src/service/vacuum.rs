//! What the live table's vacuum asks of the store ([`crate::Vacuum`] decides when).

use super::Queue;
use crate::error::QueueError;
use crate::store::LiveDead;

impl Queue {
    /// How much of the live table is dead; `None` where there is nothing to vacuum.
    pub(crate) async fn live_dead(&self) -> Result<Option<LiveDead>, QueueError> {
        Ok(self.inner.db.live_dead().await?)
    }

    /// Whether it vacuumed: not while another replica does.
    pub(crate) async fn vacuum_live(&self) -> Result<bool, QueueError> {
        Ok(self.inner.db.vacuum_live().await?)
    }
}
