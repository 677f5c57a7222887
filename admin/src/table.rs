//! Creates the plants table, with the key the function's store declares,
//! for DynamoDB Local; in AWS, `template.yaml` creates it.

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::{DisplayErrorContext, SdkError};
use aws_sdk_dynamodb::operation::create_table::CreateTableError;
use aws_sdk_dynamodb::types::{AttributeDefinition, BillingMode, KeySchemaElement};
use plant_store::store::layout::TABLE_KEY;

/// Creates `table` on demand (pay per request), unless it exists.
pub async fn create_table(client: &Client, table: &str) -> Result<(), String> {
    let mut request =
        client.create_table().table_name(table).billing_mode(BillingMode::PayPerRequest);
    for attribute in TABLE_KEY {
        let key = KeySchemaElement::builder()
            .attribute_name(attribute.name)
            .key_type(attribute.key_type)
            .build()
            .map_err(|error| error.to_string())?;
        let definition = AttributeDefinition::builder()
            .attribute_name(attribute.name)
            .attribute_type(attribute.attribute_type)
            .build()
            .map_err(|error| error.to_string())?;
        request = request.key_schema(key).attribute_definitions(definition);
    }
    match request.send().await {
        Ok(_) => Ok(()),
        Err(SdkError::ServiceError(service))
            if matches!(service.err(), CreateTableError::ResourceInUseException(_)) =>
        {
            Ok(())
        }
        Err(error) => Err(DisplayErrorContext(&error).to_string()),
    }
}
