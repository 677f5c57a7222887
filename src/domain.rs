//! The domain: a plant and how a request body becomes one, the caller, a
//! page's `limit` and `cursor`, and the interface's [`limits`]. Each value is
//! parsed once, by one constructor with a precise error; past it, types hold.

use std::fmt;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::Deserialize;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::{Map, Value};

use limits::{LIMIT_DEFAULT, LIMIT_MAX, MAX_SUBJECT_BYTES, NAME_MAX_CHARS, TAG_MAX_CHARS};

/// The interface's limits, in one place: messages, checks, tests and the
/// fuzz targets read them here (docs/contract.md names them).
pub mod limits {
    /// A plant's `name` and `tag`, in characters.
    pub const NAME_MAX_CHARS: usize = 256;
    pub const TAG_MAX_CHARS: usize = 64;
    /// How many plants one GET answers at most, and when `limit` is not given.
    pub const LIMIT_MAX: usize = 1000;
    pub const LIMIT_DEFAULT: usize = 100;
    /// Request bodies larger than this are refused with 413.
    pub const MAX_BODY_BYTES: usize = 16 * 1024;
    /// Clock skew tolerated on a token's `exp` and `nbf`, in seconds.
    pub const TOKEN_LEEWAY_SECONDS: u64 = 30;
    /// What AWS WAF inspects of a request's headers (each as HTTP/1.1 writes
    /// it): beyond, it may have keyed a request without its `Authorization`
    /// (docs/contract.md). It bounds a token too (real ones are ~2 KiB).
    pub const MAX_HEADERS: usize = 200;
    pub const MAX_HEADER_BYTES: usize = 8 * 1024;
    /// A subject's bytes: the owner is a DynamoDB partition key (2,048 at most).
    pub const MAX_SUBJECT_BYTES: usize = 512;
    /// The most characters of a client's own text (a method, a header
    /// name) that an error message repeats.
    pub const MAX_ECHOED_CHARS: usize = 64;

    /// The start of someone else's `text` (a client's, a token's, an
    /// issuer's) that a message or a log line repeats.
    pub fn echoed(text: &str) -> &str {
        text.char_indices().nth(MAX_ECHOED_CHARS).map_or(text, |(end, _)| &text[..end])
    }
}

