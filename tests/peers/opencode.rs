//! OpenCode smoke tests (placeholder).
