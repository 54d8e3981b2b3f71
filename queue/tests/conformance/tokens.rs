//! API token storage.

use std::time::Duration;

use queue::{NewToken, Role, SessionPurpose, TokenKind};

use crate::harness::*;

fn hash(n: u8) -> String {
    format!("{:064x}", n)
}

fn user(name: &str, n: u8, role: Role) -> NewToken {
    NewToken {
        name: name.into(),
        kind: TokenKind::User,
        role: Some(role),
        token_hash: hash(n),
        token_prefix: "sw_u_abcd".into(),
        capabilities: None,
        allowed_repositories: None,
        allowed_job_types: None,
    }
}

pub async fn token_is_found_by_hash_until_revoked(h: Harness) {
    assert_eq!(h.queue.count_tokens().await.unwrap(), 0);
    let created = h
        .queue
        .create_token(user("admin", 1, Role::Admin))
        .await
        .unwrap();
    assert_eq!(created.kind, TokenKind::User);
    assert_eq!(created.role, Some(Role::Admin));
    assert_eq!(created.token_hash, hash(1));
    assert_eq!(created.created_at, start_time());
    assert_eq!(created.last_used_at, None);
    assert_eq!(created.revoked_at, None);
    assert_eq!(h.queue.count_tokens().await.unwrap(), 1);
    assert_eq!(
        h.queue.find_token_by_hash(&hash(1)).await.unwrap(),
        Some(created.clone())
    );
    assert_eq!(h.queue.find_token_by_hash(&hash(2)).await.unwrap(), None);

    h.advance(Duration::from_secs(10));
    h.queue.touch_token(&created.id).await.unwrap();
    let touched = h.queue.find_token_by_hash(&hash(1)).await.unwrap().unwrap();
    assert_eq!(
        touched.last_used_at,
        Some(start_time() + Duration::from_secs(10))
    );

    h.advance(Duration::from_secs(10));
    let revoked = h.queue.revoke_token(&created.id).await.unwrap();
    let revoked_at = start_time() + Duration::from_secs(20);
    assert_eq!(revoked.revoked_at, Some(revoked_at));
    assert_eq!(h.queue.find_token_by_hash(&hash(1)).await.unwrap(), None);
    assert_eq!(h.queue.count_tokens().await.unwrap(), 0);
    h.advance(Duration::from_secs(10));
    let again = h.queue.revoke_token(&created.id).await.unwrap();
    assert_eq!(again.revoked_at, Some(revoked_at));
    let listed = h.queue.list_tokens().await.unwrap();
    assert_eq!(listed, [again]);
}

pub async fn worker_token_keeps_its_scopes(h: Harness) {
    let worker = NewToken {
        name: "builder-1".into(),
        kind: TokenKind::Worker,
        role: None,
        token_hash: hash(3),
        token_prefix: "sw_w_1234".into(),
        capabilities: Some(vec!["codex".into(), "git".into()]),
        allowed_repositories: Some(vec!["octo/repo".into()]),
        allowed_job_types: None,
    };
    let created = h.queue.create_token(worker.clone()).await.unwrap();
    let found = h.queue.find_token_by_hash(&hash(3)).await.unwrap().unwrap();
    assert_eq!(found, created);
    assert_eq!(found.role, None);
    assert_eq!(found.capabilities, worker.capabilities);
    assert_eq!(found.allowed_repositories, worker.allowed_repositories);
    assert_eq!(found.allowed_job_types, None);
    let viewer = h
        .queue
        .create_token(user("viewer", 4, Role::Viewer))
        .await
        .unwrap();
    let listed: Vec<String> = h
        .queue
        .list_tokens()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(listed, [viewer.name, created.name]);
}

pub async fn inconsistent_tokens_are_refused(h: Harness) {
    let no_role = NewToken {
        role: None,
        ..user("u", 5, Role::Admin)
    };
    let worker_with_role = NewToken {
        kind: TokenKind::Worker,
        ..user("w", 6, Role::Operator)
    };
    let user_with_scope = NewToken {
        capabilities: Some(vec![]),
        ..user("u", 7, Role::Operator)
    };
    let secret_not_hash = NewToken {
        token_hash: "sw_u_plaintext-secret".into(),
        ..user("u", 8, Role::Viewer)
    };
    for bad in [no_role, worker_with_role, user_with_scope, secret_not_hash] {
        assert_code(h.queue.create_token(bad).await, "invalid_queue_payload");
    }
    h.queue
        .create_token(user("a", 9, Role::Viewer))
        .await
        .unwrap();
    assert_code(
        h.queue.create_token(user("b", 9, Role::Admin)).await,
        "invalid_queue_payload",
    );
    assert_eq!(h.queue.list_tokens().await.unwrap().len(), 1);
}

pub async fn unknown_token_is_not_found(h: Harness) {
    let id = uuid::Uuid::now_v7().to_string();
    assert_code(h.queue.revoke_token(&id).await, "token_not_found");
    assert_code(h.queue.touch_token(&id).await, "token_not_found");
    assert_code(h.queue.revoke_token("nope").await, "token_not_found");
}

pub async fn session_stands_for_its_token_until_it_expires(h: Harness) {
    let admin = h
        .queue
        .create_token(user("admin", 10, Role::Admin))
        .await
        .unwrap();
    let expires = h
        .queue
        .create_session(
            &admin.id,
            SessionPurpose::Session,
            &hash(11),
            Duration::from_secs(60),
        )
        .await
        .unwrap();
    assert_eq!(expires, start_time() + Duration::from_secs(60));
    let found = h.queue.find_session(&hash(11)).await.unwrap().unwrap();
    assert_eq!(found.id, admin.id);
    assert_eq!(h.queue.find_session(&hash(12)).await.unwrap(), None);
    // A login code is not a session: its secret opens nothing until it is redeemed.
    h.queue
        .create_session(
            &admin.id,
            SessionPurpose::Login,
            &hash(12),
            Duration::from_secs(60),
        )
        .await
        .unwrap();
    assert_eq!(h.queue.find_session(&hash(12)).await.unwrap(), None);

    h.advance(Duration::from_secs(60));
    assert_eq!(h.queue.find_session(&hash(11)).await.unwrap(), None);
}

