//! Dispatch spec validation: turns what a client sent ([`SpecInput`]) into a [`Spec`] the
//! dispatcher can act on, or refuses it with a stable code and one sentence saying what
//! to change (docs/ARCHITECTURE.md §"Run lifecycle").
//!
//! What must stay true:
//! - Pure: no I/O, no clock. The file system is consulted only through
//!   [`ValidationContext::dir_exists`], models only through [`ModelCatalog`], the sim's
//!   scenarios only through the shipped list ([`crate::sim::scenario::builtin_names`]).
//! - Every bound and default comes from [`crate::config::Limits`]; the only constants
//!   here are the shape of titles and tags.
//! - Words are refused (`INVALID_PROVIDER`, `TASK_REQUIRED`, `TASK_TOO_LONG`,
//!   `CWD_INVALID`, `MODEL_UNKNOWN`, `MODEL_DISABLED`, `PERMISSION_POLICY_UNSUPPORTED`,
//!   `INVALID_SPEC`, `SCENARIO_UNKNOWN`); numbers never are: they are clamped and each clamp is listed in
//!   [`Spec::clamps`].
//!
//! Files: `input` (wire shape), `validated` (the result and its vocabularies),
//! `context` (what validation consults), `validate` (the checks), `clamp` (numbers),
//! `title`, `suggest` ("did you mean"); one-line text helpers are [`crate::text`].

pub(crate) mod clamp;
mod context;
mod input;
mod suggest;
mod title;
mod validate;
mod validated;

#[cfg(test)]
mod tests;

pub use context::{AnyModel, ModelCatalog, ModelResolution, ProviderInfo, ValidationContext};
pub use input::SpecInput;
pub use suggest::{MAX_SUGGESTIONS, suggest};
pub use title::{TITLE_MAX_CHARS, derive_title};
pub use validate::{MAX_TAGS, TAG_MAX_CHARS, validate};
pub use validated::{Capability, Clamp, Effort, PermissionPolicy, Spec};
