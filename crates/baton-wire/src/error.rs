//! The crate's one error type: what was wrong with a vendor message, request or response, and
//! where.

/// Why a vendor message, request body, response body or stream could not be read.
///
/// The message variants carry `at`, the place in the message, such as `message`, `message: role`
/// or `message: content[2].source`, and the offending value where there is one.
/// [`Error::Invalid`] names a place in a request body (`messages.3`), [`Error::Malformed`] a
/// place in a response body or stream (`stream event 4 (content_block_delta)`).
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
    /// A request body the vendor's API would refuse, such as a `tool_result` that answers no
    /// `tool_use`; `message` is worded as the real API words it.
    #[error("{at}: {message}")]
    Invalid {
        /// Where in the request: `messages.3`, `messages.[3]`, `max_tokens`.
        at: String,
        /// What is wrong.
        message: String,
    },
    /// A response body or stream event that is not what the wire format says it is.
    #[error("{at}: {detail}")]
    Malformed {
        /// Where: `response`, `stream line 7`, `stream event 4 (content_block_delta)`.
        at: String,
        /// What was wrong.
        detail: String,
    },
    /// A stream that ended before its final event.
    #[error("the stream ended before {missing}")]
    Truncated {
        /// The event that never came, such as `message_stop` or `[DONE]`.
        missing: &'static str,
    },
    /// An error the vendor reported inside a stream or a response body.
    #[error("{kind}: {message}")]
    Api {
        /// The vendor's error type, such as `overloaded_error`.
        kind: String,
        /// The vendor's message.
        message: String,
    },
}
