//! `t`: the selected run's transcript full screen, and what its keys read; copying to
//! the clipboard (docs/ARCHITECTURE.md §"Reading a transcript").
//!
//! What must stay true: before a key reaches the transcript view it is handed the
//! transcript as the view model holds it then (what the user sees is what the key acts
//! on); a copy leaves as [`Effect::Copy`] and the flash line says what was copied.

use super::App;
use crate::event::Effect;
use crate::model::RunEntry;
use crate::views::transcript::TranscriptScreen;
use drover_core::dispatch::api::RunSummary;

impl App {
    /// `t`: the run's transcript, full screen.
    pub(super) fn open_transcript(&mut self, selected: Option<&RunSummary>) {
        let Some(run) = selected else {
            return self.flash_error("select a run first".into());
        };
        self.views.push(TranscriptScreen::new(
            run.head.run_id.clone(),
            run.head.title.clone(),
        ));
        self.sync_transcript_view();
    }

    /// Hands the transcript view on top what its keys read now.
    pub(super) fn sync_transcript_view(&mut self) {
        let Some(at) = self.views.len().checked_sub(1) else {
            return;
        };
        let Some(view) = self.views.get_mut::<TranscriptScreen>(at) else {
            return;
        };
        match self.model.run(&view.run_id) {
            Some(entry) => view.sync(&entry.transcript, result_block(entry), &self.model.filter),
            None => {
                let entries: Vec<String> = Vec::new();
                view.sync(&entries, None, &self.model.filter);
            }
        }
    }

    /// Puts `text` on the clipboard and says so.
    pub(super) fn copy(&mut self, text: String, what: &str, effects: &mut Vec<Effect>) {
        let chars = text.chars().count();
        effects.push(Effect::Copy(text));
        self.flash_info(format!(
            "copied {what} ({chars} character{}) to the clipboard (OSC 52)",
            drover_core::text::plural(chars)
        ));
    }
}

/// The run's result block as the agent wrote it: from the result heading of the last
/// text in its transcript that has one, to the end of that text; else the result the
/// run's view holds, written out as a block.
pub fn result_block(entry: &RunEntry) -> Option<String> {
    use drover_core::result_contract::result_heading;
    for line in entry.transcript.iter().rev() {
        let Some(text) = line.strip_prefix("text: ") else {
            continue;
        };
        let lines: Vec<&str> = text.lines().collect();
        if let Some(at) = lines.iter().rposition(|l| result_heading(l).is_some()) {
            return Some(lines[at..].join("\n"));
        }
    }
    let result = entry.detail.as_ref()?.last_result.as_ref()?;
    let mut out = vec!["## Result".to_string()];
    if let Some(status) = &result.status {
        out.push(format!("status: {status}"));
    }
    if let Some(summary) = &result.summary {
        out.push(format!("summary: {summary}"));
    }
    if let Some(question) = &result.question {
        out.push(format!("question: {question}"));
    }
    for (name, list) in [
        ("files", &result.files),
        ("changes", &result.changes),
        ("follow_ups", &result.follow_ups),
    ] {
        if !list.is_empty() {
            out.push(format!("{name}:"));
            out.extend(list.iter().map(|i| format!("- {i}")));
        }
    }
    if let Some(json) = &result.json {
        out.push(json.to_string());
    }
    Some(out.join("\n"))
}
