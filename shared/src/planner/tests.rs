use super::create::verdict;

#[test]
fn reviewer_verdicts() {
    assert_eq!(verdict(r#"{"verdict":"approve","reason":"fine"}"#), (true, "fine".into()));
    assert!(!verdict("Sure: {\"verdict\": \"reject\", \"reason\": \"deletes\"}").0);
    assert!(!verdict("looks good").0);
}
