//! The Plant Store domain: what a plant is, and how a request body becomes one;
//! who the caller is; and every limit on what a request, a token or an
//! issuer's answer may hold ([`limits`]).
//!
//! Every value here is parsed once, through one constructor that returns a
//! precise [`PlantError`]; past that point the rest of the code trusts the types.

use std::fmt;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::Value;

const NAME_MAX_CHARS: usize = 256;
const TAG_MAX_CHARS: usize = 64;

/// The limits on what the function reads, in one place.
pub mod limits {
    /// Request bodies larger than this are refused with 413.
    pub const MAX_BODY_BYTES: usize = 16 * 1024;
    /// Real tokens are a few hundred bytes to ~2 KiB; anything far larger is
    /// refused (401) before any decoding work.
    pub const MAX_TOKEN_BYTES: usize = 8 * 1024;
    /// Clock skew tolerated on a token's `exp` and `nbf`, in seconds.
    pub const TOKEN_LEEWAY_SECONDS: u64 = 30;
    /// The most characters of a client's own text (a method, a header
    /// name) that an error message repeats.
    pub const MAX_ECHOED_CHARS: usize = 64;
}

/// Why a request body is not a valid NewPlant. Each message names the field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlantError {
    NotJson(String),
    NotAnObject,
    DuplicateField(&'static str),
    MissingField(&'static str),
    NotAString(&'static str),
    InvalidId,
    Length { field: &'static str, max: usize },
    Blank(&'static str),
    ControlCharacter(&'static str),
}

impl fmt::Display for PlantError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotJson(detail) => write!(f, "The request body is not valid JSON ({detail})."),
            Self::NotAnObject => f.write_str("The request body must be a JSON object."),
            Self::DuplicateField(field) => {
                write!(
                    f,
                    "The field `{field}` appears more than once in the request body."
                )
            }
            Self::MissingField(field) => write!(f, "The field `{field}` is required."),
            Self::NotAString(field) => write!(f, "The field `{field}` must be a JSON string."),
            Self::InvalidId => write!(
                f,
                "The field `id` must be a JSON integer from {} to {}.",
                i64::MIN,
                i64::MAX
            ),
            Self::Length { field, max } => {
                write!(f, "The field `{field}` must be 1 to {max} characters long.")
            }
            Self::Blank(field) => write!(f, "The field `{field}` must not be blank."),
            Self::ControlCharacter(field) => {
                write!(
                    f,
                    "The field `{field}` must not contain control characters."
                )
            }
        }
    }
}

impl std::error::Error for PlantError {}

/// The caller: the `sub` of a verified token. Plants are stored per owner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner(String);

impl Owner {
    /// Subjects longer than this are refused: a token issuer never needs
    /// more, and the owner is a DynamoDB partition key (at most 2,048 bytes).
    pub const MAX_BYTES: usize = 512;

    /// A usable subject (docs/contract.md): at most [`Self::MAX_BYTES`], at
    /// least one character that is not whitespace, and no control
    /// characters, so that it names somebody and reads the same in a log.
    pub fn parse(sub: String) -> Option<Self> {
        let usable = sub.len() <= Self::MAX_BYTES
            && !sub.trim().is_empty()
            && !sub.chars().any(char::is_control);
        usable.then_some(Self(sub))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A plant id: unique per owner, any int64.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct PlantId(i64);

impl PlantId {
    pub fn new(id: i64) -> Self {
        Self(id)
    }

    pub fn get(self) -> i64 {
        self.0
    }

    fn parse(value: Value) -> Result<Self, PlantError> {
        match value {
            Value::Number(number) => number.as_i64().map(Self).ok_or(PlantError::InvalidId),
            _ => Err(PlantError::InvalidId),
        }
    }
}

impl fmt::Display for PlantId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A plant's name: 1 to 256 characters, not blank, no control characters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct PlantName(String);

impl PlantName {
    pub fn parse(name: String) -> Result<Self, PlantError> {
        check_text("name", &name, NAME_MAX_CHARS)?;
        if name.trim().is_empty() {
            return Err(PlantError::Blank("name"));
        }
        Ok(Self(name))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A plant's tag: 1 to 64 characters, no control characters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct PlantTag(String);

impl PlantTag {
    pub fn parse(tag: String) -> Result<Self, PlantError> {
        check_text("tag", &tag, TAG_MAX_CHARS)?;
        Ok(Self(tag))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

fn check_text(field: &'static str, text: &str, max: usize) -> Result<(), PlantError> {
    let chars = text.chars().count();
    if chars == 0 || chars > max {
        return Err(PlantError::Length { field, max });
    }
    if text.chars().any(char::is_control) {
        return Err(PlantError::ControlCharacter(field));
    }
    Ok(())
}

/// How many plants one GET answers: 1 to 1000, 100 when not given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit(usize);

impl Limit {
    pub const MAX: usize = 1000;
    pub const DEFAULT: Self = Self(100);

    /// Digits only (no sign, no fraction, no exponent), 1 to 1000.
    pub fn parse(text: &str) -> Option<Self> {
        if text.is_empty() || text.len() > 4 || !text.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let value: usize = text.parse().ok()?;
        (1..=Self::MAX).contains(&value).then_some(Self(value))
    }

    pub fn get(self) -> usize {
        self.0
    }
}

/// Where a page of plants starts: after the plant with this id. Opaque to
/// clients. The text is `B.B`, where `B` is base64url of a version byte and
/// the id (12 characters, no padding bits): the second copy makes a truncated
/// or mistyped cursor fail before a store call. It is no protection against
/// forgery, and needs none: anyone may write a well-formed cursor for any id,
/// but it holds no owner (the owner always comes from the token), so it only
/// moves within the caller's plants. Unlike a hash, the rule fits a JSON
/// Schema pattern (`openapi.yaml`), so the document says exactly which
/// cursors are accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cursor {
    pub after: PlantId,
}

impl Cursor {
    const VERSION: u8 = 1;

    pub fn after(id: PlantId) -> Self {
        Self { after: id }
    }

    pub fn encode(self) -> String {
        let mut bytes = [0u8; 9];
        bytes[0] = Self::VERSION;
        bytes[1..].copy_from_slice(&self.after.get().to_be_bytes());
        let copy = URL_SAFE_NO_PAD.encode(bytes);
        format!("{copy}.{copy}")
    }

    /// `None` for anything malformed: not two equal halves, not base64url of
    /// nine bytes (padding bits included), or another version.
    pub fn parse(text: &str) -> Option<Self> {
        let (copy, check) = text.split_once('.')?;
        if copy != check {
            return None;
        }
        let bytes: [u8; 9] = URL_SAFE_NO_PAD.decode(copy).ok()?.try_into().ok()?;
        if bytes[0] != Self::VERSION {
            return None;
        }
        let id = i64::from_be_bytes(bytes[1..].try_into().ok()?);
        Some(Self::after(PlantId::new(id)))
    }
}

/// A Plant as the API answers it: `{"name", "tag"?}`; the id is never echoed
/// and an absent tag is left out rather than sent as `null`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Plant {
    pub name: PlantName,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tag: Option<PlantTag>,
}

/// A plant to create: the id and the plant stored under it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewPlant {
    pub id: PlantId,
    pub plant: Plant,
}

/// A create whose id is already stored under other content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Conflict(pub PlantId);

impl NewPlant {
    /// The contract's rule when this id is already stored: the same plant
    /// again is a safe retry, answered as the first time; other content is a
    /// conflict, and the stored plant stays as it is.
    pub fn check_retry_of(&self, stored: &Plant) -> Result<(), Conflict> {
        if *stored == self.plant {
            Ok(())
        } else {
            Err(Conflict(self.id))
        }
    }

    /// Parses a request body. Fields the contract does not name are ignored.
    pub fn from_json(body: &[u8]) -> Result<Self, PlantError> {
        let fields: BodyFields =
            serde_json::from_slice(body).map_err(|error| match error.classify() {
                // Our visitor only fails when the top-level value is not an object.
                serde_json::error::Category::Data => PlantError::NotAnObject,
                _ => PlantError::NotJson(error.to_string()),
            })?;
        if let Some(field) = fields.duplicate {
            return Err(PlantError::DuplicateField(field));
        }
        let id = PlantId::parse(fields.id.ok_or(PlantError::MissingField("id"))?)?;
        let name = match fields.name {
            None | Some(Value::Null) => return Err(PlantError::MissingField("name")),
            Some(Value::String(name)) => PlantName::parse(name)?,
            Some(_) => return Err(PlantError::NotAString("name")),
        };
        let tag = match fields.tag {
            None | Some(Value::Null) => None,
            Some(Value::String(tag)) => Some(PlantTag::parse(tag)?),
            Some(_) => return Err(PlantError::NotAString("tag")),
        };
        Ok(Self {
            id,
            plant: Plant { name, tag },
        })
    }
}

/// The named fields of a body, kept raw so that each gets its own error, and
/// the first field that appeared twice (serde would silently keep the last).
#[derive(Default)]
struct BodyFields {
    id: Option<Value>,
    name: Option<Value>,
    tag: Option<Value>,
    duplicate: Option<&'static str>,
}

impl<'de> Deserialize<'de> for BodyFields {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(BodyFieldsVisitor)
    }
}

struct BodyFieldsVisitor;

impl<'de> Visitor<'de> for BodyFieldsVisitor {
    type Value = BodyFields;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<BodyFields, A::Error> {
        let mut fields = BodyFields::default();
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            let (name, slot) = match key.as_ref() {
                "id" => ("id", &mut fields.id),
                "name" => ("name", &mut fields.name),
                "tag" => ("tag", &mut fields.tag),
                _ => {
                    // Read (and drop) as a Value rather than IgnoredAny: it
                    // keeps serde_json's nesting limit, so a body nested too
                    // deep is refused wherever the nesting is.
                    map.next_value::<Value>()?;
                    continue;
                }
            };
            let value = map.next_value::<Value>()?;
            if slot.replace(value).is_some() && fields.duplicate.is_none() {
                fields.duplicate = Some(name);
            }
        }
        Ok(fields)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(body: &str) -> Result<NewPlant, PlantError> {
        NewPlant::from_json(body.as_bytes())
    }

    #[test]
    fn a_full_body_parses() {
        let plant = parse(r#"{"id": 7, "name": "Fern", "tag": "green", "extra": [1]}"#).unwrap();
        assert_eq!(plant.id, PlantId::new(7));
        assert_eq!(plant.plant.name.as_str(), "Fern");
        assert_eq!(plant.plant.tag.unwrap().as_str(), "green");
    }

    #[test]
    fn a_null_tag_is_absent() {
        assert_eq!(
            parse(r#"{"id": 1, "name": "Fern", "tag": null}"#)
                .unwrap()
                .plant
                .tag,
            None
        );
    }

    #[test]
    fn ids_must_be_int64_integers() {
        for id in [
            "1.5",
            "\"7\"",
            "1e3",
            "9223372036854775808",
            "-9223372036854775809",
            "1.0",
        ] {
            let body = format!(r#"{{"id": {id}, "name": "Fern"}}"#);
            assert_eq!(parse(&body), Err(PlantError::InvalidId), "id {id}");
        }
        let extremes = [i64::MIN, i64::MAX];
        for id in extremes {
            let body = format!(r#"{{"id": {id}, "name": "Fern"}}"#);
            assert_eq!(parse(&body).unwrap().id.get(), id);
        }
    }

    #[test]
    fn name_and_tag_limits() {
        let name_at_limit = "n".repeat(256);
        assert!(parse(&format!(r#"{{"id":1,"name":"{name_at_limit}"}}"#)).is_ok());
        let too_long = "n".repeat(257);
        assert_eq!(
            parse(&format!(r#"{{"id":1,"name":"{too_long}"}}"#)),
            Err(PlantError::Length {
                field: "name",
                max: 256
            })
        );
        assert_eq!(
            parse(r#"{"id":1,"name":"   "}"#),
            Err(PlantError::Blank("name"))
        );
        assert_eq!(
            parse(r#"{"id":1,"name":"a\u0007b"}"#),
            Err(PlantError::ControlCharacter("name"))
        );
        assert_eq!(
            parse(r#"{"id":1,"name":"x","tag":""}"#),
            Err(PlantError::Length {
                field: "tag",
                max: 64
            })
        );
        // Limits count characters, not bytes.
        let wide_tag = "é".repeat(64);
        assert!(parse(&format!(r#"{{"id":1,"name":"x","tag":"{wide_tag}"}}"#)).is_ok());
    }

    #[test]
    fn structural_errors() {
        assert_eq!(parse("[1]"), Err(PlantError::NotAnObject));
        assert_eq!(parse("\"x\""), Err(PlantError::NotAnObject));
        assert!(matches!(parse("{"), Err(PlantError::NotJson(_))));
        assert_eq!(
            parse(r#"{"name":"x"}"#),
            Err(PlantError::MissingField("id"))
        );
        assert_eq!(parse(r#"{"id":1}"#), Err(PlantError::MissingField("name")));
        assert_eq!(
            parse(r#"{"id":1,"name":5}"#),
            Err(PlantError::NotAString("name"))
        );
        assert_eq!(
            parse(r#"{"id":1,"name":"a","id":2}"#),
            Err(PlantError::DuplicateField("id"))
        );
    }

    #[test]
    fn the_same_plant_again_is_a_retry_and_other_content_a_conflict() {
        let new = NewPlant::from_json(br#"{"id": 9, "name": "Aloe", "tag": "succulent"}"#).unwrap();
        assert_eq!(new.check_retry_of(&new.plant), Ok(()));
        for other in [
            r#"{"id": 9, "name": "Cactus", "tag": "succulent"}"#,
            r#"{"id": 9, "name": "Aloe", "tag": "other"}"#,
            r#"{"id": 9, "name": "Aloe"}"#,
        ] {
            let stored = NewPlant::from_json(other.as_bytes()).unwrap().plant;
            assert_eq!(
                new.check_retry_of(&stored),
                Err(Conflict(PlantId::new(9))),
                "{other}"
            );
        }
    }

    #[test]
    fn a_subject_names_somebody_in_printable_text_of_at_most_512_bytes() {
        for usable in ["alice", " alice ", "é", &"x".repeat(Owner::MAX_BYTES)] {
            assert!(Owner::parse(usable.to_owned()).is_some(), "{usable:?}");
        }
        let too_long = "x".repeat(Owner::MAX_BYTES + 1);
        for unusable in [
            "",
            " ",
            "\t \u{3000}",
            "alice\0",
            "al\0ice",
            "a\u{7f}",
            "a\nb",
            &too_long,
        ] {
            assert_eq!(Owner::parse(unusable.to_owned()), None, "{unusable:?}");
        }
    }

    #[test]
    fn limits() {
        assert_eq!(Limit::parse("1"), Some(Limit(1)));
        assert_eq!(Limit::parse("1000"), Some(Limit(1000)));
        assert_eq!(Limit::parse("0010"), Some(Limit(10)));
        for bad in [
            "", "0", "1001", "-1", "+5", "1.5", "1e2", "ten", "00001", " 5",
        ] {
            assert_eq!(Limit::parse(bad), None, "limit {bad:?}");
        }
    }

    #[test]
    fn cursors_round_trip_and_refuse_malformed_text() {
        for id in [i64::MIN, -1, 0, 7, i64::MAX] {
            let cursor = Cursor::after(PlantId::new(id));
            assert_eq!(Cursor::parse(&cursor.encode()), Some(cursor));
        }
        let text = Cursor::after(PlantId::new(42)).encode();
        assert_eq!(text.len(), 25);
        assert_eq!(Cursor::parse(""), None);
        assert_eq!(Cursor::parse(&text[..text.len() - 1]), None);
        assert_eq!(Cursor::parse(&text[..12]), None);
        assert_eq!(Cursor::parse(&format!("{text}A")), None);
        assert_eq!(Cursor::parse("not base64!.not base64!"), None);
        // A wrong version, even when both copies agree.
        let version_2 = URL_SAFE_NO_PAD.encode([2u8, 0, 0, 0, 0, 0, 0, 0, 42]);
        assert_eq!(Cursor::parse(&format!("{version_2}.{version_2}")), None);
        // Forgery is not caught, by design: a well-formed cursor for any id
        // is accepted, and only ever reads the caller's own plants.
        let forged = URL_SAFE_NO_PAD.encode([1u8, 0, 0, 0, 0, 0, 0, 0, 99]);
        assert_eq!(
            Cursor::parse(&format!("{forged}.{forged}")),
            Some(Cursor::after(PlantId::new(99)))
        );
        // Every single-bit change of the text is caught.
        for bit in 0..text.len() * 8 {
            let mut flipped = text.clone().into_bytes();
            flipped[bit / 8] ^= 1 << (bit % 8);
            if let Ok(flipped) = String::from_utf8(flipped) {
                assert_eq!(Cursor::parse(&flipped), None, "bit {bit}: {flipped}");
            }
        }
    }

    #[test]
    fn a_plant_without_tag_serialises_without_the_key() {
        let plant = parse(r#"{"id":1,"name":"Fern"}"#).unwrap().plant;
        assert_eq!(serde_json::to_string(&plant).unwrap(), r#"{"name":"Fern"}"#);
    }
}
