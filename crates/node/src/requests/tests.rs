//! The request flow on one domain playing both archives: answers kept only
//! as sealed, refusals only from the holding archive, copies checked when
//! used, certificates issued once and checked, steps logged once.

use std::collections::BTreeMap;
use std::sync::Arc;

use xarchive_seal::statement::AnswerStatement;

use super::holding::copy_digest;
use super::kept::{decode, encode, Action, Incoming, Kept, Outgoing, Part, Step};
use super::receiving::{check_answer, Unaccepted};

use super::*;
use crate::config::NodeConfig;
use crate::local::audit::Requester;
use crate::local::id::ArchiveId;
use crate::local::record::{now_us, RecordBody};
use crate::local::requests::Side;
use crate::local::store::Write;
use crate::node::Node;
use crate::wire::{Answer, Decision, Delivery, SignedCopy};

fn clerk() -> Requester {
    Requester::archive("A")
}

fn node(dir: &std::path::Path) -> Arc<Node> {
    let config = NodeConfig {
        name: "A".parse().unwrap(),
        data: dir.join("A"),
        ..NodeConfig::default()
    };
    Node::open(config, "http://127.0.0.1:1").unwrap()
}

fn delivery(request_id: &str) -> Delivery {
    Delivery {
        request_id: request_id.into(),
        receiving: "A".into(),
        applicant_digest: "digest".into(),
        applicant_name: "张三".into(),
        purpose: "贷款".into(),
        records: vec!["R-1".into()],
    }
}

/// Domain A as both archives of request 00ff for record R-1 (not released
/// by the policy, so its reviewer approves it), the answer checked and
/// taken in, no certificate issued yet.
async fn answered(node: &Arc<Node>) -> String {
    let id = ArchiveId::parse("R-1").unwrap();
    let mut metadata = serde_json::Map::new();
    metadata.insert("形成日期".into(), "2007-05-01".into());
    let body = RecordBody {
        title: "婚姻登记".into(),
        metadata,
        content: Some(b"content".to_vec()),
        keys: BTreeMap::default(),
    };
    node.domain.apply(&[Write::Put(id, body)]).unwrap();
    let request_id = "00ff".to_owned();
    let outgoing = Outgoing {
        id: request_id.clone(),
        submitted_us: now_us(),
        clerk: "clerk".into(),
        applicant_digest: "digest".into(),
        applicant_name: "张三".into(),
        purpose: "贷款".into(),
        searched_by: None,
        not_found: Vec::new(),
        certified_us: None,
        certificate: None,
        flagged: Vec::new(),
        unlogged: Vec::new(),
        parts: BTreeMap::from([("A".to_owned(), Part::pending(vec!["R-1".into()]))]),
    };
    node.requests
        .book
        .change::<RequestsError>(Side::Outgoing, &request_id, |_| outgoing.entry().map(Some))
        .unwrap();
    let answer = node.take_in("A", delivery(&request_id)).unwrap();
    assert_eq!(answer.state, HoldingState::InReview);
    let approve = Decision {
        approve: true,
        reason: String::new(),
    };
    let answer = node.decide("A", &request_id, approve, clerk()).unwrap();
    let trust = node.trust_list(false).await.unwrap();
    check_answer("A", &trust.list, &delivery(&request_id), &answer).unwrap();
    node.take_answer("A", &request_id, answer).unwrap();
    request_id
}

/// Changes the title inside the first copy A keeps for `request`, its
/// seal left as it was: what an insider editing the file would do.
fn tamper(node: &Node, request: &str) {
    node.requests
        .book
        .change::<RequestsError>(Side::Outgoing, request, |old| {
            let mut kept = decode::<Outgoing>(old.unwrap())?;
            let copy = &mut kept.parts.get_mut("A").unwrap().copies[0];
            copy.metadata.insert("形成日期".into(), "1999-01-01".into());
            Ok(Some(encode(&kept)?.into()))
        })
        .unwrap();
}

