//! The vocabulary of `[keys.<context>] "<key>" = "<action>"`: the contexts, the
//! actions and how a key is written. The dashboard binds keys from this vocabulary
//! (`drover-tui`'s `keys` module holds one action per name here, and a test holds the two
//! lists equal); the config check ([`super::validate`]) refuses a table that strays from
//! it, whichever command loads the file.

/// The contexts a `[keys.<context>]` table may name.
pub const CONTEXTS: [&str; 9] = [
    "dashboard",
    "prompt",
    "route",
    "diff",
    "transcript",
    "form",
    "input",
    "confirm",
    "help",
];

/// The actions a key may be bound to (and `"none"`, which unbinds it).
pub const ACTIONS: [&str; 67] = [
    "select_next",
    "select_prev",
    "select_first",
    "select_last",
    "scroll_up",
    "scroll_down",
    "follow_end",
    "open",
    "next_pending",
    "new_dispatch",
    "follow_up",
    "stop",
    "complete",
    "remove",
    "remove_finished",
    "kill_all",
    "filter",
    "help",
    "quit",
    "escalate",
    "resume",
    "open_diff",
    "open_editor",
    "open_shell",
    "take_over",
    "focus_pane",
    "update_branch",
    "redispatch",
    "pull_request",
    "spend",
    "attention_allow",
    "attention_deny",
    "attention_rule",
    "clear_filter",
    "next_file",
    "prev_file",
    "page_down",
    "page_up",
    "merge",
    "merge_squash",
    "keep",
    "discard",
    "refresh",
    "open_transcript",
    "toggle_tool",
    "select_lines",
    "copy",
    "copy_result",
    "next_match",
    "prev_match",
    "pick",
    "toggle_remember",
    "decline",
    "allow_once",
    "allow_always",
    "add_rule",
    "deny",
    "deny_with_message",
    "type_answer",
    "next_request",
    "next_field",
    "prev_field",
    "choice_prev",
    "choice_next",
    "submit",
    "confirm",
    "close",
];

/// What unbinds a key.
pub const UNBIND: &str = "none";

/// A named key that is not one character.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NamedKey {
    /// `enter` (or `return`).
    Enter,
    /// `esc` (or `escape`).
    Esc,
    /// `tab`.
    Tab,
    /// `backtab` (or `shift-tab`).
    BackTab,
    /// `up`.
    Up,
    /// `down`.
    Down,
    /// `left`.
    Left,
    /// `right`.
    Right,
    /// `pgup` (or `pageup`).
    PageUp,
    /// `pgdn` (or `pagedown`).
    PageDown,
    /// `home`.
    Home,
    /// `end`.
    End,
    /// `backspace`.
    Backspace,
    /// `delete` (or `del`).
    Delete,
    /// `f1` … `f12`.
    F(u8),
}

/// A key as the config writes it: one character or a named key, with Ctrl and Alt
/// (Shift is part of the character: `X`, not shift-x).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyText {
    /// One character (`space` is `' '`); lower-cased under Ctrl.
    Char {
        /// The character.
        c: char,
        /// With Ctrl.
        ctrl: bool,
        /// With Alt.
        alt: bool,
    },
    /// A named key.
    Named {
        /// The key.
        key: NamedKey,
        /// With Ctrl.
        ctrl: bool,
        /// With Alt.
        alt: bool,
    },
}

impl KeyText {
    /// Parses `j`, `J`, `?`, `ctrl-c`, `alt-x`, `enter`, `esc`, `tab`, `backtab`, `up`,
    /// `down`, `left`, `right`, `pgup`, `pgdn`, `home`, `end`, `space`, `backspace`,
    /// `delete`, `f1`…`f12`.
    pub fn parse(text: &str) -> Option<KeyText> {
        let mut ctrl = false;
        let mut alt = false;
        let mut rest = text;
        loop {
            let lower = rest.to_ascii_lowercase();
            if lower.starts_with("ctrl-") && rest.len() > 5 {
                ctrl = true;
                rest = &rest[5..];
            } else if lower.starts_with("alt-") && rest.len() > 4 {
                alt = true;
                rest = &rest[4..];
            } else {
                break;
            }
        }
        let mut chars = rest.chars();
        if let (Some(c), None) = (chars.next(), chars.next()) {
            let c = if ctrl { c.to_ascii_lowercase() } else { c };
            return Some(KeyText::Char { c, ctrl, alt });
        }
        let key = match rest.to_ascii_lowercase().as_str() {
            "space" => return Some(KeyText::Char { c: ' ', ctrl, alt }),
            "enter" | "return" => NamedKey::Enter,
            "esc" | "escape" => NamedKey::Esc,
            "tab" => NamedKey::Tab,
            "backtab" | "shift-tab" => NamedKey::BackTab,
            "up" => NamedKey::Up,
            "down" => NamedKey::Down,
            "left" => NamedKey::Left,
            "right" => NamedKey::Right,
            "pgup" | "pageup" => NamedKey::PageUp,
            "pgdn" | "pagedown" => NamedKey::PageDown,
            "home" => NamedKey::Home,
            "end" => NamedKey::End,
            "backspace" => NamedKey::Backspace,
            "delete" | "del" => NamedKey::Delete,
            f if f.starts_with('f') => {
                NamedKey::F(f[1..].parse().ok().filter(|n| (1..=12).contains(n))?)
            }
            _ => return None,
        };
        Some(KeyText::Named { key, ctrl, alt })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_parse_as_the_help_writes_them() {
        let ch = |c, ctrl, alt| Some(KeyText::Char { c, ctrl, alt });
        let named = |key, ctrl, alt| Some(KeyText::Named { key, ctrl, alt });
        let cases = [
            ("j", ch('j', false, false)),
            ("J", ch('J', false, false)),
            ("ctrl-C", ch('c', true, false)),
            ("alt-x", ch('x', false, true)),
            ("space", ch(' ', false, false)),
            ("Enter", named(NamedKey::Enter, false, false)),
            ("shift-tab", named(NamedKey::BackTab, false, false)),
            ("ctrl-alt-f12", named(NamedKey::F(12), true, true)),
            ("f13", None),
            ("ctrl-", None),
            ("jj", None),
            ("", None),
        ];
        for (text, want) in cases {
            assert_eq!(KeyText::parse(text), want, "{text:?}");
        }
    }
}
