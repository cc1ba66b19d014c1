//! The load test at a small N (issue 30; `tests::load`): users at once,
//! each a conversation of tool turns with resumes and Stops mixed in, and
//! DynamoDB throttles injected — then every conversation's stored log is
//! checked. `scripts/load.sh` runs N = 50 (docs/performance.md).

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_conversations_lose_duplicate_and_mix_nothing() {
    let cfg = tests::load::LoadConfig::small();
    let report = tests::load::run(cfg.clone()).await;
    eprintln!("{}", report.render(&cfg));
    assert_eq!((report.lost, report.duplicated, report.cross_user), (0, 0, 0), "{report:#?}");
    assert_eq!(report.wrong_answer, 0, "{report:#?}");
    assert!(report.problems.is_empty(), "{report:#?}");
    assert!(report.throttles_absorbed > 0, "throttles were injected and absorbed: {report:#?}");
    assert!(report.resumed > 0 && report.stopped > 0, "{report:#?}");
    assert_eq!(report.first_byte.len(), cfg.users * cfg.turns, "{report:#?}");
}
