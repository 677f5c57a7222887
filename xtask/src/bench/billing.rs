//! What DynamoDB bills on demand for the calls the recording proxy saw.

use plant_store_local_support::fault_proxy::Call;
use serde_json::Value;

/// What DynamoDB bills on demand for `calls` (the calls the function and
/// the baselines make), (write, read) units: a write 1 per KB of the item
/// (a failed condition too), a read 1 per 4 KB (half, eventually consistent).
pub(super) fn billed(calls: &[Call]) -> (f64, f64) {
    let write = |bytes: usize| (bytes as f64 / 1024.0).ceil().max(1.0);
    let read = |bytes: usize, consistent: bool| {
        (bytes as f64 / 4096.0).ceil().max(1.0) * if consistent { 1.0 } else { 0.5 }
    };
    let (mut writes, mut reads) = (0.0, 0.0);
    for call in calls {
        let request = &call.request;
        let consistent = request["ConsistentRead"].as_bool() == Some(true);
        match call.operation.as_str() {
            "PutItem" => writes += write(item_bytes(&request["Item"])),
            "UpdateItem" => writes += write(item_bytes(&request["Key"]) + 32),
            "GetItem" => reads += read(item_bytes(&call.response["Item"]), consistent),
            "Query" => {
                let items = call.response["Items"].as_array().into_iter().flatten();
                reads += read(items.map(item_bytes).sum(), consistent);
            }
            other => panic!("a call the billing does not price: {other}"),
        }
    }
    (writes, reads)
}

/// An item's size as DynamoDB counts it: each attribute's name and value
/// (strings by length, numbers by about a byte per two digits; the other
/// types, which these items do not have, by their JSON's length).
fn item_bytes(item: &Value) -> usize {
    let value_bytes = |value: &Value| match value.as_object().and_then(|typed| typed.iter().next())
    {
        Some((kind, Value::String(number))) if kind == "N" => number.len().div_ceil(2) + 1,
        Some((_, Value::String(text))) => text.len(),
        _ => value.to_string().len(),
    };
    item.as_object()
        .into_iter()
        .flatten()
        .map(|(name, value)| name.len() + value_bytes(value))
        .sum()
}

/// Lambda's price per GB-second on arm64 (us-east-1); each request also
/// costs $0.20 per million, whatever its duration.
const PRICE_PER_GB_SECOND_USD: f64 = 0.000_013_333_4;
/// The template's memory size.
const MEMORY_GB: f64 = 128.0 / 1024.0;

/// What the duration of a million requests like these (ms) costs at
/// 128 MB, each billed by the millisecond, rounded up.
pub(super) fn duration_cost_per_million(durations_ms: &[f64]) -> f64 {
    let billed_ms =
        durations_ms.iter().map(|ms| ms.ceil()).sum::<f64>() / durations_ms.len().max(1) as f64;
    1e6 * billed_ms / 1000.0 * MEMORY_GB * PRICE_PER_GB_SECOND_USD
}
