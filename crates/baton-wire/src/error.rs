//! The crate's one error type: what was wrong with a vendor message, and where.

/// Why a vendor message could not be read.
///
/// Every variant carries `at`, the place in the message, such as `message`, `message: role` or
/// `message: content[2].source`, and the offending value where there is one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A value of the wrong JSON type, such as a number where a string belongs.
    #[error("{at}: expected {expected}, found {found}")]
    WrongType {
        /// Where the value is.
        at: String,
        /// What the shape allows there.
        expected: &'static str,
        /// The JSON type found instead.
        found: &'static str,
    },
    /// A required field is absent.
    #[error("{at}: missing field \"{field}\"")]
    MissingField {
        /// The object that lacks it.
        at: String,
        /// The field's name.
        field: &'static str,
    },
    /// A role the format does not have.
    #[error("{at}: role \"{role}\" is not one of {expected}")]
    UnknownRole {
        /// The message.
        at: String,
        /// The role found.
        role: String,
        /// The roles the format accepts, comma-separated.
        expected: &'static str,
    },
    /// A `type` tag the format does not define (or baton does not read): a content block, a media
    /// source or a tool call.
    #[error("{at}: unknown {kind} type \"{type_name}\"")]
    UnknownType {
        /// Where the tagged object is.
        at: String,
        /// What kind of object it is: `block`, `source` or `tool call`.
        kind: &'static str,
        /// The tag found.
        type_name: String,
    },
    /// A field that is neither read nor on the documented list of dropped fields.
    /// It might change the block's meaning, so it is not dropped silently.
    #[error("{at}: unknown field \"{field}\" in {kind}")]
    UnknownField {
        /// The object that has it.
        at: String,
        /// The field's name.
        field: String,
        /// What the object is, such as `text block`.
        kind: String,
    },
    /// A field that changes the message's meaning and has no place in baton's model.
    #[error("{at}: field \"{field}\" is not supported: {reason}")]
    Unsupported {
        /// The message.
        at: String,
        /// The field's name.
        field: &'static str,
        /// Why, and what to use instead.
        reason: &'static str,
    },
    /// A message carrying markers of both vendor shapes, so [`crate::parse_message`] cannot choose.
    #[error("message: has anthropic markers ({anthropic}) and openai markers ({openai})")]
    MixedFormats {
        /// The first Anthropic marker found.
        anthropic: String,
        /// The first OpenAI marker found.
        openai: String,
    },
}
