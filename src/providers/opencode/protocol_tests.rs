//! Tables of OpenCode server events (shapes from PROVIDERS.md and the pinned 1.18.33) and
//! the drover events they must become.

use super::*;
use serde_json::json;

const NOW: UnixMillis = 1_700_000_000_000;
const SID: &str = "ses_abc";
