//! Two nodes on one PostgreSQL database: latest values and acknowledged points reach the other node at once.

use super::*;

/// Two nodes on one fresh PostgreSQL database and an organization; `None` (the test is
/// skipped) without one.
async fn two_nodes(org: &str) -> Option<(Tsdb, Tsdb, plantd_model::org::Organization)> {
    if std::env::var(TEST_DATABASE_ENV).is_err() {
        eprintln!(
            "skipped: set {} to run the two-node test on PostgreSQL",
            TEST_DATABASE_ENV
        );
        return None;
    }
    let (url, _) = fresh_database().await;
    let store_a = Store::connect(&url).await.unwrap();
    let store_b = Store::connect(&url).await.unwrap();
    let org = store_a.create_org(org, Tier::Enterprise).await.unwrap();
    Some((
        Tsdb::new(store_a, Retention::default()),
        Tsdb::new(store_b, Retention::default()),
        org,
    ))
}

/// Two nodes on one PostgreSQL database: each answers `latest` from memory, and one node's
/// ingest reaches the other's cache (announced with the commit).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latest_values_in_memory_follow_other_nodes_on_postgresql() {
    let Some((node_a, node_b, org)) = two_nodes("L").await else {
        return;
    };
    let now = Timestamp::now().millis();
    let one = |tag: &str, value: f64, at: i64| {
        Arc::new(vec![Point {
            asset_id: "Pump".into(),
            tag_name: tag.into(),
            value,
            timestamp: Timestamp::from_millis(at),
            quality: Quality::Good,
            data_source_id: None,
        }])
    };
    let b_sees = |tag: &'static str, value: f64| {
        let (node_b, org) = (&node_b, org.id.clone());
        async move {
            // Delivery takes milliseconds; the bound only keeps a broken setup from hanging.
            for _ in 0..200 {
                let latest = node_b.latest(&org, "Pump", None).await.unwrap();
                if latest.iter().any(|l| l.tag_name == tag && l.value == value) {
                    return true;
                }
                tokio::time::sleep(std::time::Duration::from_millis(25)).await;
            }
            false
        }
    };
    node_a
        .ingest(&org.id, one("T", 1.0, now - 2000), None)
        .await
        .unwrap();
    assert!(b_sees("T", 1.0).await);
    // B's listener is up: from now on B answers from memory.
    for _ in 0..200 {
        if node_b.latest_from_memory() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    assert!(node_b.latest_from_memory());
    node_b.latest(&org.id, "Pump", None).await.unwrap();
    node_a.latest(&org.id, "Pump", None).await.unwrap();
    // A newer value, and a new tag, written by A reach B's cached entry.
    node_a
        .ingest(&org.id, one("T", 2.0, now - 1000), None)
        .await
        .unwrap();
    assert!(b_sees("T", 2.0).await, "B kept a stale latest value");
    node_a
        .ingest(&org.id, one("P", 7.0, now - 1000), None)
        .await
        .unwrap();
    assert!(b_sees("P", 7.0).await, "B missed a new tag");
    // B's own writes are in its memory at once.
    node_b
        .ingest(&org.id, one("T", 3.0, now), None)
        .await
        .unwrap();
    let latest = node_b.latest(&org.id, "Pump", None).await.unwrap();
    assert!(latest.iter().any(|l| l.tag_name == "T" && l.value == 3.0));
    // And A, which cached the asset before B wrote, follows B.
    let mut a_saw = false;
    for _ in 0..200 {
        let latest = node_a.latest(&org.id, "Pump", None).await.unwrap();
        if latest.iter().any(|l| l.tag_name == "T" && l.value == 3.0) {
            a_saw = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    assert!(a_saw, "A kept a stale latest value");
}

/// Two nodes on one PostgreSQL database: a point acknowledged by node A is in node B's queries
/// at once (B flushes A's log records before it reads), while A's flusher may run too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_node_reads_what_one_node_acknowledged_at_once() {
    let Some((node_a, node_b, org)) = two_nodes("R").await else {
        return;
    };
    let start = (Timestamp::now().millis() / HOUR) * HOUR - HOUR;
    let mut sent = 0;
    for round in 0..20_i64 {
        let batch: Vec<(i64, f64)> = (0..50)
            .map(|i| (start + (round * 50 + i) * 1_000, (round * 50 + i) as f64))
            .collect();
        sent += batch.len();
        node_a
            .ingest(&org.id, points("P", batch), None)
            .await
            .unwrap();
        let f = filter("P", start, start + HOUR);
        let count = node_b
            .query_aggregated(
                &org.id,
                &f,
                Aggregation::Count,
                None,
                Page::new(None, None).unwrap(),
            )
            .await
            .unwrap();
        assert_eq!(count.items[0].value as usize, sent, "round {round}");
        let raw = node_b
            .query_raw(&org.id, &f, Page::new(Some(1), Some(1)).unwrap())
            .await
            .unwrap();
        assert_eq!(raw.total as usize, sent, "round {round}");
    }
    node_a.flush().await.unwrap();
    node_b.flush().await.unwrap();
    assert_eq!(node_b.log_backlog(), 0);
}
