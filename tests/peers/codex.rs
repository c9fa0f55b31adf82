//! Codex smoke tests (placeholder).
