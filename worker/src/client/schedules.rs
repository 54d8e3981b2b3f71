//! The schedules' routes (user token): make, list, read, pause, resume and delete a
//! recurring task.

use contract::api::{Schedule, ScheduleList};
use reqwest::Method;

use super::{QueueClient, Result};

impl QueueClient {
    /// `POST /schedules`: makes the schedule `request` (a `ScheduleRequest`) asks for.
    pub async fn create_schedule(&self, request: &serde_json::Value) -> Result<Schedule> {
        let url = self.url(&["schedules"]);
        self.fetch(self.request(Method::POST, &url).json(request), &url)
            .await
    }

    pub async fn list_schedules(&self) -> Result<Vec<Schedule>> {
        let url = self.url(&["schedules"]);
        let list: ScheduleList = self.fetch(self.request(Method::GET, &url), &url).await?;
        Ok(list.items)
    }

    pub async fn get_schedule(&self, id: &str) -> Result<Schedule> {
        let url = self.url(&["schedules", id]);
        self.fetch(self.request(Method::GET, &url), &url).await
    }

    pub async fn pause_schedule(&self, id: &str) -> Result<Schedule> {
        let url = self.url(&["schedules", id, "pause"]);
        self.fetch(self.request(Method::POST, &url), &url).await
    }

    pub async fn resume_schedule(&self, id: &str) -> Result<Schedule> {
        let url = self.url(&["schedules", id, "resume"]);
        self.fetch(self.request(Method::POST, &url), &url).await
    }

    /// `DELETE /schedules/{id}`; the jobs it made stay.
    pub async fn delete_schedule(&self, id: &str) -> Result<()> {
        let url = self.url(&["schedules", id]);
        self.send(self.request(Method::DELETE, &url), &url)
            .await
            .map(drop)
    }
}
