//! The OXP checker (`oxp-check`, which any server can run) run against oxp's own server: every
//! MUST passes, and the checks that need what a server may not offer (requirements, challenges,
//! authentication) ran rather than skipped. This keeps the checker and `conformance.rs` from
//! drifting: a rule the checker reads differently from oxp fails here.

#[path = "harness/mod.rs"]
mod harness;

use harness::{Oxp, bounded};
use oxp_check::{Level, Options, Outcome, Report};
use oxp_runtime::authorization::InMemoryAuthorization;
use oxp_runtime::server::{Server, ServerAuth};

const JWT_SECRET: &str = "test-secret-with-at-least-32-bytes-of-entropy";

fn assert_every_must_passes(report: &Report) {
    let failed: Vec<String> = report.failed_musts().map(ToString::to_string).collect();
    assert!(
        failed.is_empty(),
        "failed MUSTs:\n{}\n\n{report}",
        failed.join("\n")
    );
}

/// The checks of `section` (all of them), each passed, not skipped.
fn assert_passed(report: &Report, section: &str) {
    let checks: Vec<_> = report
        .checks
        .iter()
        .filter(|c| c.section == section)
        .collect();
    assert!(!checks.is_empty(), "no check of {section}:\n{report}");
    for check in checks {
        assert_eq!(check.outcome, Outcome::Pass, "{check}\n\n{report}");
    }
}

#[tokio::test]
async fn oxp_passes_every_must_of_the_checker() {
    let pipeline = harness::pipeline().authorization(InMemoryAuthorization::new(
        "https://auth.example.com/authorize",
    ));
    let oxp = Oxp::start(Server::from_pipeline(pipeline)).await;
    let report = bounded(
        "the checker's run",
        oxp_check::check(&Options::new(&oxp.base)),
    )
    .await
    .expect("the server answers");
    assert_every_must_passes(&report);
    // Found from the tool list, not skipped: a tool to call, one to refuse input of, and tools
    // with each kind of requirement, one with a challenge and its check_url.
    for section in [
        "§1 L.16", "§1 C.31", "§1 C.33", "§1 G.4", "§1 V.40", "§1 E.42", "§1 E.46", "§1 R.54",
        "§1 R.52", "§1 R.55", "§1 R.56", "§3.22", "§1 A.59", "§1 G.8", "§3.25",
    ] {
        assert_passed(&report, section);
    }
    // oxp keeps the SHOULDs too.
    let failed: Vec<String> = report
        .checks
        .iter()
        .filter(|c| c.level == Level::Should && matches!(c.outcome, Outcome::Fail(_)))
        .map(ToString::to_string)
        .collect();
    assert!(failed.is_empty(), "failed SHOULDs:\n{}", failed.join("\n"));
}

#[tokio::test]
async fn oxp_with_authentication_passes_the_token_and_key_rules() {
    let server = Server::new(oxp_tests::all_tools().build().unwrap()).auth(
        ServerAuth::default()
            .jwt_secret(JWT_SECRET)
            .jwt_audience(["agent-1"]),
    );
    let oxp = Oxp::start(server).await;
    let options = Options::new(&oxp.base)
        .jwt_secret(JWT_SECRET)
        .jwt_audience("agent-1");
    let report = bounded("the checker's run", oxp_check::check(&options))
        .await
        .expect("the server answers and takes the checker's tokens");
    assert_every_must_passes(&report);
    for section in ["§1 H.12", "§1 A.61", "§1 A.60", "§3.7", "§1 C.31"] {
        assert_passed(&report, section);
    }
    // Without credentials, what needs them is skipped, saying why; the rest still runs.
    let report = bounded(
        "the checker's run",
        oxp_check::check(&Options::new(&oxp.base)),
    )
    .await
    .unwrap();
    assert_every_must_passes(&report);
    assert_passed(&report, "§1 H.12");
    let call = report
        .checks
        .iter()
        .find(|c| c.section == "§1 C.31")
        .unwrap();
    assert!(
        matches!(&call.outcome, Outcome::Skip(why) if why.contains("--jwt-secret")),
        "{call}"
    );
}

/// The checker's copy of the OpenAPI document is the one the suite validates against.
#[test]
fn the_checker_reads_the_same_spec() {
    assert_eq!(
        oxp_check::OPENAPI,
        include_str!("spec/oxp-1.0-openapi.json")
    );
}
