//! The lines of a streamed HTTP answer, as they arrive: server-sent events (OpenAI) and
//! newline-delimited JSON (Ollama) are both read a line at a time.

use futures::StreamExt;
use futures::stream::BoxStream;

/// Splits a response body into lines without waiting for the whole of it.
pub(crate) struct Lines {
    body: BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    pending: Vec<u8>,
}

impl Lines {
    /// The lines of `response`'s body.
    pub(crate) fn new(response: reqwest::Response) -> Lines {
        Lines {
            body: response.bytes_stream().boxed(),
            pending: Vec::new(),
        }
    }

    /// The next line, trimmed, or `None` at the end of the body (a last line without a
    /// newline is still a line).
    pub(crate) async fn next(&mut self) -> reqwest::Result<Option<Vec<u8>>> {
        loop {
            if let Some(end) = self.pending.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.pending.drain(..=end).collect();
                return Ok(Some(line.trim_ascii().to_vec()));
            }
            match self.body.next().await {
                Some(piece) => self.pending.extend_from_slice(&piece?),
                None if self.pending.is_empty() => return Ok(None),
                None => {
                    let line = std::mem::take(&mut self.pending);
                    return Ok(Some(line.trim_ascii().to_vec()));
                }
            }
        }
    }
}