/// The entries of `action` for `request` in `node`'s audit log.
fn logged(node: &Node, request: &str, action: Action) -> usize {
    node.audit
        .since(0, 10_000)
        .unwrap()
        .into_iter()
        .filter(|e| e.request.as_deref() == Some(request))
        .filter(|e| e.action.as_deref() == Some(action.as_str()))
        .count()
}

#[tokio::test]
async fn a_certificate_checks_by_its_code_and_its_payload_until_a_copy_kept_is_changed() {
    let dir = tempfile::tempdir().unwrap();
    let node = node(dir.path());
    let request = answered(&node).await;
    let certificate = node.issue_certificate(&request, clerk()).await.unwrap();
    assert!(certificate.code.starts_with("A."));
    let check = node
        .check_certificate(&certificate.code.to_lowercase().replace("a.", "A."))
        .await
        .unwrap();
    assert_eq!(check.copies[0].archive_number, "R-1");
    assert_eq!(check.copies[0].record_date.as_deref(), Some("2007-05-01"));
    assert_eq!(check.applicant_name, "张三");
    let offline = node
        .verify_payload(&certificate.sheets[0].payload)
        .await
        .unwrap();
    assert_eq!(offline.code, certificate.code);

    tamper(&node, &request);
    let view = node.request(&request).await.unwrap();
    let copy = &view.holdings[0].copies[0];
    assert!(!copy.valid, "{copy:?}");
    assert!(
        copy.problem.as_deref().unwrap().contains("changed"),
        "{copy:?}"
    );
    let e = node.check_certificate(&certificate.code).await.unwrap_err();
    assert!(matches!(e, RequestsError::CertificateInvalid { .. }), "{e}");
    assert_eq!(logged(&node, &request, Action::CopyFailedCheck), 1);
    // Seen again: logged once.
    node.request(&request).await.unwrap();
    assert_eq!(logged(&node, &request, Action::CopyFailedCheck), 1);
}

#[tokio::test]
async fn no_certificate_is_issued_while_a_copy_kept_does_not_check() {
    let dir = tempfile::tempdir().unwrap();
    let node = node(dir.path());
    let request = answered(&node).await;
    tamper(&node, &request);
    let e = node.issue_certificate(&request, clerk()).await.unwrap_err();
    assert!(matches!(e, RequestsError::CopyInvalid { .. }), "{e}");
    assert_eq!(logged(&node, &request, Action::CopyFailedCheck), 1);
    assert_eq!(logged(&node, &request, Action::CertificateIssued), 0);
}

