//! createPlant (`POST /plants`): the plant answered without its id, a retry
//! written once, a conflict leaving the stored plant; the bound on plants
//! per owner, 409 past it, nothing written, also when 32 race for the last
//! place; retries and conflicts count nothing; `recount`.

use aws_sdk_dynamodb::types::AttributeValue;
use futures::future::join_all;
use plant_store::store::layout::counter_key;
use plant_store_admin::recount::recount;
use plant_store_testkit::{ApiGatewayEvent, TestApp, bearer};
use serde_json::{Value, json};

const MAX: u32 = 5;

fn plant(id: i64) -> String {
    json!({"id": id, "name": format!("Plant {id}")}).to_string()
}

/// `owner`'s plants `1..=count`, created through the API.
async fn fill(app: &TestApp, owner: &str, count: i64) {
    for id in 1..=count {
        assert_eq!(app.post(&bearer(owner), &plant(id)).await.status, 200);
    }
}

fn counts(owner_counts: &[(&str, u32)]) -> Vec<Value> {
    owner_counts.iter().map(|(owner, plants)| json!({"owner": owner, "plants": plants})).collect()
}

#[tokio::test]
async fn thirty_two_racing_posts_for_the_last_place_store_exactly_one() {
    let app = TestApp::with_store(None, MAX).await;
    fill(&app, "alice", i64::from(MAX) - 1).await;

    let alice = bearer("alice");
    let bodies: Vec<String> = (100..132).map(plant).collect();
    let responses = join_all(bodies.iter().map(|body| app.post(&alice, body))).await;

    let created = responses.iter().filter(|r| r.status == 200).count();
    assert_eq!(created, 1, "{:?}", responses.iter().map(|r| r.status).collect::<Vec<_>>());
    for refused in responses.iter().filter(|r| r.status != 200) {
        refused.assert_error(409, &format!("maximum of {MAX} plants"));
    }
    let stored = app.stored_items().await;
    assert_eq!(stored.len(), MAX as usize);
    assert_eq!(app.stored_plant_counts().await, counts(&[("alice", MAX)]));
    // The listing holds the plants, never the counter.
    let listed = app.get(&alice, "").await;
    assert_eq!(listed.body.as_array().unwrap().len(), MAX as usize);
}

