//! A one-line text box: what the follow-up box, the filter, the form's text fields and a
//! deny message share. Typing appends at the end; Backspace, Ctrl-U (clear) and Ctrl-W
//! (delete a word) edit.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// The longest text a box takes (the dispatcher refuses longer tasks with a sentence).
pub const MAX_CHARS: usize = 20_000;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TextField {
    pub text: String,
}

impl TextField {
    pub fn new(text: impl Into<String>) -> Self {
        TextField { text: text.into() }
    }

    /// Applies an editing key; `false` when the key is not an editing key.
    pub fn edit(&mut self, key: &KeyEvent) -> bool {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        match key.code {
            KeyCode::Char('u') if ctrl => self.text.clear(),
            KeyCode::Char('w') if ctrl => {
                let trimmed = self.text.trim_end().len();
                self.text.truncate(trimmed);
                let cut = self.text.rfind(' ').map_or(0, |i| i + 1);
                self.text.truncate(cut);
            }
            KeyCode::Char(c) if !ctrl && !key.modifiers.contains(KeyModifiers::ALT) => {
                if self.text.chars().count() < MAX_CHARS && !c.is_control() {
                    self.text.push(c);
                }
            }
            KeyCode::Backspace => {
                self.text.pop();
            }
            _ => return false,
        }
        true
    }

    /// The end of the text that fits in `width` columns, with room for the cursor.
    pub fn visible(&self, width: usize) -> String {
        let room = width.saturating_sub(1);
        let count = self.text.chars().count();
        if count <= room {
            self.text.clone()
        } else {
            let tail: String = self.text.chars().skip(count - room + 1).collect();
            format!("…{tail}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(code: KeyCode, mods: KeyModifiers) -> KeyEvent {
        KeyEvent::new(code, mods)
    }

    #[test]
    fn typing_and_editing() {
        let mut f = TextField::default();
        for c in "fix the bug".chars() {
            assert!(f.edit(&key(KeyCode::Char(c), KeyModifiers::NONE)));
        }
        assert!(f.edit(&key(KeyCode::Char('W'), KeyModifiers::SHIFT)));
        assert_eq!(f.text, "fix the bugW");
        f.edit(&key(KeyCode::Backspace, KeyModifiers::NONE));
        f.edit(&key(KeyCode::Char('w'), KeyModifiers::CONTROL));
        assert_eq!(f.text, "fix the ");
        f.edit(&key(KeyCode::Char('u'), KeyModifiers::CONTROL));
        assert_eq!(f.text, "");
        assert!(!f.edit(&key(KeyCode::Enter, KeyModifiers::NONE)));
        assert!(!f.edit(&key(KeyCode::Char('c'), KeyModifiers::CONTROL)));
    }

    #[test]
    fn long_text_shows_its_end() {
        let f = TextField::new("abcdefghij");
        assert_eq!(f.visible(20), "abcdefghij");
        assert_eq!(f.visible(6), "…ghij");
    }
}
