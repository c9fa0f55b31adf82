//! The dashboard's palette: every colour and text modifier it uses, and nothing else.
//!
//! What must stay true: only the terminal's own ANSI colours (the sixteen the user's theme
//! defines) and the default foreground/background are used — never RGB or indexed colours —
//! so the dashboard reads on light and dark terminals alike. Plain text keeps the default
//! foreground; secondary text is dimmed rather than painted grey; emphasis is bold or
//! reversed. Other modules take their styles from here.

use ratatui::style::{Color, Modifier, Style};

/// Plain text: the terminal's default colours.
pub fn text() -> Style {
    Style::new()
}

/// Secondary text (labels, ages, hints' descriptions).
pub fn dim() -> Style {
    Style::new().add_modifier(Modifier::DIM)
}

/// Section titles and the run's title.
pub fn title() -> Style {
    Style::new().add_modifier(Modifier::BOLD)
}

/// The product name in the header.
pub fn brand() -> Style {
    Style::new().fg(Color::Magenta).add_modifier(Modifier::BOLD)
}

/// The selected row.
pub fn selected() -> Style {
    Style::new().add_modifier(Modifier::REVERSED)
}

/// A key in a hint (`n`, `?`).
pub fn key() -> Style {
    Style::new().fg(Color::Cyan).add_modifier(Modifier::BOLD)
}

/// Things that want the user: pending prompts, needs input, the warning level.
pub fn attention() -> Style {
    Style::new().fg(Color::Yellow).add_modifier(Modifier::BOLD)
}

pub fn warning() -> Style {
    Style::new().fg(Color::Yellow)
}

pub fn error() -> Style {
    Style::new().fg(Color::Red)
}

pub fn error_bold() -> Style {
    Style::new().fg(Color::Red).add_modifier(Modifier::BOLD)
}

/// The guard's banner over a flagged request: red, reversed and bold.
pub fn danger_banner() -> Style {
    Style::new()
        .fg(Color::Red)
        .add_modifier(Modifier::BOLD | Modifier::REVERSED)
}

pub fn success() -> Style {
    Style::new().fg(Color::Green)
}

/// Running work (the running glyph, live lines of working runs).
pub fn active() -> Style {
    Style::new().fg(Color::Blue)
}

/// The focused field of a form, the highlighted choice of a question, the border of the
/// dashboard's pane that has the focus (drawn heavy).
pub fn focus() -> Style {
    Style::new().fg(Color::Cyan)
}

/// Borders of the views on the stack (prompts, forms, help).
pub fn overlay_border() -> Style {
    Style::new().fg(Color::Cyan)
}

/// Borders of the panes.
pub fn pane_border() -> Style {
    Style::new().add_modifier(Modifier::DIM)
}

/// A diff's added lines (and added-line counts).
pub fn diff_added() -> Style {
    Style::new().fg(Color::Green)
}

/// A diff's removed lines (and removed-line counts).
pub fn diff_removed() -> Style {
    Style::new().fg(Color::Red)
}

/// A diff's hunk headers (`@@ -1,3 +1,4 @@`).
pub fn diff_hunk() -> Style {
    Style::new().fg(Color::Cyan)
}

/// A diff's file headers (`diff --git`, `---`, `+++`).
pub fn diff_file() -> Style {
    Style::new().add_modifier(Modifier::BOLD)
}

/// The style of one line of a unified diff.
pub fn diff_line(line: &str) -> Style {
    if line.starts_with("diff --git") || line.starts_with("+++ ") || line.starts_with("--- ") {
        diff_file()
    } else if line.starts_with("@@") {
        diff_hunk()
    } else if line.starts_with('+') {
        diff_added()
    } else if line.starts_with('-') {
        diff_removed()
    } else if line.starts_with("index ")
        || line.starts_with("new file mode")
        || line.starts_with("deleted file mode")
        || line.starts_with("similarity index")
        || line.starts_with("rename ")
        || line.starts_with('\\')
    {
        dim()
    } else {
        text()
    }
}

/// The spent part of a gauge, by budget level.
pub fn gauge_spent(level: BudgetLevel) -> Style {
    match level {
        BudgetLevel::Normal => Style::new().fg(Color::Green),
        BudgetLevel::Warning => Style::new().fg(Color::Yellow),
        BudgetLevel::Cap => Style::new().fg(Color::Red),
    }
}

/// The reserved part of a gauge (what live runs may still spend).
pub fn gauge_reserved() -> Style {
    Style::new().fg(Color::Blue).add_modifier(Modifier::DIM)
}

/// Where a budget stands against its warning and hard cap (in order: a higher level
/// says more).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum BudgetLevel {
    Normal,
    Warning,
    Cap,
}

impl BudgetLevel {
    /// The level of `spent` against a warning and a cap (a cap of zero is reached at once).
    pub fn of(spent: f64, warning: f64, cap: f64) -> BudgetLevel {
        if spent >= cap {
            BudgetLevel::Cap
        } else if spent >= warning {
            BudgetLevel::Warning
        } else {
            BudgetLevel::Normal
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_levels_turn_at_the_warning_and_at_the_cap() {
        assert_eq!(BudgetLevel::of(1.0, 8.0, 25.0), BudgetLevel::Normal);
        assert_eq!(BudgetLevel::of(8.0, 8.0, 25.0), BudgetLevel::Warning);
        assert_eq!(BudgetLevel::of(24.99, 8.0, 25.0), BudgetLevel::Warning);
        assert_eq!(BudgetLevel::of(25.0, 8.0, 25.0), BudgetLevel::Cap);
    }

    #[test]
    fn diff_lines_are_styled_by_what_they_are() {
        assert_eq!(diff_line("+added"), diff_added());
        assert_eq!(diff_line("-removed"), diff_removed());
        assert_eq!(diff_line("+++ b/src/main.rs"), diff_file());
        assert_eq!(diff_line("--- a/src/main.rs"), diff_file());
        assert_eq!(diff_line("@@ -1,3 +1,4 @@ fn main"), diff_hunk());
        assert_eq!(diff_line("index 3f2a..9c1e 100644"), dim());
        assert_eq!(diff_line(" context"), text());
    }

    #[test]
    fn the_palette_uses_only_ansi_colours() {
        let styles = [
            text(),
            dim(),
            title(),
            brand(),
            selected(),
            key(),
            attention(),
            warning(),
            error(),
            error_bold(),
            success(),
            active(),
            focus(),
            overlay_border(),
            pane_border(),
            gauge_spent(BudgetLevel::Normal),
            gauge_spent(BudgetLevel::Warning),
            gauge_spent(BudgetLevel::Cap),
            gauge_reserved(),
            diff_added(),
            diff_removed(),
            diff_hunk(),
            diff_file(),
        ];
        for style in styles {
            for colour in [style.fg, style.bg].into_iter().flatten() {
                assert!(
                    !matches!(colour, Color::Rgb(..) | Color::Indexed(_)),
                    "{colour:?} is not one of the terminal's ANSI colours"
                );
            }
        }
    }
}