/// Why a request body is not a valid NewPlant. Each message names the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Deserialize)]
pub enum PlantError {
    #[error("The request body is not valid JSON ({0}).")]
    NotJson(String),
    #[error("The request body must be a JSON object.")]
    NotAnObject,
    #[error("The field `{0}` appears more than once in the request body.")]
    DuplicateField(&'static str),
    #[error("The field `{0}` is required.")]
    MissingField(&'static str),
    #[error("The field `{0}` must be a JSON string.")]
    NotAString(&'static str),
    #[error("The field `id` must be a JSON integer from {} to {}.", i64::MIN, i64::MAX)]
    InvalidId,
    #[error("The field `{field}` must be 1 to {max} characters long.")]
    Length { field: &'static str, max: usize },
    #[error("The field `{0}` must not be blank.")]
    Blank(&'static str),
    #[error("The field `{0}` must not contain control characters.")]
    ControlCharacter(&'static str),
}

/// The caller: the `sub` of a verified token. Plants are stored per owner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner(String);

impl Owner {
    /// A usable subject (docs/contract.md), which names somebody and reads
    /// the same in a log.
    pub fn parse(sub: String) -> Option<Self> {
        let usable = sub.len() <= MAX_SUBJECT_BYTES
            && !sub.trim().is_empty()
            && !sub.chars().any(char::is_control);
        usable.then_some(Self(sub))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A field's value, read from a JSON value under the field's name.
trait Field: Sized {
    fn read(field: &'static str, value: Value) -> Result<Self, PlantError>;
}

/// A plant id: unique per owner, any int64, a JSON integer literal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
pub struct PlantId(pub i64);

impl Field for PlantId {
    fn read(_field: &'static str, value: Value) -> Result<Self, PlantError> {
        value.as_i64().map(Self).ok_or(PlantError::InvalidId)
    }
}

impl fmt::Display for PlantId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Text of 1 to `MAX` characters, no control characters, not blank unless
/// `BLANK_OK`: a plant's text fields, made only by [`Text::parse`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Text<const MAX: usize, const BLANK_OK: bool = true>(String);

/// A plant's name: not blank.
pub type PlantName = Text<NAME_MAX_CHARS, false>;
pub type PlantTag = Text<TAG_MAX_CHARS>;

impl<const MAX: usize, const BLANK_OK: bool> Text<MAX, BLANK_OK> {
    pub fn parse(field: &'static str, text: String) -> Result<Self, PlantError> {
        let chars = text.chars().count();
        if chars == 0 || chars > MAX {
            return Err(PlantError::Length { field, max: MAX });
        }
        if text.chars().any(char::is_control) {
            return Err(PlantError::ControlCharacter(field));
        }
        if !BLANK_OK && text.trim().is_empty() {
            return Err(PlantError::Blank(field));
        }
        Ok(Self(text))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl<const MAX: usize, const BLANK_OK: bool> Field for Text<MAX, BLANK_OK> {
    fn read(field: &'static str, value: Value) -> Result<Self, PlantError> {
        match value {
            Value::String(text) => Self::parse(field, text),
            _ => Err(PlantError::NotAString(field)),
        }
    }
}

/// A Plant as a request gives it, every field by its rules; the table's
/// form, and the answer's, is `store::StoredPlant`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plant {
    pub name: PlantName,
    pub tag: Option<PlantTag>,
}

/// A plant to create: the id and the plant stored under it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewPlant {
    pub id: PlantId,
    pub plant: Plant,
}

impl NewPlant {
    /// Parses a request body. Fields the contract does not name are ignored.
    pub fn from_json(body: &[u8]) -> Result<Self, PlantError> {
        let mut fields: Fields =
            serde_json::from_slice(body).map_err(|error| match error.classify() {
                // The visitor only fails when the top-level value is not an object.
                serde_json::error::Category::Data => PlantError::NotAnObject,
                _ => PlantError::NotJson(error.to_string()),
            })?;
        Ok(Self {
            id: fields.required("id")?,
            plant: Plant { name: fields.required("name")?, tag: fields.optional("tag")? },
        })
    }
}

/// `text` as a `T`, if a JSON object (serde reads a struct from an array too).
pub(crate) fn from_object<'a, T: Deserialize<'a>>(text: &'a str) -> Result<T, String> {
    let object = text.trim_start_matches([' ', '\t', '\n', '\r']).starts_with('{');
    let parsed = serde_json::from_str(text).map_err(|error| error.to_string());
    parsed.and_then(|value| if object { Ok(value) } else { Err("not a JSON object".into()) })
}

/// A JSON object's members, each raw until its field reads it, and the
/// names repeated (serde would keep the last).
#[derive(Default)]
pub struct Fields {
    members: Map<String, Value>,
    repeated: Vec<String>,
}

impl Fields {
    fn take(&mut self, field: &'static str) -> Result<Option<Value>, PlantError> {
        if self.repeated.iter().any(|name| name == field) {
            return Err(PlantError::DuplicateField(field));
        }
        Ok(self.members.remove(field).filter(|value| !value.is_null()))
    }

    /// A field that must be there; `null` is absent.
    fn required<T: Field>(&mut self, field: &'static str) -> Result<T, PlantError> {
        let value = self.take(field)?.ok_or(PlantError::MissingField(field))?;
        T::read(field, value)
    }

    /// A field that may be absent or `null`.
    fn optional<T: Field>(&mut self, field: &'static str) -> Result<Option<T>, PlantError> {
        self.take(field)?.map(|value| T::read(field, value)).transpose()
    }
}

impl<'de> Deserialize<'de> for Fields {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Members;
        impl<'de> Visitor<'de> for Members {
            type Value = Fields;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }

            // Every member is read as a Value, also those no field takes: it
            // keeps serde_json's nesting limit wherever the nesting is.
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Fields, A::Error> {
                let mut fields = Fields::default();
                while let Some((name, value)) = map.next_entry::<String, Value>()? {
                    if fields.members.contains_key(&name) {
                        fields.repeated.push(name.clone());
                    }
                    fields.members.insert(name, value);
                }
                Ok(fields)
            }
        }
        deserializer.deserialize_map(Members)
    }
}

/// How many plants one GET answers: 1 to [`LIMIT_MAX`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit(usize);

impl Limit {
    pub const DEFAULT: Self = Self(LIMIT_DEFAULT);

    /// Digits only (no sign, no fraction, no exponent), at most as many as
    /// [`LIMIT_MAX`] has, from 1 to it.
    pub fn parse(text: &str) -> Option<Self> {
        let digits = LIMIT_MAX.to_string().len();
        if text.is_empty() || text.len() > digits || !text.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let value: usize = text.parse().ok()?;
        (1..=LIMIT_MAX).contains(&value).then_some(Self(value))
    }

    pub fn get(self) -> usize {
        self.0
    }
}

/// Where a page of plants starts: after the plant with this id. Opaque to
/// clients: `B.B`, `B` base64url of a version byte and the id, the copy
/// catching a truncated or mistyped cursor (docs/contract.md).
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
        let mut bytes = [Self::VERSION; 9];
        bytes[1..].copy_from_slice(&self.after.0.to_be_bytes());
        let copy = URL_SAFE_NO_PAD.encode(bytes);
        format!("{copy}.{copy}")
    }

    /// `None` for anything malformed (halves unequal, not base64url of nine
    /// bytes, another version).
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
        Some(Self::after(PlantId(id)))
    }
}

// The body's and the subject's rules are checked through the handler
// (tests/api/hostile.rs, contract.rs, auth.rs) and by the fuzz targets.
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_refuse_malformed_text() {
        for id in [i64::MIN, -1, 0, 7, i64::MAX] {
            let cursor = Cursor::after(PlantId(id));
            assert_eq!(Cursor::parse(&cursor.encode()), Some(cursor));
        }
        let text = Cursor::after(PlantId(42)).encode();
        let version_2 = URL_SAFE_NO_PAD.encode([2u8, 0, 0, 0, 0, 0, 0, 0, 42]);
        for malformed in [&text[..24], &text[..12], &format!("{version_2}.{version_2}")] {
            assert_eq!(Cursor::parse(malformed), None, "{malformed}");
        }
        // Every single-bit change of the text is caught.
        for bit in 0..text.len() * 8 {
            let mut flipped = text.clone().into_bytes();
            flipped[bit / 8] ^= 1 << (bit % 8);
            if let Ok(flipped) = String::from_utf8(flipped) {
                assert_eq!(Cursor::parse(&flipped), None, "bit {bit}: {flipped}");
            }
        }
    }
}
