//! Mock API self tests (placeholder).
