//! The answer encoding of the server functions whose answer is also an island's props
//! (the job, the jobs list): JSON, as server functions answer by default, but read in the
//! browser from text, as leptos reads island props. Reading JSON from bytes (the default)
//! and from text are two copies of every reader of those types in the bundle: one copy is
//! about 8 KB (gzip) less.

use leptos::server_fn::codec::Post;
use leptos::server_fn::{Bytes, ContentType, Format, FormatType};
use leptos::server_fn::{Decodes, Encodes};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// JSON read from text: see the module.
pub struct JsonText;

/// A server function's `output` for [`JsonText`].
pub type Json = Post<JsonText>;

impl ContentType for JsonText {
    const CONTENT_TYPE: &'static str = "application/json";
}

impl FormatType for JsonText {
    const FORMAT_TYPE: Format = Format::Text;
}

impl<T: Serialize> Encodes<T> for JsonText {
    type Error = serde_json::Error;

    fn encode(output: &T) -> Result<Bytes, Self::Error> {
        serde_json::to_vec(output).map(Bytes::from)
    }
}

impl<T: DeserializeOwned> Decodes<T> for JsonText {
    type Error = serde_json::Error;

    fn decode(bytes: Bytes) -> Result<T, Self::Error> {
        let text = std::str::from_utf8(&bytes).map_err(serde::de::Error::custom)?;
        serde_json::from_str(text)
    }
}
