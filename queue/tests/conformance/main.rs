//! The queue conformance suite: every case runs unchanged against SQLite and PostgreSQL
//! (`sqlite::…` and `postgres::…`). One binary, so it links once.
//!
//! PostgreSQL must be reachable (see `harness.rs`); when it is not, the `postgres::` cases
//! fail with a message saying how to start it. They are never skipped.

mod harness;

mod artifacts;
mod batches;
mod budget;
mod cancel;
mod claim;
mod concurrency;
mod dependencies;
mod events;
mod fencing;
mod finishes;
mod golden;
mod handoff;
mod health;
mod kept;
mod lifecycle;
mod limits;
mod listing;
mod live;
mod notify;
mod outbox;
mod pauses;
mod replies;
mod rescuer;
mod retention;
mod retry;
mod rounds;
mod schedule;
mod schedules;
mod text;
mod tokens;
mod usage;
mod vacuum;
mod watches;
mod workers;

/// Instantiates each `module::case` once per backend.
macro_rules! conformance {
    ($($module:ident :: $case:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    crate::harness::run(crate::harness::Backend::Sqlite, crate::$module::$case)
                        .await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    crate::harness::run(crate::harness::Backend::Postgres, crate::$module::$case)
                        .await;
                }
            )*
        }
    };
}

