//! The bound on how many plants one owner may store (MAX_PLANTS_PER_OWNER):
//! a POST past it gets 409 naming the bound and writes nothing, also when 32
//! race for the last place; a retry of a stored plant is still answered and
//! counts once; an id conflict counts nothing; other owners are not
//! affected; and what a created plant costs in write units.

use futures::future::join_all;
use plant_store::domain::{NewPlant, Owner};
use plant_store::store::{Created, PlantStore};
use plant_store_testkit::{TestApp, WriteUnits, bearer, dynamodb_client_with};
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
    owner_counts
        .iter()
        .map(|(owner, plants)| json!({"owner": owner, "plants": plants}))
        .collect()
}

#[tokio::test]
async fn thirty_two_racing_posts_for_the_last_place_store_exactly_one() {
    let app = TestApp::with_max_plants_per_owner(MAX).await;
    fill(&app, "alice", i64::from(MAX) - 1).await;

    let alice = bearer("alice");
    let bodies: Vec<String> = (100..132).map(plant).collect();
    let responses = join_all(bodies.iter().map(|body| app.post(&alice, body))).await;

    let created = responses.iter().filter(|r| r.status == 200).count();
    assert_eq!(
        created,
        1,
        "{:?}",
        responses.iter().map(|r| r.status).collect::<Vec<_>>()
    );
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
    let app = TestApp::with_max_plants_per_owner(MAX).await;
    fill(&app, "alice", i64::from(MAX)).await;
    let alice = bearer("alice");
    let before = app.stored_items().await;

    let retry = app.post(&alice, &plant(1)).await;
    assert_eq!(
        (retry.status, &retry.body),
        (200, &json!({"name": "Plant 1"}))
    );
    app.post(&alice, r#"{"id": 1, "name": "Other"}"#)
        .await
        .assert_error(409, "id 1");
    app.post(&alice, &plant(99))
        .await
        .assert_error(409, &format!("maximum of {MAX} plants"));

    assert_eq!(app.stored_items().await, before);
    assert_eq!(app.stored_plant_counts().await, counts(&[("alice", MAX)]));
    // Another owner's plants are counted apart.
    assert_eq!(app.post(&bearer("bob"), &plant(99)).await.status, 200);
    assert_eq!(
        app.stored_plant_counts().await,
        counts(&[("alice", MAX), ("bob", 1)])
    );
}

#[tokio::test]
async fn retries_and_conflicts_below_the_bound_count_nothing() {
    let app = TestApp::with_max_plants_per_owner(MAX).await;
    let alice = bearer("alice");
    fill(&app, "alice", 1).await;
    for _ in 0..MAX {
        assert_eq!(app.post(&alice, &plant(1)).await.status, 200);
        app.post(&alice, r#"{"id": 1, "name": "Other"}"#)
            .await
            .assert_error(409, "id 1");
    }
    assert_eq!(app.stored_plant_counts().await, counts(&[("alice", 1)]));
    // So the bound still admits MAX plants in all.
    for id in 2..=i64::from(MAX) {
        assert_eq!(app.post(&alice, &plant(id)).await.status, 200, "plant {id}");
    }
    app.post(&alice, &plant(99))
        .await
        .assert_error(409, &format!("maximum of {MAX} plants"));
}

#[tokio::test]
async fn what_a_created_plant_costs_in_write_units() {
    let app = TestApp::new().await;
    let units = WriteUnits::default();
    let client = dynamodb_client_with(None, units.clone()).await;
    let store = PlantStore::new(client, &app.table, MAX);
    let owner = Owner::parse("alice".to_owned()).unwrap();
    let new = NewPlant::from_json(plant(1).as_bytes()).unwrap();
    assert!(matches!(
        store.create(&owner, &new).await.unwrap(),
        Created::New
    ));
    let write_units = units
        .last()
        .expect("DynamoDB reports the consumed capacity");
    // Two items of under 1 KB: the plant and the owner's counter. DynamoDB
    // Local reports one unit per item; DynamoDB bills an item written in a
    // transaction at two, so 4 units there (a lone PutItem was 1).
    eprintln!("write units per created plant (DynamoDB Local): {write_units}");
    assert_eq!(write_units, 2.0);
}