#[tokio::test]
async fn an_answer_is_kept_only_as_its_holding_archive_sealed_it_whole() {
    let dir = tempfile::tempdir().unwrap();
    let node = node(dir.path());
    let id = ArchiveId::parse("R-1").unwrap();
    let body = RecordBody {
        title: "婚姻登记".into(),
        metadata: serde_json::Map::default(),
        content: None,
        keys: BTreeMap::default(),
    };
    node.domain.apply(&[Write::Put(id, body)]).unwrap();
    let asked = delivery("00ff");
    let approve = Decision {
        approve: true,
        reason: String::new(),
    };
    node.take_in("A", asked.clone()).unwrap();
    let answer = node.decide("A", "00ff", approve, clerk()).unwrap();
    let trust = node.trust_list(false).await.unwrap();
    let list = &trust.list;
    check_answer("A", list, &asked, &answer).unwrap();

    let refused = |answer: &Answer| check_answer("A", list, &asked, answer).unwrap_err();
    // Unsealed; a refusal put in its place; the copies taken away (a
    // release without copies); a copy changed; a reason added.
    let mut unsealed = answer.clone();
    unsealed.sealed.clear();
    assert!(matches!(refused(&unsealed), Unaccepted::Unsealed));
    let mut forged = answer.clone();
    forged.state = HoldingState::Refused;
    forged.reason = Some("伪造的理由".into());
    forged.copies.clear();
    assert!(matches!(refused(&forged), Unaccepted::Differs(_)));
    let mut emptied = answer.clone();
    emptied.copies.clear();
    assert!(matches!(refused(&emptied), Unaccepted::Differs(_)));
    let mut changed = answer.clone();
    changed.copies[0].metadata.insert("x".into(), "y".into());
    assert!(matches!(refused(&changed), Unaccepted::Rejected(_)));
    // For another request or another receiving archive.
    assert!(check_answer("A", list, &delivery("0aaa"), &answer).is_err());
    assert!(check_answer("C", list, &asked, &answer).is_err());

    // Sealed whole by a key the trust list does not hold: a forgery.
    let stranger = xarchive_seal::SecretKey::generate(xarchive_seal::Algorithm::Sm2Sm3);
    let statement = AnswerStatement {
        holding: "A".into(),
        receiving: "A".into(),
        request_id: "00ff".into(),
        state: "refused".into(),
        reason: Some("伪造的理由".into()),
        records: asked.records.clone(),
        missing: Vec::new(),
        copies: Vec::new(),
        at: 2_000_000_000,
    };
    let forged = Answer {
        state: HoldingState::Refused,
        copies: Vec::new(),
        missing: Vec::new(),
        reason: statement.reason.clone(),
        sealed: base64(&xarchive_seal::seal(&stranger, statement.encode())),
    };
    assert!(matches!(
        refused(&forged),
        Unaccepted::Rejected(xarchive_seal::Rejected::UnknownKey(_))
    ));

    // Released with no copy, sealed by the archive itself: not sensible.
    let statement = AnswerStatement {
        state: "released".into(),
        reason: None,
        ..statement
    };
    let empty_release = Answer {
        state: HoldingState::Released,
        copies: Vec::new(),
        missing: Vec::new(),
        reason: None,
        sealed: base64(&node.requests.seal.seal(statement.encode())),
    };
    assert!(matches!(refused(&empty_release), Unaccepted::Malformed(_)));
    // A copy of this request replayed into an answer of another.
    let other = delivery("0bbb");
    let replayed = Answer {
        sealed: {
            let s = AnswerStatement {
                request_id: "0bbb".into(),
                state: "released".into(),
                reason: None,
                copies: answer.copies.iter().map(copy_digest).collect(),
                ..AnswerStatement::decode(
                    &xarchive_seal::Opened::parse(&unbase64(&answer.sealed).unwrap())
                        .unwrap()
                        .payload,
                )
                .unwrap()
            };
            base64(&node.requests.seal.seal(s.encode()))
        },
        ..answer.clone()
    };
    assert!(matches!(
        check_answer("A", list, &other, &replayed).unwrap_err(),
        Unaccepted::Rejected(xarchive_seal::Rejected::Mismatch(_))
    ));
}

#[tokio::test]
async fn a_record_deleted_before_release_is_answered_none_held_never_refused() {
    let dir = tempfile::tempdir().unwrap();
    let node = node(dir.path());
    let answer = node.take_in("A", delivery("00ff")).unwrap();
    assert_eq!(answer.state, HoldingState::NoneHeld);
    assert!(answer.reason.is_none());
    assert_eq!(answer.missing, vec!["R-1".to_owned()]);
    let trust = node.trust_list(false).await.unwrap();
    check_answer("A", &trust.list, &delivery("00ff"), &answer).unwrap();
}

