//! What every dialect shares, and no dialect owns: the diagnostics collector, source
//! maps (document pointer -> line:column), the JSON Schema helpers, the dataflow checks
//! (docs/dataflow.md), reading a Python node's body, and template text.

pub(crate) mod dataflow;
pub(crate) mod diagnostics;
pub(crate) mod python_body;
pub(crate) mod schema;
pub mod source_map;
pub(crate) mod template_text;
