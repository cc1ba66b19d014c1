//! `scripts/load.sh`: the load test (`tests::load`) at N = 50 users × 10
//! turns, or as given: `load [users] [turns]`. Prints its report (Markdown)
//! and fails when anything was lost, duplicated or mixed across users.

#[tokio::main]
async fn main() {
    let mut cfg = tests::load::LoadConfig::full();
    let mut args = std::env::args().skip(1);
    if let Some(users) = args.next().and_then(|a| a.parse().ok()) {
        cfg.users = users;
    }
    if let Some(turns) = args.next().and_then(|a| a.parse().ok()) {
        cfg.turns = turns;
    }
    eprintln!("load: {} users × {} turns", cfg.users, cfg.turns);
    let report = tests::load::run(cfg.clone()).await;
    println!("{}", report.render(&cfg));
    if !report.problems.is_empty() {
        println!("Problems:\n");
        for p in &report.problems {
            println!("- {p}");
        }
    }
    if !report.clean() {
        std::process::exit(1);
    }
}