#[tokio::test]
async fn a_step_kept_from_the_log_by_a_kill_is_logged_once_whichever_write_the_kill_came_between() {
    let dir = tempfile::tempdir().unwrap();
    let node = node(dir.path());
    let request_id = answered(&node).await;
    let key = format!("A/{request_id}");
    assert_eq!(logged(&node, &request_id, Action::ReviewApproved), 1);
    // Killed after the book's write, before the log's: the step is kept,
    // and written once, however often it is flushed.
    let step = Step::now(
        Requester::archive("A"),
        Action::InReviewThere,
        vec!["R-1".into()],
    );
    let keep = |step: Step| {
        node.requests
            .book
            .change::<RequestsError>(Side::Incoming, &key, |old| {
                let mut kept = decode::<Incoming>(old.unwrap())?;
                kept.unlogged.push(step);
                kept.entry().map(Some)
            })
            .unwrap();
    };
    keep(step.clone());
    assert_eq!(
        node.requests.book.unfinished(Side::Incoming).unwrap().len(),
        1
    );
    node.flush_all_steps().unwrap();
    node.flush_all_steps().unwrap();
    assert_eq!(logged(&node, &request_id, Action::InReviewThere), 1);
    assert!(node
        .requests
        .book
        .unfinished(Side::Incoming)
        .unwrap()
        .is_empty());
    // Killed after the log's write, before the step was marked: the entry
    // in the log is found, and not written again.
    keep(step);
    node.flush_all_steps().unwrap();
    assert_eq!(logged(&node, &request_id, Action::InReviewThere), 1);
    assert!(node
        .requests
        .book
        .unfinished(Side::Incoming)
        .unwrap()
        .is_empty());
}

#[tokio::test]
async fn a_certificate_is_issued_once_and_only_for_an_answered_request() {
    let dir = tempfile::tempdir().unwrap();
    let node = node(dir.path());
    let request = answered(&node).await;
    let first = node.issue_certificate(&request, clerk()).await.unwrap();
    let again = node.issue_certificate(&request, clerk()).await.unwrap();
    assert_eq!(first, again);
    assert_eq!(node.certificate(&request).await.unwrap(), first);
    assert_eq!(logged(&node, &request, Action::CertificateIssued), 1);
    assert!(matches!(
        node.issue_certificate("0abc", clerk()).await,
        Err(RequestsError::NoRequest(_))
    ));
    assert!(matches!(
        node.check_certificate("A.0000-0000-0000-0000-0000").await,
        Err(RequestsError::NoCertificate(_))
    ));
    assert!(matches!(
        node.check_certificate("NOSUCH.0000-0000-0000-0000-0000")
            .await,
        Err(RequestsError::UnknownIssuer(_))
    ));
    assert!(matches!(
        node.check_certificate("0000-0000-0000-0000-0000").await,
        Err(RequestsError::NoCertificate(_))
    ));
    assert!(matches!(
        node.check_certificate("not a code").await,
        Err(RequestsError::Invalid(_))
    ));
}

#[tokio::test]
async fn a_copy_of_format_1_kept_from_before_still_shows_and_checks() {
    let dir = tempfile::tempdir().unwrap();
    let node = node(dir.path());
    let key = ed25519_dalek::SigningKey::from_bytes(&[9; 32]);
    let copy: SignedCopy = super::legacy::tests::signed(&key);
    let mut outgoing = Outgoing {
        id: "00ff".into(),
        submitted_us: now_us(),
        clerk: "clerk".into(),
        applicant_digest: "digest".into(),
        applicant_name: "张三".into(),
        purpose: "贷款".into(),
        searched_by: None,
        not_found: Vec::new(),
        certified_us: Some(now_us()),
        certificate: None,
        flagged: Vec::new(),
        unlogged: Vec::new(),
        parts: BTreeMap::from([("B".to_owned(), Part::pending(vec!["M-1".into()]))]),
    };
    let part = outgoing.parts.get_mut("B").unwrap();
    part.state = HoldingState::Released;
    part.copies = vec![copy.clone()];
    part.signing_key = hex::encode(key.verifying_key().as_bytes());
    // As a book of before holds it: the fields added since left out.
    let mut json: serde_json::Value = serde_json::to_value(&outgoing).unwrap();
    for field in ["searched_by", "certificate", "flagged"] {
        json.as_object_mut().unwrap().remove(field);
    }
    let bytes = serde_json::to_vec(&json).unwrap();
    let codes = super::legacy::codes(std::slice::from_ref(&copy));
    node.requests
        .book
        .change::<RequestsError>(Side::Outgoing, "00ff", |_| {
            Ok(Some(crate::local::requests::BookWrite {
                bytes,
                codes: codes.clone(),
                unfinished: false,
            }))
        })
        .unwrap();
    let view = node.request("00ff").await.unwrap();
    assert!(view.holdings[0].copies[0].valid, "{view:?}");
    let check = node.check_certificate(&codes[0]).await.unwrap();
    assert_eq!(check.copies[0].archive_number, "M-1");
}