pub async fn revoking_a_token_ends_its_sessions_and_logout_ends_one(h: Harness) {
    let admin = h
        .queue
        .create_token(user("admin", 20, Role::Admin))
        .await
        .unwrap();
    for n in [21, 22] {
        h.queue
            .create_session(
                &admin.id,
                SessionPurpose::Session,
                &hash(n),
                Duration::from_secs(600),
            )
            .await
            .unwrap();
    }
    h.queue.end_session(&hash(21)).await.unwrap();
    h.queue.end_session(&hash(21)).await.unwrap();
    assert_eq!(h.queue.find_session(&hash(21)).await.unwrap(), None);
    assert!(h.queue.find_session(&hash(22)).await.unwrap().is_some());
    h.queue.revoke_token(&admin.id).await.unwrap();
    assert_eq!(h.queue.find_session(&hash(22)).await.unwrap(), None);
}

pub async fn login_code_is_redeemed_once_and_only_before_it_expires(h: Harness) {
    let admin = h
        .queue
        .create_token(user("admin", 30, Role::Admin))
        .await
        .unwrap();
    let code = |n: u8| {
        let queue = h.queue.clone();
        let id = admin.id.clone();
        async move {
            queue
                .create_session(
                    &id,
                    SessionPurpose::Login,
                    &hash(n),
                    Duration::from_secs(900),
                )
                .await
                .unwrap();
        }
    };
    code(31).await;
    code(32).await;
    let redeemed = h.queue.redeem_login_code(&hash(31)).await.unwrap().unwrap();
    assert_eq!(redeemed.id, admin.id);
    assert_eq!(h.queue.redeem_login_code(&hash(31)).await.unwrap(), None);
    // A session secret is not a login code.
    h.queue
        .create_session(
            &admin.id,
            SessionPurpose::Session,
            &hash(33),
            Duration::from_secs(900),
        )
        .await
        .unwrap();
    assert_eq!(h.queue.redeem_login_code(&hash(33)).await.unwrap(), None);
    assert!(h.queue.find_session(&hash(33)).await.unwrap().is_some());

    h.advance(Duration::from_secs(900));
    assert_eq!(h.queue.redeem_login_code(&hash(32)).await.unwrap(), None);
}

pub async fn only_a_live_user_token_can_open_a_session(h: Harness) {
    let worker = NewToken {
        name: "builder".into(),
        kind: TokenKind::Worker,
        role: None,
        token_hash: hash(40),
        token_prefix: "sww_".into(),
        capabilities: None,
        allowed_repositories: None,
        allowed_job_types: None,
    };
    let worker = h.queue.create_token(worker).await.unwrap();
    let ttl = Duration::from_secs(60);
    let refused = h
        .queue
        .create_session(&worker.id, SessionPurpose::Session, &hash(41), ttl)
        .await
        .unwrap_err();
    assert!(refused.to_string().contains("tokenId"), "{refused}");
    let admin = h
        .queue
        .create_token(user("admin", 42, Role::Admin))
        .await
        .unwrap();
    let bad_hash = h
        .queue
        .create_session(&admin.id, SessionPurpose::Session, "secret", ttl)
        .await
        .unwrap_err();
    assert!(bad_hash.to_string().contains("secretHash"), "{bad_hash}");
    h.queue.revoke_token(&admin.id).await.unwrap();
    let revoked = h
        .queue
        .create_session(&admin.id, SessionPurpose::Session, &hash(43), ttl)
        .await
        .unwrap_err();
    assert!(
        matches!(revoked, queue::QueueError::NotFound { .. }),
        "{revoked}"
    );
}

pub async fn the_first_token_is_made_once_however_many_replicas_ask_at_once(h: Harness) {
    // Four replicas on one database, each asked four times at once to make "the first
    // admin"; ten rounds, the winner revoked after each so the next starts empty again.
    // Without the lock, PostgreSQL made two or more in about one race of five.
    let mut replicas = Vec::new();
    for _ in 0..4 {
        let replica = h.queue_with(|_| {}).await;
        replicas.extend(std::iter::repeat_n(replica, 4));
    }
    for round in 0..10u8 {
        let start = std::sync::Arc::new(tokio::sync::Barrier::new(replicas.len()));
        let mut attempts = tokio::task::JoinSet::new();
        for (i, queue) in replicas.iter().cloned().enumerate() {
            let token = user(
                &format!("admin-{round}-{i}"),
                round * 16 + i as u8,
                Role::Admin,
            );
            let start = start.clone();
            attempts.spawn(async move {
                start.wait().await;
                queue.create_first_token(token).await.unwrap()
            });
        }
        let made: Vec<_> = attempts.join_all().await.into_iter().flatten().collect();
        assert_eq!(made.len(), 1, "round {round}: {made:?}");
        assert_eq!(h.queue.count_tokens().await.unwrap(), 1);
        // With a live token there, none is made.
        let late = h
            .queue
            .create_first_token(user("late", 200 + round, Role::Admin))
            .await
            .unwrap();
        assert!(late.is_none());
        h.queue.revoke_token(&made[0].id).await.unwrap();
    }
}