#[tokio::test]
async fn at_the_bound_a_retry_is_answered_and_a_new_plant_is_refused() {
    let app = TestApp::with_store(None, MAX).await;
    fill(&app, "alice", i64::from(MAX)).await;
    let alice = bearer("alice");
    let before = app.stored_items().await;

    let retry = app.post(&alice, &plant(1)).await;
    assert_eq!((retry.status, &retry.body), (200, &json!({"name": "Plant 1"})));
    app.post(&alice, r#"{"id": 1, "name": "Other"}"#).await.assert_error(409, "id 1");
    app.post(&alice, &plant(99)).await.assert_error(409, &format!("maximum of {MAX} plants"));

    assert_eq!(app.stored_items().await, before);
    assert_eq!(app.stored_plant_counts().await, counts(&[("alice", MAX)]));
    // Another owner's plants are counted apart.
    assert_eq!(app.post(&bearer("bob"), &plant(99)).await.status, 200);
    assert_eq!(app.stored_plant_counts().await, counts(&[("alice", MAX), ("bob", 1)]));
}

#[tokio::test]
async fn retries_and_conflicts_below_the_bound_count_nothing() {
    let app = TestApp::with_store(None, MAX).await;
    let alice = bearer("alice");
    fill(&app, "alice", 1).await;
    for _ in 0..MAX {
        assert_eq!(app.post(&alice, &plant(1)).await.status, 200);
        app.post(&alice, r#"{"id": 1, "name": "Other"}"#).await.assert_error(409, "id 1");
    }
    assert_eq!(app.stored_plant_counts().await, counts(&[("alice", 1)]));
    // So the bound still admits MAX plants in all.
    for id in 2..=i64::from(MAX) {
        assert_eq!(app.post(&alice, &plant(id)).await.status, 200, "plant {id}");
    }
    app.post(&alice, &plant(99)).await.assert_error(409, &format!("maximum of {MAX} plants"));
}

/// Sets `owner`'s count in the table, as a crash could have left it.
async fn set_count(app: &TestApp, owner: &str, plants: u32) {
    let update = app.client.update_item().table_name(&app.table).set_key(Some(counter_key(owner)));
    let update = update.update_expression("SET plants = :plants");
    let update =
        update.expression_attribute_values(":plants", AttributeValue::N(plants.to_string()));
    update.send().await.unwrap();
}

#[tokio::test]
async fn recount_sets_every_count_to_the_plants_idempotently_and_only_when_applied() {
    let app = TestApp::with_store(None, 0).await;
    // Plants stored while the bound was off: no counts at all.
    fill(&app, "alice", 3).await;
    fill(&app, "bob", 1).await;
    set_count(&app, "carol", 2).await; // left high: carol has no plant
    let before = app.stored_plant_counts().await;

    let dry = recount(&app.client, &app.table, None, false).await.unwrap();
    assert_eq!((dry.owners, dry.plants, dry.right), (3, 4, 0));
    let changes = [("alice", None, 3), ("bob", None, 1), ("carol", Some(2), 0)];
    assert_eq!(dry.changes, changes.map(|(owner, count, plants)| (owner.into(), count, plants)));
    assert_eq!(app.stored_plant_counts().await, before, "a dry run changes nothing");

    let applied = recount(&app.client, &app.table, None, true).await.unwrap();
    assert_eq!(applied.changes, dry.changes);
    let exact = counts(&[("alice", 3), ("bob", 1), ("carol", 0)]);
    assert_eq!(app.stored_plant_counts().await, exact);
    let again = recount(&app.client, &app.table, None, true).await.unwrap();
    assert_eq!((again.right, again.changes.len()), (3, 0), "idempotent");

    // One owner: a count left one high by a crash between the two writes.
    set_count(&app, "alice", 4).await;
    let one = recount(&app.client, &app.table, Some("alice"), true).await.unwrap();
    assert_eq!(one.changes, vec![("alice".to_owned(), Some(4), 3)]);
    assert_eq!(app.stored_plant_counts().await, exact);
}

/// Each body answered without its id and stored as its item, sent twice
/// (the second a retry, written once): a tag absent or null left out,
/// fields the contract does not name ignored and never stored.
#[tokio::test]
async fn post_stores_the_plant_and_answers_it_without_the_id() {
    let app = TestApp::new().await;
    #[rustfmt::skip]
    let plants = [
        (r#"{"id": 1, "name": "Moss", "tag": null}"#, json!({"name": "Moss"})),
        (r#"{"id": 3, "name": "Ivy", "owner": "mallory", "color": {"deep": [1, 2]}}"#, json!({"name": "Ivy"})),
        (r#"{"id": 7, "name": "Fern", "tag": "green"}"#, json!({"name": "Fern", "tag": "green"})),
    ];
    for (body, answer) in &plants {
        for _ in 0..2 {
            let response = app.post(&bearer("alice"), body).await;
            assert_eq!(response.header("content-type"), Some("application/json"));
            assert_eq!((response.status, &response.body), (200, answer), "{body}");
        }
    }
    let listed = app.get(&bearer("alice"), "").await.body;
    assert_eq!(listed, json!(plants.iter().map(|(_, answer)| answer).collect::<Vec<_>>()));
    let stored = plants.iter().zip([1, 3, 7]).map(|((_, answer), id)| {
        let mut item = json!({"owner": "alice", "id": id});
        item.as_object_mut().unwrap().extend(answer.as_object().unwrap().clone());
        item
    });
    assert_eq!(app.stored_items().await, stored.collect::<Vec<_>>());
}

#[tokio::test]
async fn a_conflicting_post_gets_409_and_leaves_the_stored_plant_unchanged() {
    let app = TestApp::new().await;
    app.create("alice", json!({"id": 9, "name": "Aloe", "tag": "succulent"})).await;
    let stored_before = app.stored_items().await;
    for body in [
        r#"{"id": 9, "name": "Cactus", "tag": "succulent"}"#,
        r#"{"id": 9, "name": "Aloe", "tag": "other"}"#,
        r#"{"id": 9, "name": "Aloe"}"#,
    ] {
        let response = app.post(&bearer("alice"), body).await;
        response.assert_error(409, "id 9");
    }
    assert_eq!(app.stored_items().await, stored_before);
}

/// (Refused content types and bodies, each with its 4xx: `hostile.rs`.)
#[tokio::test]
async fn a_json_content_type_in_any_case_or_none_is_read_as_json() {
    let app = TestApp::new().await;
    for (id, content_type) in
        [(1, Some("application/json; charset=utf-8")), (2, Some("Application/JSON")), (3, None)]
    {
        let mut request =
            ApiGatewayEvent::new("POST", "/plants").header("authorization", &bearer("alice"));
        if let Some(content_type) = content_type {
            request = request.header("content-type", content_type);
        }
        let body = json!({"id": id, "name": "Fern"}).to_string();
        let response = app.send(request.body(&body)).await;
        assert_eq!(response.status, 200, "{content_type:?}");
    }
    assert_eq!(app.stored_items().await.len(), 3);
}