#[tokio::test]
async fn a_holding_archive_and_its_records_are_named_to_the_clerk_only_once_it_has_answered_for_good(
) {
    let dir = tempfile::tempdir().unwrap();
    let node = node(dir.path());
    let part = |state, unreachable_since_us| Part {
        state,
        unreachable_since_us,
        ..Part::pending(vec![format!("{state:?}-1")])
    };
    let request = Outgoing {
        id: "00ff".into(),
        submitted_us: now_us(),
        clerk: "clerk".into(),
        applicant_digest: "digest".into(),
        applicant_name: "张三".into(),
        purpose: "贷款".into(),
        searched_by: Some("id_card".into()),
        not_found: Vec::new(),
        certified_us: None,
        certificate: None,
        flagged: Vec::new(),
        unlogged: Vec::new(),
        parts: BTreeMap::from([
            ("B".to_owned(), part(HoldingState::Pending, Some(2_000_000))),
            (
                "C".to_owned(),
                part(HoldingState::InReview, Some(1_000_000)),
            ),
            ("D".to_owned(), part(HoldingState::NoneHeld, None)),
        ]),
    };
    let view = node.view(&request, None);
    let named: Vec<&str> = view.holdings.iter().map(|h| h.domain.as_str()).collect();
    assert_eq!(named, ["D"]);
    assert_eq!((view.awaiting.archives, view.awaiting.in_review), (2, 1));
    assert_eq!(
        view.awaiting.unreachable_since.as_deref(),
        Some("1970-01-01T00:00:01Z")
    );
    let shown = serde_json::to_string(&view).unwrap();
    for hidden in ["\"B\"", "\"C\"", "Pending-1", "InReview-1"] {
        assert!(!shown.contains(hidden), "{hidden} in {shown}");
    }
}

#[tokio::test]
async fn a_record_asked_for_in_another_typed_form_is_asked_of_its_holder_as_it_is_held() {
    let dir = tempfile::tempdir().unwrap();
    let node = node(dir.path());
    let held = "J201-CW·2010-Y-00042";
    let body = RecordBody {
        title: "婚姻登记".into(),
        metadata: serde_json::Map::new(),
        content: None,
        keys: BTreeMap::default(),
    };
    let id = ArchiveId::parse(held).unwrap();
    node.domain.apply(&[Write::Put(id, body)]).unwrap();
    let new = crate::wire::NewRequest {
        applicant_id: crate::wire::IdentityNumber("110101199003071233".into()),
        applicant_name: "张三".into(),
        purpose: "贷款".into(),
        records: Some(vec!["J201-CW.2010-Y-00042".into()]),
    };
    let view = node.submit_request(new, clerk()).await.unwrap();
    let (_, bytes) = node
        .requests
        .book
        .unfinished(Side::Outgoing)
        .unwrap()
        .into_iter()
        .find(|(key, _)| *key == view.id)
        .unwrap();
    let kept = decode::<Outgoing>(&bytes).unwrap();
    assert!(kept.not_found.is_empty());
    assert_eq!(kept.parts["A"].records, [held]);
}