conformance! {
    golden::a_job_that_succeeds_reads_as_it_always_did,
    golden::a_job_that_fails_reads_as_it_always_did,
    golden::a_job_that_retries_reads_as_it_always_did,
    golden::a_job_whose_lease_expires_reads_as_it_always_did,
    golden::jobs_cancelled_queued_and_running_read_as_they_always_did,
    golden::a_job_paused_and_resumed_reads_as_it_always_did,
    golden::a_job_approved_at_its_gate_reads_as_it_always_did,
    golden::a_job_looped_and_followed_up_reads_as_it_always_did,
    golden::jobs_claimed_and_completed_in_batches_read_as_they_always_did,
    finishes::a_job_completed_with_its_next_claim_reads_as_one_completed_alone,
    finishes::the_next_jobs_are_leased_in_claim_order_once_the_completion_is_written,
    finishes::a_refused_completion_or_claim_writes_nothing,
    finishes::the_next_claim_keeps_to_the_worker_s_capabilities_and_repository_limit,
    finishes::concurrent_finishes_complete_every_job_once_and_lease_none_twice,
    kept::a_success_is_kept_in_its_row_until_the_job_changes_again,
    kept::a_success_kept_in_its_row_comes_after_an_event_appended_while_it_waited,
    kept::a_claim_is_kept_in_its_row_while_its_attempt_stands,
    kept::a_claim_is_written_out_when_its_attempt_ends_otherwise,
    kept::a_kept_claim_reads_in_order_with_the_job_s_events,
    kept::a_kept_claim_comes_after_an_event_appended_under_another_lock,
    kept::a_success_stays_kept_while_events_are_appended_after_it,
    dependencies::unknown_or_failed_dependencies_are_refused_by_their_place,
    dependencies::a_waiting_job_is_claimed_only_once_every_dependency_succeeded,
    dependencies::a_failed_dependency_cancels_its_waiting_jobs_naming_it,
    schedules::a_schedule_s_problems_are_named_by_their_field,
    schedules::a_slot_makes_exactly_one_job_however_many_replicas_pass,
    schedules::skip_makes_no_job_while_the_previous_one_goes_on,
    schedules::missed_slots_run_at_most_the_latest_and_only_with_catch_up,
    schedules::a_paused_schedule_makes_nothing_and_resumes_at_its_next_slot,
    replies::a_delivery_makes_one_job_and_its_reply_is_due_with_it,
    replies::a_reply_is_held_by_one_replica_and_due_again_when_its_job_ends,
    watches::a_completion_that_wants_feedback_is_watched_by_one_replica_at_a_time,
    watches::each_cause_of_feedback_makes_one_round,
    watches::a_person_is_asked_once_and_a_later_completion_watches_again,
    outbox::a_job_s_end_is_in_the_outbox_with_its_event_and_nothing_else_is,
    outbox::a_notification_is_held_by_one_replica_and_settled_only_under_its_claim,
    outbox::a_claim_whose_holder_went_silent_is_taken_over_when_its_lease_ends,
    outbox::with_no_replica_listening_an_end_writes_no_notification,
    outbox::every_way_a_job_ends_is_told_with_the_state_it_ended_in,
    outbox::every_way_a_success_is_written_tells_it_once_with_its_event,
    retention::a_finished_job_keeps_its_history_for_thirty_days_then_only_its_row_and_one_event,
    retention::log_lines_go_after_a_day_where_the_step_s_log_artifact_holds_them,
    retention::queued_running_and_recent_jobs_are_never_touched,
    retention::a_job_retried_after_its_history_went_is_due_again_once_it_finishes_again,
    retention::job_rows_are_deleted_only_when_asked_and_their_history_goes_first,
    retention::two_replicas_at_once_delete_each_history_once,
    retention::jobs_that_finished_in_one_millisecond_are_compacted_across_batches,
    retention::a_job_passed_over_before_it_finished_is_done_once_its_end_is_old_enough,
    live::a_job_has_a_live_row_exactly_while_it_is_queued_or_running,
    live::a_claimed_job_reads_its_lease_from_its_live_row,
    retention::a_job_left_waiting_holds_back_none_of_those_after_it,
    retention::a_walk_passes_no_job_younger_than_its_slack,
    limits::a_repository_at_its_limit_waits_while_other_repositories_go_first,
    limits::one_repository_written_several_ways_is_one_for_the_limit_and_for_a_token,
    limits::a_batch_never_takes_more_of_a_repository_than_its_limit_allows,
    limits::a_worker_s_own_limit_tightens_the_queue_s_and_zero_is_refused,
    limits::concurrent_claimers_never_run_more_of_a_repository_than_its_limit,
    limits::a_waiting_claimer_under_a_limit_is_woken_to_claim_a_job_it_may_run,
    schedule::a_scheduled_job_is_not_claimed_before_its_time,
    schedule::a_start_in_the_past_runs_at_once_and_a_bad_one_is_named,
    health::a_migrated_queue_is_ready,
    health::a_missing_migration_makes_the_queue_unready_and_is_named,
    health::a_schema_newer_than_the_build_makes_the_queue_unready,
    health::a_database_without_the_schema_is_not_ready,
    pauses::pausing_a_queued_job_pauses_it_at_once_and_no_claim_takes_it,
    pauses::a_running_job_pauses_at_its_latest_checkpoint_and_releases_its_lease,
    pauses::a_job_resumes_from_a_chosen_checkpoint_and_refuses_an_unknown_one,
    pauses::pause_then_lease_expiry_pauses_the_job_at_its_latest_checkpoint,
    pauses::lease_expiry_then_pause_pauses_the_requeued_job,
    pauses::complete_wins_over_a_pause_requested_too_late,
    pauses::a_paused_job_cannot_be_completed_by_its_old_worker,
    pauses::a_cancel_requested_before_the_pause_is_acknowledged_wins,
    pauses::resume_then_cancel_cancels_the_queued_job,
    pauses::cancel_then_resume_is_refused_and_the_job_stays_cancelled,
    pauses::resume_withdraws_a_pause_not_yet_obeyed,
    pauses::a_retryable_failure_after_a_pause_request_pauses_instead_of_retrying,
    pauses::a_failed_job_retries_from_the_failed_step_with_the_checkpoint_before_it,
    pauses::a_cancelled_job_retries_from_the_start_and_forgets_the_cancel,
    pauses::a_job_awaiting_approval_holds_nothing_and_approving_queues_it_to_publish,
    pauses::rejecting_fails_the_job_with_the_reason_and_a_retry_asks_again,
    pauses::a_cancel_ends_a_job_awaiting_approval_and_wins_over_the_request,
    pauses::a_worker_without_the_lease_cannot_ask_for_approval,
    pauses::steps_appended_to_a_paused_job_are_checked_as_at_submit_and_kept,
    pauses::appending_a_step_sends_a_job_back_from_the_gate_to_run_it,
    pauses::a_running_job_takes_steps_until_its_last_step_has_ended,
    pauses::a_running_job_resumed_past_its_steps_takes_none,
    lifecycle::created_job_is_queued_with_normalized_fields,
    lifecycle::seed_example_payload_is_stored_as_normalized,
    lifecycle::invalid_task_is_refused_with_field_errors,
    lifecycle::claim_leases_the_job_and_records_the_claim,
    lifecycle::a_claim_event_names_a_worker_of_any_text_verbatim,
    lifecycle::heartbeat_extends_the_lease_without_an_event,
    lifecycle::complete_finishes_the_job,
    lifecycle::repeated_complete_by_the_same_worker_is_a_no_op,
    lifecycle::finished_job_refuses_worker_writes_with_a_state_conflict,
    lifecycle::unknown_job_is_not_found_everywhere,
    lifecycle::migrating_again_changes_nothing,
    claim::claim_takes_higher_priority_first_then_oldest,
    claim::jobs_created_in_the_same_millisecond_are_claimed_in_creation_order,
    claim::claim_requires_every_capability_of_the_job,
    claim::claim_respects_allowed_types_and_repositories,
    claim::claim_with_nothing_claimable_returns_none,
    claim::claim_refuses_a_blank_worker_or_an_empty_lease,
    retry::retryable_failure_requeues_after_exponential_backoff,
    retry::backoff_is_capped,
    retry::retryable_failure_on_the_last_attempt_dead_letters,
    retry::non_retryable_failure_fails_the_job,
    cancel::cancelling_a_queued_job_cancels_it_at_once,
    cancel::cancelling_a_running_job_only_marks_it,
    cancel::worker_acknowledges_a_requested_cancel,
    cancel::repeated_cancel_requests_are_no_ops,
    cancel::repeated_ack_by_the_same_worker_is_a_no_op,
    cancel::ack_without_a_cancel_request_is_a_state_conflict,
    cancel::ack_by_a_worker_without_the_lease_is_refused,
    cancel::cancelling_a_finished_job_is_a_state_conflict,
    cancel::late_cancel_keeps_the_actual_result,
    cancel::failure_after_a_cancel_request_cancels_instead_of_retrying,
    cancel::cancel_before_claim_makes_the_job_unclaimable,
    cancel::claim_before_cancel_leaves_the_stop_to_the_worker,
    cancel::racing_cancel_and_claim_agree,
    fencing::stale_worker_cannot_write_after_another_reclaimed_the_job,
    fencing::stale_worker_cannot_complete_reclaimed_job,
    fencing::requeued_job_refuses_its_former_worker,
    fencing::lease_expired_but_not_yet_taken_back_can_still_be_extended,
    fencing::a_replica_answers_from_the_row_not_from_what_it_last_wrote,
    fencing::a_worker_naming_no_attempt_is_fenced_on_the_lease_it_holds,
    rescuer::expired_lease_is_requeued_with_the_attempt_kept,
    rescuer::expired_lease_with_a_cancel_request_is_cancelled,
    rescuer::expired_lease_on_the_last_attempt_dead_letters,
    rescuer::heartbeating_job_is_never_rescued,
    rescuer::rescuer_handles_more_jobs_than_one_batch,
    rescuer::rescuer_runs_in_the_background_until_stopped,
    events::a_cursor_reader_never_skips_events_written_concurrently,
    events::worker_events_are_listed_in_order_with_cursor_paging,
    events::event_ids_grow_across_jobs,
    events::reserved_and_malformed_event_kinds_are_refused,
    events::a_timeline_is_read_from_its_end_or_without_its_log_lines,
    events::finished_steps_are_counted_for_the_current_attempt_only,
    events::watchers_following_a_job_each_get_every_event_after_their_cursor_once,
    artifacts::artifact_is_stored_with_its_size_and_sha256,
    artifacts::reuploading_an_artifact_replaces_it,
    artifacts::artifact_names_that_could_escape_are_refused,
    artifacts::artifact_paths_that_collide_are_refused,
    artifacts::oversized_artifact_is_refused,
    artifacts::unknown_artifact_is_not_found,
    artifacts::an_artifact_is_read_by_id_up_to_a_limit,
    artifacts::a_large_artifact_goes_in_and_out_in_pieces_through_any_replica,
    artifacts::an_artifact_name_part_too_long_for_a_file_system_is_refused,
    text::a_nul_typed_into_a_task_is_refused_at_its_field,
    text::a_nul_in_a_cancel_reason_or_a_filter_is_refused,
    text::a_nul_in_what_a_worker_offers_is_refused,
    text::a_nul_an_agent_printed_is_stored_replaced,
    text::reported_text_past_its_limit_is_refused_whole,
    notify::created_job_wakes_a_waiting_claim_at_once,
    notify::claim_wait_gives_up_at_the_deadline,
    notify::claim_wait_notices_an_elapsed_retry_window,
    notify::step_progress_is_announced_but_log_lines_are_not,
    handoff::a_job_created_while_a_claimer_waits_is_handed_to_it_in_one_write,
    handoff::a_waiting_claimer_is_not_handed_a_job_it_may_not_run,
    handoff::a_claimer_that_left_is_not_handed_a_job,
    handoff::jobs_created_together_go_one_to_each_waiting_claimer,
    notify::every_change_is_broadcast_once_to_subscribers,
    notify::second_replica_hears_changes_through_the_database,
    notify::own_notifications_are_not_repeated,
    notify::a_job_reaches_the_idle_worker_that_can_run_it,
    concurrency::concurrent_claimers_claim_every_job_exactly_once,
    concurrency::racing_heartbeats_never_undo_a_cancel_request,
    concurrency::claimers_asking_for_different_things_at_once_each_get_only_what_they_can_run,
    concurrency::completions_at_once_each_get_their_own_answer_and_event,
    concurrency::every_write_of_a_running_job_at_once_ends_without_a_deadlock,
    batches::claim_many_leases_up_to_the_limit_in_claim_order,
    batches::claim_many_refuses_a_limit_out_of_range,
    batches::complete_many_answers_each_job_and_a_refused_one_holds_back_no_other,
    batches::complete_many_decides_on_the_row_what_another_replica_changed_and_a_job_named_twice,
    batches::batch_claimers_and_completers_run_every_job_exactly_once,
    tokens::token_is_found_by_hash_until_revoked,
    tokens::worker_token_keeps_its_scopes,
    tokens::inconsistent_tokens_are_refused,
    tokens::unknown_token_is_not_found,
    tokens::session_stands_for_its_token_until_it_expires,
    tokens::revoking_a_token_ends_its_sessions_and_logout_ends_one,
    tokens::login_code_is_redeemed_once_and_only_before_it_expires,
    tokens::only_a_live_user_token_can_open_a_session,
    tokens::the_first_token_is_made_once_however_many_replicas_ask_at_once,
    workers::a_worker_is_remembered_with_what_it_can_run_and_what_it_holds,
    listing::jobs_are_listed_newest_first_in_keyset_pages,
    listing::listing_filters_by_state_and_type,
    listing::every_state_is_listed_and_counted,
    listing::states_with_no_job_are_not_counted,
    listing::a_cursor_the_queue_did_not_issue_is_refused,
    usage::a_jobs_usage_totals_the_usage_of_its_finished_steps,
    usage::usage_keeps_counting_across_attempts,
    usage::a_malformed_step_usage_is_refused_by_field_and_adds_nothing,
    budget::a_budget_reached_asks_the_running_job_to_pause_once_and_its_ack_pauses_it_for_the_budget,
    budget::minutes_reached_ask_for_an_immediate_pause_and_tokens_count_input_and_output,
    budget::a_budget_is_checked_by_name_and_a_spent_one_keeps_a_retry_from_running,
    budget::a_budget_reached_is_in_the_webhook_outbox_as_its_own_event,
    rounds::a_follow_up_queues_the_ended_job_as_its_next_round_to_run_only_its_steps,
    rounds::only_a_job_that_succeeded_or_failed_takes_a_follow_up_and_its_steps_are_checked,
    rounds::a_job_whose_history_was_deleted_takes_no_follow_up,
    vacuum::the_live_table_is_vacuumed_once_enough_of_it_is_dead,
}
