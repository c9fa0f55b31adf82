//! Claude Code adapter (being written).
