//! Reading `serde_json::Value` objects field by field, with the path kept for error messages.

use std::fmt;

use serde_json::{Map, Value};

use crate::Error;

/// A place in a message, printed as `message`, `message: content[2]` or
/// `message: content[2].source`.
#[derive(Clone, Debug)]
pub(crate) struct Path {
    text: String,
    root: bool,
}

impl Path {
    pub(crate) fn root() -> Path {
        Path {
            text: "message".to_owned(),
            root: true,
        }
    }

    pub(crate) fn field(&self, name: &str) -> Path {
        let text = match self.root {
            true => format!("message: {name}"),
            false => format!("{}.{name}", self.text),
        };
        Path { text, root: false }
    }

    pub(crate) fn index(&self, i: usize) -> Path {
        Path {
            text: format!("{}[{i}]", self.text),
            root: false,
        }
    }
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// A JSON object being read. A field holding `null` counts as absent for optional fields.
pub(crate) struct Obj<'a> {
    map: &'a Map<String, Value>,
    pub(crate) at: Path,
}

impl<'a> Obj<'a> {
    pub(crate) fn new(value: &'a Value, at: Path) -> Result<Obj<'a>, Error> {
        match value {
            Value::Object(map) => Ok(Obj { map, at }),
            other => Err(wrong_type(&at, "object", other)),
        }
    }

    /// The field's value, or `None` when it is absent or `null`.
    pub(crate) fn get(&self, name: &str) -> Option<&'a Value> {
        self.map.get(name).filter(|v| !v.is_null())
    }

    pub(crate) fn required(&self, name: &'static str) -> Result<&'a Value, Error> {
        self.map.get(name).ok_or_else(|| Error::MissingField {
            at: self.at.to_string(),
            field: name,
        })
    }

    pub(crate) fn str(&self, name: &'static str) -> Result<&'a str, Error> {
        let value = self.required(name)?;
        value
            .as_str()
            .ok_or_else(|| wrong_type(&self.at.field(name), "string", value))
    }

    pub(crate) fn opt_str(&self, name: &'static str) -> Result<Option<&'a str>, Error> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(other) => Err(wrong_type(&self.at.field(name), "string", other)),
        }
    }

    pub(crate) fn opt_bool(&self, name: &'static str) -> Result<Option<bool>, Error> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(other) => Err(wrong_type(&self.at.field(name), "boolean", other)),
        }
    }

    /// Fails on the first field that is neither `known` nor `dropped`.
    pub(crate) fn only(&self, known: &[&str], dropped: &[&str], kind: &str) -> Result<(), Error> {
        match self
            .map
            .keys()
            .find(|k| !known.contains(&k.as_str()) && !dropped.contains(&k.as_str()))
        {
            None => Ok(()),
            Some(field) => Err(Error::UnknownField {
                at: self.at.to_string(),
                field: field.clone(),
                kind: kind.to_owned(),
            }),
        }
    }
}

pub(crate) fn wrong_type(at: &Path, expected: &'static str, found: &Value) -> Error {
    Error::WrongType {
        at: at.to_string(),
        expected,
        found: type_name(found),
    }
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}
