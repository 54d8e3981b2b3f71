//! The live table's vacuum: on PostgreSQL a pass vacuums `job_queue` once enough of it is
//! dead, and claims go on in their order after it; SQLite has nothing to vacuum.

use queue::{Vacuum, VacuumConfig, VacuumReport};

use crate::harness::*;

fn vacuum(h: &Harness, min_dead: i64) -> Vacuum {
    Vacuum::new(
        h.queue.clone(),
        VacuumConfig {
            min_dead,
            ..VacuumConfig::default()
        },
    )
}

pub async fn the_live_table_is_vacuumed_once_enough_of_it_is_dead(h: Harness) {
    for _ in 0..20 {
        let job = h.create(Spec::default()).await;
        let claimed = h.claim_exactly("w1", &job).await;
        h.queue
            .complete(&claimed.id, &fence(&claimed), None)
            .await
            .unwrap();
    }
    let low = h.create(Spec::priority(0)).await;
    let high = h.create(Spec::priority(5)).await;
    let middle = h.create(Spec::priority(1)).await;
    let passes = "SELECT vacuum_count FROM pg_stat_user_tables WHERE relid = 'job_queue'::regclass";

    let never = vacuum(&h, i64::MAX).run_once().await.unwrap();
    assert!(matches!(never, VacuumReport::Skipped { .. }), "{never:?}");
    let always = vacuum(&h, 0);
    match h.backend {
        Backend::Postgres => {
            let before = h.count(passes).await;
            let report = always.run_once().await.unwrap();
            assert!(
                matches!(report, VacuumReport::Vacuumed { .. }),
                "{report:?}"
            );
            assert_eq!(h.count(passes).await, before + 1);
        }
        Backend::Sqlite => {
            assert_eq!(
                always.run_once().await.unwrap(),
                VacuumReport::Skipped { dead: 0 }
            );
        }
    }

    h.claim_exactly("w1", &high).await;
    h.claim_exactly("w1", &middle).await;
    h.claim_exactly("w1", &low).await;
    assert_eq!(h.claim("w1").await, None);
}
